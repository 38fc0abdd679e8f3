"""Jain's fairness index and total throughput per period, from receiver-side counts.

The seed-004 paper (Ito, Koga, Iida) measures, every 0.1 s at the receiver, Jain's index
``(sum x)^2 / (n sum x^2)`` among the TCP flows and the total throughput, ignoring the
first 5 s.  The traffic agents write, every ``agent.rx_interval`` s, the payload bytes
received so far per flow (``rx_<host>.jsonl``, agent.py); this module turns one run's
files into:

- a series (``fairness_series.csv``, one row per period): time, flows, Jain's index over
  the TCP flows that exist during the whole period, TCP / UDP / total throughput (Mbit/s
  of payload received in the period from every flow, existing or not), whether the
  period is measured and whether it lies in the UDP burst;
- a run row (``fairness.csv``): over the measured periods, the mean and minimum Jain
  index, the mean before the UDP burst starts (the allocation's steady state, before
  UDP and the timeouts it causes), the mean and minimum during the burst, mean TCP /
  UDP / total throughput, mean TCP throughput during the burst (where reallocation
  shows), and the per-run counters of the scheme's host parts (``HostParts.columns`` in
  dcnlab.schemes, e.g. clamps applied by the agents' BPF programs);
- the summary across seeds (mean, 95% CI, paired ratio to the baseline, as metrics.py
  does for flows) and its text section in summary.txt.

Counts from different receivers are sampled at slightly different instants, so each
host's cumulative counts are interpolated linearly onto the common grid
``k * rx_interval`` before periods are differenced.  A TCP flow exists in a period when it
is scheduled to send during all of it (start <= period start, stop >= period end) and,
for a sized flow, has not been received in full by the period's start.  A flow that
exists but receives nothing counts as 0: a starved flow lowers the index, as it should;
one that does not exist is left out: a client that has stopped (or not started yet, or
started again as a new flow) is no zero.  Throughput is not limited to existing flows:
a flow's bytes in the period it starts or stops in, and the last ones of a stopped
client that arrive after its stop (its send buffer drains), count, since the bottleneck
carried them.  When no existing TCP flow receives anything the index is undefined (empty
in the series) and the period counts for throughput only.  Measured periods lie inside
[warmup, duration - cooldown]; the burst is the span of the UDP flows' schedules.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dcnlab.benchmarks import longflows
from dcnlab.schemes import registry

from .metrics import SummaryRow, mean_ci, ratio_ci
from .table import aligned, fmt, ratio_interval
from .workloads import Flow

FAIRNESS_CSV = "fairness.csv"
SERIES_CSV = "fairness_series.csv"
RX_GLOB = "rx_*.jsonl"
EPS = 1e-6  # grid times are k * period in floating point

HOST_PARTS = list(registry.registry().host_parts.values())
# every host-parts kind's per-run counters (empty for schemes without them)
HOST_COLUMNS = list(dict.fromkeys(c for part in HOST_PARTS for c in part.columns))
# (column, header, footnote) of host-parts counters shown in the summary table
HOST_SUMMARY = [part.summary_column for part in HOST_PARTS if part.summary_column]
COLUMNS = ["scheme", "load", "seed", "period", "measured_from", "measured_to", "udp_from",
           "udp_to", "periods", "flows", "jain_mean", "jain_min", "jain_pre_udp",
           "jain_udp_mean", "jain_udp_min", "tcp_mbps", "udp_mbps", "total_mbps",
           "tcp_udp_mbps", *HOST_COLUMNS]
SERIES_COLUMNS = ["scheme", "load", "seed", "t", "flows", "jain", "tcp_mbps", "udp_mbps",
                  "total_mbps", "measured", "udp"]

Samples = list[tuple[float, dict[str, int]]]  # (t, {flow id: cumulative bytes})

# (metric, class) of the summary rows, in the order of fairness.csv's columns.
METRICS = [("jain_mean", "tcp"), ("jain_min", "tcp"), ("jain_pre_udp", "tcp"),
           ("jain_udp_mean", "tcp"),
           ("jain_udp_min", "tcp"), ("tcp_mbps", "tcp"), ("udp_mbps", "udp"),
           ("total_mbps", "all"), ("tcp_udp_mbps", "tcp"),
           *((column, "tcp") for column, _, _ in HOST_SUMMARY)]
NO_RATIO = {column for column, _, _ in HOST_SUMMARY}  # counts: the baseline has none


# ---------------------------------------------------------------------------- compute


def read_rx(run_dir: Path) -> list[Samples]:
    """Every host's receiver samples of one run (files written by the traffic agents)."""
    out = []
    for path in sorted(run_dir.glob(RX_GLOB)):
        rows = sorted(longflows.load(path), key=lambda r: r[0])
        if rows:
            out.append(rows)
    return out


