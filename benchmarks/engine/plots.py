"""PNG plots derived from flows.csv and the summary (matplotlib, no display needed).

- ``fct_cdf_<sweep><value>.png``: CDF of FCT per scheme, pooled over seeds, one file per
  sweep value (measured, completed TCP flows of known size).
- ``fct_by_class.png``: mean FCT per size class against the sweep value, a bar per
  scheme with its 95% CI across seeds (none when no flow has an FCT: long-lived only).
- ``throughput_elephant.png``, ``out_of_order.png``: the same layout for elephant
  throughput and the out-of-order percentage.
- with receiver throughput recorded (fairness.py): ``jain_time_<sweep><value>.png``,
  Jain's index and TCP throughput per period against time, a line per scheme for the
  first seed, the UDP burst shaded, the measured window's start dashed (the paper's
  Fig. 11); ``fairness_bars.png``, mean Jain index, TCP throughput and TCP throughput
  during the UDP burst per scheme against the sweep value with 95% CIs across seeds
  (Figs. 6 and 7).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display

import matplotlib.pyplot as plt  # noqa: E402 - after choosing the backend
import numpy as np  # noqa: E402

from .metrics import CLASSES, OK, SummaryRow  # noqa: E402
from .table import fmt  # noqa: E402

DPI = 110


def fct_cdfs(rows: Sequence[Mapping[str, Any]], out_dir: Path, sweep: str,
             schemes: Sequence[str]) -> list[Path]:
    by_load: dict[float, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if (r.get("measured", True) and r["status"] == OK and r.get("fct") is not None
                and r.get("kind", "tcp") == "tcp" and r.get("size")):
            by_load[float(r["load"])][str(r["scheme"])].append(float(r["fct"]))
    files = []
    for load, per_scheme in sorted(by_load.items()):
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for scheme in schemes:
            values = np.sort(np.asarray(per_scheme.get(scheme, []))) * 1e3
            if values.size == 0:
                continue
            ax.step(values, np.arange(1, values.size + 1) / values.size, where="post",
                    label=f"{scheme} (n={values.size})")
        ax.set_xscale("log")
        ax.set_xlabel("flow completion time (ms)")
        ax.set_ylabel("CDF")
        ax.set_ylim(0, 1.02)
        ax.grid(True, which="both", alpha=0.3)
        ax.set_title(f"FCT CDF, {sweep} = {fmt(load)}")
        ax.legend(loc="lower right")
        path = out_dir / f"fct_cdf_{sweep}{fmt(load)}.png"
        fig.tight_layout()
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
        files.append(path)
    return files


def _bars(ax: Any, summary: Sequence[SummaryRow], metric: str, cls: str,
          schemes: Sequence[str], scale: float) -> bool:
    loads = sorted({r.load for r in summary})
    index = {(r.scheme, r.load): r for r in summary if r.metric == metric and r.cls == cls}
    width = 0.8 / max(1, len(schemes))
    x = np.arange(len(loads))
    drawn = False
    for i, scheme in enumerate(schemes):
        means, errs = [], []
        for load in loads:
            row = index.get((scheme, load))
            m = row.mean * scale if row is not None and math.isfinite(row.mean) else np.nan
            e = row.ci * scale if row is not None and math.isfinite(row.ci) else 0.0
            means.append(m)
            errs.append(e)
        if not np.all(np.isnan(means)):
            drawn = True
        ax.bar(x + (i - (len(schemes) - 1) / 2) * width, means, width, yerr=errs,
               capsize=3, label=scheme)
    ax.set_xticks(x, [fmt(v) for v in loads])
    ax.grid(True, axis="y", alpha=0.3)
    return drawn


def _has(summary: Sequence[SummaryRow], metric: str) -> bool:
    """Whether any run has a value for ``metric`` (else its figure or panel is left out)."""
    return any(r.metric == metric and math.isfinite(r.mean) for r in summary)


def class_bars(summary: Sequence[SummaryRow], out_dir: Path, sweep: str,
               schemes: Sequence[str]) -> list[Path]:
    files = []
    if _has(summary, "fct_mean"):
        # (a long-lived workload has no FCT at all: no figure of empty panels)
        fig, axes = plt.subplots(1, len(CLASSES), figsize=(4.2 * len(CLASSES), 3.8))
        for ax, cls in zip(axes, CLASSES, strict=True):
            if not _bars(ax, summary, "fct_mean", cls, schemes, 1e3):
                ax.text(0.5, 0.5, f"no {cls} flows", ha="center", transform=ax.transAxes)
            ax.set_title(f"{cls} flows")
            ax.set_xlabel(sweep)
            ax.set_ylabel("mean FCT (ms)")
        axes[0].legend()
        fig.tight_layout()
        path = out_dir / "fct_by_class.png"
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
        files.append(path)
    for metric, cls, label, name in (
            ("tput_mbps", "elephant", "elephant throughput (Mbit/s)", "throughput_elephant"),
            ("ooo_pct", "all", "out-of-order segments (%)", "out_of_order")):
        fig, ax = plt.subplots(figsize=(6.4, 4.0))
        if not _bars(ax, summary, metric, cls, schemes, 1.0):
            plt.close(fig)
            continue
        ax.set_xlabel(sweep)
        ax.set_ylabel(label)
        ax.legend()
        fig.tight_layout()
        path = out_dir / f"{name}.png"
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
        files.append(path)
    return files


def render_all(rows: Sequence[Mapping[str, Any]], summary: Sequence[SummaryRow],
               out_dir: Path, sweep: str, schemes: Sequence[str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.png"):  # a re-render replaces every plot it owns
        old.unlink()
    return fct_cdfs(rows, out_dir, sweep, schemes) + class_bars(summary, out_dir, sweep,
                                                               schemes)


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def jain_timelines(series: Sequence[Mapping[str, Any]], out_dir: Path, sweep: str,
                   schemes: Sequence[str]) -> list[Path]:
    by_load: dict[float, list[Mapping[str, Any]]] = defaultdict(list)
    for r in series:
        by_load[_num(r["load"])].append(r)
    files = []
    for load, rows in sorted(by_load.items()):
        seed = min(int(_num(r["seed"])) for r in rows)
        mine = [r for r in rows if int(_num(r["seed"])) == seed]
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 5.6), sharex=True)
        for scheme in schemes:
            pts = sorted((_num(r["t"]), _num(r["jain"]), _num(r["tcp_mbps"]))
                         for r in mine if r["scheme"] == scheme)
            if not pts:
                continue
            t, jain, tput = (np.asarray(v) for v in zip(*pts, strict=True))
            top.plot(t, jain, lw=1.0, label=scheme)
            bottom.plot(t, tput, lw=1.0, label=scheme)
        burst = [_num(r["t"]) for r in mine if str(r.get("udp")) in ("1", "True")]
        measured = [_num(r["t"]) for r in mine if str(r.get("measured")) in ("1", "True")]
        period = _period(mine)
        active = [_num(r["t"]) for r in mine if _num(r.get("flows")) > 0]
        for ax in (top, bottom):
            if active:  # not the drain after the last flow stopped
                ax.set_xlim(0, max(active) + period)
            if burst:
                ax.axvspan(min(burst) - period, max(burst), color="0.85", zorder=0,
                           label="UDP on" if ax is top else None)
            if measured:
                ax.axvline(min(measured) - period, color="0.4", ls="--", lw=0.8)
            ax.grid(True, alpha=0.3)
        top.set_ylabel("Jain's index (TCP flows)")
        top.set_ylim(0, 1.02)
        bottom.set_ylabel("TCP throughput (Mbit/s)")
        bottom.set_xlabel("time (s)")
        top.set_title(f"fairness every {period:g} s, {sweep} = {fmt(load)}, seed {seed}")
        top.legend(loc="lower left", fontsize="small", ncol=2)
        fig.tight_layout()
        path = out_dir / f"jain_time_{sweep}{fmt(load)}.png"
        fig.savefig(path, dpi=DPI)
        plt.close(fig)
        files.append(path)
    return files


def _period(rows: Sequence[Mapping[str, Any]]) -> float:
    times = sorted({_num(r["t"]) for r in rows})
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    return float(np.median(gaps)) if gaps else 0.0


def fairness_bars(summary: Sequence[SummaryRow], out_dir: Path, sweep: str,
                  schemes: Sequence[str]) -> list[Path]:
    """Jain, TCP throughput and (with a UDP burst) TCP throughput during the burst: the
    third panel is where reallocation shows (what the UDP-squeezed flows leave)."""
    panels = [("jain_mean", "mean Jain's index (TCP flows)"),
              ("tcp_mbps", "mean TCP throughput (Mbit/s)"),
              ("tcp_udp_mbps", "TCP throughput, UDP burst (Mbit/s)")]
    panels = [(m, label) for m, label in panels if _has(summary, m)]
    if not panels:
        return []
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.0),
                             squeeze=False)
    for ax, (metric, label) in zip(axes[0], panels, strict=True):
        _bars(ax, summary, metric, "tcp", schemes, 1.0)
        ax.set_ylabel(label)
        ax.set_xlabel(sweep)
        if metric == "jain_mean":
            ax.set_ylim(0, 1.05)
    axes[0][0].legend(fontsize="small", loc="lower left")
    fig.tight_layout()
    path = out_dir / "fairness_bars.png"
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return [path]


def fairness_plots(series: Sequence[Mapping[str, Any]], summary: Sequence[SummaryRow],
                   out_dir: Path, sweep: str, schemes: Sequence[str]) -> list[Path]:
    """The fairness figures (after render_all, which clears the directory)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return jain_timelines(series, out_dir, sweep, schemes) + fairness_bars(
        summary, out_dir, sweep, schemes)
