"""Metrics math on flow rows: size classes, per-run figures, CIs across seeds, ratios.

Pure functions over plain rows (dicts as in flows.csv), no I/O, so they are tested in
memory.  Definitions:

- class: ``mouse`` if size < mouse_max, ``elephant`` if size > elephant_min or the flow
  is long-lived, ``rabbit`` otherwise; UDP flows are ``udp``.
- per run (scheme, sweep value, seed), over *measured* flows (start inside the
  warm-up/cool-down window; a long-lived or UDP flow: sending inside it):
  ``fct_mean/p50/p99`` per class (seconds; completed flows of a size only -- a
  long-lived flow's "FCT" is the time the workload let it run; linear-interpolated
  percentiles), ``tput_mbps`` of elephants (mean over completed elephant flows,
  long-lived ones included, of bytes * 8 / fct), ``ooo_pct`` per class and overall
  (100 * out-of-order packets / data segments received, pooled over the class's TCP
  flows; the receiver's ``tcpi_rcv_ooopack`` counts every segment that lands above a
  hole, so segments after a loss count too -- single-path forwarding shows a few
  percent under loss, packet spraying adds true reordering on top), per-flow
  diagnosis means per class over the TCP flows that report them (``retrans``: the
  sender's tcpi_total_retrans; ``reord_seen``: reordering events it detected;
  ``dsack_dups``: its retransmissions the receiver reported as duplicates (DSACK), i.e.
  spurious ones; see agent.reorder_fields), ``flows`` and ``failed`` counts (failed =
  any status other than ok: failures are counted, never dropped).
- across seeds: mean and a 95% Student-t confidence interval (half-width
  ``t(0.975, n-1) * sd / sqrt(n)``; undefined for one seed).
- geometric mean across seeds with a 95% interval (``geo``, ``geo_low``, ``geo_high``;
  values all > 0, else undefined): ``exp(mean(log v) +- t(0.975, n-1) * sd(log v) /
  sqrt(n))``, the same interval as the arithmetic one but on the log of the values, so
  both ends stay positive however few and spread the seeds are.  The FCT bar plots draw
  it (plots.py): an FCT is positive, and with three seeds the arithmetic interval often
  reaches below zero.  Not in summary.csv (the table keeps the arithmetic mean).
- ratio to the baseline (ECMP): per seed ``r = scheme / baseline`` on the same seed (the
  same flow list); the ratio is their geometric mean ``exp(mean(log r))`` with the
  interval ``exp(mean(log r) +- t(0.975, n-1) * sd(log r) / sqrt(n))``.  Pairing by seed
  removes the workload's seed-to-seed variation; working in logs keeps the interval of
  a ratio positive and symmetric between "x2" and "x0.5".  Seeds where either value is
  missing or the baseline's is 0 are left out (``seeds`` counts the rest).
- a scheme transport's columns (``extra``): per run, the mean over completed flows of a
  numeric column (metric = the column, class ``all``); a column of numbers joined by
  ``;`` (one per subflow) element by element (metrics ``<column>_1``, ``<column>_2``...;
  a flow without element i counts 0 there).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

CLASSES = ("mouse", "rabbit", "elephant")
OK = "ok"
CONFIDENCE = 0.95

# (metric, class) pairs of the summary, in table order.  Counts get no ratio.
FCT_METRICS = ("fct_mean", "fct_p50", "fct_p99")
COUNT_METRICS = ("flows", "failed")
# Per-flow diagnosis means: summary metric -> flows.csv column.
DIAG_METRICS = {"retrans": "retransmits", "reord_seen": "reord_seen",
                "dsack_dups": "dsack_dups"}


def size_class(size: int, kind: str, mouse_max: int, elephant_min: int) -> str:
    if kind == "udp":
        return "udp"
    if size == 0 or size > elephant_min:  # size 0: long-lived TCP
        return "elephant"
    return "mouse" if size < mouse_max else "rabbit"


def percentile(values: Sequence[float], q: float) -> float:
    if len(values) == 0:
        return math.nan
    return float(np.percentile(np.asarray(values, dtype=float), q))


def mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else math.nan


def mean_ci(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """(mean, CI half-width) of finite values; half-width nan with fewer than two."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if arr.size == 0:
        return math.nan, math.nan
    if arr.size == 1:
        return float(arr[0]), math.nan
    t = stats.t.ppf(0.5 + confidence / 2, arr.size - 1)
    return float(arr.mean()), float(t * arr.std(ddof=1) / math.sqrt(arr.size))