def _at(rows: Samples, times: list[float], t: float) -> dict[str, float]:
    """Cumulative counts at time t, linear between the samples around it."""
    i = bisect_right(times, t)
    if i == 0:
        return {k: float(v) for k, v in rows[0][1].items()}
    if i == len(rows):
        return {k: float(v) for k, v in rows[-1][1].items()}
    (t0, b0), (t1, b1) = rows[i - 1], rows[i]
    w = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
    return {k: b0.get(k, 0) + (b1.get(k, 0) - b0.get(k, 0)) * w for k in set(b0) | set(b1)}


def on_grid(hosts: Sequence[Samples], period: float) -> Samples:
    """All hosts' counts merged on the grid 0, period, 2*period ... up to the last time
    every host has a sample for."""
    hosts = [h for h in hosts if h]
    if not hosts or period <= 0:
        return []
    end = min(h[-1][0] for h in hosts)
    steps = int(end / period + EPS)
    index = [[t for t, _ in h] for h in hosts]
    grid: Samples = []
    for k in range(steps + 1):
        t = k * period
        merged: dict[str, float] = {}
        for rows, times in zip(hosts, index, strict=True):
            merged.update(_at(rows, times, t))
        grid.append((t, merged))  # type: ignore[arg-type]  # interpolated: float bytes
    return grid


def udp_window(flows: Iterable[Flow]) -> tuple[float, float] | None:
    """The span of the UDP flows' schedules, if there are any."""
    udp = [f for f in flows if f.kind == "udp" and f.stop is not None]
    if not udp:
        return None
    return min(f.start for f in udp), max(float(f.stop or 0.0) for f in udp)


def _exists(flow: Flow, a: float, b: float, got: float) -> bool:
    if flow.start > a + EPS or (flow.stop is not None and flow.stop < b - EPS):
        return False
    return flow.size == 0 or got < flow.size


