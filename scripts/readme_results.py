#!/usr/bin/env python3
"""Render the README's "What you get" section from a results directory of the main job.

    .venv/bin/python scripts/readme_results.py results/ecmp_vs_single

reads flows.csv and meta.json (as `dcnlab report` does), and writes between the README's
markers ``<!-- what-you-get:begin -->`` and ``<!-- what-you-get:end -->``: where and when
the run was made, the summary table (the main rows of summary.txt: flow counts, FCT per
size class, elephant throughput, reordering; ratios to the baseline with 95% intervals)
and one plot, mean FCT per size class (the report's fct_by_class.png), copied to
``docs/img/``.  Nothing in the section is edited by hand, so the README shows what a
real run printed.  Only a complete run is accepted.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BEGIN = "<!-- what-you-get:begin -->"
END = "<!-- what-you-get:end -->"
IMAGE = Path("docs/img/main_job_fct_by_class.png")  # relative to the README's folder
# The summary rows the section shows (metric, class), in the table's own order.
SHOWN = {("flows", "all"), ("failed", "all"), ("fct_mean", "mouse"), ("fct_p99", "mouse"),
         ("fct_mean", "rabbit"), ("fct_p99", "rabbit"), ("fct_mean", "elephant"),
         ("tput_mbps", "elephant"), ("ooo_pct", "all")}


class SectionError(RuntimeError):
    """A results directory or README the section cannot be rendered from or into."""


def _when(meta: dict[str, Any]) -> str:
    """'2026-11-30, 5 min' from meta.json's start and finish times."""
    from dcnlab.benchmarks.engine.results import meta_time

    start, end = meta_time(meta.get("started")), meta_time(meta.get("finished"))
    if start is None or end is None:
        raise SectionError("meta.json has no start and finish time")
    minutes = max(1, round((end - start).total_seconds() / 60))
    return f"{start:%Y-%m-%d}, {minutes} min"


def _machine(meta: dict[str, Any]) -> str:
    machine = meta.get("machine") or {}
    parts = [machine.get("os") or "unknown OS"]
    if machine.get("cpus"):
        parts.append(f"{machine['cpus']} CPUs")
    if machine.get("kernel"):
        parts.append(f"kernel {machine['kernel']}")
    return ", ".join(parts)


def _commit(meta: dict[str, Any]) -> str:
    versions = meta.get("versions") or {}
    commit = versions.get("git_commit")
    if not commit:
        return "an unknown commit"
    return f"commit {commit[:7]}" + (" (with local changes)" if versions.get("git_dirty")
                                      else "")


def render_section(results: Path, image: Path, image_link: str) -> str:
    """The section's text (markers included); the plot is written to ``image``."""
    from dcnlab.benchmarks.engine import plots
    from dcnlab.benchmarks.engine.metrics import summarize
    from dcnlab.benchmarks.engine.results import (
        FLOWS_CSV,
        META_JSON,
        ResultsError,
        extra_columns,
        read_flows,
        read_json,
    )
    from dcnlab.benchmarks.engine.table import fmt, render

    try:
        meta = read_json(results / META_JSON)
        rows = read_flows(results / FLOWS_CSV)
    except ResultsError as exc:
        raise SectionError(str(exc)) from None
    if meta.get("status") != "complete":
        raise SectionError(f"{results}: the run's status is {meta.get('status')!r}, not "
                           "'complete': the README shows complete runs only")
    spec = meta.get("spec") or {}
    baseline = spec.get("baseline")
    sweep = spec.get("sweep", "load")
    order = [s["name"] for s in spec.get("schemes", [])]
    seen = list(dict.fromkeys(str(r["scheme"]) for r in rows))
    schemes = [s for s in order if s in seen] + [s for s in seen if s not in order]
    summary = summarize(rows, baseline if baseline in seen else None, extra_columns(rows))
    table = render([r for r in summary if (r.metric, r.cls) in SHOWN], baseline, sweep)
    with tempfile.TemporaryDirectory() as tmp:
        drawn = [p for p in plots.class_bars(summary, Path(tmp), sweep, schemes)
                 if p.name == "fct_by_class.png"]
        if not drawn:
            raise SectionError(f"{results}: no completed flow has an FCT to plot")
        image.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(drawn[0], image)
    seeds = spec.get("seeds") or sorted({int(r["seed"]) for r in rows})
    values = spec.get("loads") or sorted({float(r["load"]) for r in rows})
    what = (f"{meta.get('name', results.name)}: {' vs '.join(schemes)} on "
            f"`{spec.get('topology', '?')}`, {spec.get('workload_type', '?')} workload, "
            f"{sweep} {', '.join(fmt(v) for v in values)}, seeds "
            f"{', '.join(str(s) for s in seeds)}")
    return "\n".join([
        BEGIN,
        "<!-- rendered by scripts/readme_results.py from a results directory of "
        "scripts/main.sh; do not edit by hand -->",
        "",
        f"{what}; run on {_machine(meta)}, {_commit(meta)}, {_when(meta)}.",
        "",
        "```text",
        table.rstrip("\n"),
        "```",
        "",
        f"![FCT per size class and scheme: the run's plots/fct_by_class.png]({image_link})",
        END,
    ])


def replace_section(readme: str, section: str) -> str:
    """``readme`` with the text between (and including) the markers replaced."""
    if readme.count(BEGIN) != 1 or readme.count(END) != 1:
        raise SectionError(f"the README must hold {BEGIN} and {END} once each")
    head, rest = readme.split(BEGIN)
    _old, tail = rest.split(END)
    return head + section + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a results directory of scripts/main.sh")
    parser.add_argument("--readme", type=Path, default=REPO / "README.md")
    args = parser.parse_args(argv)
    image = args.readme.parent / IMAGE
    try:
        readme = args.readme.read_text()
        replace_section(readme, "")  # the markers first: no plot is written for nothing
        section = render_section(args.results, image, IMAGE.as_posix())
        args.readme.write_text(replace_section(readme, section))
    except (OSError, SectionError) as exc:
        print(f"readme_results: {exc}", file=sys.stderr)
        return 2
    print(f"readme_results: wrote {args.readme} and {image}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
