"""A result section defined by a test: it plugs into the runner and the report through
the registry alone (sections.register), which is what the seam promises."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dcnlab.benchmarks.engine import sections
from dcnlab.benchmarks.engine.metrics import SummaryRow, summarize_runs

CSV = "toy.csv"


class ToySection:
    """One row per run: its flows and the stats lines seen; the summary's mean flows."""

    name = "toy"
    csv = CSV
    columns = ("scheme", "load", "seed", "flows", "switches_with_lines")

    def wanted(self, spec: Any) -> bool:
        return True

    def run_rows(self, ctx: sections.RunContext) -> list[dict[str, Any]]:
        return [{"scheme": ctx.scheme, "load": ctx.load, "seed": ctx.seed,
                 "flows": len(ctx.flows), "switches_with_lines": len(ctx.stats_lines)}]

    def summary(self, ctx: sections.ReportContext) -> list[SummaryRow]:
        runs = {(r["scheme"], float(r["load"]), int(r["seed"])):
                {("toy_flows", "all"): float(r["flows"])} for r in ctx.rows(CSV)}
        return summarize_runs(runs, ctx.baseline, counts=("toy_flows",))

    def text(self, ctx: sections.ReportContext, summary: Sequence[SummaryRow]) -> str:
        return "".join(f"toy section: {r.scheme} {r.mean:g} flows per run\n"
                       for r in summary if math.isfinite(r.mean))

    def plots(self, ctx: sections.ReportContext, summary: Sequence[SummaryRow]
              ) -> list[Path]:
        return []


@contextmanager
def toy_registered() -> Iterator[ToySection]:
    section = ToySection()
    sections.register(section)
    try:
        yield section
    finally:
        sections.unregister(section.name)
