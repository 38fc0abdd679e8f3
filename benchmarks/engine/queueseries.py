"""The bottleneck's queue over time: ``queue_series.csv`` and ``queue_time_*.png``.

network.csv gives each run's bottleneck queue as one distribution (mean, p5, p95).  Some
papers show the queue's course instead: how it grows with the number of flows (paper
004's Fig. 8) or how it swings between empty and full in an incast (paper 002's Fig.
1c).  This family keeps that course, per run, for the run's bottleneck port (network.csv's
``bottleneck``: the port with the largest mean Q_out during the run), one row per stats
line switch_ext wrote during the run (every ``stats_interval_ms``, a switch option: 100
ms by default; an experiment that wants a finer course sets it, e.g. 5 ms for an incast):

- ``t``: the line's time, seconds since the replay's T0 (flows.csv's ``start`` clock);
  the row describes the interval that ends there, since the previous line;
- ``qlen``: the egress buffer length (frames) at that moment;
- ``qlen_max``: the longest it was during the interval (a swing faster than the interval
  still shows its tops);
- ``qout_mean``: its time-weighted mean over the interval (from the exact histograms);
- ``qin``: the frames the port's ingress discipline holds at that moment (ABQ's Q_in;
  empty without one);
- ``drops``: the port's egress drops during the interval.

Switches that keep no stats file (OVS) give no rows; the plot says nothing for them.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .netstats import hist_delta, hist_stats
from .plots import as_float
from .table import fmt

QUEUE_CSV = "queue_series.csv"
COLUMNS = ["scheme", "load", "seed", "port", "t", "qlen", "qlen_max", "qout_mean", "qin",
           "drops"]


def _port_entry(line: Mapping[str, Any], port: int) -> Mapping[str, Any] | None:
    for p in line.get("ports") or []:
        if isinstance(p, dict) and p.get("port") == port:
            return p
    return None


def _hist(entry: Mapping[str, Any] | None) -> dict[int, int]:
    h = (entry or {}).get("qout")
    if not isinstance(h, dict) or not isinstance(h.get("hist"), list):
        return {}
    return {int(n): int(t) for n, t in h["hist"]}


def series(lines: Sequence[Mapping[str, Any]], port: int, t0: float
           ) -> list[dict[str, Any]]:
    """The rows (without scheme, load, seed) of ``port`` over one switch's stats
    ``lines``, oldest first; the first line only opens the first interval."""
    rows: list[dict[str, Any]] = []
    prev: Mapping[str, Any] | None = None
    for line in lines:
        entry = _port_entry(line, port)
        ts = line.get("ts")
        if entry is None or not isinstance(ts, int | float):
            continue
        if prev is not None:
            mean = hist_stats(hist_delta(_hist(prev), _hist(entry)))["mean"]
            ingress = entry.get("ingress")
            rows.append({
                "t": round(float(ts) - t0, 4), "qlen": entry.get("qlen"),
                "qlen_max": entry.get("qlen_max"),
                "qout_mean": None if math.isnan(mean) else round(mean, 3),
                "qin": ingress.get("held") if isinstance(ingress, dict) else None,
                "drops": int(entry.get("drops", 0)) - int(prev.get("drops", 0))})
        prev = entry
    return rows


def run_rows(scheme: str, load: float, seed: int,
             lines: Mapping[str, Sequence[Mapping[str, Any]]], bottleneck: str | None,
             t0: float) -> list[dict[str, Any]]:
    """queue_series.csv's rows of a run: ``bottleneck`` is ``"s1:2"`` (network.csv's),
    ``lines`` each switch's stats lines written during the run."""
    if not bottleneck or ":" not in bottleneck:
        return []
    switch, port = bottleneck.rsplit(":", 1)
    try:
        number = int(port)
    except ValueError:
        return []
    key = {"scheme": scheme, "load": load, "seed": seed, "port": bottleneck}
    return [{**key, **row} for row in series(lines.get(switch, []), number, t0)]


# ---------------------------------------------------------------------------- plot


