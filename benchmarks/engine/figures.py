"""Figures and tables an experiment file asks for by name (``plots:`` and ``tables:``),
drawn from the summary the report already computed, so a paper's figure can be
reproduced in its own shape without code that knows the experiment.

``plots:`` -- one PNG per entry (``plots/<name>.png``), one panel per item, the sweep
value on the x axis and a bar (one metric) or a line (several) per scheme::

    plots:
      - name: fig4                     # file name (letters, digits, '-', '_', '.')
        title: queue, goodput, drops   # [none]
        panels:
          - metrics: [qout_busy_mean]  # summary metrics (below); several: lines
            range: [qout_busy_p5, qout_busy_p95]   # error bars from these metrics'
                                       #  means instead of the 95% CI across seeds
            stack: qin_busy_mean       # drawn on top of the bar, hatched [none]
            ylabel: Q_out (packets)    # [the metric's label]
            log: false                 # log y axis [false]

A bar or point is the mean over seeds with its 95% interval, cut at zero below -- but a
flow completion time (``fct_*``) is the geometric mean over seeds with the interval taken
on the log of the values (plots.interval, metrics.geo_mean_ci), so both ends stay
positive; the figure's caption says so.  A panel none of whose metrics has a value is
left out, a figure without any is not drawn.

A metric is a column of network.csv (``netstats.METRICS``) or switch.csv (the schemes'
declared switch columns), or a flow metric of a size class written ``metric@class``
(``fct_p99@mouse``, ``tput_mbps@elephant``).

``tables:`` -- per sweep value, the values of one kind per run sorted from smallest to
largest, averaged rank by rank over seeds, a column per (scheme, kind); in summary.txt
and ``<name>.csv`` (the shape of a table listing, e.g., the smallest to the largest
long-flow throughput)::

    tables:
      - name: table1
        title: long flows and ToR drops
        ranks: [elephant_tput, edge_drops]

Rank kinds: ``elephant_tput`` (Mbit/s of each completed, measured elephant flow:
bytes * 8 / FCT), ``edge_drops`` (drops of each switch hosts attach to, network.csv's
``edge_drops_each``).
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import netstats, switch_stats
from .metrics import FCT_METRICS, OK, SummaryRow, run_key
from .schema import SpecFileError, from_mapping, join
from .table import fmt

FLOW_METRICS = (*FCT_METRICS, "tput_mbps", "ooo_pct", "flows", "failed")
FLOW_CLASSES = ("mouse", "rabbit", "elephant", "all")
RANK_KINDS = {"elephant_tput": "long-flow throughput (Mbit/s)",
              "edge_drops": "edge-switch (ToR) drops"}
RANK_NAMES = ("smallest", "2nd", "3rd", "4th", "5th", "6th", "7th", "8th", "9th", "10th")


@dataclass(frozen=True)
class Panel:
    metrics: list[str]
    range: list[str] = field(default_factory=list)
    stack: str | None = None
    ylabel: str | None = None
    log: bool = False


@dataclass(frozen=True)
class Plot:
    name: str
    panels: list[dict[str, Any]]
    title: str | None = None


@dataclass(frozen=True)
class RankTable:
    name: str
    ranks: list[str]
    title: str | None = None


def known_metrics() -> list[str]:
    return [*netstats.METRICS, *switch_stats.METRICS,
            *(f"{m}@{c}" for m in FLOW_METRICS for c in FLOW_CLASSES)]


def _metric(name: Any, where: str) -> str:
    text = str(name)
    if text not in known_metrics():
        import difflib

        close = difflib.get_close_matches(text, known_metrics(), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise SpecFileError(where, f"unknown metric {text!r}{hint}; network.csv and "
                            "switch.csv columns, or METRIC@CLASS for flows")
    return text


def _name(value: Any, where: str, seen: set[str]) -> str:
    import re

    text = str(value)
    if not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}", text):
        raise SpecFileError(where, f"{text!r}: a file name (letters, digits, '-', '_', "
                            "'.' not first)")
    if text in seen:
        raise SpecFileError(where, f"{text!r} appears twice")
    seen.add(text)
    return text


def parse_plots(value: Any) -> list[dict[str, Any]]:
    """The validated ``plots:`` section (plain data, as stored in meta.json)."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecFileError("plots", "expected a list of {name, panels} mappings")
    out, seen = [], set()
    for i, item in enumerate(value):
        where = join("plots", i)
        plot = from_mapping(Plot, item, where)
        _name(plot.name, join(where, "name"), seen)
        if not isinstance(plot.panels, list) or not plot.panels:
            raise SpecFileError(join(where, "panels"), "needs at least one panel")
        panels = []
        for j, raw in enumerate(plot.panels):
            pw = join(join(where, "panels"), j)
            panel = from_mapping(Panel, raw, pw)
            if not panel.metrics:
                raise SpecFileError(join(pw, "metrics"), "needs at least one metric")
            metrics = [_metric(m, join(join(pw, "metrics"), k))
                       for k, m in enumerate(panel.metrics)]
            if panel.range and len(panel.range) != 2:
                raise SpecFileError(join(pw, "range"), "two metrics: [low, high]")
            if (panel.range or panel.stack) and len(metrics) != 1:
                raise SpecFileError(pw, "range and stack go with a single metric (bars)")
            panels.append({"metrics": metrics,
                           "range": [_metric(m, join(pw, "range")) for m in panel.range],
                           "stack": _metric(panel.stack, join(pw, "stack"))
                           if panel.stack else None,
                           "ylabel": panel.ylabel, "log": panel.log})
        out.append({"name": plot.name, "title": plot.title, "panels": panels})
    return out


