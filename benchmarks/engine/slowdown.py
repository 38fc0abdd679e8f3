"""FCT slowdown: each flow's completion time over the time it would take alone on the
fabric, in flow-size bins, per run and across seeds (the load-balancing papers' figure).

Ideal FCT of a flow of ``size`` bytes from ``src`` to ``dst``, from the topology alone
(:func:`ideal_fct`), on the best of the shortest paths between them (fewest links; on
every symmetric family all of them are alike):

- ``rtt0``: the path's base RTT, every link's one-way delay twice plus a header-only frame
  (66 bytes: Ethernet, IPv4, TCP with timestamps) serialized on it in each direction;
- ``transfer``: the flow's frames (``ceil(size / 1448)`` segments of at most 1448 payload
  bytes, 66 bytes of headers each) at the path's bottleneck rate, plus the first frame's
  serialization on every other link of the path (store and forward: at 10 Mbit/s a
  1514-byte frame takes 1.2 ms per link, which is most of a mouse's time);
- ``ideal = 2 * rtt0 + transfer``: dcnlab's FCT runs from connect() to the receiver's
  answer after the last byte (agent.py), so it spans the handshake and one more round
  trip; the papers' ``size / rate + base RTT`` counts one RTT for an FCT measured from the
  first byte sent.  An unloaded flow's slowdown is therefore about 1 here too.

Unshaped links (no ``rate``) serialize in no time; a path without rate or delay has no
ideal and its flows no slowdown.  Host interfaces beyond the first are ignored (a path
is one path; an MPTCP flow over two can come out below 1).

Per run, over measured (inside the warm-up/cool-down window), completed TCP flows of a
size: ``slowdown = fct / ideal``; per size bin (``DEFAULT_EDGES``: below 100 KB, 100 KB
to 10 MB, above 10 MB, sizes in SI bytes) its mean, p50 and p99 (linear-interpolated
percentiles) and the flow count.  Across seeds as every summary metric (metrics.py):
mean and 95% interval, the geometric mean of per-seed ratios to the baseline with its
interval, and the geometric mean with its log-scale interval for the figures.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from dcnlab.model.topology import LinkSpec, TopologySpec

from .flowdiag import Link
from .flowdiag import shortest_paths as shortest_fabric_paths
from .metrics import OK, SummaryRow, mean, percentile, run_key, summarize_runs
from .sections import ReportContext, RunContext, register
from .table import aligned, baseline_first, cell, fmt

MSS = 1448  # TCP payload per segment: 1500-byte MTU less IPv4, TCP and timestamp option
HEADERS = 66  # Ethernet 14 + IPv4 20 + TCP 20 + timestamps 12 bytes per segment
DEFAULT_EDGES = (100_000, 10_000_000)  # bin edges in bytes: <100 KB, 100 KB-10 MB, >10 MB
STATS = ("slowdown_mean", "slowdown_p50", "slowdown_p99")
COUNT = "slowdown_flows"


@dataclass(frozen=True)
class Hop:
    rate_bps: float  # math.inf: unshaped
    delay_s: float  # one way


def si_bytes(n: int) -> str:
    """100000 -> '100KB', 10000000 -> '10MB' (SI units, as sizes are written in papers)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


def bin_labels(edges: Sequence[int] = DEFAULT_EDGES) -> list[str]:
    """``0-100KB``, ``100KB-10MB``, ``10MB+`` for the default edges."""
    bounds = [0, *edges]
    labels = [f"{si_bytes(lo) if lo else '0'}-{si_bytes(hi)}"
              for lo, hi in zip(bounds, bounds[1:], strict=False)]
    return [*labels, f"{si_bytes(bounds[-1])}+"]


def size_bin(size: int, edges: Sequence[int] = DEFAULT_EDGES,
             labels: Sequence[str] | None = None) -> str:
    """The label of the bin ``size`` falls in: below an edge, or from it on (``labels``:
    bin_labels(edges), when the caller has them)."""
    labels = labels if labels is not None else bin_labels(edges)
    for edge, label in zip(edges, labels, strict=False):
        if size < edge:
            return label
    return labels[-1]


def check_edges(edges: Sequence[Any]) -> tuple[int, ...]:
    """Bin edges as given in an experiment file: positive, increasing byte counts."""
    out = tuple(int(e) for e in edges)
    if not out or any(e <= 0 for e in out) or list(out) != sorted(set(out)):
        raise ValueError(f"slowdown bins {list(edges)}: expected increasing positive sizes "
                         "in bytes, e.g. [100000, 10000000]")
    return out


