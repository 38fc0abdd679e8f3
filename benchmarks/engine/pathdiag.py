"""Reordering diagnosis per run: how the parallel paths were used and what the hosts'
TCP stacks made of it, one row per run in ``paths.csv``; summarized per scheme and sweep
value with 95% intervals and paired ratios to the baseline, plus a plot of long-flow
throughput against the reordering the senders saw (``reorder_vs_throughput.png``).

- Parallel paths: a switch's *up* ports are the fabric ports towards switches farther
  from every host (hop distance from the nearest host, from the topology's links; no tier
  names). A switch with two or more up ports has parallel paths (a fat-tree's edge and
  aggregation switches). From switch_ext's stats file (every ``stats_interval_ms``,
  switch_ext/README.md) over the run:

  - ``up_split``: per such switch, the largest up port's share of the bytes its up ports
    sent, times their number (1 = an even split, n = everything on one path), averaged
    over the switches weighted by bytes. A flow's own split is not measurable without
    per-packet capture; a scheme that picks a path per packet independently of the flow
    (random spraying) gives every flow this split in expectation, a per-flow hash
    (ECMP) gives each flow 100% on one path and this figure shows the collisions.
  - ``q_up``: mean egress queue (packets) of the up ports at the stats samples;
    ``qdiff_mean``/``qdiff_p95``: the difference between the longest and the shortest
    up-port queue of a switch at the same sample, over the samples where one of them
    was busy: what two packets of one flow sent at the same moment on two paths wait
    apart (x the packet time: 0.24 ms per 1500-byte packet at 50 Mbit/s).
    Instantaneous ``qlen`` samples, so a figure per sample period, not per packet.

- Hosts' TCP counters (``/proc/net/netstat``, TcpExt, summed over every host namespace:
  host granularity, not per flow), the run's delta: ``sack_reorder`` (reordering
  detected by SACK, TCPSACKReorder, + TCPTSReorder + TCPRenoReorder), ``recoveries``
  (fast recoveries entered, each a cwnd reduction: TCPSackRecovery + TCPRenoRecovery),
  ``undos`` (reductions reverted as spurious: TCPFullUndo + TCPPartialUndo +
  TCPDSACKUndo + TCPLossUndo), ``dsack_recv`` (DSACKs the senders received: spurious
  retransmissions), ``spurious_rtos`` (TCPSpuriousRTOs), ``timeouts`` (TCPTimeouts).

Other switch kinds write no stats file: the path columns stay empty there.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict, deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dcnlab.model.topology import TopologySpec

from . import netstats
from .metrics import OK, SummaryRow, percentile, throughput_mbps
from .netstats import parse_netstat
from .table import fmt

PATHS_CSV = "paths.csv"
PLOT_FILE = "reorder_vs_throughput.png"
# run-row column -> TcpExt counters summed into it
TCPEXT = {
    "sack_reorder": ("TCPSACKReorder", "TCPTSReorder", "TCPRenoReorder"),
    "recoveries": ("TCPSackRecovery", "TCPRenoRecovery"),
    "undos": ("TCPFullUndo", "TCPPartialUndo", "TCPDSACKUndo", "TCPLossUndo"),
    "dsack_recv": ("TCPDSACKRecv",),
    "spurious_rtos": ("TCPSpuriousRTOs",),
    "timeouts": ("TCPTimeouts",),
}
PATH_METRICS = ["up_split", "q_up", "qdiff_mean", "qdiff_p95"]
METRICS = PATH_METRICS + list(TCPEXT)
COLUMNS = ["scheme", "load", "seed", "groups", *METRICS]
LABELS = {"up_split": "up-port split (1=even)", "q_up": "up-port queue (pkts)",
          "qdiff_mean": "queue diff mean (pkts)", "qdiff_p95": "queue diff p95 (pkts)",
          "sack_reorder": "reorder detections", "recoveries": "cwnd reductions",
          "undos": "  of them undone", "dsack_recv": "DSACKs (spurious rtx)",
          "spurious_rtos": "spurious RTOs", "timeouts": "RTOs"}


# ---------------------------------------------------------------------------- topology


def up_ports(switches: Iterable[str], links: Iterable[tuple[str, int, str, int]]
             ) -> dict[str, list[int]]:
    """``{switch: [port, ...]}`` of the switches with two or more up ports (ports towards
    a switch farther from every host); ``links`` as (a, a_port, b, b_port), hosts being
    the ends that are not switches."""
    names = set(switches)
    links = list(links)
    adj: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for a, ap, b, bp in links:
        adj[a].append((ap, b))
        adj[b].append((bp, a))
    dist: dict[str, int] = {n: 0 for n in adj if n not in names}  # hosts
    todo = deque(dist)
    while todo:
        node = todo.popleft()
        for _port, peer in adj[node]:
            if peer not in dist:
                dist[peer] = dist[node] + 1
                todo.append(peer)
    out = {}
    for sw in sorted(names):
        ups = sorted(p for p, peer in adj.get(sw, []) if peer in names
                     and dist.get(peer, -1) > dist.get(sw, -1))
        if len(ups) >= 2:
            out[sw] = ups
    return out


def spec_ups(spec: TopologySpec) -> dict[str, list[int]]:
    """:func:`up_ports` of a topology."""
    return up_ports([s.name for s in spec.switches],
                    [(lk.a, lk.a_port, lk.b, lk.b_port) for lk in spec.links])


def topology_ups(net: Any) -> dict[str, list[int]]:
    return spec_ups(net.spec)


# ---------------------------------------------------------------------------- reading


def host_counters(net: Any) -> dict[str, int] | None:
    """The TCPEXT sums over every host's /proc/net/netstat (None if unreadable)."""
    totals = dict.fromkeys(TCPEXT, 0)
    for h in net.spec.hosts:
        ext = parse_netstat(net.host(h.name).cmd("cat /proc/net/netstat")).get("TcpExt")
        if not ext:
            return None
        for column, names in TCPEXT.items():
            totals[column] += sum(ext.get(n, 0) for n in names)
    return totals


