"""``report(out_dir)``: summary table and plots from saved data, without rerunning."""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dcnlab.model.topology import TopologySpec
from dcnlab.topo.spec import SpecError, parse

from . import (
    controller_stats,
    fairness,
    figures,
    flowdiag,
    netstats,
    paired,
    pathdiag,
    plots,
    queueseries,
    sections,
    sizes,
    switch_stats,
)
from .metrics import SummaryRow, summarize
from .results import (
    FLOWS_CSV,
    META_JSON,
    SUMMARY_COLUMNS,
    ResultsError,
    extra_columns,
    read_flows,
    read_json,
    write_csv,
)
from .table import render

SUMMARY_CSV = "summary.csv"
SUMMARY_TXT = "summary.txt"
PLOTS_DIR = "plots"


@dataclass
class ReportResult:
    table: str  # the summary table (also in summary.txt)
    files: list[Path] = field(default_factory=list)  # summary.csv, summary.txt, plots


def report(out_dir: str | os.PathLike[str]) -> ReportResult:
    """Re-render summary.csv, summary.txt and plots/ from flows.csv and meta.json.

    A directory of scenarios (OUT/<scenario>/meta.json) is rendered scenario by scenario.
    """
    out = Path(out_dir)
    if not out.is_dir():
        raise ResultsError(f"{out} is not a directory")
    if not (out / META_JSON).exists():
        parts = sorted(p.parent for p in out.glob(f"*/{META_JSON}"))
        if not parts:
            raise ResultsError(f"{out} holds no {META_JSON}: not a results directory")
        rendered = [(p.name, _report_one(p)) for p in parts]
        return ReportResult("\n".join(f"== scenario {name} ==\n{r.table}"
                                       for name, r in rendered),
                            [f for _name, r in rendered for f in r.files])
    return _report_one(out)


