"""One scheme's bottleneck queue over time across the scenarios and sweep values of a
results directory, on one axis (queue_series.csv; switch_ext only).

The report draws each sweep value's runs apart (plots/queue_time_*.png, a panel per
scheme); a paper that compares the queue's course across its settings (paper 004's Fig.
8: the queue for 4, 16, 32 and 64 flows) needs them together:

    python -m dcnlab.benchmarks.queue_course results/p004/seed004 --scheme realloc-down \\
        --out fig8_queue.png [--seed 1] [--scenarios clients4,clients16,clients32,clients64]

Several schemes (``--scheme a,b``) give a course each per scenario and sweep value, and
``--window T0,T1`` draws only those seconds of the runs: one round of an incast, as paper
002's Fig. 1c shows the queue from a flow's start to its end:

    python -m dcnlab.benchmarks.queue_course results/p002/seed002_queue \\
        --scheme droptail_tcp,ecn_dctcp --window 3,3.4 --out fig1c_queue.png
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dcnlab.benchmarks.engine import queueseries


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path, help="an experiment's output directory")
    ap.add_argument("--scheme", required=True, help="a scheme, or several: a,b")
    ap.add_argument("--out", type=Path, required=True, help="the PNG to write")
    ap.add_argument("--seed", type=int, help="default: each scenario's smallest")
    ap.add_argument("--scenarios", help="comma-separated, in this order (default: all)")
    ap.add_argument("--window", type=_window, metavar="T0,T1",
                    help="draw only these seconds of the runs (their replay clock)")
    args = ap.parse_args(argv)
    schemes = [s for s in args.scheme.split(",") if s]
    courses = {}
    for scheme in schemes:
        mine = queueseries.read_courses(args.results, scheme, args.seed)
        if args.scenarios:
            order = args.scenarios.split(",")
            mine = {label: rows for name in order for label, rows in mine.items()
                    if label.split(" ", 1)[0] == name}
        courses.update({(f"{scheme}: {label}" if len(schemes) > 1 else label): rows
                        for label, rows in mine.items()})
    if not courses:
        print(f"queue_course: no {queueseries.QUEUE_CSV} rows of scheme {args.scheme!r} "
              f"under {args.results} (queue series come from switch_ext runs)",
              file=sys.stderr)
        return 1
    path = queueseries.course_plot(courses, args.out,
                                   f"{args.scheme}: bottleneck queue over time",
                                   window=args.window)
    print(path)
    return 0


def _window(text: str) -> tuple[float, float]:
    try:
        t0, t1 = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give two times in seconds, T0,T1 "
                                         "(e.g. 3,3.4)") from None
    if not t0 < t1:
        raise argparse.ArgumentTypeError(f"{text!r}: T0 must be before T1")
    return t0, t1


if __name__ == "__main__":
    sys.exit(main())