def parse_tables(value: Any) -> list[dict[str, Any]]:
    """The validated ``tables:`` section."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise SpecFileError("tables", "expected a list of {name, ranks} mappings")
    out, seen = [], set()
    for i, item in enumerate(value):
        where = join("tables", i)
        table = from_mapping(RankTable, item, where)
        _name(table.name, join(where, "name"), seen)
        if not table.ranks:
            raise SpecFileError(join(where, "ranks"), "needs at least one rank kind")
        for k, kind in enumerate(table.ranks):
            if kind not in RANK_KINDS:
                raise SpecFileError(join(join(where, "ranks"), k), f"unknown rank kind "
                                    f"{kind!r} (known: {', '.join(RANK_KINDS)})")
        out.append({"name": table.name, "title": table.title, "ranks": list(table.ranks)})
    return out


# ---------------------------------------------------------------------------- plots


def _index(summary: Sequence[SummaryRow]) -> dict[tuple[str, float, str], SummaryRow]:
    """(scheme, load, metric name as written in plots:) -> row."""
    out = {}
    for r in summary:
        key = r.metric if r.cls in ("net", switch_stats.CLASS) else f"{r.metric}@{r.cls}"
        out[(r.scheme, r.load, key)] = r
    return out


def _label(metric: str) -> str:
    if "@" in metric:
        m, c = metric.split("@", 1)
        return f"{m} ({c} flows)"
    return netstats.LABELS.get(metric) or switch_stats.LABELS.get(metric) or metric


def render_plots(plots: Sequence[Mapping[str, Any]], summary: Sequence[SummaryRow],
                 out_dir: Path, sweep: str, schemes: Sequence[str]) -> list[Path]:
    """The ``plots:`` figures; a figure none of whose metrics was measured is skipped."""
    from . import plots as plotting

    plt, np = plotting.plt, plotting.np
    index = _index(summary)
    loads = sorted({r.load for r in summary})
    files = []
    out_dir.mkdir(parents=True, exist_ok=True)
    for spec in plots:
        panels = [p for p in spec["panels"]
                  if any(math.isfinite(index[k].mean) for k in index if k[2] in p["metrics"])]
        if not panels or not loads:
            continue
        wide = any(len(p["metrics"]) > 1 for p in panels)  # lines: room for the legend
        fig, axes = plt.subplots(1, len(panels), figsize=((7.5 if wide else 5.2)
                                                          * len(panels), 4.4),
                                 squeeze=False)
        x = np.arange(len(loads))
        log_fct = False  # some FCT drawn with its log-scale interval: say so
        for ax, panel in zip(axes[0], panels, strict=True):
            metrics = panel["metrics"]
            if len(metrics) == 1:
                log_fct |= _bar_panel(ax, index, panel, loads, schemes, np)
            else:
                log_fct |= _line_panel(ax, index, panel, loads, schemes, np)
            ax.set_xticks(x, [fmt(v) for v in loads])
            ax.set_xlabel(sweep)
            ax.set_ylabel(panel.get("ylabel") or _label(metrics[0]))
            if panel.get("log"):
                ax.set_yscale("log")
            ax.grid(True, axis="y", alpha=0.3, which="both")
            if len(metrics) > 1:
                ax.legend(fontsize="x-small", ncol=2, loc="upper left",
                          bbox_to_anchor=(1.01, 1.0))
            else:
                ax.legend(fontsize="x-small")
        if spec.get("title"):
            fig.suptitle(spec["title"])
        if log_fct:
            plotting.caption(fig, plotting.FCT_CAPTION)
        else:
            fig.tight_layout()
        path = out_dir / f"{spec['name']}.png"
        fig.savefig(path, dpi=plotting.DPI)
        plt.close(fig)
        files.append(path)
    return files


def _value(index: Mapping[tuple[str, float, str], SummaryRow], scheme: str, load: float,
           metric: str) -> tuple[float, float]:
    row = index.get((scheme, load, metric))
    if row is None:
        return math.nan, 0.0
    return row.mean, row.ci if math.isfinite(row.ci) else 0.0


def _cells(index: Any, scheme: str, loads: list[float], metric: str, np: Any
           ) -> tuple[Any, Any, Any, bool]:
    """Values, whiskers down and up of ``metric`` per sweep value (plots.interval), and
    whether an FCT's log-scale interval was among them."""
    from .plots import interval, is_fct

    fct = is_fct(metric)
    rows = [index.get((scheme, ld, metric)) for ld in loads]
    cells = [interval(r, fct) for r in rows]
    geo = fct and any(r is not None and math.isfinite(r.geo) for r in rows)
    return (np.array([c[0] for c in cells]), np.array([c[1] for c in cells]),
            np.array([c[2] for c in cells]), geo)