def period_series(grid: Samples, flows: Sequence[Flow], window: tuple[float, float],
                  burst: tuple[float, float] | None) -> list[dict[str, Any]]:
    """One row per grid period: Jain over the existing TCP flows, throughputs (Mbit/s)
    of every flow's bytes received in the period."""
    tcp = [f for f in flows if f.kind == "tcp"]
    tcp_keys = [str(f.id) for f in tcp]
    udp_keys = [str(f.id) for f in flows if f.kind == "udp"]
    low, high = window
    out = []
    for before, after in zip(grid, grid[1:], strict=False):
        a, b = before[0], after[0]
        keys = [str(f.id) for f in tcp if _exists(f, a, b, before[1].get(str(f.id), 0))]
        pair = [before, after]
        jain_row = (longflows.series(pair, keys)[0] if keys
                    else {"jain": math.nan, "total_bps": 0.0})
        # Throughput counts what the receivers got from every flow, also from one that
        # stops during the period (or whose last bytes arrive after its stop) or starts
        # during it: the bottleneck carried those bytes, though the flow is no competitor
        # for Jain's index there.
        tcp_bps = longflows.series(pair, tcp_keys)[0]["total_bps"] if tcp_keys else 0.0
        udp_bps = longflows.series(pair, udp_keys)[0]["total_bps"] if udp_keys else 0.0
        # No TCP byte at all (every flow starved, e.g. by the UDP burst): Jain's index is
        # undefined, not 1 ("equally nothing"); such periods count for throughput only.
        out.append({
            "t": round(b, 6), "flows": len(keys),
            "jain": jain_row["jain"] if keys and jain_row["total_bps"] > 0 else math.nan,
            "tcp_mbps": tcp_bps / 1e6, "udp_mbps": udp_bps / 1e6,
            "total_mbps": (tcp_bps + udp_bps) / 1e6,
            "measured": a >= low - EPS and b <= high + EPS,
            "udp": burst is not None and a >= burst[0] - EPS and b <= burst[1] + EPS,
        })
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def run_row(rows: Sequence[Mapping[str, Any]], period: float, window: tuple[float, float],
            burst: tuple[float, float] | None) -> dict[str, Any]:
    """A run's fairness.csv figures from its period series."""
    measured = [r for r in rows if r["measured"]]
    jains = [r["jain"] for r in measured if math.isfinite(r["jain"])]
    in_burst = [r["jain"] for r in measured if r["udp"] and math.isfinite(r["jain"])]
    before = [r["jain"] for r in measured if burst is not None
              and r["t"] <= burst[0] + EPS and math.isfinite(r["jain"])]
    return {
        "period": period, "measured_from": window[0],
        "measured_to": window[1] if math.isfinite(window[1]) else None,
        "udp_from": burst[0] if burst else None, "udp_to": burst[1] if burst else None,
        "periods": len(measured), "flows": max((r["flows"] for r in measured), default=0),
        "jain_mean": _mean(jains), "jain_min": min(jains, default=math.nan),
        "jain_pre_udp": _mean(before),
        "jain_udp_mean": _mean(in_burst), "jain_udp_min": min(in_burst, default=math.nan),
        "tcp_mbps": _mean([r["tcp_mbps"] for r in measured]),
        "udp_mbps": _mean([r["udp_mbps"] for r in measured]),
        "total_mbps": _mean([r["total_mbps"] for r in measured]),
        # What reallocation is for: TCP throughput while UDP squeezes some TCP flows.
        "tcp_udp_mbps": _mean([r["tcp_mbps"] for r in measured if r["udp"]]),
    }