def _report_one(out: Path) -> ReportResult:
    meta = read_json(out / META_JSON)
    rows = read_flows(out / FLOWS_CSV)
    spec = meta.get("spec", {})
    baseline = spec.get("baseline")
    sweep = spec.get("sweep", "load")
    scheme_order = [s["name"] for s in spec.get("schemes", [])]
    seen = list(dict.fromkeys(str(r["scheme"]) for r in rows))
    schemes = [s for s in scheme_order if s in seen] + [s for s in seen if s not in scheme_order]
    if baseline not in seen:
        baseline = None  # e.g. the experiment stopped before the baseline ran
    extra = extra_columns(rows)
    summary = summarize(rows, baseline, extra)
    fair_rows, fair_summary, fair_text = _fairness_section(out, schemes, baseline, sweep)
    net_rows = netstats.refresh_flow_columns(netstats.read_rows(out / netstats.NETWORK_CSV),
                                             rows)
    net_summary = netstats.summarize(net_rows, baseline)
    switch_summary = switch_stats.summarize(_read_csv(out / switch_stats.SWITCH_CSV))
    path_summary = pathdiag.summarize(_read_csv(out / pathdiag.PATHS_CSV), baseline)
    flow_rows = _read_csv(out / flowdiag.FLOWDIAG_CSV)
    flow_summary = flowdiag.summarize(flow_rows, baseline)
    per_flow = paired.summarize(rows, baseline)
    ctx = sections.ReportContext(out, spec, rows, baseline, sweep, schemes,
                                 _topology(spec.get("topology")), out / PLOTS_DIR)
    by_section = [(sec, sec.summary(ctx)) for sec in sections.registered()]
    if per_flow:
        write_csv(out / paired.PAIRED_CSV, list(paired.COLUMNS),
                  (r.as_dict() for r in per_flow))
    others = [b for b in spec.get("other_baselines") or [] if b in seen and b != baseline]
    also = {b: summarize(rows, b, extra) for b in others}
    write_csv(out / SUMMARY_CSV, SUMMARY_COLUMNS, [
        *({**r.as_dict(), "baseline": baseline or ""}
          for r in [*summary, *fair_summary, *net_summary, *switch_summary, *path_summary,
                    *flow_summary, *(r for _sec, rs in by_section for r in rs)]),
        *({**r.as_dict(), "baseline": b} for b, rows_b in also.items() for r in rows_b)])
    name = meta.get("name", out.name)
    if meta.get("scenario"):
        name += f" / {meta['scenario']}"
    title = f"{name}: {spec.get('topology', '')}, {spec.get('workload_type', '')} workload"
    if meta.get("status") not in (None, "complete"):
        title += f"  [status: {meta.get('status')}]"
    table = render(summary, baseline, sweep, title)
    paired_text = paired.render(per_flow, sweep)
    if paired_text:
        table += "\n" + paired_text
    for b, rows_b in also.items():
        table += "\n" + render(rows_b, b, sweep, f"{title}; ratios to {b}")
    controller = _controller_table(out, schemes, sweep)
    if controller:
        table += "\n" + controller
    if fair_text:
        table += "\n" + fair_text
    net_text = netstats.render(net_summary, schemes, baseline, sweep)
    if net_text:
        table += "\n" + net_text
    switch_text = switch_stats.render(switch_summary, schemes, sweep)
    if switch_text:
        table += "\n" + switch_text
    ranks, rank_files = figures.render_tables(spec.get("tables") or [], rows, net_rows, out,
                                              sweep, schemes)
    if ranks:
        table += "\n" + ranks
    size_stats = sizes.flow_stats(rows, schemes, baseline, extra) \
        if sweep == sizes.SWEEP else []
    if size_stats:
        table += "\n" + sizes.render(size_stats, baseline)
    path_text = pathdiag.render(path_summary, schemes, sweep)
    if path_text:
        table += "\n" + path_text
    flow_text = flowdiag.render(flow_summary, schemes, baseline, sweep, flow_rows)
    if flow_text:
        table += "\n" + flow_text
    for sec, sec_summary in by_section:
        text = sec.text(ctx, sec_summary)
        if text:
            table += "\n" + text
    (out / SUMMARY_TXT).write_text(table)
    files = [out / SUMMARY_CSV, out / SUMMARY_TXT, *rank_files]
    if per_flow:
        files.append(out / paired.PAIRED_CSV)
    files += plots.render_all(rows, summary, out / PLOTS_DIR, sweep, schemes)
    files += figures.render_plots(spec.get("plots") or [],
                                  [*summary, *net_summary, *switch_summary],
                                  out / PLOTS_DIR, sweep, schemes)
    if size_stats:
        files.append(sizes.write(out, size_stats))
        files += sizes.plots(size_stats, out / PLOTS_DIR, schemes, baseline)
    if pathdiag.some_run_reorders(rows):  # else every point sits at x = 0: nothing to show
        files += pathdiag.plot(rows, out / PLOTS_DIR, sweep, schemes)
    if fair_rows:
        files += plots.fairness_plots(_read_csv(out / fairness.SERIES_CSV), fair_summary,
                                      out / PLOTS_DIR, sweep, schemes)
    for sec, sec_summary in by_section:
        files += sec.plots(ctx, sec_summary)
    queue_rows = _read_csv(out / queueseries.QUEUE_CSV)
    if queue_rows:
        files += queueseries.plot(queue_rows, out / PLOTS_DIR, sweep, schemes)
    return ReportResult(table, files)


def _topology(text: Any) -> TopologySpec | None:
    """The experiment's topology, for the ideal FCTs; None if meta.json has none (results
    from before it was recorded) or it no longer parses (a family since renamed)."""
    if not text:
        return None
    try:
        return parse(str(text))
    except SpecError:
        return None


def _read_csv(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _fairness_section(out: Path, schemes: list[str], baseline: str | None, sweep: str
                      ) -> tuple[list[dict[str, str]], list[SummaryRow], str]:
    """fairness.csv's rows, their summary rows (for summary.csv) and the text section;
    nothing when the experiment recorded no receiver throughput."""
    rows = _read_csv(out / fairness.FAIRNESS_CSV)
    if not rows:
        return [], [], ""
    summary = fairness.summarize(rows, baseline)
    return rows, summary, fairness.render(rows, summary, schemes, baseline, sweep)


def _controller_table(out: Path, schemes: list[str], sweep: str) -> str:
    """The controller section (per-flow entries, exploration overhead), if recorded."""
    rows = _read_csv(out / controller_stats.CONTROLLER_CSV)
    if not rows:
        return ""  # results from before controller.csv existed
    return controller_stats.render(rows, [s for s in schemes
                                          if any(r["scheme"] == s for r in rows)], sweep)