def _bar_panel(ax: Any, index: Any, panel: Mapping[str, Any], loads: list[float],
               schemes: Sequence[str], np: Any) -> bool:
    """Bars of the panel's one metric; whether an FCT's log-scale interval was drawn."""
    metric = panel["metrics"][0]
    present = [s for s in schemes if any(math.isfinite(_value(index, s, ld, metric)[0])
                                         for ld in loads)]
    width = 0.8 / max(1, len(present))
    x = np.arange(len(loads))
    log_fct = False
    for i, scheme in enumerate(present):
        if panel.get("range"):
            means = np.array([_value(index, scheme, ld, metric)[0] for ld in loads])
            low = np.array([_value(index, scheme, ld, panel["range"][0])[0] for ld in loads])
            high = np.array([_value(index, scheme, ld, panel["range"][1])[0] for ld in loads])
            err = np.vstack([np.clip(means - low, 0, None), np.clip(high - means, 0, None)])
            err = np.nan_to_num(err)
        else:
            means, down, up, geo = _cells(index, scheme, loads, metric, np)
            err = np.vstack([down, up])
            log_fct |= geo
        pos = x + (i - (len(present) - 1) / 2) * width
        color = f"C{list(schemes).index(scheme) % 10}"  # a scheme's colour in every panel
        ax.bar(pos, means, width, yerr=err, capsize=3, label=scheme, color=color)
        if panel.get("stack"):
            extra = np.nan_to_num([_value(index, scheme, ld, panel["stack"])[0]
                                   for ld in loads])
            if np.any(extra > 0):
                ax.bar(pos, extra, width, bottom=np.nan_to_num(means), hatch="//",
                       color=color, alpha=0.45,
                       label=f"{scheme} + {_label(panel['stack'])}")
    return log_fct


def _line_panel(ax: Any, index: Any, panel: Mapping[str, Any], loads: list[float],
                schemes: Sequence[str], np: Any) -> bool:
    """A line per scheme and metric; whether an FCT's log-scale interval was drawn."""
    x = np.arange(len(loads))
    markers = "os^vDP*X"
    styles = ["-", "--", ":", "-."]
    log_fct = False
    for i, scheme in enumerate(schemes):
        color = f"C{i % 10}"
        for j, metric in enumerate(panel["metrics"]):
            values, down, up, geo = _cells(index, scheme, loads, metric, np)
            if np.all(np.isnan(values)):
                continue
            log_fct |= geo
            # a whisker cut at zero has no end on a log axis: stop it just above
            down = np.minimum(down, np.nan_to_num(np.clip(values, 0, None)) * 0.999)
            ax.errorbar(x + (i - (len(schemes) - 1) / 2) * 0.06, values,
                        yerr=np.vstack([down, up]), color=color, capsize=2,
                        marker=markers[j % len(markers)], ls=styles[j % len(styles)],
                        label=f"{scheme} {metric.split('@')[0]}")
    return log_fct


