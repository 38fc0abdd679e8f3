"""PNG plots derived from flows.csv and the summary (matplotlib, no display needed).

- ``fct_cdf_<sweep><value>.png``: CDF of FCT per scheme, pooled over seeds, one file per
  sweep value (measured, completed TCP flows of known size).
- ``fct_by_class.png``: mean FCT per size class against the sweep value, a bar per
  scheme, a panel per class that has completed flows (none at all when no flow has an
  FCT: long-lived only).  The bar is the geometric mean over seeds of each run's mean
  FCT and its whisker the 95% Student-t interval of the log of those values, taken back
  (metrics.geo_mean_ci; the figure's caption says so), on a log axis where that
  interval is symmetric: both ends stay above zero, where the arithmetic interval of
  three spread seeds reaches below it.
- ``throughput_elephant.png``, ``out_of_order.png``: the same layout for elephant
  throughput and the out-of-order percentage, the arithmetic mean over seeds with its
  95% interval cut at zero (neither quantity is ever negative: an interval below zero
  says "few seeds").
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
FCT_CAPTION = ("FCT bars: geometric mean over seeds of each run's value; whiskers: 95% "
               "Student-t interval of log FCT across seeds, exponentiated (always > 0)")
FCT_YLABEL = "FCT (ms, log scale), geometric mean"


def is_fct(metric: str) -> bool:
    """Whether a summary metric (``metric`` or ``metric@class``) is a flow completion time:
    positive by nature, drawn with its interval on the log scale (FCT_CAPTION)."""
    return metric.split("@", 1)[0].startswith("fct_")


def interval(row: SummaryRow | None, fct: bool, scale: float = 1.0
             ) -> tuple[float, float, float]:
    """(value, down, up) that a bar or point draws for ``row``, times ``scale``.

    An FCT (``fct``) with a geometric mean: that mean and its log-scale 95% interval, both
    ends positive.  Anything else (and an FCT whose summarizer fills no geometric mean):
    the arithmetic mean and its t-interval, cut at zero below.  nan value without a row
    or value; no whisker (0, 0) where the interval is undefined (one seed)."""
    if row is None:
        return math.nan, 0.0, 0.0
    if fct and math.isfinite(row.geo):
        if math.isfinite(row.geo_low) and math.isfinite(row.geo_high):
            return (row.geo * scale, (row.geo - row.geo_low) * scale,
                    (row.geo_high - row.geo) * scale)
        return row.geo * scale, 0.0, 0.0
    if not math.isfinite(row.mean):
        return math.nan, 0.0, 0.0
    ci = row.ci if math.isfinite(row.ci) else 0.0
    return row.mean * scale, min(ci, max(row.mean, 0.0)) * scale, ci * scale


def save_figure(fig: Any, path: Path) -> Path:
    """Writes ``fig`` to ``path`` at the plots' resolution and frees it."""
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def caption(fig: Any, text: str) -> None:
    """``text`` under the figure's panels (call instead of fig.tight_layout())."""
    fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize="small", wrap=True)
    fig.tight_layout(rect=(0, 0.07, 1, 1))


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
    """A bar per scheme that has a value at some sweep value, with its interval
    (:func:`interval`); whether any was drawn."""
    loads = sorted({r.load for r in summary})
    index = {(r.scheme, r.load): r for r in summary if r.metric == metric and r.cls == cls}
    width = 0.8 / max(1, len(schemes))
    x = np.arange(len(loads))
    drawn = False
    for i, scheme in enumerate(schemes):
        cells = [interval(index.get((scheme, load)), is_fct(metric), scale) for load in loads]
        values = np.array([c[0] for c in cells])
        if np.all(np.isnan(values)):
            continue  # no empty series: the scheme keeps its colour and place all the same
        drawn = True
        ax.bar(x + (i - (len(schemes) - 1) / 2) * width, values, width,
               yerr=np.array([[c[1] for c in cells], [c[2] for c in cells]]), capsize=3,
               label=scheme, color=f"C{i % 10}")
    ax.set_xticks(x, [fmt(v) for v in loads])
    ax.grid(True, axis="y", alpha=0.3)
    return drawn


def _has(summary: Sequence[SummaryRow], metric: str) -> bool:
    """Whether any run has a value for ``metric`` (else its figure or panel is left out)."""
    return any(r.metric == metric and math.isfinite(r.mean) for r in summary)


def class_bars(summary: Sequence[SummaryRow], out_dir: Path, sweep: str,
               schemes: Sequence[str]) -> list[Path]:
    files = []
    # A panel per class with an FCT: none for a class without completed flows, no figure
    # at all for a long-lived workload.
    classes = [c for c in CLASSES if any(r.metric == "fct_mean" and r.cls == c
                                         and math.isfinite(r.mean) for r in summary)]
    if classes:
        fig, axes = plt.subplots(1, len(classes), figsize=(4.2 * len(classes) + 0.6, 4.2),
                                 squeeze=False)
        for ax, cls in zip(axes[0], classes, strict=True):
            _bars(ax, summary, "fct_mean", cls, schemes, 1e3)
            ax.set_title(f"{cls} flows")
            ax.set_xlabel(sweep)
            ax.set_ylabel(FCT_YLABEL)
            # the interval is symmetric on the log of the FCT: so is a log axis
            ax.set_yscale("log")
            ax.grid(True, axis="y", which="both", alpha=0.3)
        axes[0][0].legend()
        caption(fig, FCT_CAPTION)
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


def as_float(value: Any) -> float:
    """A CSV cell as a number (nan when empty or not a number)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def jain_timelines(series: Sequence[Mapping[str, Any]], out_dir: Path, sweep: str,
                   schemes: Sequence[str]) -> list[Path]:
    by_load: dict[float, list[Mapping[str, Any]]] = defaultdict(list)
    for r in series:
        by_load[as_float(r["load"])].append(r)
    files = []
    for load, rows in sorted(by_load.items()):
        seed = min(int(as_float(r["seed"])) for r in rows)
        mine = [r for r in rows if int(as_float(r["seed"])) == seed]
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(7.0, 5.6), sharex=True)
        for scheme in schemes:
            pts = sorted((as_float(r["t"]), as_float(r["jain"]), as_float(r["tcp_mbps"]))
                         for r in mine if r["scheme"] == scheme)
            if not pts:
                continue
            t, jain, tput = (np.asarray(v) for v in zip(*pts, strict=True))
            top.plot(t, jain, lw=1.0, label=scheme)
            bottom.plot(t, tput, lw=1.0, label=scheme)
        burst = [as_float(r["t"]) for r in mine if str(r.get("udp")) in ("1", "True")]
        measured = [as_float(r["t"]) for r in mine if str(r.get("measured")) in ("1", "True")]
        period = _period(mine)
        active = [as_float(r["t"]) for r in mine if as_float(r.get("flows")) > 0]
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
    times = sorted({as_float(r["t"]) for r in rows})
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
