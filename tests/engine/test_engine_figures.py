"""figures: an experiment file's ``plots:`` and ``tables:`` sections, validated up front
and rendered by report() from a tiny fake result directory (no network)."""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

import pytest
from figure_content import (
    assert_readable,
    bar_heights,
    bar_series,
    errorbar_series,
    intervals,
    panels,
    saved_figures,
)

from dcnlab.benchmarks.engine import netstats, report, switch_stats
from dcnlab.benchmarks.engine.figures import parse_plots, parse_tables, rank_values
from dcnlab.benchmarks.engine.results import FLOW_COLUMNS, CsvAppender, write_json
from dcnlab.benchmarks.engine.schema import SpecFileError

PLOTS = [{"name": "fig4", "title": "queue", "panels": [
    {"metrics": ["qout_busy_mean"], "range": ["qout_busy_p5", "qout_busy_p95"],
     "stack": "qin_busy_mean", "ylabel": "packets"},
    {"metrics": ["drops"]}, {"metrics": ["abq_held"]}]},
    {"name": "fig5", "panels": [{"metrics": ["fct_p1", "fct_p50", "fct_p99"], "log": True}]},
    {"name": "unmeasured", "panels": [{"metrics": ["tput_mbps@mouse"]}]}]
TABLES = [{"name": "table1", "title": "long flows", "ranks": ["elephant_tput", "edge_drops"]}]


