"""Where a claim's metric lives: the tables of a results directory, what each one
produces, and reading one value per run (scheme, sweep value, seed) from it.

A claim names a ``table`` and a ``metric`` as dcnlab writes them; this module is the one
place that says which names are valid (paper files are checked against it before
anything runs) and how they are read back (extraction), so the two cannot disagree:

- ``flows``: flows.csv, through metrics.run_metrics per run over its measured flows --
  the summary's per-run figures (``fct_mean``, ``fct_p50``, ``fct_p99``, ``flows``,
  ``failed``, ``ooo_pct``, ``retrans``, ``reord_seen``, ``dsack_dups``, ``tput_mbps``),
  each for the classes run_metrics gives it (``tput_mbps`` for elephants only, ``failed``
  for ``all`` only, ...), plus the columns of the experiment's scheme transports (class
  ``all``; a ``;``-joined column as ``<column>_1``, ``<column>_2``...);
- ``network``, ``switch``, ``controller``, ``paths``, ``flowdiag``, ``fairness``: one
  row per run in network.csv (goodput and FCT percentiles recomputed from flows.csv, as
  the report does), switch.csv, controller.csv, paths.csv, flowdiag.csv, fairness.csv;
  the metric is a column of the engine's own list for that file, class ``all``;
- ``sizes``: size sweeps only (workload ``sizes``/``incast_size``): sizes.flow_stats of
  each run's flows -- ``n``, ``failed``, ``fct_mean_ms``, ``fct_geo_ms`` and the
  transport columns, over every flow of the run whatever its class;
- ``paired``: per-flow paired ratios (paired.py): the figure ``fct`` (classes mouse,
  rabbit, elephant) or ``tput_mbps`` (elephant), or class ``all`` for every completed
  flow whatever its class.  Not per run: see :meth:`ResultsDir.paired_rows`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import controller_stats, fairness, flowdiag, netstats, paired, pathdiag, switch_stats
from ..metrics import run_metrics
from ..results import FLOW_COLUMNS, FLOWS_CSV, ResultsError, extra_columns, read_flows
from ..spec import ExperimentSpec
from .errors import MissingResultsError

ALL = "all"
FLOW_CLASSES = ("mouse", "rabbit", "elephant")
CLASSES = (ALL, *FLOW_CLASSES)
PAIRED = "paired"
SIZES_METRICS = ("n", "failed", "fct_mean_ms", "fct_geo_ms")
SIZE_SWEEP = "size"
# The class paired.summarize pools every flow into for class "all" (see paired_rows):
# paired.FIGURES has both figures for it (a test holds it to that).
POOLED_CLASS = "elephant"

# A run: (scheme, sweep value rounded as a key, seed).
RunKey = tuple[str, float, int]


def value_key(value: float) -> float:
    """A sweep value as a dictionary key: the CSVs store round(value, 9) (results._cell),
    the experiment file the value itself."""
    return round(float(value), 9)


def value_text(value: float) -> str:
    """A sweep value or a paper's value as written: 8388608, 0.005, 0.63 (never the 6
    digits of :g, which print 8388608 as 8.38861e+06)."""
    return f"{value:.10g}"


@dataclass(frozen=True)
class Table:
    name: str
    file: str  # the CSV its values come from (named in errors)
    per_run: bool  # one value per run (else: per-flow pairs, paired.py)
    meaning: str


TABLES: dict[str, Table] = {t.name: t for t in (
    Table("flows", FLOWS_CSV, True, "per run, from the measured flows (metrics.run_metrics)"),
    Table("network", netstats.NETWORK_CSV, True, "per run: bottleneck queue, drops, RTOs, "
          "goodput, FCT percentiles over all flows (netstats.py)"),
    Table("switch", switch_stats.SWITCH_CSV, True, "per run: the queue disciplines' "
          "counters (switch_stats.py)"),
    Table("controller", controller_stats.CONTROLLER_CSV, True, "per run: the app's "
          "counters and per-flow entries (controller_stats.py)"),
    Table("paths", pathdiag.PATHS_CSV, True, "per run: parallel up ports and the hosts' "
          "TCP counters (pathdiag.py)"),
    Table("flowdiag", flowdiag.FLOWDIAG_CSV, True, "per run: elephants sharing links, "
          "least-loaded choices (flowdiag.py)"),
    Table("fairness", fairness.FAIRNESS_CSV, True, "per run: Jain's index and throughput "
          "from the receivers (fairness.py)"),
    Table("sizes", FLOWS_CSV, True, "per run of a size sweep: FCT over all its flows "
          "(sizes.flow_stats)"),
    Table(PAIRED, FLOWS_CSV, False, "per flow: the same flow under the scheme and the "
          "baseline (paired.py)"),
)}

_CSV_METRICS: dict[str, list[str]] = {
    "network": list(netstats.METRICS),
    "switch": list(switch_stats.METRICS),
    "controller": list(controller_stats.COLUMNS[3:]),
    "paths": list(pathdiag.METRICS),
    "flowdiag": list(flowdiag.METRICS),
    "fairness": [*dict.fromkeys([m for m, _cls in fairness.METRICS] + fairness.HOST_COLUMNS)],
}


def transport_columns(spec: ExperimentSpec) -> list[str]:
    """flows.csv's columns of the experiment's scheme transports (runner.flow_columns)."""
    from ..runner import flow_columns

    return [c for c in flow_columns(spec) if c not in FLOW_COLUMNS]


def _flow_metrics(spec: ExperimentSpec) -> dict[str, tuple[str, ...]]:
    """metric -> its classes, as run_metrics produces them (asked of run_metrics itself)."""
    out: dict[str, list[str]] = defaultdict(list)
    for metric, cls in run_metrics([]):
        out[metric].append(cls)
    for column in transport_columns(spec):
        out[column].append(ALL)
    return {m: tuple(c) for m, c in out.items()}


def metrics(table: str, spec: ExperimentSpec) -> dict[str, tuple[str, ...]]:
    """The metrics ``table`` produces for the experiment ``spec``: metric -> its classes."""
    if table == "flows":
        return _flow_metrics(spec)
    if table == "sizes":
        return {m: (ALL,) for m in [*SIZES_METRICS, *transport_columns(spec)]}
    if table == PAIRED:
        return {"fct": (ALL, *FLOW_CLASSES), "tput_mbps": (ALL, "elephant")}
    return {m: (ALL,) for m in _CSV_METRICS[table]}


def check(table: str, metric: str, cls: str, spec: ExperimentSpec) -> tuple[str, str] | None:
    """None if ``table`` produces ``metric`` for class ``cls`` in ``spec``'s results, else
    (the field at fault, why)."""
    known = metrics(table, spec)
    if table == "sizes" and spec.sweep != SIZE_SWEEP:
        return "table", (f"the sizes table exists for size sweeps only; this experiment "
                         f"sweeps {spec.sweep}")
    base = _list_column(metric, known) if table in ("flows", "sizes") else None
    if metric not in known and base is None:
        close = difflib.get_close_matches(metric, list(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return "metric", (f"table {table} has no metric {metric!r}{hint}; it has: "
                          f"{', '.join(known)}")
    classes = known[base or metric]
    if cls not in classes:
        return "class", (f"{table} {metric} has class {' or '.join(classes)}, not {cls!r}"
                         + ("" if table in ("flows", PAIRED) else
                            f" ({TABLES[table].file} has one row per run, no size classes)"))
    return None


def _list_column(metric: str, known: Mapping[str, Any]) -> str | None:
    """``subflow_bytes_2`` -> ``subflow_bytes`` for a transport column that holds a
    ``;``-joined list (metrics.extra_values numbers its elements from 1)."""
    match = re.fullmatch(r"(.+)_([1-9][0-9]*)", metric)
    return match.group(1) if match and match.group(1) in known else None


# ---------------------------------------------------------------------------- reading


def _number(value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return math.nan
    return x


class ResultsDir:
    """One experiment's (or scenario's) results directory as ``dcnlab run`` writes it,
    each file read once and only when a claim needs it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._flows: list[dict[str, Any]] | None = None
        self._csv: dict[str, list[dict[str, Any]]] = {}
        self._runs: dict[RunKey, dict[tuple[str, str], float]] | None = None

    def flows(self) -> list[dict[str, Any]]:
        if self._flows is None:
            try:
                self._flows = read_flows(self.path / FLOWS_CSV)
            except ResultsError as exc:
                raise MissingResultsError(str(exc)) from None
        return self._flows

    def _rows(self, table: str) -> list[dict[str, Any]]:
        name = TABLES[table].file
        if name not in self._csv:
            path = self.path / name
            if not path.is_file():
                raise MissingResultsError(f"{path} does not exist")
            rows = netstats.read_rows(path)
            if table == "network" and (self.path / FLOWS_CSV).is_file():
                rows = netstats.refresh_flow_columns(rows, self.flows())  # as report() does
            self._csv[name] = rows
        return self._csv[name]

    def run_values(self, table: str, metric: str, cls: str) -> dict[RunKey, float]:
        """{run: value} of ``metric`` (class ``cls``) in ``table``; a run without a value
        maps to nan.  Raises MissingResultsError naming the file or column missing."""
        if table == "flows":
            return {key: figures.get((metric, cls), math.nan)
                    for key, figures in self._flow_runs().items()}
        if table == "sizes":
            return self._size_runs(metric)
        rows = self._rows(table)
        path = self.path / TABLES[table].file
        if not rows:
            raise MissingResultsError(f"{path} holds no run")
        if metric not in rows[0]:
            raise MissingResultsError(f"{path} has no column {metric}")
        return {(str(r["scheme"]), value_key(r["load"]), int(float(r["seed"]))):
                _number(r.get(metric)) for r in rows}

    def _flow_runs(self) -> dict[RunKey, dict[tuple[str, str], float]]:
        """metrics.run_metrics of every run, over its measured rows (metrics.summarize's
        grouping), with the transports' columns."""
        if self._runs is None:
            rows = self.flows()
            extra = extra_columns(rows)
            runs: dict[RunKey, list[dict[str, Any]]] = defaultdict(list)
            for row in rows:
                if row.get("measured", True):
                    runs[(str(row["scheme"]), value_key(row["load"]),
                          int(row["seed"]))].append(row)
            self._runs = {key: run_metrics(members, extra) for key, members in runs.items()}
        return self._runs

    def _size_runs(self, metric: str) -> dict[RunKey, float]:
        from .. import sizes  # matplotlib: only when a claim needs it

        rows = self.flows()
        extra = extra_columns(rows)
        by_seed: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            by_seed[int(row["seed"])].append(row)
        out: dict[RunKey, float] = {}
        for seed, members in by_seed.items():
            schemes = list(dict.fromkeys(str(r["scheme"]) for r in members))
            for stats in sizes.flow_stats(members, schemes, None, extra):
                out[(str(stats["scheme"]), value_key(stats["load"]), seed)] = \
                    _number(stats.get(metric))
        return out

    def paired_rows(self, metric: str, cls: str, baseline: str
                    ) -> dict[tuple[str, float], paired.PairedRow]:
        """{(scheme, sweep value): paired.PairedRow} of ``metric`` and class ``cls``
        against ``baseline``, from flows.csv by paired.summarize (the function that
        writes paired.csv, which pairs with the experiment's baseline only)."""
        rows: Sequence[dict[str, Any]] = self.flows()
        figure_cls = cls
        if cls == ALL:  # every completed flow in one class: the pooled figure
            rows = [{**r, "class": POOLED_CLASS} for r in rows]
            figure_cls = POOLED_CLASS
        return {(r.scheme, value_key(r.load)): r for r in paired.summarize(rows, baseline)
                if r.figure == metric and r.cls == figure_cls}
