"""Delivered throughput over time: ``throughput.csv`` and ``throughput_time_*.png``.

What the fabric delivered to the hosts, every ``BIN_S`` seconds of a run: the bytes the
switches sent out of their host-facing ports (from switch_ext's stats file, every
``stats_interval_ms``, 100 ms by default), the load-balancing papers' throughput-over-time
figure around a failure. Each switch's interval between two stats lines counts, at its
rate, into the bins it overlaps, in proportion to the overlap; the bins of all switches
add up. Rows: ``t`` (the bin's start, seconds since the replay's T0), ``mbps`` (Mbit/s
of frames delivered to hosts in the bin). Other switch kinds write no stats file: no
rows, no figure.

Recovery after a link cut (the experiment's ``events:``, events.csv): the time from the
cut to the start of the first bin, among those that start at or after it, in which the
aggregate is back at ``RECOVERED`` (90%) of its mean over the ``BEFORE_S`` second before
the cut (0: it never dipped below; none when it was idle before or is not back by the
run's end). Summary rows ``recovery_s`` with the class ``cut <link> at <t> s``, per
scheme and sweep value across seeds; the figure marks every event.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dcnlab.model.topology import TopologySpec

from .events import EVENTS_CSV, applied
from .metrics import SummaryRow, run_key, summarize_runs
from .plots import as_float
from .sections import ReportContext, RunContext, register
from .table import aligned, cell, fmt

THROUGHPUT_CSV = "throughput.csv"
COLUMNS = ["scheme", "load", "seed", "t", "mbps"]
BIN_S = 0.1
BEFORE_S = 1.0
RECOVERED = 0.9


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


def recovery_s(points: Sequence[tuple[float, float]], at: float) -> float | None:
    """Seconds from ``at`` until the aggregate is back at RECOVERED of its level before
    (module docstring); ``points`` are (bin start, Mbit/s) in time order."""
    before = [v for t, v in points if at - BEFORE_S <= t and t + BIN_S <= at + 1e-9]
    level = sum(before) / len(before) if before else 0.0
    if level <= 0:
        return None
    for t, v in points:
        if t >= at - 1e-9 and v >= RECOVERED * level:
            return round(max(0.0, t - at), 4)
    return None


def _runs(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, float, int], list[Any]]:
    out: dict[tuple[str, float, int], list[Any]] = defaultdict(list)
    for r in rows:
        out[run_key(r)].append(r)
    return out


def recoveries(series_rows: Sequence[Mapping[str, Any]],
               event_rows: Sequence[Mapping[str, Any]]) -> list[SummaryRow]:
    """``recovery_s`` summary rows: every applied cut of every run that has a series."""
    series_by_run = {key: sorted((as_float(r["t"]), as_float(r["mbps"])) for r in rs)
                     for key, rs in _runs(series_rows).items()}
    per_run: dict[tuple[str, float, int], dict[tuple[str, str], float]] = defaultdict(dict)
    for key, evs in _runs(event_rows).items():
        points = series_by_run.get(key)
        if not points:
            continue
        for ev in evs:
            if ev.get("type") != "cut" or not applied(ev):
                continue
            value = recovery_s(points, as_float(ev["t"]))
            label = f"cut {ev['link']} at {as_float(ev['planned']):g} s"
            per_run[key][("recovery_s", label)] = math.nan if value is None else value
    return summarize_runs(per_run, None, counts=()) if per_run else []


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
        return recoveries(ctx.rows(THROUGHPUT_CSV), ctx.rows(EVENTS_CSV))

    def text(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> str:
        if not summary:
            return ""
        lines = [f"Recovery after a cut: s until delivered throughput is back at "
                 f"{RECOVERED:.0%} of its last {BEFORE_S:g} s before (mean ± 95% CI across "
                 "seeds; - : not back within the run)"]
        for load in sorted({r.load for r in summary}):
            labels = list(dict.fromkeys(r.cls for r in summary if r.load == load))
            order = [s for s in ctx.schemes if any(r.scheme == s for r in summary)]
            index = {(r.scheme, r.cls): r for r in summary if r.load == load}
            body = [[label, *(cell(index[(s, label)], 1.0, None)
                              if (s, label) in index else "-" for s in order)]
                    for label in labels]
            lines += ["", *aligned([f"{ctx.sweep} = {fmt(load)}", *order], body)]
        return "\n".join(lines) + "\n"

    def plots(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> list[Path]:
        return plot(ctx.rows(THROUGHPUT_CSV), ctx.plots_dir, ctx.sweep, ctx.schemes,
                    ctx.rows(EVENTS_CSV))


def plot(rows: Sequence[Mapping[str, Any]], out_dir: Path, sweep: str,
         schemes: Sequence[str], event_rows: Sequence[Mapping[str, Any]] = ()
         ) -> list[Path]:
    """``throughput_time_<sweep><value>.png``: delivered Mbit/s against time, a line per
    scheme, for the first seed of each sweep value; every event's planned time dashed."""
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
        planned = sorted({(as_float(e["planned"]), str(e["type"]), str(e["link"]))
                          for e in event_rows if as_float(e.get("load")) == load})
        for k, (t, kind, link) in enumerate(planned):
            ax.axvline(t, color="0.3", ls="--", lw=0.8)
            ax.annotate(f"{kind} {link}", (t, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(2, -10 - 10 * (k % 3)), textcoords="offset points",
                        fontsize="x-small")
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