def geo_mean_ci(values: Sequence[float], confidence: float = CONFIDENCE
                ) -> tuple[float, float, float]:
    """(geometric mean, low, high) of the finite values, the interval taken on their logs;
    all nan if one of them is <= 0 (no log), low/high nan with fewer than two."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if any(v <= 0 for v in finite):
        return math.nan, math.nan, math.nan
    return ratio_ci(finite, confidence)


def ratio_ci(ratios: Sequence[float], confidence: float = CONFIDENCE
             ) -> tuple[float, float, float]:
    """(geometric mean, low, high) of positive ratios; low/high nan with fewer than two."""
    logs = [math.log(r) for r in ratios if r is not None and math.isfinite(r) and r > 0]
    m, half = mean_ci(logs, confidence)
    if not math.isfinite(m):
        return math.nan, math.nan, math.nan
    if not math.isfinite(half):
        return math.exp(m), math.nan, math.nan
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def throughput_mbps(row: Mapping[str, Any]) -> float:
    fct = row.get("fct")
    nbytes = row.get("bytes")
    if not fct or nbytes is None or fct <= 0:
        return math.nan
    return float(nbytes) * 8 / float(fct) / 1e6


def extra_values(rows: Sequence[Mapping[str, Any]], extra: Sequence[str]
                 ) -> dict[str, float]:
    """Means over the completed flows of the transport columns ``extra`` (see above)."""
    done = [r for r in rows if r["status"] == OK]
    out: dict[str, float] = {}
    for column in extra:
        cells = [r.get(column) for r in done if r.get(column) is not None]
        if not cells:
            continue
        if all(isinstance(c, int | float) for c in cells):
            out[column] = mean([float(c) for c in cells])
            continue
        lists = [split_list(c) for c in cells]
        if any(v is None for v in lists):
            continue  # text, not numbers: nothing to average
        width = max(len(v) for v in lists if v is not None)
        for i in range(width):
            out[f"{column}_{i + 1}"] = mean([v[i] if v is not None and i < len(v) else 0.0
                                             for v in lists])
    return out


def split_list(cell: Any) -> list[float] | None:
    """``"1;2;3"`` (or one number) as floats; None if it is not such a list."""
    if isinstance(cell, int | float):
        return [float(cell)]
    try:
        return [float(x) for x in str(cell).split(";")]
    except ValueError:
        return None


def run_metrics(rows: Iterable[Mapping[str, Any]], extra: Sequence[str] = ()
                ) -> dict[tuple[str, str], float]:
    """Figures of one run from its measured rows: {(metric, class): value}."""
    by_class: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        by_class[row["class"]].append(row)
    out: dict[tuple[str, str], float] = {}
    everything = [r for rs in by_class.values() for r in rs]
    out[("flows", "all")] = float(len(everything))
    out[("failed", "all")] = float(sum(1 for r in everything if r["status"] != OK))
    for cls in CLASSES:
        members = by_class.get(cls, [])
        done = [float(r["fct"]) for r in members
                if r["status"] == OK and r.get("fct") is not None and r.get("size") != 0]
        out[("flows", cls)] = float(len(members))
        out[("fct_mean", cls)] = mean(done)
        out[("fct_p50", cls)] = percentile(done, 50)
        out[("fct_p99", cls)] = percentile(done, 99)
        out[("ooo_pct", cls)] = _ooo_pct(members)
        for metric, column in DIAG_METRICS.items():
            out[(metric, cls)] = mean([float(r[column]) for r in members
                                       if _num(r.get(column)) and r.get("kind") != "udp"])
    elephants = [r for r in by_class.get("elephant", []) if r["status"] == OK]
    out[("tput_mbps", "elephant")] = mean([throughput_mbps(r) for r in elephants])
    out[("ooo_pct", "all")] = _ooo_pct([r for cls in CLASSES for r in by_class.get(cls, [])])
    for metric, value in extra_values(everything, extra).items():
        out[(metric, "all")] = value
    return out


def _ooo_pct(rows: Sequence[Mapping[str, Any]]) -> float:
    ooo = sum(int(r["ooo"]) for r in rows if _num(r.get("ooo")) and _num(r.get("segs_in")))
    segs = sum(int(r["segs_in"]) for r in rows if _num(r.get("ooo")) and _num(r.get("segs_in")))
    return 100.0 * ooo / segs if segs else math.nan


def _num(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class SummaryRow:
    scheme: str
    load: float
    metric: str
    cls: str
    seeds: int  # seeds with a finite value
    mean: float
    ci: float  # 95% half-width (nan with one seed)
    ratio: float  # geometric mean of per-seed ratios to the baseline (nan for counts)
    ratio_low: float  # its 95% interval (nan with fewer than two seeds)
    ratio_high: float
    # geometric mean over seeds and its 95% interval from the logs (geo_mean_ci): what the
    # FCT bar plots draw; nan where a summarizer does not fill them
    geo: float = math.nan
    geo_low: float = math.nan
    geo_high: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "load": self.load, "metric": self.metric,
                "class": self.cls, "seeds": self.seeds, "mean": self.mean, "ci95": self.ci,
                "ratio": self.ratio, "ratio_low95": self.ratio_low,
                "ratio_high95": self.ratio_high}


def run_key(row: Mapping[str, Any]) -> tuple[str, float, int]:
    """The run a row of any per-run CSV belongs to: (scheme, sweep value, seed)."""
    return str(row["scheme"]), float(row["load"]), int(float(row["seed"]))


def per_run_metrics(rows: Iterable[Mapping[str, Any]], extra: Sequence[str] = ()
                    ) -> dict[tuple[str, float, int], dict[tuple[str, str], float]]:
    """Each run's figures (:func:`run_metrics`) from its measured flow rows, by
    (scheme, sweep value, seed), in the order the rows first name them."""
    runs: dict[tuple[str, float, int], list[Mapping[str, Any]]] = defaultdict(list)
    for row in rows:
        if row.get("measured", True):
            runs[(str(row["scheme"]), float(row["load"]), int(row["seed"]))].append(row)
    return {key: run_metrics(members, extra) for key, members in runs.items()}


def summarize(rows: Iterable[Mapping[str, Any]], baseline: str | None,
              extra: Sequence[str] = ()) -> list[SummaryRow]:
    """Summary rows per (scheme, load, metric, class) from all measured flow rows
    (``extra``: a scheme transport's flows.csv columns, see above)."""
    return summarize_runs(per_run_metrics(rows, extra), baseline)


def summarize_runs(per_run: Mapping[tuple[str, float, int], Mapping[tuple[str, str], float]],
                   baseline: str | None, counts: Sequence[str] = COUNT_METRICS
                   ) -> list[SummaryRow]:
    """Summary rows per (scheme, load, metric, class) from each run's figures, keyed by
    (scheme, sweep value, seed); ``counts`` are counts: no ratio to the baseline."""
    schemes = list(dict.fromkeys(k[0] for k in per_run))
    loads = sorted({k[1] for k in per_run})
    seeds = sorted({k[2] for k in per_run})
    keys = list(dict.fromkeys(k for m in per_run.values() for k in m))
    out = []
    for load in loads:
        for scheme in schemes:
            for metric, cls in keys:
                values = {s: per_run[(scheme, load, s)].get((metric, cls), math.nan) for s in seeds
                          if (scheme, load, s) in per_run}
                m, ci = mean_ci(list(values.values()))
                ratio = low = high = math.nan
                if baseline is not None and metric not in counts:
                    ratios = []
                    for s, v in values.items():
                        base = per_run.get((baseline, load, s), {}).get((metric, cls))
                        if base is not None and math.isfinite(base) and base > 0 and \
                                math.isfinite(v) and v > 0:
                            ratios.append(v / base)
                    ratio, low, high = ratio_ci(ratios)
                finite = sum(1 for v in values.values() if math.isfinite(v))
                geo, geo_low, geo_high = geo_mean_ci(list(values.values()))
                out.append(SummaryRow(scheme, load, metric, cls, finite, m, ci, ratio,
                                      low, high, geo, geo_low, geo_high))
    return out
