"""report() re-renders table and plots from saved data alone; the progress bar."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from figure_content import (
    assert_readable,
    bar_heights,
    bar_series,
    errorbar_series,
    intervals,
    line_series,
    panels,
    saved_figures,
    scatter_points,
)

from dcnlab.benchmarks.engine import ResultsError, report
from dcnlab.benchmarks.engine.plots import FCT_CAPTION, FCT_YLABEL
from dcnlab.benchmarks.engine.progress import Progress
from dcnlab.benchmarks.engine.results import FLOW_COLUMNS, CsvAppender, read_flows, write_json


def _results_dir(out: Path, scenario: str | None = None) -> None:
    out.mkdir(parents=True)
    write_json(out / "meta.json", {
        "name": "demo", "scenario": scenario, "status": "complete",
        "spec": {"baseline": "ecmp", "sweep": "load", "topology": "fattree:4",
                 "workload_type": "poisson",
                 "schemes": [{"name": "ecmp"}, {"name": "single"}]}})
    appender = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    rows = []
    fid = 0
    for seed in (1, 2):
        for load in (0.2, 0.4):
            for scheme, slow in (("ecmp", 1.0), ("single", 1.5)):
                for size, fct in ((5_000, 0.01), (300_000, 0.3), (20_000_000, 12.0)):
                    rows.append({"scheme": scheme, "load": load, "seed": seed,
                                 "flow_id": fid, "size": size, "kind": "tcp",
                                 "class": ("mouse" if size < 10_000 else "elephant"
                                           if size > 10_000_000 else "rabbit"),
                                 "fct": fct * slow * (1 + load) * (1 + 0.1 * seed),
                                 "bytes": size, "ooo": 1, "segs_in": 100, "status": "ok",
                                 "measured": True, "sched": 0.0})
                    fid += 1
                rows.append({"scheme": scheme, "load": load, "seed": seed, "flow_id": fid,
                             "size": 50_000, "kind": "tcp", "class": "rabbit",
                             "status": "failed", "measured": True, "error": "reset"})
                fid += 1
    appender.write(rows)
    appender.close()


def test_report_renders_from_saved_data(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "res"
    _results_dir(out)
    figures = saved_figures(monkeypatch)
    first = report(out)
    assert "load = 0.20 (2 seeds)" in first.table and "load = 0.40" in first.table
    mouse = next(ln for ln in first.table.splitlines() if ln.startswith("mouse FCT mean"))
    assert "x1.50 [1.50, 1.50]" in mouse
    failed = next(ln for ln in first.table.splitlines() if ln.startswith("failed"))
    assert failed.count("1 ± 0") == 2  # one per run: counted, never dropped
    names = {p.name for p in first.files}
    assert {"summary.csv", "summary.txt", "fct_by_class.png", "fct_cdf_load0.20.png",
            "fct_cdf_load0.40.png", "throughput_elephant.png", "out_of_order.png"} <= names
    assert all(p.stat().st_size > 0 for p in first.files)
    pngs = {p.name for p in first.files if p.suffix == ".png"}
    assert pngs <= set(figures)
    for name in pngs:
        assert_readable(figures[name], name)
    # FCT by class: a panel per class, a bar per scheme and sweep value
    by_class = figures["fct_by_class.png"]
    assert [ax.get_title() for ax in panels(by_class)] == \
        ["mouse flows", "rabbit flows", "elephant flows"]
    for ax in panels(by_class):
        assert bar_series(ax) == ["ecmp", "single"]
        assert ax.get_xlabel() == "load" and ax.get_ylabel() == FCT_YLABEL
        assert ax.get_yscale() == "log"
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0.20", "0.40"]
        assert all(low > 0 for low, _high in intervals(ax))
    # ecmp's mice at load 0.2: 10 ms * 1.2 * 1.1 and * 1.2 * 1.2 on seeds 1 and 2, whose
    # geometric mean is 12 ms * sqrt(1.1 * 1.2)
    mouse = panels(by_class)[0]
    assert bar_heights(mouse, "ecmp")[0] == pytest.approx(12 * (1.1 * 1.2) ** 0.5)
    assert FCT_CAPTION in [t.get_text() for t in by_class.texts]
    # the CDF: a line per scheme over its 3 sizes x 2 seeds completed flows
    cdf = panels(figures["fct_cdf_load0.20.png"])
    assert len(cdf) == 1 and line_series(cdf[0]) == ["ecmp (n=6)", "single (n=6)"]
    for name in ("throughput_elephant.png", "out_of_order.png"):
        (ax,) = panels(figures[name])
        assert bar_series(ax) == ["ecmp", "single"] and ax.get_xlabel() == "load"
    with open(out / "summary.csv", newline="") as fh:
        summary = list(csv.DictReader(fh))
    assert {r["scheme"] for r in summary} == {"ecmp", "single"}
    # Idempotent: the same data renders the same table.
    assert report(out).table == first.table
    assert (out / "summary.txt").read_text() == first.table


def test_report_over_scenarios_and_bad_directories(tmp_path: Path) -> None:
    _results_dir(tmp_path / "exp" / "static", "static")
    _results_dir(tmp_path / "exp" / "random", "random")
    both = report(tmp_path / "exp")
    assert "== scenario random ==" in both.table and "== scenario static ==" in both.table
    assert "demo / static" in both.table
    with pytest.raises(ResultsError, match="not a results directory"):
        report(tmp_path)
    with pytest.raises(ResultsError, match="not a directory"):
        report(tmp_path / "nothing")


def test_flows_csv_round_trip(tmp_path: Path) -> None:
    _results_dir(tmp_path / "r")
    rows = read_flows(tmp_path / "r" / "flows.csv")
    failed = [r for r in rows if r["status"] == "failed"]
    assert failed and all(r["fct"] is None and r["error"] == "reset" for r in failed)
    assert isinstance(rows[0]["seed"], int) and isinstance(rows[0]["load"], float)
    assert rows[0]["measured"] is True


def test_progress_plain_lines_when_not_a_tty() -> None:
    stream = io.StringIO()
    bar = Progress(10, stream=stream)
    bar.set_phase("ecmp seed 1")
    for _ in range(10):
        bar.advance()
    bar.message("ecmp seed 1: 10 flows")
    bar.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines[0].startswith("[") and "0/10 flows" in lines[0] and "ecmp seed 1" in lines[0]
    assert "ecmp seed 1: 10 flows" in lines
    assert "10/10 flows" in lines[-1]


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_redraws_in_place_on_a_tty() -> None:
    stream = _Tty()
    bar = Progress(4, stream=stream)
    bar.set_phase("x")
    bar.advance(4)
    bar.close()
    text = stream.getvalue()
    assert text.count("\n") == 1 and "\r\x1b[2K" in text and "100.0%" in text
    quiet = io.StringIO()
    off = Progress(4, stream=quiet, enabled=False)
    off.advance(2)
    off.message("hidden")
    off.close()
    assert quiet.getvalue() == ""


def test_public_names_are_the_functions() -> None:
    # A submodule named like an export would shadow it once imported.
    import importlib

    import dcnlab.benchmarks.engine as engine

    for module in ("runner", "reporting", "spec", "results", "schema"):
        importlib.import_module(f"dcnlab.benchmarks.engine.{module}")
    assert callable(engine.report) and callable(engine.run_experiment)
    assert callable(engine.load_spec)
    assert engine.report.__module__.endswith(".reporting")


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_progress_estimates_time_left_from_whole_runs() -> None:
    # Four runs of 20 s each, with 6, 6, 34 and 34 flows (clients 4 and 32 of seed 004).
    clock = _Clock()
    bar = Progress(80, stream=io.StringIO(), runs=4, clock=clock)
    assert bar.remaining() is None and "run 1/4" in bar.line()
    clock.t = 20.0
    bar.advance(6)
    bar.run_done()
    # A flow-weighted estimate would say 20 s * 74/6 = 247 s; three runs of 20 s remain.
    assert bar.remaining() == 60.0 and "run 2/4" in bar.line() and "eta 1:00" in bar.line()
    clock.t = 30.0  # half-way through the second run
    assert bar.remaining() == 50.0
    clock.t = 80.0
    bar.advance(74)
    for _ in range(3):
        bar.run_done()
    assert bar.remaining() == 0.0 and "run 4/4" in bar.line() and "eta" not in bar.line()


def test_progress_without_runs_estimates_from_flows() -> None:
    clock = _Clock()
    bar = Progress(10, stream=io.StringIO(), clock=clock)
    clock.t = 10.0
    bar.advance(5)
    bar.run_done()  # no run count given: ignored
    assert bar.remaining() == 10.0 and " run " not in bar.line()


def test_other_baselines_get_their_own_ratio_table(tmp_path: Path) -> None:
    import json

    out = tmp_path / "res"
    _results_dir(out)
    meta = json.loads((out / "meta.json").read_text())
    meta["spec"]["other_baselines"] = ["single"]
    write_json(out / "meta.json", meta)
    table = report(out).table
    assert "x ratio to ecmp" in table and "ratios to single" in table
    # against single, ecmp's mice took 1/1.5 of the time
    second = table[table.index("ratios to single"):]
    mouse = next(ln for ln in second.splitlines() if ln.startswith("mouse FCT mean"))
    assert "x0.67 [0.67, 0.67]" in mouse
    with open(out / "summary.csv", newline="") as fh:
        baselines = {r["baseline"] for r in csv.DictReader(fh)}
    assert baselines == {"ecmp", "single"}


def test_size_sweep_table_and_plots_from_a_tiny_fake_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A size sweep (workload ``sizes``, one seed): FCT mean and 95% interval across the
    flows of each size, change against the baseline, the transport's columns averaged
    (a ";" list element by element), fct_by_size.csv and the two Fig. 8/9 plots."""
    out = tmp_path / "sizes"
    out.mkdir()
    write_json(out / "meta.json", {
        "name": "seed003", "status": "complete",
        "spec": {"baseline": "minrtt", "sweep": "size", "topology": "twopath",
                 "workload_type": "sizes",
                 "schemes": [{"name": "minrtt"}, {"name": "cfs"}, {"name": "tcp-path1"}]}})
    columns = FLOW_COLUMNS + ["dup_bytes", "reorder_peak_bytes", "subflow_bytes"]
    appender = CsvAppender(out / "flows.csv", columns)
    rows, fid = [], 0
    fcts = {"minrtt": [0.10, 0.12, 0.14], "cfs": [0.09, 0.10, 0.11],
            "tcp-path1": [0.08, 0.08, 0.08]}
    for size in (65536, 4 << 20):
        for scheme, values in fcts.items():
            for i, fct in enumerate(values):
                row = {"scheme": scheme, "load": size, "seed": 1, "flow_id": fid,
                       "size": size, "kind": "tcp", "class": "rabbit",
                       "fct": fct * (1 if size == 65536 else 4), "bytes": size,
                       "status": "ok", "measured": True, "sched": 2.0 * i}
                if scheme != "tcp-path1":  # a reference leaves the mp columns empty
                    dup = 1000 * i if scheme == "cfs" else 0
                    row.update(dup_bytes=dup, reorder_peak_bytes=10 * i,
                               subflow_bytes=f"{size - 500};{500 + dup}")
                rows.append(row)
                fid += 1
        rows.append({"scheme": "cfs", "load": size, "seed": 1, "flow_id": fid, "size": size,
                     "kind": "tcp", "class": "rabbit", "status": "failed",
                     "measured": True, "error": "not intact", "dup_bytes": 99999})
        fid += 1
    appender.write(rows)
    appender.close()
    figures = saved_figures(monkeypatch)
    result = report(out)
    names = {p.name for p in result.files}
    assert {"fct_by_size.csv", "fct_by_size.png", "fct_change_by_size.png"} <= names
    for name in ("fct_by_size.png", "fct_change_by_size.png"):
        assert_readable(figures[name], name)
    (by_size,) = panels(figures["fct_by_size.png"])  # Figs. 8/9: a line per scheme
    assert errorbar_series(by_size) == ["minrtt", "cfs", "tcp-path1"]
    assert by_size.get_xlabel() == "flow size" and by_size.get_yscale() == "log"
    (change,) = panels(figures["fct_change_by_size.png"])  # the baseline has no bar
    assert bar_series(change) == ["cfs", "tcp-path1"]
    # cfs 100 ms and tcp-path1 80 ms against minrtt's 120 ms, at both sizes
    assert bar_heights(change, "cfs") == [pytest.approx(-100 / 6)] * 2
    assert bar_heights(change, "tcp-path1") == [pytest.approx(-100 / 3)] * 2
    with open(out / "fct_by_size.csv", newline="") as fh:
        table = {(float(r["load"]), r["scheme"]): r for r in csv.DictReader(fh)}
    small = table[(65536.0, "cfs")]
    # By hand: 90, 100 and 110 ms have mean 100 ms and standard deviation 10 ms
    # (sqrt((100 + 0 + 100) / 2)); the 95% half-width is t(0.975, 2) * 10 / sqrt(3) ms,
    # t(0.975, 2) = 0.95 sqrt(2 / (1 - 0.95^2)) = 4.3027 from the closed-form CDF of
    # Student's t with 2 degrees of freedom, F(t) = 1/2 + t / (2 sqrt(2 + t^2)).
    t = 0.95 * (2 / (1 - 0.95 ** 2)) ** 0.5
    assert float(small["fct_mean_ms"]) == pytest.approx(100.0)
    assert float(small["fct_ci95_ms"]) == pytest.approx(t * 10 / 3 ** 0.5)  # 24.84 ms
    assert float(small["change_pct"]) == pytest.approx(100 * (0.10 / 0.12 - 1))
    assert (small["n"], small["failed"]) == ("3", "1")  # the failed flow is counted
    assert float(small["dup_bytes"]) == pytest.approx(1000)  # completed flows only
    assert float(small["subflow_bytes_2"]) == pytest.approx(1500)
    assert table[(65536.0, "tcp-path1")]["dup_bytes"] == ""
    assert float(table[(float(4 << 20), "minrtt")]["change_pct"]) == 0.0
    assert "FCT across the flows of each size" in result.table
    import re
    assert re.search(r"4MB\s+tcp-path1\s+3\s+0\s+320\s+0\s+-33\.3", result.table)
    # the summary (across seeds) averages the same columns per run
    with open(out / "summary.csv", newline="") as fh:
        summary = {(r["scheme"], float(r["load"]), r["metric"]): r
                   for r in csv.DictReader(fh)}
    assert float(summary[("cfs", 65536.0, "subflow_bytes_1")]["mean"]) == 65536 - 500
    assert "dup_bytes (mean per flow)" in result.table