# ---------------------------------------------------------------------------- tables


def rank_values(kind: str, flows: Sequence[Mapping[str, Any]],
                network: Sequence[Mapping[str, Any]]) -> dict[tuple[str, float, int],
                                                              list[float]]:
    """Per run (scheme, load, seed): the sorted values of ``kind``."""
    out: dict[tuple[str, float, int], list[float]] = defaultdict(list)
    if kind == "elephant_tput":
        for f in flows:
            if (f.get("class") == "elephant" and f.get("status") == OK
                    and f.get("measured", True) in (True, "True", "true", 1)
                    and _pos(f.get("fct")) and _pos(f.get("bytes"))):
                out[run_key(f)].append(float(f["bytes"]) * 8 / float(f["fct"]) / 1e6)
    elif kind == "edge_drops":
        for r in network:
            text = str(r.get("edge_drops_each") or "")
            if text:
                out[run_key(r)] = [float(v) for v in text.split(";") if v != ""]
    else:
        raise ValueError(f"unknown rank kind {kind!r}")
    return {k: sorted(v) for k, v in out.items()}


def _pos(v: Any) -> bool:
    try:
        return float(v) > 0
    except (TypeError, ValueError):
        return False


def render_tables(tables: Sequence[Mapping[str, Any]], flows: Sequence[Mapping[str, Any]],
                  network: Sequence[Mapping[str, Any]], out: Path, sweep: str,
                  schemes: Sequence[str]) -> tuple[str, list[Path]]:
    """The ``tables:`` text (for summary.txt) and their CSV files."""
    texts, files = [], []
    for spec in tables:
        values = {kind: rank_values(kind, flows, network) for kind in spec["ranks"]}
        loads = sorted({k[1] for v in values.values() for k in v})
        if not loads:
            continue
        columns = [(s, kind) for s in schemes for kind in spec["ranks"]
                   if any(k[0] == s for k in values[kind])]
        lines = [spec.get("title") or spec["name"],
                 "  (each run's values sorted, then averaged rank by rank over seeds; "
                 + "; ".join(f"{k}: {RANK_KINDS[k]}" for k in spec["ranks"]) + ")"]
        rows_csv = []
        for load in loads:
            per = {}
            for s, kind in columns:
                runs = [v for k, v in values[kind].items() if k[0] == s and k[1] == load]
                depth = max((len(v) for v in runs), default=0)
                per[(s, kind)] = [_mean([v[i] for v in runs if len(v) > i])
                                  for i in range(depth)]
            depth = max((len(v) for v in per.values()), default=0)
            header = [f"{sweep} {fmt(load)}", *(f"{s} {k}" for s, k in columns)]
            body = []
            for i in range(depth):
                name = ("largest" if i == depth - 1 and depth > 1
                        else RANK_NAMES[i] if i < len(RANK_NAMES) else f"#{i + 1}")
                cells = [f"{per[c][i]:.4g}" if i < len(per[c]) else "-" for c in columns]
                body.append([name, *cells])
                rows_csv += [{"load": load, "rank": i + 1, "scheme": s, "kind": k,
                              "value": per[(s, k)][i]} for s, k in columns
                             if i < len(per[(s, k)])]
            widths = [max(len(r[j]) for r in [header, *body]) for j in range(len(header))]
            lines += ["", "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
            lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True))
                      for r in body]
        texts.append("\n".join(lines) + "\n")
        path = out / f"{spec['name']}.csv"
        with open(path, "w", newline="") as fh:
            writer = csv.DictWriter(fh, ["load", "rank", "scheme", "kind", "value"])
            writer.writeheader()
            writer.writerows(rows_csv)
        files.append(path)
    return "\n".join(texts), files


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan
