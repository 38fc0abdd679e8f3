"""``claims.png``: every claim's measured interval next to the paper's value and the
no-change line, so a reader sees at a glance how far each one is from deciding.

One panel per claim, one row per sweep value: the estimate with its 95 % interval
(coloured by verdict), the paper's value (a red cross on each row) and no change (a
black line).  Ratios on a log axis, where "x2" and "x0.5" sit at the same distance from
no change; differences on a linear one.  Drawn from evaluate()'s results, as the
document is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import plots
from . import verdict as rule
from .evaluate import Result, evaluate
from .papers import PER_FLOW, Paper

COLOURS = {rule.REPRODUCED: "tab:green", rule.DIRECTION: "tab:olive",
           rule.INCONCLUSIVE: "tab:gray", rule.OPPOSITE: "tab:red"}
SPAN = 100.0  # a ratio axis spans at most this factor each side of no change
DPI = 90  # below the report's plots.DPI: this figure grows with the number of claims
# ratio ticks: 1-2-5 per decade, more within a decade (0.01 .. 700)
RATIO_TICKS = [m * 10.0 ** e for e in range(-2, 3) for m in (1, 2, 5)]
FINE_TICKS = [m * 10.0 ** e for e in range(-2, 3) for m in (1, 1.5, 2, 3, 5, 7)]


def _groups(results: Sequence[Result]) -> list[list[Result]]:
    out: dict[str, list[Result]] = {}
    for r in results:
        out.setdefault(r.claim.id, []).append(r)
    return list(out.values())


def _limits(rows: Sequence[Result], log: bool) -> tuple[float, float]:
    """The x range: no change, the paper's value, the estimates and their intervals,
    a ratio axis clipped to SPAN either side of 1 (a two-seed interval can reach 1e-12)."""
    claim = rows[0].claim
    n0 = rule.NO_CHANGE[claim.compare]
    points = [n0] + ([] if claim.paper_value is None else [claim.paper_value])
    for r in rows:
        points += [v for v in (r.measured.estimate, r.measured.low, r.measured.high)
                   if math.isfinite(v) and (not log or v > 0)]
    low, high = min(points), max(points)
    if log:
        low, high = max(low, n0 / SPAN), min(high, n0 * SPAN)
        return low / 1.3, high * 1.3
    pad = (high - low) * 0.1 or 1.0
    return low - pad, high + pad


def draw(paper: Paper, summary: Mapping[str, Any], path: Path) -> Path:
    """Draw the figure of ``paper``'s claims against ``summary`` into ``path``."""
    plt = plots.plt
    groups = _groups(evaluate(paper, summary))
    # a paper has up to ~70 claims: panels as small as their labels allow
    heights = [0.75 + 0.28 * len(rows) for rows in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(7.5, sum(heights) + 0.6),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, rows in zip(axes[:, 0], groups, strict=True):
        _panel(ax, rows)
    plots.caption(fig, "point: measured estimate; bar: its 95% interval (per seed, or per "
                  "flow where marked); x: the paper's value (where it states one); line: no "
                  "change; ratios on a log axis, differences on a linear one")
    path.parent.mkdir(parents=True, exist_ok=True)
    # no Software entry: the same matplotlib draws the same bytes, whoever runs it
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)
    return path


def _panel(ax: Any, rows: Sequence[Result]) -> None:
    claim = rows[0].claim
    log = claim.compare == "ratio"
    n0 = rule.NO_CHANGE[claim.compare]
    low, high = _limits(rows, log)
    ys = list(range(len(rows)))[::-1]  # the first sweep value on top
    for y, r in zip(ys, rows, strict=True):
        m = r.measured
        colour = COLOURS[r.verdict]
        if math.isfinite(m.estimate):
            lo = min(max(m.low, low), m.estimate) if m.has_interval else m.estimate
            hi = max(min(m.high, high), m.estimate) if m.has_interval else m.estimate
            ax.errorbar([m.estimate], [y], xerr=[[m.estimate - lo], [hi - m.estimate]],
                        fmt="o", color=colour, capsize=3)
        if claim.paper_value is not None:  # else the paper states a direction only
            ax.plot([claim.paper_value], [y], marker="x", color="tab:red", markersize=8,
                    linestyle="none")
        ax.text(1.01, y, r.verdict, transform=ax.get_yaxis_transform(), va="center",
                fontsize="small", color=colour)
    ax.set_yticks(ys, [r.condition + (" (per flow)" if r.measured.per == PER_FLOW else "")
                       for r in rows])
    ax.axvline(n0, color="black", linewidth=0.9)
    if log:
        ax.set_xscale("log")
        ticks = [t for t in (FINE_TICKS if high / low < 10 else RATIO_TICKS)
                 if low <= t <= high]
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.set_xticks([], minor=True)
    ax.set_xlim(low, high)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.set_title(f"{claim.id}: {claim.scheme} {'/' if log else '-'} {claim.baseline} "
                 f"{claim.table} {claim.metric}", fontsize="small", loc="left")
    ax.grid(True, axis="x", alpha=0.3, which="both")
    ax.tick_params(labelsize="small")