def stats_offsets(net: Any) -> dict[str, int]:
    """Where each switch's stats file ends now (switches that write one)."""
    out = {}
    for sw in net.spec.switches:
        path = getattr(net.switch(sw.name), "stats_file", None)
        if isinstance(path, Path) and path.exists():
            out[sw.name] = path.stat().st_size
    return out


def stats_lines(net: Any, offsets: Mapping[str, int]) -> dict[str, list[dict[str, Any]]]:
    """Each switch's complete stats lines written since ``offsets``."""
    out = {}
    for name, offset in offsets.items():
        path = net.switch(name).stats_file
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
        out[name] = parse_lines(data.decode(errors="replace"))
    return out


def parse_lines(text: str) -> list[dict[str, Any]]:
    """Stats lines (JSON objects); a line cut short (still being written) is skipped."""
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            rows.append(row)
    return rows


# ---------------------------------------------------------------------------- per run


def path_figures(ups: Mapping[str, Sequence[int]],
                 lines: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, float]:
    """up_split, q_up, qdiff_mean, qdiff_p95 and the number of switches with parallel
    paths that carried traffic (``groups``) from the run's stats lines."""
    splits: list[tuple[float, float]] = []  # (split, bytes)
    queues: list[float] = []
    diffs: list[float] = []
    for sw, ports in ups.items():
        rows = [r for r in lines.get(sw, []) if isinstance(r.get("ports"), list)]
        if len(rows) < 2:
            continue
        samples = [{int(p["port"]): p for p in r["ports"] if "port" in p} for r in rows]
        first, last = samples[0], samples[-1]
        sent = [int(last.get(p, {}).get("tx_bytes", 0)) - int(first.get(p, {}).get(
            "tx_bytes", 0)) for p in ports]
        total = sum(sent)
        if total <= 0:
            continue
        splits.append((max(sent) / total * len(ports), float(total)))
        for s in samples[1:]:
            q = [float(s.get(p, {}).get("qlen", 0)) for p in ports]
            queues += q
            if max(q) > 0:
                diffs.append(max(q) - min(q))
    out: dict[str, float] = {"groups": float(len(splits))}
    weight = sum(b for _s, b in splits)
    out["up_split"] = sum(s * b for s, b in splits) / weight if weight else math.nan
    out["q_up"] = sum(queues) / len(queues) if queues else math.nan
    out["qdiff_mean"] = sum(diffs) / len(diffs) if diffs else (0.0 if queues else math.nan)
    out["qdiff_p95"] = percentile(diffs, 95) if diffs else (0.0 if queues else math.nan)
    return out


