"""Delivered throughput over time: ``throughput.csv`` and ``throughput_time_*.png``.

What the fabric delivered to the hosts, every ``BIN_S`` seconds of a run: the bytes the
switches sent out of their host-facing ports (from switch_ext's stats file, every
``stats_interval_ms``, 100 ms by default), the load-balancing papers' throughput-over-time
figure around a failure. Each switch's interval between two stats lines counts, at its
rate, into the bins it overlaps, in proportion to the overlap; the bins of all switches
add up. Rows: ``t`` (the bin's start, seconds since the replay's T0), ``mbps`` (Mbit/s
of frames delivered to hosts in the bin). Other switch kinds write no stats file: no
rows, no figure.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dcnlab.model.topology import TopologySpec

from .metrics import SummaryRow
from .plots import as_float
from .sections import ReportContext, RunContext, register
from .table import fmt

THROUGHPUT_CSV = "throughput.csv"
COLUMNS = ["scheme", "load", "seed", "t", "mbps"]
BIN_S = 0.1


def host_ports(spec: TopologySpec) -> dict[str, set[int]]:
    """``{switch: {its ports that face a host}}``."""
    out: dict[str, set[int]] = defaultdict(set)
    for lk in spec.host_links():
        if spec.is_switch(lk.a):
            out[lk.a].add(lk.a_port)
        else:
            out[lk.b].add(lk.b_port)
    return dict(out)


def _sent(line: Mapping[str, Any], ports: set[int]) -> int:
    return sum(int(p.get("tx_bytes") or 0) for p in line.get("ports") or []
               if isinstance(p, dict) and p.get("port") in ports)


def series(spec: TopologySpec, lines: Mapping[str, Sequence[Mapping[str, Any]]], t0: float,
           bin_s: float = BIN_S) -> list[tuple[float, float]]:
    """(bin start, Mbit/s) from the first to the last bin any switch's lines cover."""
    bits: dict[int, float] = defaultdict(float)
    for sw, ports in host_ports(spec).items():
        prev: tuple[float, int] | None = None
        for line in lines.get(sw, []):
            ts = line.get("ts")
            if not isinstance(ts, int | float):
                continue
            now = (float(ts) - t0, _sent(line, ports))
            if prev is not None and now[0] > prev[0]:
                start, end = prev[0], now[0]
                rate = max(0, now[1] - prev[1]) * 8 / (end - start)  # bit/s
                for b in range(math.floor(start / bin_s), math.ceil(end / bin_s)):
                    overlap = min(end, (b + 1) * bin_s) - max(start, b * bin_s)
                    if overlap > 0:
                        bits[b] += rate * overlap
            prev = now
    if not bits:
        return []
    return [(round(b * bin_s, 6), round(bits.get(b, 0.0) / bin_s / 1e6, 4))
            for b in range(min(bits), max(bits) + 1)]


class ThroughputSection:
    """throughput.csv during runs; a time-series figure per sweep value in the report."""

    name = "throughput"
    csv = THROUGHPUT_CSV
    columns = COLUMNS

    def wanted(self, spec: Any) -> bool:
        return True  # rows only where switches keep stats files

    def run_rows(self, ctx: RunContext) -> list[dict[str, Any]]:
        return [{"scheme": ctx.scheme, "load": ctx.load, "seed": ctx.seed, "t": t, "mbps": v}
                for t, v in series(ctx.topology, ctx.stats_lines, ctx.t0)]

    def summary(self, ctx: ReportContext) -> list[SummaryRow]:
        return []

    def text(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> str:
        return ""

    def plots(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> list[Path]:
        return plot(ctx.rows(THROUGHPUT_CSV), ctx.plots_dir, ctx.sweep, ctx.schemes)


def plot(rows: Sequence[Mapping[str, Any]], out_dir: Path, sweep: str,
         schemes: Sequence[str]) -> list[Path]:
    """``throughput_time_<sweep><value>.png``: delivered Mbit/s against time, a line per
    scheme, for the first seed of each sweep value."""
    by_load: dict[float, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by_load[as_float(r.get("load"))].append(r)
    if not by_load:
        return []
    from .plots import caption, plt, save_figure

    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for load, mine in sorted(by_load.items()):
        seed = min(int(as_float(r["seed"])) for r in mine)
        fig, ax = plt.subplots(figsize=(7.0, 3.6))
        for i, scheme in enumerate(schemes):
            pts = sorted((as_float(r["t"]), as_float(r["mbps"])) for r in mine
                         if r["scheme"] == scheme and int(as_float(r["seed"])) == seed)
            if pts:
                ax.step([p[0] for p in pts], [p[1] for p in pts], where="post",
                        color=f"C{i % 10}", lw=0.9, label=scheme)
        ax.set_xlabel("time since the run's start (s)")
        ax.set_ylabel("delivered to hosts (Mbit/s)")
        ax.set_title(f"Delivered throughput, {sweep} = {fmt(load)}, seed {seed}")
        ax.grid(True, alpha=0.3)
        ax.legend(loc="upper right", fontsize="small")
        caption(fig, f"bytes the switches sent out of host-facing ports per {BIN_S:g} s "
                "bin, from the switches' stats files")
        files.append(save_figure(fig, out_dir / f"throughput_time_{sweep}{fmt(load)}.png"))
    return files


register(ThroughputSection())
