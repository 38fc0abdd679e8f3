"""What the switches' queue disciplines and load balancers did during one run: switch.csv.

A scheme whose mechanism is a queue discipline of ``switch_ext`` (ABQ's input queue, say)
or one of its load balancers (LetFlow's flowlets) declares which of the discipline's
per-port or the balancer's per-group counters become columns (``Scheme.switch_columns``,
:class:`dcnlab.schemes.base.SwitchColumns`).  The runner reads every switch's stats line
just before and just after each replay (:func:`netstats.switch_lines`, as ports and
select groups: :func:`netstats.ports`, :func:`netstats.balancers`); a run's figures are
the differences, summed over the ports or groups running it, gauges as after - before,
and the peak a port histogram reached during the run.  Columns come from every
declaration in the registry, so the file has the same header whatever the experiment
compares; a run without the discipline or balancer (another scheme, the ``ovs`` switch
kind) leaves them empty.

The summary gives each column's mean and 95% interval across seeds per scheme and sweep
value (no ratio: the baseline usually runs no such discipline).  Everything here is
informative: a missing stats line gives empty cells, never an error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from dcnlab.schemes import registry
from dcnlab.schemes.base import SwitchColumns

from . import netstats
from .metrics import SummaryRow

SWITCH_CSV = "switch.csv"
CLASS = "switch"


def declared() -> list[SwitchColumns]:
    """Every scheme's declarations, each (section, kind) once (the first wins)."""
    out: dict[tuple[str, str], SwitchColumns] = {}
    for scheme in registry.registry().schemes.values():
        for decl in scheme.switch_columns:
            out.setdefault((decl.section, decl.kind), decl)
    return list(out.values())


DECLARED = declared()
METRICS = list(dict.fromkeys(c for d in DECLARED for c in d.columns()))
COLUMNS = ["scheme", "load", "seed", *METRICS]
LABELS = {c: label for d in DECLARED for c, label in d.labels.items()}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def units(lines: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """What :func:`run_row` reads of :func:`netstats.switch_lines`: the ports, the select
    groups' balancers and the switches' overlays, by ``switch:port``, ``switch:groupN``
    and ``switch:overlay``."""
    return {**netstats.ports(lines), **netstats.balancers(lines), **netstats.overlays(lines)}


def run_row(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]],
            declarations: Iterable[SwitchColumns] | None = None) -> dict[str, Any]:
    """The declared columns of one run from two snapshots of ports and groups
    (``{"s1:2": port entry, "s1:group1": {"balancer": entry}}``, :func:`netstats.ports`
    and :func:`netstats.balancers`); columns of a discipline or balancer nothing runs are
    left out."""
    out: dict[str, Any] = {}
    for decl in DECLARED if declarations is None else declarations:
        ports = [name for name, p in after.items()
                 if isinstance(p.get(decl.section), dict)
                 and p[decl.section].get("kind") == decl.kind]
        if not ports:
            continue
        for key, column in [*decl.counters.items(), *decl.gauges.items()]:
            out[column] = sum(
                _int(after[n][decl.section].get(key))
                - _int(((before.get(n) or {}).get(decl.section) or {}).get(key))
                for n in ports)
        for hist, column in decl.peaks.items():
            peak = 0
            for n in ports:
                now = netstats.hists({n: after[n]}).get(n, {}).get(hist, {})
                then = netstats.hists({n: before[n]}).get(n, {}).get(hist, {}) \
                    if n in before else {}
                delta = netstats.hist_delta(then, now)
                peak = max([peak, *delta])
            out[column] = peak
    return out


def summarize(rows: Iterable[Mapping[str, Any]]) -> list[SummaryRow]:
    """Mean and 95% interval across seeds of every column some run has."""
    return netstats.summarize(rows, None, METRICS, CLASS)


def render(summary: list[SummaryRow], schemes: list[str], sweep: str) -> str:
    present = [s for s in schemes if any(r.scheme == s and math.isfinite(r.mean)
                                         for r in summary)]
    if not present:
        return ""
    return netstats.render([r for r in summary if r.scheme in present], present, None,
                           sweep, METRICS, LABELS,
                           "switch queue disciplines and load balancers (their own counters "
                           "per run, summed over the ports or select groups running them; "
                           "mean ± 95% CI across seeds)")