def _hop(link: LinkSpec) -> Hop:
    p = link.params
    rate = p.rate_mbit * 1e6 if p.rate_mbit else math.inf
    return Hop(rate, p.delay_us / 1e6)


def _fabric(spec: TopologySpec) -> tuple[list[Link], dict[tuple[str, int], LinkSpec]]:
    """The switch-to-switch links in both directions, and every link by either end."""
    by_end: dict[tuple[str, int], LinkSpec] = {}
    fabric: list[Link] = []
    for lk in spec.links:
        by_end[(lk.a, lk.a_port)] = by_end[(lk.b, lk.b_port)] = lk
        if spec.is_switch(lk.a) and spec.is_switch(lk.b):
            fabric += [Link(lk.a, lk.a_port, lk.b, lk.b_port),
                       Link(lk.b, lk.b_port, lk.a, lk.a_port)]
    return fabric, by_end


def _host_paths(spec: TopologySpec, fabric: list[Link],
                by_end: Mapping[tuple[str, int], LinkSpec], src: str, dst: str
                ) -> list[list[Hop]]:
    """Every path of fewest links from host ``src`` to host ``dst``: an access link of
    each, and between their switches the fabric's shortest paths (flowdiag's); a path
    never crosses another host."""
    def access(host: str) -> list[tuple[str, LinkSpec]]:
        return [(lk.b if lk.a == host else lk.a, lk) for lk in spec.links
                if host in (lk.a, lk.b)]
    paths: list[list[Hop]] = []
    for sa, first in access(src):
        for sb, last in access(dst):
            middles = [()] if sa == sb else shortest_fabric_paths(fabric, sa, sb)
            paths += [[_hop(first), *(_hop(by_end[(k.src, k.src_port)]) for k in m),
                       _hop(last)] for m in middles]
    fewest = min((len(p) for p in paths), default=0)
    return [p for p in paths if len(p) == fewest]


def shortest_paths(spec: TopologySpec, src: str, dst: str) -> list[list[Hop]]:
    """Every path of fewest links from host ``src`` to host ``dst``, each as its links
    in order."""
    return _host_paths(spec, *_fabric(spec), src, dst)


def _serialize(nbytes: float, rate_bps: float) -> float:
    return nbytes * 8 / rate_bps if math.isfinite(rate_bps) else 0.0


def path_ideal(hops: Sequence[Hop], size: int) -> float:
    """The ideal FCT of ``size`` bytes alone on ``hops`` (module docstring)."""
    rtt0 = sum(2 * h.delay_s + 2 * _serialize(HEADERS, h.rate_bps) for h in hops)
    segments = max(1, math.ceil(size / MSS))
    wire = size + segments * HEADERS
    first = min(size, MSS) + HEADERS
    slowest = min(range(len(hops)), key=lambda i: hops[i].rate_bps)
    transfer = _serialize(wire, hops[slowest].rate_bps) + sum(
        _serialize(first, h.rate_bps) for i, h in enumerate(hops) if i != slowest)
    return 2 * rtt0 + transfer


class IdealFct:
    """Ideal FCTs on one topology, the host pairs' shortest paths computed once each."""

    def __init__(self, spec: TopologySpec) -> None:
        fabric, by_end = _fabric(spec)
        self._paths = lru_cache(maxsize=None)(
            lambda s, d: _host_paths(spec, fabric, by_end, s, d))

    def __call__(self, src: str, dst: str, size: int) -> float | None:
        """The best ideal over the pair's shortest paths; None without a path, or when
        the path has neither rate nor delay (nothing to compare with)."""
        ideals = [path_ideal(p, size) for p in self._paths(src, dst) if p]
        best = min(ideals, default=0.0)
        return best if best > 0 else None


def ideal_fct(spec: TopologySpec, src: str, dst: str, size: int) -> float | None:
    return IdealFct(spec)(src, dst, size)


def _counted(row: Mapping[str, Any]) -> bool:
    return (bool(row.get("measured", True)) and row.get("status") == OK
            and row.get("kind", "tcp") == "tcp" and bool(row.get("size"))
            and row.get("fct") not in (None, ""))


