"""What the controller app did during one run: counter deltas and per-flow table size.

The app writes its state file (DCNLAB_STATE_FILE) every stats interval; the runner reads
it just before and just after each replay.  Counters are cumulative over the network's
life (``network: per_scheme`` reuses one controller for several runs), so a run's share is
the difference of the two snapshots.  Which counters become columns, and which state
section holds a series of (wall time, per-flow entries over all switches), each scheme
declares (``Scheme.controller`` in dcnlab.schemes); the run's table size is the mean and
maximum of the samples that fall inside its replay.  Schemes without per-flow entries
report 0 entries, which is what they install per flow.

Everything here is informative: a missing or unreadable state gives empty cells, never an
error, because the flows were measured regardless.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dcnlab.model.runtime import ControllerState
from dcnlab.schemes import registry

from .table import aligned

CONTROLLER_CSV = "controller.csv"


def _declared_counters() -> dict[str, str]:
    """Counter name in the app -> column: FabricApp's packet_in, then every scheme's.
    Only the counters an app keeps get values."""
    counters = {"packet_in": "packet_in"}
    for scheme in registry.registry().schemes.values():
        counters.update(scheme.controller.counters)
    return counters


COUNTERS = _declared_counters()
# the exploration broadcast at the leaf switches (the switches hosts attach to), as the
# paper of seed 001 counts it (its Table 2, Fig. 17): the bytes of the exploration copies
# the leaves received, the bytes they received in all (rx, every port, copies included:
# as in the paper's measurement, ACKs and retransmissions are data), and the copies'
# share of the rest in percent
OVERHEAD = ["leaf_copy_bytes", "leaf_rx_bytes", "bcast_data_pct"]
COLUMNS = ["scheme", "load", "seed", "entries_mean", "entries_max", "entries_samples",
           *dict.fromkeys(COUNTERS.values()), *OVERHEAD]


def snapshot(net: Any) -> ControllerState | None:
    """The app's current state, or None when there is none to read."""
    try:
        state = net.state()
    except Exception:  # noqa: BLE001 - informative only
        return None
    return state if isinstance(state, dict) else None


def run_stats(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
              t0: float, t1: float, app: str = "", leaves: Collection[str] = (),
              leaf_rx: int | None = None) -> dict[str, Any]:
    """The controller's columns for one run of ``app`` that replayed from wall time t0
    to t1; ``leaves``: the dpids (decimal strings) of the switches hosts attach to,
    ``leaf_rx``: the bytes they received during the run (None: unknown)."""
    out: dict[str, Any] = {}
    if after is None:
        return out
    start = (before or {}).get("counters", {}) or {}
    end = after.get("counters", {}) or {}
    for name, column in COUNTERS.items():
        if name in end:
            out[column] = int(end[name]) - int(start.get(name, 0))
    scheme = registry.lookup(app) if app else None
    section = scheme.controller.entries_section if scheme is not None else None
    per_flow = after.get(section) if section else None
    if isinstance(per_flow, Mapping):
        values = entries_in_window(per_flow.get("series", []), t0, t1)
        if values:
            out["entries_mean"] = sum(values) / len(values)
            out["entries_max"] = max(values)
            out["entries_samples"] = len(values)
    else:
        out.update(entries_mean=0.0, entries_max=0, entries_samples=0)
    copies = scheme.controller.copies_section if scheme is not None else None
    if copies and isinstance(after.get(copies), Mapping):
        out.update(leaf_overhead((before or {}).get(copies), after[copies], leaves, leaf_rx))
    return out


def leaf_overhead(before: Mapping[str, Any] | None, after: Mapping[str, Any],
                  leaves: Collection[str], leaf_rx: int | None) -> dict[str, Any]:
    """OVERHEAD's columns from a copies section before and after a run."""
    def at_leaves(section: Mapping[str, Any] | None) -> int:
        counts = (section or {}).get("copies_in") or {}
        return sum(int(n) for dpid, n in counts.items() if str(dpid) in leaves)

    copy_bytes = (at_leaves(after) - at_leaves(before)) * int(after.get("copy_bytes") or 0)
    out: dict[str, Any] = {"leaf_copy_bytes": copy_bytes, "leaf_rx_bytes": leaf_rx}
    if leaf_rx is not None and leaf_rx > copy_bytes:
        out["bcast_data_pct"] = 100.0 * copy_bytes / (leaf_rx - copy_bytes)
    return out


def entries_in_window(series: Sequence[Any], t0: float, t1: float) -> list[int]:
    """Entry counts of the (time, entries) samples with t0 <= time <= t1."""
    values = []
    for item in series:
        try:
            t, n = float(item[0]), int(item[1])
        except (TypeError, ValueError, IndexError):
            continue
        if t0 <= t <= t1:
            values.append(n)
    return values


# ---------------------------------------------------------------------------- report

def _table_rows() -> list[tuple[str, str]]:
    """(column, label) in display order: table sizes, the schemes' labelled counters,
    then all packet-ins."""
    rows = {"entries_mean": "per-flow entries, mean (all switches)",
            "entries_max": "per-flow entries, max"}
    for scheme in registry.registry().schemes.values():
        rows.update(scheme.controller.labels)
    rows["bcast_data_pct"] = "exploration / data bytes at leaves (%)"
    rows["packet_in"] = "packet-ins (all)"
    return list(rows.items())


TABLE_ROWS = _table_rows()


def render(rows: Sequence[Mapping[str, Any]], schemes: Sequence[str], sweep: str) -> str:
    """A controller table: mean over seeds per scheme and sweep value.

    The per-flow entries row also gives each scheme's share of the scheme with the most
    entries (a scheme that pins only some flows against one that pins all of them).
    """
    if not rows:
        return ""
    loads = sorted({float(r["load"]) for r in rows})
    lines = ["controller (mean across seeds)"]
    for load in loads:
        at = [r for r in rows if float(r["load"]) == load]
        means = {(s, c): _mean([r.get(c) for r in at if r["scheme"] == s])
                 for s in schemes for c, _ in TABLE_ROWS}
        top = max((means[(s, "entries_mean")] for s in schemes
                   if math.isfinite(means[(s, "entries_mean")])), default=math.nan)
        header = [f"{sweep} = {_fmt(load)}", *schemes]
        body = []
        for column, label in TABLE_ROWS:
            values = [means[(s, column)] for s in schemes]
            if not any(math.isfinite(v) for v in values):
                continue
            cells = [_fmt(v, 3 if column == "bcast_data_pct" else 0) for v in values]
            if column == "entries_mean" and math.isfinite(top) and top > 0:
                cells = [c + (f" ({v / top:.1%})" if math.isfinite(v) and v != top else "")
                         for c, v in zip(cells, values, strict=True)]
            body.append([label, *cells])
        if not body:
            continue
        lines += ["", *aligned(header, body)]
    return "\n".join(lines) + "\n" if len(lines) > 1 else ""


def _mean(values: Sequence[Any]) -> float:
    nums = []
    for v in values:
        try:
            x = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(x):
            nums.append(x)
    return sum(nums) / len(nums) if nums else math.nan


def _fmt(value: float, significant: int = 0) -> str:
    """A table cell; ``significant`` digits for small ratios (0.0213), else whole numbers
    or one decimal."""
    if not math.isfinite(value):
        return "-"
    if significant and value:
        return f"{value:.{significant}g}"
    if value == int(value) or abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}"
