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
from collections.abc import Mapping, Sequence
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
COLUMNS = ["scheme", "load", "seed", "entries_mean", "entries_max", "entries_samples",
           *dict.fromkeys(COUNTERS.values())]


def snapshot(net: Any) -> ControllerState | None:
    """The app's current state, or None when there is none to read."""
    try:
        state = net.state()
    except Exception:  # noqa: BLE001 - informative only
        return None
    return state if isinstance(state, dict) else None


def run_stats(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
              t0: float, t1: float, app: str = "") -> dict[str, Any]:
    """The controller's columns for one run of ``app`` that replayed from wall time t0
    to t1."""
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
            cells = [_fmt(v) for v in values]
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


def _fmt(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    if value == int(value) or abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}"