def flow_slowdowns(rows: Iterable[Mapping[str, Any]], ideal: IdealFct,
                   edges: Sequence[int] = DEFAULT_EDGES
                   ) -> dict[tuple[str, float, int], dict[str, list[float]]]:
    """Each run's slowdowns by size bin: {(scheme, load, seed): {bin: [fct / ideal]}}; a
    run appears once it has a counted flow or any row at all (its bins may be empty)."""
    labels = bin_labels(edges)
    runs: dict[tuple[str, float, int], dict[str, list[float]]] = {}
    for row in rows:
        key = run_key(row)
        if key not in runs:
            runs[key] = {label: [] for label in labels}
        if not _counted(row) or not row.get("src") or not row.get("dst"):
            continue
        size = int(float(row["size"]))
        best = ideal(str(row["src"]), str(row["dst"]), size)
        if best is not None:
            runs[key][size_bin(size, edges, labels)].append(float(row["fct"]) / best)
    return runs


def run_metrics(bins: Mapping[str, Sequence[float]]) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for label, values in bins.items():
        out[(COUNT, label)] = float(len(values))
        out[("slowdown_mean", label)] = mean(values)
        out[("slowdown_p50", label)] = percentile(values, 50)
        out[("slowdown_p99", label)] = percentile(values, 99)
    return out


def summarize(rows: Iterable[Mapping[str, Any]], spec: TopologySpec, baseline: str | None,
              edges: Sequence[int] = DEFAULT_EDGES) -> list[SummaryRow]:
    """Summary rows (metric ``slowdown_mean/p50/p99`` or ``slowdown_flows``, class = the
    bin's label) per scheme and sweep value; nothing when no flow has a slowdown."""
    per_run = {key: run_metrics(bins)
               for key, bins in flow_slowdowns(rows, IdealFct(spec), edges).items()}
    if not any(v for m in per_run.values() for (metric, _), v in m.items() if metric == COUNT):
        return []
    return summarize_runs(per_run, baseline, counts=(COUNT,))


def render(summary: Sequence[SummaryRow], schemes: Sequence[str], baseline: str | None,
           sweep: str = "load") -> str:
    """The slowdown section of summary.txt: per sweep value, a block of bins x stats."""
    if not summary:
        return ""
    index = {(r.scheme, r.load, r.metric, r.cls): r for r in summary}
    labels = list(dict.fromkeys(r.cls for r in summary))
    order = baseline_first([s for s in schemes if any(r.scheme == s for r in summary)],
                           baseline)
    lines = ["FCT slowdown: FCT / ideal FCT alone on the path (2 base RTTs + the flow's "
             "frames at the bottleneck rate + one frame per other link); by flow size"]
    for load in sorted({r.load for r in summary}):
        body = []
        for label in labels:
            for metric in (COUNT, *STATS):
                rows = [index.get((s, load, metric, label)) for s in order]
                if not any(r is not None and math.isfinite(r.mean) and r.mean > 0
                           for r in rows):
                    continue
                name = "flows / run" if metric == COUNT else metric.removeprefix("slowdown_")
                body.append([f"{label} {name}",
                             *(cell(r, 1.0, baseline) if r is not None else "-"
                               for r in rows)])
        if body:
            lines += ["", *aligned([f"{sweep} = {fmt(load)}", *order], body)]
    return "\n".join(lines) + "\n"


