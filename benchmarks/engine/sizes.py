"""Flow-size sweeps (workload ``sizes``): FCT statistics across the flows of each size.

In a size sweep every flow of a run has the same size and the repetitions are the
sample, so the interval that matters is across flows (the summary's intervals are across
seeds, undefined with one seed).  Per sweep value and scheme, over measured flows that
completed (pooled over seeds):

- ``n``, mean FCT and the half-width of its 95% Student-t interval across flows;
- the geometric mean FCT across flows and its 95% interval taken on the log of the FCTs
  (metrics.geo_mean_ci: ``fct_geo_ms``, ``fct_geo_low_ms``, ``fct_geo_high_ms``), what
  the plot draws;
- ``change_pct``: 100 * (mean / the baseline's mean - 1), negative = faster than the
  baseline (the seed 003 tables give the reduction, the same number with the sign
  flipped);
- ``failed``: flows of the run that did not complete intact (counted, never dropped);
- the means of the schemes' transport columns (metrics.extra_values).

Written as ``fct_by_size.csv`` and a section of summary.txt (the arithmetic mean and its
interval); plots ``fct_by_size.png`` (FCT against flow size, a line per scheme: the
seed's Figs. 8 and 9) and ``fct_change_by_size.png`` (the change against the baseline per
size).  ``fct_by_size.png`` draws the geometric mean with the interval of the log FCT on
a log axis, as the FCT bars of plots.py do (plots.interval), not the arithmetic mean with
its symmetric interval: with a few repetitions spread over an order of magnitude that
interval reaches zero or below, which a log axis cannot show; this one stays positive.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .metrics import OK, SummaryRow, extra_values, geo_mean_ci, mean_ci  # noqa: E402
from .plots import FCT_YLABEL, caption, interval  # noqa: E402
from .results import write_csv  # noqa: E402
from .table import fmt  # noqa: E402

SWEEP = "size"  # the sweep name of the workload this applies to
SIZES_CSV = "fct_by_size.csv"
CHANGE_LIMIT = 100.0  # % change plot's range; bars beyond it are clipped and labelled
BASE_COLUMNS = ["load", "scheme", "n", "failed", "fct_mean_ms", "fct_ci95_ms", "change_pct",
                "fct_geo_ms", "fct_geo_low_ms", "fct_geo_high_ms"]
CAPTION = ("points: geometric mean FCT over the flows of a size (all seeds);\nwhiskers: "
           "95% Student-t interval of log FCT across them, exponentiated (always > 0)")


def flow_stats(rows: Sequence[Mapping[str, Any]], schemes: Sequence[str],
               baseline: str | None, extra: Sequence[str] = ()) -> list[dict[str, Any]]:
    """One dict per (sweep value, scheme) with the statistics above, sizes ascending."""
    groups: dict[tuple[float, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("measured", True) and r.get("kind", "tcp") != "udp":
            groups[(float(r["load"]), str(r["scheme"]))].append(r)
    out = []
    for load in sorted({k[0] for k in groups}):
        base_mean = math.nan
        if baseline is not None:
            base_mean = mean_ci(_fcts(groups.get((load, baseline), [])))[0]
        for scheme in schemes:
            members = groups.get((load, scheme))
            if not members:
                continue
            fcts = _fcts(members)
            m, ci = mean_ci(fcts)
            geo, geo_low, geo_high = geo_mean_ci(fcts)
            change = (100.0 * (m / base_mean - 1)
                      if math.isfinite(m) and math.isfinite(base_mean) and base_mean > 0
                      else math.nan)
            out.append({"load": load, "scheme": scheme, "n": len(fcts),
                        "failed": sum(1 for r in members if r["status"] != OK),
                        "fct_mean_ms": m * 1e3, "fct_ci95_ms": ci * 1e3,
                        "change_pct": change if scheme != baseline else 0.0,
                        "fct_geo_ms": geo * 1e3, "fct_geo_low_ms": geo_low * 1e3,
                        "fct_geo_high_ms": geo_high * 1e3,
                        **extra_values(members, extra)})
    return out


def _fcts(rows: Sequence[Mapping[str, Any]]) -> list[float]:
    return [float(r["fct"]) for r in rows if r["status"] == OK and r.get("fct") is not None]


def columns(stats: Sequence[Mapping[str, Any]]) -> list[str]:
    extra = dict.fromkeys(k for s in stats for k in s if k not in BASE_COLUMNS)
    return BASE_COLUMNS + list(extra)


def size_label(value: float) -> str:
    """64KB, 1MB, 1146KB: bytes in the seed's units (1 KB = 1024 bytes)."""
    v = int(value)
    if v >= 1 << 20 and v % (1 << 20) == 0:
        return f"{v >> 20}MB"
    if v >= 1 << 10 and v % (1 << 10) == 0:
        return f"{v >> 10}KB"
    return f"{v}B"