def analyze_run(run_dir: Path, flows: Sequence[Flow], period: float,
                window: tuple[float, float]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(fairness.csv row, series rows) of one run from its rx files."""
    burst = udp_window(flows)
    rows = period_series(on_grid(read_rx(run_dir), period), flows, window, burst)
    return run_row(rows, period, window, burst), rows


# ---------------------------------------------------------------------------- summary


def _number(value: Any) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return math.nan
    return x


def summarize(rows: Iterable[Mapping[str, Any]], baseline: str | None) -> list[SummaryRow]:
    """Per (scheme, sweep value, metric): mean and CI across seeds, paired ratio to the
    baseline on the same seed (metrics.py's definitions).  ``rows``: fairness.csv."""
    runs: dict[tuple[str, float, int], Mapping[str, Any]] = {}
    for r in rows:
        runs[(str(r["scheme"]), float(r["load"]), int(float(r["seed"])))] = r
    schemes = list(dict.fromkeys(k[0] for k in runs))
    out = []
    for load in sorted({k[1] for k in runs}):
        for scheme in schemes:
            seeds = sorted(s for (sc, ld, s) in runs if sc == scheme and ld == load)
            if not seeds:
                continue
            for metric, cls in METRICS:
                values = {s: _number(runs[(scheme, load, s)].get(metric)) for s in seeds}
                finite = [v for v in values.values() if math.isfinite(v)]
                m, ci = mean_ci(finite)
                ratio = low = high = math.nan
                if baseline is not None and metric not in NO_RATIO:
                    ratios = []
                    for s, v in values.items():
                        base = _number((runs.get((baseline, load, s)) or {}).get(metric))
                        if math.isfinite(base) and base > 0 and math.isfinite(v) and v > 0:
                            ratios.append(v / base)
                    ratio, low, high = ratio_ci(ratios)
                out.append(SummaryRow(scheme, load, metric, cls, len(finite), m, ci, ratio,
                                      low, high))
    return out


# ---------------------------------------------------------------------------- render


def _cell(row: SummaryRow | None, digits: str = "") -> str:
    if row is None or not math.isfinite(row.mean):
        return "-"
    text = f"{row.mean:{digits}}" if digits else fmt(row.mean)
    if math.isfinite(row.ci):
        text += f" ± {row.ci:{digits}}" if digits else f" ± {fmt(row.ci)}"
    return text


def _ratio(row: SummaryRow | None, baseline: str | None) -> str:
    if row is None or row.scheme == baseline or not math.isfinite(row.ratio):
        return "-"
    text = f"{row.ratio:.2f}"
    if math.isfinite(row.ratio_low):
        text += " " + ratio_interval(row.ratio_low, row.ratio_high)
    return text


def _span(rows: Sequence[Mapping[str, Any]], low: str, high: str) -> str:
    values = {(_number(r.get(low)), _number(r.get(high))) for r in rows}
    values = {v for v in values if math.isfinite(v[0])}
    if len(values) != 1:
        return ""
    a, b = values.pop()
    return f"{fmt(a)}-{fmt(b)} s" if math.isfinite(b) else f"from {fmt(a)} s"


def _scheme_row(scheme: str, cells: Mapping[str, SummaryRow | None],
                baseline: str | None) -> list[str]:
    return [scheme, _cell(cells["jain_mean"], ".3f"), _ratio(cells["jain_mean"], baseline),
            _cell(cells["jain_pre_udp"], ".3f"), _ratio(cells["jain_pre_udp"], baseline),
            _cell(cells["jain_udp_min"], ".3f"), _cell(cells["tcp_mbps"]),
            _ratio(cells["tcp_mbps"], baseline), _cell(cells["tcp_udp_mbps"]),
            _ratio(cells["tcp_udp_mbps"], baseline), _cell(cells["total_mbps"]),
            *(_cell(cells[column]) for column, _, _ in HOST_SUMMARY)]


def render(rows: Sequence[Mapping[str, Any]], summary: Sequence[SummaryRow],
           schemes: Sequence[str], baseline: str | None, sweep: str) -> str:
    """The fairness section of summary.txt: per sweep value, a row per scheme."""
    if not rows or not summary:
        return ""
    if baseline not in schemes:
        baseline = None
    order = [s for s in schemes if any(r.scheme == s for r in summary)]
    if baseline is not None:  # baseline first: every ratio refers to it
        order.remove(baseline)
        order.insert(0, baseline)
    period = _number(rows[0].get("period"))
    window = _span(rows, "measured_from", "measured_to")
    udp = _span(rows, "udp_from", "udp_to")
    lines = [f"fairness: receiver throughput every {period:g} s"
             + (f", measured {window}" if window else "")
             + "; Jain's index among the TCP flows, throughput = payload; mean ± 95% CI "
             "across seeds" + (f"; x = paired ratio to {baseline} [95% CI]" if baseline
                               else "")]
    index = {(r.scheme, r.load, r.metric): r for r in summary}
    jain_udp = f"Jain min, UDP {udp}" if udp else "Jain min, UDP on"
    tcp_udp = f"TCP Mbit/s, UDP {udp}" if udp else "TCP Mbit/s, UDP on"
    header = ["scheme", "Jain (TCP)", "x Jain", "Jain before UDP", "x pre", jain_udp,
              "TCP Mbit/s", "x TCP", tcp_udp, "x TCP UDP", "total Mbit/s",
              *(header for _, header, _ in HOST_SUMMARY)]
    for load in sorted({r.load for r in summary}):
        seeds = max((r.seeds for r in summary if r.load == load and r.metric == "jain_mean"),
                    default=0)
        body = [_scheme_row(scheme, {m: index.get((scheme, load, m)) for m, _ in METRICS},
                            baseline) for scheme in order]
        lines += ["", f"{sweep} = {fmt(load)} ({seeds} seed{'s' if seeds != 1 else ''})",
                  *aligned(header, body)]
    lines += [""] + [f"{header}: {note}" for _, header, note in HOST_SUMMARY]
    return "\n".join(lines) + "\n"