def _write(path: Path, columns: list[str], rows: list[dict[str, Any]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)


def _results(out: Path) -> None:
    out.mkdir(parents=True)
    write_json(out / "meta.json", {
        "name": "fake", "status": "complete",
        "spec": {"baseline": "ecn", "sweep": "senders", "topology": "incast:4",
                 "workload_type": "incast", "schemes": [{"name": "ecn"}, {"name": "abq"}],
                 "plots": parse_plots(PLOTS), "tables": parse_tables(TABLES)}})
    flows, net, sw = [], [], []
    fid = 0
    for seed in (1, 2):
        for load in (2.0, 4.0):
            for scheme, q in (("ecn", 40.0), ("abq", 20.0)):
                for size, fct in ((32_000, 0.01), (32_000, 0.02), (30_000_000, 3.0),
                                  (30_000_000, 4.0)):
                    flows.append({"scheme": scheme, "load": load, "seed": seed,
                                  "flow_id": fid, "size": size, "kind": "tcp",
                                  "class": "elephant" if size > 10_000_000 else "rabbit",
                                  "fct": fct * (1.2 if scheme == "ecn" else 1.0),
                                  "bytes": size, "status": "ok", "measured": True,
                                  "sched": 0.0, "start": 0.0, "end": fct})
                    fid += 1
                net.append({"scheme": scheme, "load": load, "seed": seed,
                            "qout_busy_mean": q + seed, "qout_busy_p5": q / 4,
                            "qout_busy_p95": q * 2, "qin_busy_mean": 3 if scheme == "abq"
                            else "", "drops": 10 * load, "fct_p1": 0.01, "fct_p50": 0.015,
                            "fct_p99": 0.02, "edge_drops": 9 + seed,
                            "edge_drops_each": f"{seed};9"})
                sw.append({"scheme": scheme, "load": load, "seed": seed,
                           **({"abq_held": 100 * seed} if scheme == "abq" else {})})
    appender = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    appender.write(flows)
    appender.close()
    _write(out / netstats.NETWORK_CSV, netstats.COLUMNS, net)
    _write(out / switch_stats.SWITCH_CSV, switch_stats.COLUMNS, sw)


def test_report_draws_the_plots_and_rank_tables_the_file_asks_for(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "res"
    _results(out)
    figures = saved_figures(monkeypatch)
    result = report(out)
    names = {p.name for p in result.files}
    assert {"fig4.png", "fig5.png", "table1.csv"} <= names
    assert "unmeasured.png" not in names  # no metric of it has a value: no empty figure
    for name in {p.name for p in result.files if p.suffix == ".png"}:
        assert_readable(figures[name], name)
    # fig4: a panel per item, a bar per scheme that has the metric
    queue, drops, held = panels(figures["fig4.png"])
    assert figures["fig4.png"].get_suptitle() == "queue"
    assert [ax.get_ylabel() for ax in (queue, drops)] == ["packets", "drops"]
    assert all(ax.get_xlabel() == "senders" for ax in (queue, drops, held))
    assert [t.get_text() for t in queue.get_xticklabels()] == ["2", "4"]
    # ecn has no Q_in: only abq's bar carries the hatched part on top
    assert bar_series(queue) == ["ecn", "abq", "abq + busy Q_in mean"]
    # the range's p5..p95 as whiskers: abq's Q_out p5 5, p95 40 (ecn's: 10, 80)
    assert sorted(intervals(queue))[0] == (pytest.approx(5.0), pytest.approx(40.0))
    assert bar_series(drops) == ["ecn", "abq"]
    assert bar_heights(drops, "ecn") == [pytest.approx(20.0), pytest.approx(40.0)]
    assert bar_series(held) == ["abq"]  # only abq's switches report it
    # fig5: lines, a scheme per colour and a metric per style, log y
    (fct,) = panels(figures["fig5.png"])
    assert fct.get_yscale() == "log"
    assert errorbar_series(fct) == [f"{s} fct_{p}" for s in ("ecn", "abq")
                                    for p in ("p1", "p50", "p99")]
    # Table 1's shape: ranks smallest..largest, a column per (scheme, kind)
    assert "long flows" in result.table
    block = result.table[result.table.index("long flows"):]
    lines = block.splitlines()
    head = next(ln for ln in lines if ln.strip().startswith("senders 2"))
    assert "ecn elephant_tput" in head and "abq edge_drops" in head
    smallest = next(ln for ln in lines if ln.strip().startswith("smallest")).split()
    # abq's slower long flow: 30 MB in 4 s = 60 Mbit/s; edge drops ranked: mean(1, 2), 9
    assert smallest[1:] == ["50", "1.5", "60", "1.5"]
    largest = next(ln for ln in lines if ln.strip().startswith("largest")).split()
    assert largest[1:] == ["66.67", "9", "80", "9"]
    # re-rendering is idempotent
    assert report(out).table == result.table


def test_an_fct_panel_of_three_spread_seeds_stays_above_zero_and_empty_panels_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bar panel of an FCT metric: the geometric mean over seeds and the interval of the
    logs (the arithmetic interval of 10, 10 and 100 ms reaches -89 ms); a panel whose
    metric nobody measured (no elephants here) is left out of the figure."""
    plots = parse_plots([{"name": "fct", "panels": [
        {"metrics": ["fct_mean@mouse"]}, {"metrics": ["fct_mean@elephant"]}]}])
    out = tmp_path / "res"
    out.mkdir()
    write_json(out / "meta.json", {"name": "spread", "status": "complete", "spec": {
        "baseline": "ecn", "sweep": "senders", "topology": "incast:4",
        "workload_type": "incast", "schemes": [{"name": "ecn"}], "plots": plots}})
    appender = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    appender.write([{"scheme": "ecn", "load": 2.0, "seed": seed, "flow_id": seed,
                     "size": 5_000, "kind": "tcp", "class": "mouse", "fct": fct,
                     "bytes": 5_000, "status": "ok", "measured": True, "sched": 0.0}
                    for seed, fct in ((1, 0.010), (2, 0.010), (3, 0.100))])
    appender.close()
    figures = saved_figures(monkeypatch)
    report(out)
    fig = figures["fct.png"]
    (ax,) = panels(fig)
    assert bar_series(ax) == ["ecn"] and ax.get_ylabel() == "fct_mean (mouse flows)"
    # By hand, in log10(s): the values -2, -2, -1 have mean -5/3 and standard deviation
    # sqrt(1/3), so the interval is 10^(-5/3 +- t / 3) s with t = t(0.975, 2)
    # = 0.95 sqrt(2 / (1 - 0.95^2)) = 4.3027 (the closed-form CDF of Student's t with 2
    # degrees of freedom: F(t) = 1/2 + t / (2 sqrt(2 + t^2))).
    t = 0.95 * (2 / (1 - 0.95 ** 2)) ** 0.5
    assert bar_heights(ax, "ecn") == [pytest.approx(10 ** (-5 / 3))]
    (whisker,) = intervals(ax)
    assert whisker == (pytest.approx(10 ** ((-5 - t) / 3)), pytest.approx(10 ** ((-5 + t) / 3)))
    assert whisker[0] > 0
    assert any("log FCT" in text.get_text() for text in fig.texts)  # the caption says so


def test_network_fct_panels_draw_the_log_interval_of_spread_seeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """FCT percentiles from network.csv (netstats.summarize: seed 002's fig5a/b) get the
    geometric mean over seeds and the interval of the logs, as flows.csv's FCTs do: a
    bar panel and a line panel of three seeds spread over a decade; a metric that is no
    FCT (drops) keeps the arithmetic interval cut at zero."""
    from dcnlab.benchmarks.engine.figures import render_plots
    from dcnlab.benchmarks.engine.plots import FCT_CAPTION

    rows = [{"scheme": "ecn", "load": 2.0, "seed": seed, "fct_p1": 0.001 * k,
             "fct_p50": 0.01 * k, "fct_p99": 0.1 * k, "drops": 30 * (k == 10)}
            for seed, k in ((1, 1), (2, 1), (3, 10))]
    summary = netstats.summarize(rows, "ecn")
    by = {r.metric: r for r in summary}
    assert by["fct_p99"].geo == pytest.approx(10 ** (-2 / 3))
    assert all(math.isnan(v) for v in (by["drops"].geo, by["drops"].geo_low))
    plots = parse_plots([{"name": "fig5", "panels": [
        {"metrics": ["fct_p99"], "log": True},
        {"metrics": ["fct_p1", "fct_p50", "fct_p99"], "log": True},
        {"metrics": ["drops"]}]}])
    figures = saved_figures(monkeypatch)
    render_plots(plots, summary, tmp_path, "senders", ["ecn"])
    fig = figures["fig5.png"]
    bar, lines, drops = panels(fig)
    # By hand, in log10(s): fct_p99's -1, -1, 0 have mean -2/3 and standard deviation
    # sqrt(1/3) (deviations -1/3, -1/3, 2/3), so the 95% interval is
    # 10^(-2/3 +- t sqrt(1/3) / sqrt(3)) = 10^((-2 +- t) / 3) s, t = t(0.975, 2)
    # = 0.95 sqrt(2 / (1 - 0.95^2)) = 4.3027 (the closed-form CDF of Student's t with 2
    # degrees of freedom, F(t) = 1/2 + t / (2 sqrt(2 + t^2))); p50 and p1 are the same
    # one and two decades down.  (The arithmetic interval of p99, 0.4 +- 1.29 s, was cut
    # at 0.)
    t = 0.95 * (2 / (1 - 0.95 ** 2)) ** 0.5

    def log_interval(top: int) -> tuple[float, float]:
        return (pytest.approx(10 ** ((top - t) / 3)), pytest.approx(10 ** ((top + t) / 3)))

    assert intervals(bar) == [log_interval(-2)]
    assert bar_heights(bar, "ecn") == [pytest.approx(10 ** (-2 / 3))]
    assert errorbar_series(lines) == ["ecn fct_p1", "ecn fct_p50", "ecn fct_p99"]
    assert intervals(lines) == [log_interval(-8), log_interval(-5), log_interval(-2)]
    # drops 0, 0, 30: mean 10, standard deviation sqrt((100 + 100 + 400) / 2) = sqrt(300),
    # half-width t sqrt(300) / sqrt(3) = 10 t; cut at zero below
    assert intervals(drops) == [(pytest.approx(0.0), pytest.approx(10 + 10 * t))]
    assert FCT_CAPTION in [text.get_text() for text in fig.texts]


def test_rank_values_per_run() -> None:
    flows = [{"scheme": "a", "load": 1, "seed": 1, "class": "elephant", "status": "ok",
              "measured": True, "fct": 2.0, "bytes": 1_000_000},
             {"scheme": "a", "load": 1, "seed": 1, "class": "elephant", "status": "timeout",
              "measured": True, "fct": None, "bytes": 10},
             {"scheme": "a", "load": 1, "seed": 1, "class": "mouse", "status": "ok",
              "measured": True, "fct": 0.1, "bytes": 1000}]
    assert rank_values("elephant_tput", flows, []) == {("a", 1.0, 1): [4.0]}
    net = [{"scheme": "a", "load": 1, "seed": 2, "edge_drops_each": "3;1;2"}]
    assert rank_values("edge_drops", [], net) == {("a", 1.0, 2): [1.0, 2.0, 3.0]}


@pytest.mark.parametrize(("plots", "tables", "where", "message"), [
    ([{"name": "a", "panels": [{"metrics": ["qout_mean_x"]}]}], None,
     "plots[0].panels[0].metrics[0]", "did you mean qout_mean"),
    ([{"name": "a/b", "panels": [{"metrics": ["drops"]}]}], None, "plots[0].name", "file"),
    ([{"name": "a", "panels": []}], None, "plots[0].panels", "at least one"),
    ([{"name": "a", "panels": [{"metrics": ["drops", "rtos"], "stack": "rtos"}]}], None,
     "plots[0].panels[0]", "single metric"),
    ([{"name": "a", "panels": [{"metrics": ["drops"], "range": ["rtos"]}]}], None,
     "plots[0].panels[0].range", "[low, high]"),
    (None, [{"name": "t", "ranks": ["median_drops"]}], "tables[0].ranks[0]", "unknown rank"),
    (None, [{"name": "t", "ranks": ["edge_drops"]}, {"name": "t", "ranks": ["edge_drops"]}],
     "tables[1].name", "twice"),
])
def test_bad_sections_name_the_field(plots: Any, tables: Any, where: str, message: str
                                     ) -> None:
    with pytest.raises(SpecFileError) as info:
        parse_plots(plots)
        parse_tables(tables)
    assert info.value.field == where and message in str(info.value)