def render(stats: Sequence[Mapping[str, Any]], baseline: str | None) -> str:
    """The text section: a line per size and scheme."""
    if not stats:
        return ""
    extra = [c for c in columns(stats) if c not in BASE_COLUMNS]
    header = ["size", "scheme", "n", "failed", "FCT ms", "+-95%",
              f"vs {baseline} %" if baseline else "change %", *extra]
    body = []
    for s in stats:
        change = s["change_pct"]
        body.append([size_label(s["load"]), s["scheme"], str(s["n"]), str(s["failed"]),
                     fmt(s["fct_mean_ms"]), fmt(s["fct_ci95_ms"]),
                     f"{change:+.1f}" if math.isfinite(change) else "-",
                     *(fmt(float(s[c])) if c in s else "-" for c in extra)])
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    lines = ["FCT across the flows of each size (mean, 95% interval across flows; change "
             "against the baseline's mean, negative = faster; transport columns: mean "
             "per completed flow)", ""]
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    return "\n".join(lines) + "\n"


def write(out: Path, stats: Sequence[Mapping[str, Any]]) -> Path:
    path = out / SIZES_CSV
    write_csv(path, columns(stats), stats)
    return path


def _color(schemes: Sequence[str], scheme: str) -> str:
    """One colour per scheme in both plots (the change plot leaves the baseline out)."""
    return f"C{list(schemes).index(scheme) % 10}"


def _row(s: Mapping[str, Any]) -> SummaryRow:
    """One size and scheme of ``stats`` as the summary row plots.interval draws (in ms;
    its statistics are across the flows of the size where the summary's are across
    seeds)."""
    return SummaryRow(s["scheme"], float(s["load"]), "fct_mean", SWEEP, int(s["n"]),
                      s["fct_mean_ms"], s["fct_ci95_ms"], math.nan, math.nan, math.nan,
                      s["fct_geo_ms"], s["fct_geo_low_ms"], s["fct_geo_high_ms"])


def plots(stats: Sequence[Mapping[str, Any]], out_dir: Path, schemes: Sequence[str],
          baseline: str | None) -> list[Path]:
    if not stats:
        return []
    out_dir.mkdir(parents=True, exist_ok=True)
    loads = sorted({float(s["load"]) for s in stats})
    index = {(float(s["load"]), s["scheme"]): s for s in stats}
    files = []
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    for scheme in schemes:
        xs, ys, downs, ups = [], [], [], []
        for load in loads:
            s = index.get((load, scheme))
            if s is None:
                continue
            value, down, up = interval(_row(s), fct=True)
            if not math.isfinite(value):
                continue
            xs.append(load)
            ys.append(value)
            downs.append(down)
            ups.append(up)
        if xs:
            ax.errorbar(xs, ys, yerr=[downs, ups], marker="o", capsize=3, label=scheme,
                        color=_color(schemes, scheme))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(loads, [size_label(v) for v in loads], rotation=45)
    ax.minorticks_off()
    ax.set_xlabel("flow size")
    ax.set_ylabel(FCT_YLABEL)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    ax.set_title("flow completion time by size")
    caption(fig, CAPTION)
    path = out_dir / "fct_by_size.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    files.append(path)
    others = [s for s in schemes if s != baseline]
    if baseline is not None and others:
        fig, ax = plt.subplots(figsize=(7.0, 4.4))
        x = np.arange(len(loads))
        width = 0.8 / len(others)
        for i, scheme in enumerate(others):
            ys = [index[(load, scheme)]["change_pct"] if (load, scheme) in index else np.nan
                  for load in loads]
            pos = x + (i - (len(others) - 1) / 2) * width
            ax.bar(pos, np.clip(ys, -CHANGE_LIMIT, CHANGE_LIMIT), width, label=scheme,
                   color=_color(schemes, scheme))
            for px, y in zip(pos, ys, strict=True):
                if math.isfinite(y) and abs(y) > CHANGE_LIMIT:  # off the scale: say so
                    ax.text(px, math.copysign(CHANGE_LIMIT, y), f"{y:+.0f}%", rotation=90,
                            ha="center", va="top" if y > 0 else "bottom", fontsize=7)
        ax.set_ylim(-CHANGE_LIMIT * 1.05, CHANGE_LIMIT * 1.05)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(x, [size_label(v) for v in loads], rotation=45)
        ax.set_xlabel("flow size")
        ax.set_ylabel(f"mean FCT change vs {baseline} (%)")
        ax.set_title(f"change against {baseline} (negative = faster)")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize="small")
        fig.tight_layout()
        path = out_dir / "fct_change_by_size.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        files.append(path)
    return files
