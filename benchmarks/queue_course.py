"""One scheme's bottleneck queue over time across the scenarios and sweep values of a
results directory, on one axis (queue_series.csv; switch_ext only).

The report draws each sweep value's runs apart (plots/queue_time_*.png, a panel per
scheme); a paper that compares the queue's course across its settings (paper 004's Fig.
8: the queue for 4, 16, 32 and 64 flows) needs them together:

    python -m dcnlab.benchmarks.queue_course results/p004/seed004 --scheme realloc-down \\
        --out fig8_queue.png [--seed 1] [--scenarios clients4,clients16,clients32,clients64]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dcnlab.benchmarks.engine import queueseries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="an experiment's output directory")
    ap.add_argument("--scheme", required=True)
    ap.add_argument("--out", type=Path, required=True, help="the PNG to write")
    ap.add_argument("--seed", type=int, help="default: each scenario's smallest")
    ap.add_argument("--scenarios", help="comma-separated, in this order (default: all)")
    args = ap.parse_args(argv)
    courses = queueseries.read_courses(args.results, args.scheme, args.seed)
    if args.scenarios:
        order = args.scenarios.split(",")
        courses = {label: rows for name in order for label, rows in courses.items()
                   if label.split(" ", 1)[0] == name}
    if not courses:
        print(f"queue_course: no {queueseries.QUEUE_CSV} rows of scheme {args.scheme!r} "
              f"under {args.results} (queue series come from switch_ext runs)",
              file=sys.stderr)
        return 1
    path = queueseries.course_plot(courses, args.out,
                                   f"{args.scheme}: bottleneck queue over time")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
