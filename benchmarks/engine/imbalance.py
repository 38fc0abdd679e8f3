"""Uplink load imbalance per sample: ``imbalance.csv``, its summary and its CDF.

How evenly a scheme spreads load over equal-cost paths, moment by moment (the
load-balancing papers' imbalance CDF). A switch's *up* ports are those towards switches
farther from every host (pathdiag.up_ports: hop distance from the nearest host, no tier
names); switches with two or more of them have parallel paths. Between two consecutive
lines of its stats file (switch_ext, every ``stats_interval_ms``, 100 ms by default), each
up port's utilization is the bytes it sent over the interval against its link's rate, and

    imbalance = max utilization / mean utilization over the switch's up ports

(1 = perfectly even, n = everything on one of n ports). Intervals in which the up ports
carry on average less than ``MIN_UTILIZATION`` of their rate are left out: a few frames
on an idle switch say nothing about balance. Links without a rate count bytes alone (all
up ports alike). Rows: ``t`` (seconds since the replay's T0, the interval's end),
``switch``, ``imbalance``, ``mean_util`` (fraction of the rate).

Per run: ``imbalance_mean`` and ``imbalance_p95`` over its samples (every switch pooled);
across seeds as every summary metric (metrics.summarize_runs), with paired ratios to the
baseline. Other switch kinds write no stats file: no rows, no section.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dcnlab.model.topology import TopologySpec

from .metrics import SummaryRow, mean, percentile, run_key, summarize_runs
from .pathdiag import spec_ups
from .plots import as_float
from .sections import ReportContext, RunContext, register
from .table import aligned, baseline_first, cell, fmt

IMBALANCE_CSV = "imbalance.csv"
COLUMNS = ["scheme", "load", "seed", "switch", "t", "imbalance", "mean_util"]
MIN_UTILIZATION = 0.01
CLASS = "uplinks"
METRICS = ("imbalance_mean", "imbalance_p95")


def uplinks(spec: TopologySpec) -> dict[str, dict[int, float]]:
    """``{switch: {up port: its link's rate in bit/s, or nan without one}}`` for the
    switches with parallel paths."""
    ups = spec_ups(spec)
    rates: dict[tuple[str, int], float] = {}
    for lk in spec.links:
        rate = lk.params.rate_mbit * 1e6 if lk.params.rate_mbit else math.nan
        rates[(lk.a, lk.a_port)] = rates[(lk.b, lk.b_port)] = rate
    return {sw: {p: rates.get((sw, p), math.nan) for p in ports} for sw, ports in ups.items()}


def _tx(line: Mapping[str, Any]) -> dict[int, int]:
    return {int(p["port"]): int(p.get("tx_bytes") or 0) for p in line.get("ports") or []
            if isinstance(p, dict) and "port" in p}


def samples(ports: Mapping[int, float], lines: Sequence[Mapping[str, Any]], t0: float
            ) -> list[dict[str, float]]:
    """One switch's samples (``t``, ``imbalance``, ``mean_util``) over its stats lines."""
    out: list[dict[str, float]] = []
    prev: tuple[float, dict[int, int]] | None = None
    rated = all(math.isfinite(r) and r > 0 for r in ports.values())
    for line in lines:
        ts = line.get("ts")
        if not isinstance(ts, int | float):
            continue
        now = (float(ts), _tx(line))
        if prev is not None and now[0] > prev[0]:
            dt = now[0] - prev[0]
            sent = {p: max(0, now[1].get(p, 0) - prev[1].get(p, 0)) for p in ports}
            util = [sent[p] * 8 / (dt * ports[p]) if rated else float(sent[p])
                    for p in ports]
            avg = sum(util) / len(util)
            busy = avg >= MIN_UTILIZATION if rated else avg > 0
            if busy:
                out.append({"t": round(now[0] - t0, 4), "imbalance": round(max(util) / avg, 4),
                            "mean_util": round(avg, 4) if rated else math.nan})
        prev = now
    return out


def run_rows(scheme: str, load: float, seed: int, spec: TopologySpec,
             lines: Mapping[str, Sequence[Mapping[str, Any]]], t0: float
             ) -> list[dict[str, Any]]:
    """imbalance.csv's rows of a run, from each switch's stats lines written during it."""
    key = {"scheme": scheme, "load": load, "seed": seed}
    return [{**key, "switch": sw, **row}
            for sw, ports in uplinks(spec).items()
            for row in samples(ports, lines.get(sw, []), t0)]


def summarize(rows: Iterable[Mapping[str, Any]], baseline: str | None) -> list[SummaryRow]:
    per_run: dict[tuple[str, float, int], list[float]] = defaultdict(list)
    for r in rows:
        value = as_float(r.get("imbalance"))
        if math.isfinite(value):
            per_run[run_key(r)].append(value)
    figures = {key: {("imbalance_mean", CLASS): mean(v), ("imbalance_p95", CLASS):
                     percentile(v, 95)} for key, v in per_run.items()}
    return summarize_runs(figures, baseline, counts=())


def render(summary: Sequence[SummaryRow], schemes: Sequence[str], baseline: str | None,
           sweep: str = "load") -> str:
    if not summary:
        return ""
    index = {(r.scheme, r.load, r.metric): r for r in summary}
    order = baseline_first([s for s in schemes if any(r.scheme == s for r in summary)],
                           baseline)
    lines = ["Uplink imbalance: max / mean utilization of a switch's up ports per stats "
             "interval (1 = even), busy intervals of every switch with parallel paths"]
    for load in sorted({r.load for r in summary}):
        body = [[label, *(cell(index[(s, load, metric)], 1.0, baseline)
                          if (s, load, metric) in index else "-" for s in order)]
                for metric, label in (("imbalance_mean", "mean"), ("imbalance_p95", "p95"))]
        lines += ["", *aligned([f"{sweep} = {fmt(load)}", *order], body)]
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[Mapping[str, Any]], out_dir: Path, sweep: str,
         schemes: Sequence[str]) -> list[Path]:
    """``imbalance_cdf.png``: the CDF of the samples per scheme, seeds and switches
    pooled, a panel per sweep value."""
    pooled: dict[float, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        value = as_float(r.get("imbalance"))
        if math.isfinite(value):
            pooled[as_float(r["load"])][str(r["scheme"])].append(value)
    if not pooled:
        return []
    from .plots import caption, plt, save_figure

    loads = sorted(pooled)
    fig, axes = plt.subplots(1, len(loads), figsize=(4.2 * len(loads), 3.9), squeeze=False,
                             sharey=True)
    for ax, load in zip(axes[0], loads, strict=True):
        for i, scheme in enumerate(schemes):
            values = sorted(pooled[load].get(scheme, []))
            if values:
                ax.step(values, [(k + 1) / len(values) for k in range(len(values))],
                        where="post", color=f"C{i % 10}", label=f"{scheme} (n={len(values)})")
        ax.set_xlabel("max / mean up-port utilization")
        ax.set_ylabel("CDF")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{sweep} = {fmt(load)}")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right", fontsize="small")
    fig.suptitle("Uplink load imbalance per stats interval")
    caption(fig, "n: busy intervals (up ports at 1% of their rate or more on average) of "
            "every switch with parallel paths, seeds pooled")
    out_dir.mkdir(parents=True, exist_ok=True)
    return [save_figure(fig, out_dir / "imbalance_cdf.png")]


class ImbalanceSection:
    """imbalance.csv during runs; its summary rows, text and CDF in the report."""

    name = "imbalance"
    csv = IMBALANCE_CSV
    columns = COLUMNS

    def wanted(self, spec: Any) -> bool:
        return True  # rows only where switches keep stats files; cheap elsewhere

    def run_rows(self, ctx: RunContext) -> list[dict[str, Any]]:
        return run_rows(ctx.scheme, ctx.load, ctx.seed, ctx.topology, ctx.stats_lines,
                        ctx.t0)

    def summary(self, ctx: ReportContext) -> list[SummaryRow]:
        return summarize(ctx.rows(IMBALANCE_CSV), ctx.baseline)

    def text(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> str:
        return render(summary, ctx.schemes, ctx.baseline, ctx.sweep)

    def plots(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> list[Path]:
        return plot(ctx.rows(IMBALANCE_CSV), ctx.plots_dir, ctx.sweep, ctx.schemes)


register(ImbalanceSection())