def plots(summary: Sequence[SummaryRow], out_dir: Path, sweep: str,
          schemes: Sequence[str]) -> list[Path]:
    """``slowdown_mean.png`` and ``slowdown_p99.png``: the statistic against the sweep
    value, a panel per size bin, a line per scheme (geometric mean over seeds, 95%
    log-scale interval), on a log axis; n = the flows counted in all of a series' runs."""
    if not summary:
        return []
    from .plots import caption, interval, plt, save_figure  # matplotlib only when drawing

    loads = sorted({r.load for r in summary})
    index = {(r.scheme, r.load, r.metric, r.cls): r for r in summary}
    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for metric in ("slowdown_mean", "slowdown_p99"):
        labels = list(dict.fromkeys(r.cls for r in summary if r.metric == metric
                                    and math.isfinite(r.geo)))
        if not labels:
            continue
        stat = metric.removeprefix("slowdown_")
        fig, axes = plt.subplots(1, len(labels), figsize=(4.2 * len(labels), 3.9),
                                 squeeze=False)
        for ax, label in zip(axes[0], labels, strict=True):
            for i, scheme in enumerate(schemes):
                cells = [interval(index.get((scheme, ld, metric, label)), True)
                         for ld in loads]
                if all(not math.isfinite(c[0]) for c in cells):
                    continue
                counts = [index.get((scheme, ld, COUNT, label)) for ld in loads]
                n = sum(c.mean * c.seeds for c in counts
                        if c is not None and math.isfinite(c.mean))
                ax.errorbar([ld + (i - (len(schemes) - 1) / 2) * 0.004 for ld in loads],
                            [c[0] for c in cells],
                            yerr=[[c[1] for c in cells], [c[2] for c in cells]],
                            marker="os^vDP*X"[i % 8], capsize=3, color=f"C{i % 10}",
                            label=f"{scheme} (n={n:.0f} flows)")
            ax.set_yscale("log")
            ax.set_xlabel(sweep)
            ax.set_ylabel(f"FCT slowdown, {stat} (log scale)")
            ax.set_title(f"flows of {label}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize="small")
        fig.suptitle(f"FCT slowdown ({stat}) against {sweep}, by flow size")
        caption(fig, "slowdown = FCT / ideal FCT alone on the path; points: geometric "
                "mean over seeds of each run's value, whiskers: 95% interval of its log "
                "across seeds; n: flows counted in all the series' runs")
        files.append(save_figure(fig, out_dir / f"{metric}.png"))
    return files


def cdf_plots(rows: Sequence[Mapping[str, Any]], spec: TopologySpec, out_dir: Path,
              sweep: str, schemes: Sequence[str], edges: Sequence[int] = DEFAULT_EDGES
              ) -> list[Path]:
    """``slowdown_cdf_<sweep><value>.png``: per sweep value, the CDF of the flows'
    slowdowns pooled over seeds, a panel per size bin, a line per scheme (log x)."""
    runs = flow_slowdowns(rows, IdealFct(spec), edges)
    labels = bin_labels(edges)
    pooled: dict[float, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list)))
    for (scheme, load, _seed), bins in runs.items():
        for label, values in bins.items():
            pooled[load][scheme][label] += values
    if not any(v for per in pooled.values() for b in per.values() for v in b.values()):
        return []
    from .plots import caption, plt, save_figure  # matplotlib only when drawing

    out_dir.mkdir(parents=True, exist_ok=True)
    files = []
    for load, per_scheme in sorted(pooled.items()):
        shown = [lb for lb in labels if any(per_scheme[s][lb] for s in per_scheme)]
        if not shown:
            continue
        fig, axes = plt.subplots(1, len(shown), figsize=(4.2 * len(shown), 3.9),
                                 squeeze=False)
        for ax, label in zip(axes[0], shown, strict=True):
            for i, scheme in enumerate(schemes):
                values = sorted(per_scheme.get(scheme, {}).get(label, []))
                if not values:
                    continue
                ax.step(values, [(k + 1) / len(values) for k in range(len(values))],
                        where="post", color=f"C{i % 10}", label=f"{scheme} (n={len(values)})")
            ax.set_xscale("log")
            ax.set_xlabel("FCT slowdown (log scale)")
            ax.set_ylabel("CDF")
            ax.set_ylim(0, 1.02)
            ax.set_title(f"flows of {label}")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(loc="lower right", fontsize="small")
        fig.suptitle(f"FCT slowdown CDF, {sweep} = {fmt(load)}")
        caption(fig, "slowdown = FCT / ideal FCT alone on the path; every measured, "
                "completed TCP flow of the runs at this value, seeds pooled")
        files.append(save_figure(fig, out_dir / f"slowdown_cdf_{sweep}{fmt(load)}.png"))
    return files


class SlowdownSection:
    """The report's FCT slowdown section, from flows.csv and the topology alone."""

    name = "slowdown"
    csv = None
    columns: tuple[str, ...] = ()

    def wanted(self, spec: Any) -> bool:
        return False

    def run_rows(self, ctx: RunContext) -> list[dict[str, Any]]:
        return []

    def summary(self, ctx: ReportContext) -> list[SummaryRow]:
        if ctx.topology is None:
            return []
        return summarize(ctx.flows, ctx.topology, ctx.baseline, _edges(ctx))

    def text(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> str:
        return render(summary, ctx.schemes, ctx.baseline, ctx.sweep)

    def plots(self, ctx: ReportContext, summary: Sequence[SummaryRow]) -> list[Path]:
        files = plots(summary, ctx.plots_dir, ctx.sweep, ctx.schemes)
        if summary and ctx.topology is not None:
            files += cdf_plots(ctx.flows, ctx.topology, ctx.plots_dir, ctx.sweep,
                               ctx.schemes, _edges(ctx))
        return files


def _edges(ctx: ReportContext) -> tuple[int, ...]:
    return tuple(ctx.spec.get("slowdown_bins") or DEFAULT_EDGES)


register(SlowdownSection())
