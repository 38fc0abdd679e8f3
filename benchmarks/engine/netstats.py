"""Per-run figures taken from the network rather than from the flows: the bottleneck
queue (exact time-weighted histograms kept by switch_ext), drops, host RTOs, goodput
and FCT percentiles over all flows, one row per run in ``network.csv``; summarized per
scheme and sweep value with 95% intervals and paired ratios to the baseline.

- Queues: every ext switch port's cumulative ``qout``/``qin`` histograms (stats file,
  switch_ext/README.md) are read before and after the run; their difference is the run's
  distribution. The bottleneck is the port with the largest mean Q_out during the run;
  its Q_out mean/p5/p95 and Q_in mean (the frames its ingress discipline held) are
  reported, in packets, over the whole run, and again over the time that port's queue
  was busy (Q_out > 0; "busy", so idle time between incast rounds does not dilute the
  figures; Q_in over the same busy time). Other switch kinds keep no histograms: those
  columns stay empty.
- Drops: the egress drop counters summed over every switch port.
- RTOs: ``TcpExtTCPTimeouts`` summed over every host (``/proc/net/netstat`` in each).
- Goodput: per batch of flows scheduled at the same moment (an incast round; a lone
  flow otherwise), the batch's bytes / (its last end - its first start), averaged over
  the batches whose flows all completed, Mbit/s.
- FCT p1/p50/p99 over every measured completed flow, in seconds.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .metrics import SummaryRow, geo_mean_ci, mean_ci, percentile, ratio_ci
from .table import fmt

NETWORK_CSV = "network.csv"
COLUMNS = ["scheme", "load", "seed", "bottleneck", "qout_mean", "qout_p5", "qout_p95",
           "qin_mean", "qout_busy_mean", "qout_busy_p5", "qout_busy_p95", "qin_busy_mean",
           "drops", "rtos", "goodput_mbps", "fct_p1", "fct_p50", "fct_p99",
           "edge_drops", "edge_drops_each"]
METRICS = COLUMNS[4:-1]  # edge_drops_each: per edge switch, ";"-separated, ascending
LABELS = {"qout_mean": "Q_out mean (pkts)", "qout_p5": "Q_out p5", "qout_p95": "Q_out p95",
          "qin_mean": "Q_in mean (pkts)", "qout_busy_mean": "busy Q_out mean",
          "qout_busy_p5": "busy Q_out p5", "qout_busy_p95": "busy Q_out p95",
          "qin_busy_mean": "busy Q_in mean", "drops": "drops", "rtos": "RTOs",
          "goodput_mbps": "goodput (Mbit/s)", "fct_p1": "FCT p1 (s)",
          "fct_p50": "FCT p50 (s)", "fct_p99": "FCT p99 (s)",
          "edge_drops": "edge-switch drops"}


# ---------------------------------------------------------------------------- reading


def switch_lines(net: Any, after: float | None = None, timeout: float = 3.0
                 ) -> dict[str, dict[str, Any]]:
    """Every switch's last stats line by switch name (written after wall time ``after``,
    when given; switch_ext/README.md has its fields); switches that keep no stats file
    are left out."""
    out: dict[str, dict[str, Any]] = {}
    for sw in net.spec.switches:
        node = net.switch(sw.name)
        stats = getattr(node, "stats", None)
        if stats is None:
            continue
        deadline = time.time() + timeout
        line = stats() or {}
        while after is not None and line.get("ts", 0) <= after and time.time() < deadline:
            time.sleep(0.05)
            line = stats() or {}
        out[sw.name] = line
    return out


def ports(lines: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{"s1:2": port entry}`` of :func:`switch_lines`."""
    return {f"{name}:{p.get('port')}": p for name, line in lines.items()
            for p in line.get("ports", []) if isinstance(p, dict)}


def balancers(lines: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{"s1:group1": {"balancer": entry}}`` of :func:`switch_lines`: each select
    group's load balancer with its counters (the lines' ``balancers``), shaped as a port
    entry's ``ingress``/``egress`` so that :mod:`switch_stats` reads both alike."""
    return {f"{name}:group{b.get('group')}": {"balancer": b} for name, line in lines.items()
            for b in line.get("balancers", []) if isinstance(b, dict)}


def overlays(lines: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{"s1:overlay": {"overlay": entry}}`` of :func:`switch_lines`: a switch's overlay
    counters (CONGA's labels and feedback), shaped as :func:`balancers`."""
    return {f"{name}:overlay": {"overlay": line["overlay"]} for name, line in lines.items()
            if isinstance(line.get("overlay"), dict)}


def port_snapshot(net: Any, after: float | None = None, timeout: float = 3.0
                  ) -> dict[str, dict[str, Any]]:
    """``{"s1:2": port entry}`` from every switch's last stats line (see
    :func:`switch_lines`); empty for switches that keep no stats file."""
    return ports(switch_lines(net, after, timeout))


def hists(ports: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, dict[int, int]]]:
    """``{"s1:2": {"qout": {len: ns}, "qin": {...}}}`` of a :func:`port_snapshot` (ports
    without histograms left out)."""
    out: dict[str, dict[str, dict[int, int]]] = {}
    for name, p in ports.items():
        entry = {}
        for key in ("qout", "qin"):
            h = p.get(key)
            if isinstance(h, dict) and isinstance(h.get("hist"), list):
                entry[key] = {int(n): int(t) for n, t in h["hist"]}
        if entry:
            out[name] = entry
    return out


def hist_snapshot(net: Any, after: float | None = None, timeout: float = 3.0
                  ) -> dict[str, dict[str, dict[int, int]]]:
    """The queue histograms of :func:`port_snapshot`."""
    return hists(port_snapshot(net, after, timeout))


def edge_drops(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]],
               edges: Iterable[str]) -> list[int]:
    """Egress drops during a run per switch in ``edges`` (the switches hosts attach to:
    ToRs), from two :func:`port_snapshot`; switches without stats are left out."""
    out = []
    for sw in edges:
        mine = [(k, p) for k, p in after.items() if k.split(":", 1)[0] == sw]
        if not mine:
            continue
        out.append(sum(int(p.get("drops", 0)) - int((before.get(k) or {}).get("drops", 0))
                       for k, p in mine))
    return out


def host_timeouts(net: Any) -> int | None:
    """TcpExtTCPTimeouts summed over the hosts (None if unreadable)."""
    total = 0
    for h in net.spec.hosts:
        text = net.host(h.name).cmd("cat /proc/net/netstat")
        value = parse_netstat(text).get("TcpExt", {}).get("TCPTimeouts")
        if value is None:
            return None
        total += value
    return total


def parse_netstat(text: str) -> dict[str, dict[str, int]]:
    """``/proc/net/netstat``: header/value line pairs per group."""
    out: dict[str, dict[str, int]] = {}
    lines = [ln.split() for ln in text.splitlines() if ":" in ln]
    for head, vals in zip(lines[::2], lines[1::2], strict=False):
        if head and vals and head[0] == vals[0]:
            try:
                out[head[0].rstrip(":")] = dict(zip(head[1:], map(int, vals[1:]), strict=False))
            except ValueError:
                continue
    return out


# ---------------------------------------------------------------------------- per run


def hist_delta(before: Mapping[int, int], after: Mapping[int, int]) -> dict[int, int]:
    return {n: t - before.get(n, 0) for n, t in after.items() if t - before.get(n, 0) > 0}


def hist_stats(h: Mapping[int, int]) -> dict[str, float]:
    """Time-weighted mean and p5/p95 (smallest length at or above which... see
    switch_ext: the smallest L the queue was at or below for that share of the time)."""
    total = sum(h.values())
    if total <= 0:
        return {"mean": math.nan, "p5": math.nan, "p95": math.nan}
    mean = sum(n * t for n, t in h.items()) / total

    def q(share: float) -> float:
        acc, want = 0, max(1, math.ceil(share * total))
        for n in sorted(h):
            acc += h[n]
            if acc >= want:
                return float(n)
        return float(max(h))

    return {"mean": mean, "p5": q(0.05), "p95": q(0.95)}


def run_row(scheme: str, load: float, seed: int,
            before: Mapping[str, Mapping[str, Mapping[int, int]]],
            after: Mapping[str, Mapping[str, Mapping[int, int]]],
            drops: int | None, rtos: int | None, flows: Iterable[Mapping[str, Any]],
            edges: list[int] | None = None) -> dict[str, Any]:
    """One network.csv row; ``edges``: the run's drops per edge switch (ToR)."""
    row: dict[str, Any] = {"scheme": scheme, "load": load, "seed": seed, "bottleneck": "",
                           "drops": drops, "rtos": rtos}
    if edges:
        row.update(edge_drops=sum(edges), edge_drops_each=";".join(map(str, sorted(edges))))
    best, best_mean = None, -1.0
    for port, hs in after.items():
        d = hist_delta((before.get(port) or {}).get("qout", {}), hs.get("qout", {}))
        st = hist_stats(d)
        if math.isfinite(st["mean"]) and st["mean"] > best_mean:
            best, best_mean = port, st["mean"]
    if best is not None:
        st = hist_stats(hist_delta((before.get(best) or {}).get("qout", {}),
                                   after[best].get("qout", {})))
        qin = hist_stats(hist_delta((before.get(best) or {}).get("qin", {}),
                                    after[best].get("qin", {})))
        row.update(bottleneck=best, qout_mean=st["mean"], qout_p5=st["p5"],
                   qout_p95=st["p95"], qin_mean=qin["mean"])
        qout_d = hist_delta((before.get(best) or {}).get("qout", {}),
                            after[best].get("qout", {}))
        busy_ns = sum(t for n, t in qout_d.items() if n > 0)
        busy = hist_stats({n: t for n, t in qout_d.items() if n > 0})
        qin_d = hist_delta((before.get(best) or {}).get("qin", {}), after[best].get("qin", {}))
        row.update(qout_busy_mean=busy["mean"], qout_busy_p5=busy["p5"],
                   qout_busy_p95=busy["p95"],
                   qin_busy_mean=(sum(n * t for n, t in qin_d.items()) / busy_ns
                                  if busy_ns and qin_d else math.nan))
    row.update(flow_columns(flows))
    return row


def flow_columns(flows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Goodput and FCT percentiles of a run's flow rows (flows.csv's columns)."""
    measured = [f for f in flows if f.get("measured", True) in (True, "True", "true", 1)]
    done = [f for f in measured if f.get("status") == "ok" and _finite(f.get("fct"))]
    out: dict[str, float] = {"goodput_mbps": math.nan, "fct_p1": math.nan,
                             "fct_p50": math.nan, "fct_p99": math.nan}
    if not done:
        return out
    fcts = [float(f["fct"]) for f in done]
    out.update(fct_p1=percentile(fcts, 1), fct_p50=percentile(fcts, 50),
               fct_p99=percentile(fcts, 99))
    batches: dict[float, list[Mapping[str, Any]]] = {}
    for f in measured:
        batches.setdefault(round(float(f.get("sched") or 0.0), 6), []).append(f)
    rates = []
    for members in batches.values():
        if any(f.get("status") != "ok" or not _finite(f.get("end")) for f in members):
            continue
        span = (max(float(f["end"]) for f in members)
                - min(float(f["start"]) for f in members))
        size = sum(int(float(f.get("bytes") or f.get("size") or 0)) for f in members)
        if span > 0:
            rates.append(size * 8 / span / 1e6)
    if rates:
        out["goodput_mbps"] = sum(rates) / len(rates)
    return out


def _finite(v: Any) -> bool:
    try:
        return math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def refresh_flow_columns(rows: list[dict[str, Any]], flows: Iterable[Mapping[str, Any]]
                         ) -> list[dict[str, Any]]:
    """``rows`` (network.csv) with goodput and FCT recomputed from flows.csv, so a report
    always uses the current definitions."""
    by_run: dict[tuple[str, float, int], list[Mapping[str, Any]]] = {}
    for f in flows:
        by_run.setdefault((str(f["scheme"]), float(f["load"]), int(float(f["seed"]))),
                          []).append(f)
    out = []
    for r in rows:
        key = (str(r["scheme"]), float(r["load"]), int(float(r["seed"])))
        out.append({**r, **flow_columns(by_run.get(key, []))} if key in by_run else dict(r))
    return out


# ---------------------------------------------------------------------------- summary


def read_rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _number(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def summarize(rows: Iterable[Mapping[str, Any]], baseline: str | None,
              metrics: Iterable[str] = METRICS, cls: str = "net") -> list[SummaryRow]:
    """Per sweep value, scheme and metric: mean and 95% CI over seeds, and the mean of
    the per-seed ratios to ``baseline`` (paired by seed) with its interval; for a flow
    completion time (fct_p1/p50/p99), also the geometric mean over seeds with the 95%
    interval of the logs (metrics.geo_mean_ci), which the FCT panels of an experiment's
    ``plots:`` draw on a log axis (figures.py; without it they fall back to the
    arithmetic interval, cut at zero)."""
    # plots.is_fct decides which metrics the plots draw as FCTs: the same rule decides
    # which rows get a geometric mean.  Imported here, not at the top: plots loads
    # matplotlib, and this module is also imported by the engine while it runs.
    from .plots import is_fct

    metrics = list(metrics)
    runs = {(str(r["scheme"]), float(r["load"]), int(float(r["seed"]))): r for r in rows}
    schemes = list(dict.fromkeys(k[0] for k in runs))
    out = []
    for load in sorted({k[1] for k in runs}):
        for scheme in schemes:
            seeds = sorted(s for (sc, ld, s) in runs if sc == scheme and ld == load)
            for metric in metrics:
                values = {s: _number(runs[(scheme, load, s)].get(metric)) for s in seeds}
                finite = [v for v in values.values() if math.isfinite(v)]
                if not finite:
                    continue
                m, ci = mean_ci(finite)
                ratios = []
                for s, v in values.items():
                    base = _number((runs.get((baseline, load, s)) or {}).get(metric))
                    if math.isfinite(base) and base > 0 and math.isfinite(v) and v >= 0:
                        ratios.append(max(v, 1e-12) / base)
                ratio, low, high = ratio_ci(ratios) if baseline else (math.nan,) * 3
                geo = geo_mean_ci(finite) if is_fct(metric) else (math.nan,) * 3
                out.append(SummaryRow(scheme, load, metric, cls, len(finite), m, ci,
                                      ratio, low, high, *geo))
    return out


def render(summary: list[SummaryRow], schemes: list[str], baseline: str | None,
           sweep: str, metrics: Iterable[str] = METRICS,
           labels: Mapping[str, str] | None = None, title: str | None = None) -> str:
    """One block per sweep value: a row per metric that some scheme has, a column per
    scheme (mean ± CI, and the ratio to the baseline in brackets)."""
    if not summary:
        return ""
    metrics = list(metrics)
    labels = LABELS if labels is None else labels
    by = {(r.scheme, r.load, r.metric): r for r in summary}
    width = max([20, *(len(labels.get(r.metric, r.metric)) + 1 for r in summary)])
    lines = [title or (f"network (bottleneck queue from the switch's histograms; ratio to "
                       f"{baseline or '-'} in brackets)")]
    for load in sorted({r.load for r in summary}):
        lines.append(f"  {sweep} {fmt(load)}")
        present = [s for s in schemes if any(r.scheme == s and r.load == load
                                             for r in summary)]
        lines.append("    " + " " * width + "".join(f"{s:>26}" for s in present))
        for metric in metrics:
            if all((s, load, metric) not in by for s in present):
                continue  # not measured here (no switch histograms on ovs, say)
            cells = []
            for s in present:
                r = by.get((s, load, metric))
                if r is None:
                    cells.append(f"{'-':>26}")
                    continue
                text = f"{r.mean:.3g}" + (f"±{r.ci:.2g}" if math.isfinite(r.ci) else "")
                if math.isfinite(r.ratio):
                    text += f" [{r.ratio:.2f}]"
                cells.append(f"{text:>26}")
            label = labels.get(metric, metric)
            lines.append("    " + f"{label:{width}}" + "".join(cells))
    return "\n".join(lines) + "\n"