def test_fct_by_size_draws_spread_repetitions_above_zero(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fct_by_size.png on a log axis: three flows of 10, 10 and 100 ms give the
    arithmetic interval 40 +- 129 ms, whose lower end is below zero; the plot draws the
    geometric mean and the interval of the log FCT instead, both ends positive."""
    from dcnlab.benchmarks.engine import sizes

    def flow(scheme: str, size: int, fct: float | None) -> dict[str, object]:
        return {"scheme": scheme, "load": size, "kind": "tcp", "measured": True,
                "status": "ok" if fct is not None else "failed", "fct": fct}

    rows = [flow("minrtt", 65536, fct) for fct in (0.010, 0.010, 0.100)]
    rows += [flow("minrtt", 1 << 20, fct) for fct in (0.100, 0.100, 1.000)]
    rows += [flow("cfs", 65536, 0.020), flow("cfs", 65536, None)]  # one completed flow
    stats = sizes.flow_stats(rows, ["minrtt", "cfs"], "minrtt")
    figures = saved_figures(monkeypatch)
    files = sizes.plots(stats, tmp_path, ["minrtt", "cfs"], "minrtt")
    assert [p.name for p in files] == ["fct_by_size.png", "fct_change_by_size.png"]
    fig = figures["fct_by_size.png"]
    assert_readable(fig, "fct_by_size.png")
    (ax,) = panels(fig)
    whiskers = sorted(intervals(ax))  # by the lower end: 0.79, 7.9 and 20 ms
    assert all(low > 0 for low, _high in whiskers), whiskers
    assert ax.get_yscale() == "log" and ax.get_ylabel() == FCT_YLABEL
    assert errorbar_series(ax) == ["minrtt", "cfs"]
    # By hand, in log10(ms): 1, 1, 2 have mean 4/3 and standard deviation sqrt(1/3)
    # (deviations -1/3, -1/3, 2/3: sqrt((1/9 + 1/9 + 4/9) / 2)), so the 95% interval is
    # 10^(4/3 +- t sqrt(1/3) / sqrt(3)) = 10^((4 +- t) / 3) ms, t = t(0.975, 2)
    # = 0.95 sqrt(2 / (1 - 0.95^2)) = 4.3027 (the closed-form CDF of Student's t with 2
    # degrees of freedom, F(t) = 1/2 + t / (2 sqrt(2 + t^2))).  The 1 MB flows are the
    # same ten times slower: one decade up.  cfs's one flow has no interval.
    t = 0.95 * (2 / (1 - 0.95 ** 2)) ** 0.5
    minrtt = next(c for c in ax.containers if c.get_label() == "minrtt")
    assert list(minrtt.lines[0].get_ydata()) == [pytest.approx(10 ** (4 / 3)),
                                                 pytest.approx(10 ** (7 / 3))]
    assert whiskers == [(pytest.approx(10 ** ((4 - t) / 3)), pytest.approx(10 ** ((4 + t) / 3))),
                        (pytest.approx(10 ** ((7 - t) / 3)), pytest.approx(10 ** ((7 + t) / 3))),
                        (pytest.approx(20.0), pytest.approx(20.0))]
    assert sizes.CAPTION in [text.get_text() for text in fig.texts]
    # the table keeps the arithmetic mean (40 ms) next to the geometric one
    small = next(s for s in stats if s["scheme"] == "minrtt" and s["load"] == 65536)
    assert small["fct_mean_ms"] == pytest.approx(40.0)
    assert small["fct_geo_ms"] == pytest.approx(10 ** (4 / 3))


def _flows_dir(out: Path, runs: dict[tuple[str, int], list[dict[str, object]]],
               schemes: tuple[str, ...] = ("ecmp", "spray")) -> None:
    """A results directory with one sweep value (load 0.5) and the given flows per
    (scheme, seed)."""
    out.mkdir(parents=True)
    write_json(out / "meta.json", {
        "name": "demo", "status": "complete",
        "spec": {"baseline": "ecmp", "sweep": "load", "topology": "spineleaf:2,2,1",
                 "workload_type": "poisson", "schemes": [{"name": s} for s in schemes]}})
    appender = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    fid = 0
    for (scheme, seed), flows in runs.items():
        for flow in flows:
            appender.write([{"scheme": scheme, "load": 0.5, "seed": seed, "flow_id": fid,
                             "kind": "tcp", "status": "ok", "measured": True, "sched": 0.0,
                             **flow}])
            fid += 1
    appender.close()


def test_fct_bars_of_three_spread_seeds_stay_above_zero_and_show_only_classes_with_flows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ecmp's mice take 10, 10 and 100 ms on three seeds: the arithmetic mean 40 ms has a
    95% half-width of t(0.975, 2) * 52 / sqrt(3) = 129 ms, an interval reaching -89 ms.
    The plot draws the geometric mean and the interval of the logs instead."""
    out = tmp_path / "res"
    mouse = {"size": 5_000, "class": "mouse", "bytes": 5_000}
    _flows_dir(out, {**{("ecmp", seed): [{**mouse, "fct": fct}]
                        for seed, fct in ((1, 0.010), (2, 0.010), (3, 0.100))},
                     **{("spray", seed): [{**mouse, "fct": 0.020}] for seed in (1, 2, 3)}})
    figures = saved_figures(monkeypatch)
    report(out)
    fig = figures["fct_by_class.png"]
    (ax,) = panels(fig)  # no rabbit or elephant flows: no empty panels for them
    assert ax.get_title() == "mouse flows" and bar_series(ax) == ["ecmp", "spray"]
    # By hand, in log10(ms): ecmp's values 1, 1, 2 have mean 4/3 and standard deviation
    # sqrt(((1/3)^2 + (1/3)^2 + (2/3)^2) / 2) = sqrt(1/3), so the half-width is
    # t * sqrt(1/3) / sqrt(3) = t / 3, with t = t(0.975, 2) = 0.95 sqrt(2 / (1 - 0.95^2))
    # = 4.3027 (Student's t with 2 degrees of freedom: F(t) = 1/2 + t / (2 sqrt(2 + t^2))).
    t = 0.95 * (2 / (1 - 0.95 ** 2)) ** 0.5
    assert bar_heights(ax, "ecmp") == [pytest.approx(10 ** (4 / 3))]  # 21.5 ms
    assert bar_heights(ax, "spray") == [pytest.approx(20.0)]
    whiskers = sorted(intervals(ax))
    assert whiskers[0] == (pytest.approx(10 ** ((4 - t) / 3)), pytest.approx(10 ** ((4 + t) / 3)))
    assert whiskers[1] == (pytest.approx(20.0), pytest.approx(20.0))  # equal seeds
    assert all(low > 0 for low, _high in whiskers)  # 0.79 ms, not -89 ms
    assert FCT_CAPTION in [text.get_text() for text in fig.texts]


def test_the_reorder_figure_is_drawn_only_when_some_scheme_reorders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elephant = {"size": 20_000_000, "class": "elephant", "bytes": 20_000_000}

    def runs(spray_reorders: int) -> dict[tuple[str, int], list[dict[str, object]]]:
        return {(scheme, seed): [{**elephant, "fct": 4.0, "reord_seen": events}]
                for scheme, events in (("ecmp", 0), ("spray", spray_reorders))
                for seed in (1, 2)}

    figures = saved_figures(monkeypatch)
    _flows_dir(tmp_path / "none", runs(0))
    names = {p.name for p in report(tmp_path / "none").files}
    assert "reorder_vs_throughput.png" not in names  # every point at 0 events: no figure
    assert not (tmp_path / "none" / "plots" / "reorder_vs_throughput.png").exists()
    _flows_dir(tmp_path / "some", runs(40))
    names = {p.name for p in report(tmp_path / "some").files}
    assert "reorder_vs_throughput.png" in names
    (ax,) = panels(figures["reorder_vs_throughput.png"])  # a panel per sweep value
    # a point per run: 20 MB in 4 s = 40 Mbit/s; 0 and 40 reorder events per long flow
    assert scatter_points(ax) == {"ecmp": [(0.0, 40.0), (0.0, 40.0)],
                                  "spray": [(40.0, 40.0), (40.0, 40.0)]}
