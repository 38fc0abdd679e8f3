"""The summary as a readable text table: one block per sweep value, a column per scheme.

Each cell is ``mean ± CI`` across seeds; non-baseline schemes add ``x ratio [low, high]``
to the baseline (geometric mean of per-seed paired ratios and its 95% interval, see
metrics.py).  FCTs are shown in ms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .metrics import CLASSES, SummaryRow

# (metric, class, label, scale) in display order.
ROWS: list[tuple[str, str, str, float]] = [
    ("flows", "all", "flows measured", 1.0),
    ("failed", "all", "failed (not ok)", 1.0),
]
for _cls in CLASSES:
    ROWS += [
        ("fct_mean", _cls, f"{_cls} FCT mean (ms)", 1e3),
        ("fct_p50", _cls, f"{_cls} FCT p50 (ms)", 1e3),
        ("fct_p99", _cls, f"{_cls} FCT p99 (ms)", 1e3),
    ]
ROWS += [
    ("tput_mbps", "elephant", "elephant throughput (Mbit/s)", 1.0),
    ("ooo_pct", "all", "out-of-order (% of segments)", 1.0),
]
for _cls in CLASSES:
    ROWS.append(("ooo_pct", _cls, f"  {_cls} out-of-order (%)", 1.0))
for _cls in CLASSES:  # per-flow means of the senders' tcp_info at the flow's end
    ROWS += [
        ("retrans", _cls, f"{_cls} retransmits / flow", 1.0),
        ("reord_seen", _cls, f"{_cls} reorder events / flow", 1.0),
        ("dsack_dups", _cls, f"{_cls} spurious rtx (DSACK) / flow", 1.0),
    ]


def fmt(value: float) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    magnitude = abs(value)
    if magnitude >= 100 or value == int(value) and magnitude < 1e6:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.01:
        return f"{value:.2f}"
    return f"{value:.2g}"


def ratio_interval(low: float, high: float) -> str:
    """``[low, high]`` of a ratio; bounds past 0.01 or 100 (two seeds that disagree
    give t(0.975, 1) = 12.7 and intervals such as [0.00, 45816106.94]) are shown as
    ``<0.01`` / ``>100``: the table says "unknown" without a wall of digits."""
    def bound(value: float) -> str:
        if value < 0.01:
            return "<0.01"
        return ">100" if value > 100 else f"{value:.2f}"
    return f"[{bound(low)}, {bound(high)}]"


def aligned(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """A text table's lines: the header, a rule under each column, the body rows; every
    column as wide as its widest cell, two spaces apart (trailing spaces stripped)."""
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    rows = [header, ["-" * w for w in widths], *body]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def cell(row: SummaryRow, scale: float, baseline: str | None) -> str:
    text = fmt(row.mean * scale)
    if math.isfinite(row.ci):
        text += f" ± {fmt(row.ci * scale)}"
    if row.scheme != baseline and math.isfinite(row.ratio):
        text += f"  x{row.ratio:.2f}"
        if math.isfinite(row.ratio_low):
            text += " " + ratio_interval(row.ratio_low, row.ratio_high)
    return text


def baseline_first(schemes: Sequence[str], baseline: str | None) -> list[str]:
    """``schemes`` with the baseline moved to the front: every ratio refers to it."""
    out = list(schemes)
    if baseline in out:
        out.remove(baseline)
        out.insert(0, baseline)
    return out


def render(summary: Sequence[SummaryRow], baseline: str | None, sweep: str = "load",
           title: str = "") -> str:
    schemes = baseline_first(list(dict.fromkeys(r.scheme for r in summary)), baseline)
    loads = sorted({r.load for r in summary})
    index = {(r.scheme, r.load, r.metric, r.cls): r for r in summary}
    lines = [title] if title else []
    if baseline:
        lines.append(f"mean ± 95% CI across seeds; x ratio to {baseline} "
                     "[95% CI], geometric mean of per-seed ratios")
    known = {(m, c) for m, c, _label, _scale in ROWS}
    extra = [(m, c, f"{m} (mean per flow)", 1.0)
             for m, c in dict.fromkeys((r.metric, r.cls) for r in summary)
             if c == "all" and (m, c) not in known and m not in ("flows", "failed")]
    for load in loads:
        seeds = max((r.seeds for r in summary if r.load == load and r.metric == "flows"),
                    default=0)
        header = [f"{sweep} = {fmt(load)} ({seeds} seed{'s' if seeds != 1 else ''})",
                  *schemes]
        body = []
        for metric, cls, label, scale in [*ROWS, *extra]:
            cells = []
            present = False
            for scheme in schemes:
                row = index.get((scheme, load, metric, cls))
                if row is not None and math.isfinite(row.mean):
                    present = True
                cells.append(cell(row, scale, baseline) if row is not None else "-")
            if present:
                body.append([label, *cells])
        lines += ["", *aligned(header, body)]
    return "\n".join(lines).rstrip() + "\n"