def plot(rows: Sequence[Mapping[str, Any]], out_dir: Path, sweep: str,
         schemes: Sequence[str]) -> list[Path]:
    """``queue_time_<sweep><value>.png`` per sweep value: the bottleneck's queue against
    time, a panel per scheme (their bottlenecks may be different ports), for the first
    seed: the interval's peak as a thin line over its time-weighted mean, so an
    oscillation faster than the stats interval shows as the gap between the two."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_load: dict[float, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by_load[as_float(r.get("load"))].append(r)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for load, mine in sorted(by_load.items()):
        seed = min(int(as_float(r["seed"])) for r in mine)
        present = [s for s in schemes
                   if any(r["scheme"] == s and int(as_float(r["seed"])) == seed for r in mine)]
        if not present:
            continue
        fig, axes = plt.subplots(len(present), 1, figsize=(7.0, 1.9 * len(present) + 0.9),
                                 sharex=True, sharey=True, squeeze=False)
        for ax, scheme in zip(axes[:, 0], present, strict=True):
            pts = sorted((as_float(r["t"]), as_float(r["qout_mean"]),
                          as_float(r["qlen_max"]), str(r.get("port", "")))
                         for r in mine
                         if r["scheme"] == scheme and int(as_float(r["seed"])) == seed)
            t = [p[0] for p in pts]
            ax.step(t, [p[2] for p in pts], where="pre", lw=0.6, color="0.55",
                    label="peak in interval")
            ax.step(t, [p[1] for p in pts], where="pre", lw=1.0, color="C0",
                    label="time-weighted mean")
            ax.set_title(f"{scheme} ({pts[0][3]})", fontsize="small", loc="left")
            ax.set_ylabel("Q_out (pkts)")
            ax.grid(True, alpha=0.3)
        axes[0, 0].legend(fontsize="x-small", loc="upper right")
        axes[-1, 0].set_xlabel("time (s)")
        fig.suptitle(f"bottleneck queue, {sweep} = {fmt(load)}, seed {seed}",
                     fontsize="medium")
        fig.tight_layout()
        path = out_dir / f"queue_time_{sweep}{fmt(load)}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    return files


def read_courses(out: Path, scheme: str, seed: int | None = None
                 ) -> dict[str, list[dict[str, str]]]:
    """``{label: rows}``: ``scheme``'s queue over time in every run of the results
    directory ``out`` (an experiment's, or a directory of its scenarios), one course per
    scenario and sweep value, for ``seed`` (default: the smallest that scenario ran)."""
    dirs = [out] if (out / QUEUE_CSV).is_file() else sorted(
        p.parent for p in out.glob(f"*/{QUEUE_CSV}"))
    courses: dict[str, list[dict[str, str]]] = {}
    for d in dirs:
        with open(d / QUEUE_CSV, newline="") as fh:
            rows = [r for r in csv.DictReader(fh) if r["scheme"] == scheme]
        if not rows:
            continue
        want = seed if seed is not None else min(int(as_float(r["seed"])) for r in rows)
        by_load: dict[float, list[dict[str, str]]] = defaultdict(list)
        for r in rows:
            if int(as_float(r["seed"])) == want:
                by_load[as_float(r["load"])].append(r)
        for load, mine in sorted(by_load.items()):
            name = d.name if d != out else ""
            courses[" ".join(filter(None, [name, f"{fmt(load)}", f"seed {want}"]))] = mine
    return courses


def course_plot(courses: Mapping[str, Sequence[Mapping[str, Any]]], path: Path,
                title: str, window: tuple[float, float] | None = None) -> Path:
    """Several runs' queues over time on one axis (a line per course, its time-weighted
    mean per stats interval): how the course changes with the scenario or sweep value,
    as in paper 004's Fig. 8 (the queue for 4 to 64 flows).  ``window``: only the rows
    whose interval ends inside (t0, t1] are drawn (one incast round, say)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 3.8))
    for label, rows in courses.items():
        pts = sorted((as_float(r["t"]), as_float(r["qout_mean"])) for r in rows)
        if window is not None:
            pts = [p for p in pts if window[0] < p[0] <= window[1]]
        ax.step([p[0] for p in pts], [p[1] for p in pts], where="pre", lw=0.9, label=label)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("Q_out, mean per stats interval (pkts)")
    ax.set_title(title, fontsize="medium")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