def run_row(scheme: str, load: float, seed: int, figures: Mapping[str, float],
            before: Mapping[str, int] | None, after: Mapping[str, int] | None
            ) -> dict[str, Any]:
    row: dict[str, Any] = {"scheme": scheme, "load": load, "seed": seed, **figures}
    for column in TCPEXT:
        row[column] = (after[column] - before[column]
                       if before is not None and after is not None else None)
    return row


# ---------------------------------------------------------------------------- summary


def _number(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def summarize(rows: Iterable[Mapping[str, Any]], baseline: str | None) -> list[SummaryRow]:
    """Per (scheme, load, metric): mean ± CI across seeds, paired ratio to the baseline
    (class "path"), as the network section does."""
    return netstats.summarize(rows, baseline, METRICS, "path")


def render(summary: Sequence[SummaryRow], schemes: Sequence[str], sweep: str) -> str:
    """One block per sweep value: a row per metric, a column per scheme (mean ± CI)."""
    if not summary:
        return ""
    by = {(r.scheme, r.load, r.metric): r for r in summary}
    lines = ["paths and hosts' TCP (per run: parallel up ports from the switches' stats, "
             "TcpExt counters summed over the hosts; see pathdiag.py)"]
    for load in sorted({r.load for r in summary}):
        present = [s for s in schemes if any(r.scheme == s and r.load == load
                                             for r in summary)]
        lines.append(f"  {sweep} {fmt(load)}")
        lines.append("    " + f"{'':26}" + "".join(f"{s:>20}" for s in present))
        for metric in METRICS:
            if all((s, load, metric) not in by for s in present):
                continue
            cells = []
            for s in present:
                r = by.get((s, load, metric))
                text = "-" if r is None else (
                    fmt(r.mean) + (f"±{fmt(r.ci)}" if math.isfinite(r.ci) else ""))
                cells.append(f"{text:>20}")
            lines.append("    " + f"{LABELS[metric]:26}" + "".join(cells))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- plot


def run_points(rows: Iterable[Mapping[str, Any]]
               ) -> dict[tuple[str, float], list[tuple[float, float]]]:
    """Per (scheme, load): one (reorder events per elephant flow, elephant throughput
    Mbit/s) point per seed, from flows.csv rows (measured, completed elephants)."""
    runs: dict[tuple[str, float, int], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if (r.get("measured", True) and r.get("class") == "elephant"
                and r.get("status") == OK and r.get("reord_seen") is not None):
            runs[(str(r["scheme"]), float(r["load"]), int(r["seed"]))].append(r)
    out: dict[tuple[str, float], list[tuple[float, float]]] = defaultdict(list)
    for (scheme, load, _seed), members in sorted(runs.items()):
        tput = [throughput_mbps(m) for m in members]
        tput = [t for t in tput if math.isfinite(t)]
        if tput:
            out[(scheme, load)].append((sum(float(m["reord_seen"]) for m in members)
                                        / len(members), sum(tput) / len(tput)))
    return out


def some_run_reorders(rows: Iterable[Mapping[str, Any]]) -> bool:
    """Whether some run's long flows saw reordering: the rule for drawing ``PLOT_FILE``
    (without it every point sits at x = 0)."""
    return any(events > 0 for points in run_points(rows).values()
               for events, _tput in points)


def plot(rows: Sequence[Mapping[str, Any]], out_dir: Path, sweep: str,
         schemes: Sequence[str]) -> list[Path]:
    """Long-flow throughput against reordering events per long flow, a point per run,
    a colour per scheme, a panel per sweep value."""
    points = run_points(rows)
    if not points:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loads = sorted({load for _s, load in points})
    fig, axes = plt.subplots(1, len(loads), figsize=(3.4 * len(loads) + 1, 3.8),
                             squeeze=False)
    for ax, load in zip(axes[0], loads, strict=True):
        for scheme in schemes:
            pts = points.get((scheme, load), [])
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=scheme, s=24)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_title(f"{sweep} = {fmt(load)}")
        ax.set_xlabel("reorder events / long flow")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("long-flow throughput (Mbit/s)")
    axes[0][-1].legend(loc="best", fontsize=8)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PLOT_FILE
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
