"""Per-flow paired ratios to the baseline: each flow against itself.

Every scheme of an experiment runs the same flow list per (seed, sweep value): flow ``k``
of seed ``s`` has the same endpoints, size and start time under every scheme.  So a
flow's figure under a scheme divided by the same flow's figure under the baseline is a
ratio that the workload's variation (which flows happened to be large, or to start
together) does not enter.  Per (scheme, sweep value, figure):

* ``pairs``: flows measured and completed (status ok) under both;
* ``ratio``: the geometric mean of the per-flow ratios ``exp(mean(log r))``, with a
  95 % Student-t interval on ``mean(log r)`` (as metrics.ratio_ci);
* ``better``: the fraction of pairs where the scheme did better (higher throughput,
  shorter completion time).

The interval treats the flows as independent samples.  Flows of one run share the
network, so they are not quite: this interval is narrower than one that allows for
that, and the per-seed interval of the main table (pairs of runs, not of flows) is
the conservative one.  Both are shown; a difference that only the per-flow interval
resolves is worth more seeds, not a verdict.

Figures: elephant throughput (bytes * 8 / FCT) and the completion time of mice,
rabbits and elephants (classes as in metrics.py).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .metrics import OK, ratio_ci, throughput_mbps
from .table import aligned

PAIRED_CSV = "paired.csv"
COLUMNS = ("scheme", "baseline", "load", "figure", "class", "pairs", "ratio", "ratio_low95",
           "ratio_high95", "better_frac")

# (figure, class, higher is better, label)
FIGURES = (
    ("tput_mbps", "elephant", True, "elephant throughput"),
    ("fct", "elephant", False, "elephant FCT"),
    ("fct", "rabbit", False, "rabbit FCT"),
    ("fct", "mouse", False, "mouse FCT"),
)


@dataclass(frozen=True)
class PairedRow:
    scheme: str
    baseline: str
    load: float
    figure: str
    cls: str
    pairs: int
    ratio: float
    low: float
    high: float
    better: float  # fraction of pairs in which the scheme did better

    def as_dict(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "baseline": self.baseline, "load": self.load,
                "figure": self.figure, "class": self.cls, "pairs": self.pairs,
                "ratio": self.ratio, "ratio_low95": self.low, "ratio_high95": self.high,
                "better_frac": self.better}


def _value(row: Mapping[str, Any], figure: str) -> float:
    if figure == "tput_mbps":
        return throughput_mbps(row)
    fct = row.get("fct")
    return float(fct) if fct is not None and row.get("size") != 0 else math.nan


def summarize(rows: Iterable[Mapping[str, Any]], baseline: str | None) -> list[PairedRow]:
    """Paired rows for every scheme but ``baseline`` (none without a baseline)."""
    if baseline is None:
        return []
    # (scheme, load, class) -> (seed, flow id) -> the flow's row, measured and completed
    # flows only
    done: dict[tuple[str, float, str], dict[tuple[int, Any], Mapping[str, Any]]] = \
        defaultdict(dict)
    for row in rows:
        if row.get("measured", True) and row["status"] == OK:
            done[(str(row["scheme"]), float(row["load"]), row["class"])][
                (int(row["seed"]), row["flow_id"])] = row
    schemes = list(dict.fromkeys(k[0] for k in done if k[0] != baseline))
    loads = sorted({k[1] for k in done})
    out = []
    for load in loads:
        for scheme in schemes:
            for figure, cls, higher_better, _label in FIGURES:
                ratios = []
                bases = done.get((baseline, load, cls), {})
                for flow, row in done.get((scheme, load, cls), {}).items():
                    base = bases.get(flow)
                    if base is None:
                        continue
                    mine, theirs = _value(row, figure), _value(base, figure)
                    if mine > 0 and theirs > 0 and math.isfinite(mine) and math.isfinite(theirs):
                        ratios.append(mine / theirs)
                if not ratios:
                    continue
                ratio, low, high = ratio_ci(ratios)
                better = sum(1 for r in ratios if (r > 1 if higher_better else r < 1))
                out.append(PairedRow(scheme, baseline, load, figure, cls, len(ratios), ratio,
                                     low, high, better / len(ratios)))
    return out


def render(paired: Sequence[PairedRow], sweep: str) -> str:
    """The section: per sweep value, each figure's paired ratio per scheme."""
    if not paired:
        return ""
    baseline = paired[0].baseline
    schemes = list(dict.fromkeys(r.scheme for r in paired))
    index = {(r.scheme, r.load, r.figure, r.cls): r for r in paired}
    lines = [f"per-flow paired ratio to {baseline}: geometric mean [95% CI, flows as "
             "independent samples] (pairs; share of flows that did better)"]
    for load in sorted({r.load for r in paired}):
        header = [f"{sweep} = {load:g}", *schemes]
        body = []
        for figure, cls, _higher, label in FIGURES:
            cells = []
            for scheme in schemes:
                r = index.get((scheme, load, figure, cls))
                if r is None:
                    cells.append("-")
                    continue
                interval = (f" [{r.low:.2f}, {r.high:.2f}]" if math.isfinite(r.low) else "")
                cells.append(f"x{r.ratio:.2f}{interval} ({r.pairs}; {r.better:.0%})")
            if any(c != "-" for c in cells):
                body.append([label, *cells])
        lines += ["", *aligned(header, body)]
    return "\n".join(lines).rstrip() + "\n"
