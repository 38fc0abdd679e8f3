"""fairness.py in memory: receiver counts -> Jain per period, run rows, summary, text.

Every expected number is worked out by hand from the rates the samples encode
(bytes * 8 / 0.1 s), so a wrong interpolation, existence rule or ratio shows up.
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import pytest
from figure_content import (
    assert_readable,
    bar_series,
    intervals,
    line_series,
    panels,
    saved_figures,
)

from dcnlab.benchmarks.engine import fairness as fr
from dcnlab.benchmarks.engine import report
from dcnlab.benchmarks.engine.results import write_csv, write_json
from dcnlab.benchmarks.engine.workloads import (
    ClientEvent,
    Flow,
    LongLivedWorkload,
    generate,
)
from dcnlab.topo.spec import parse

PERIOD = 0.1
MBIT = 1e6 / 8 * PERIOD  # bytes in one period at 1 Mbit/s


def _flows() -> list[Flow]:
    return [Flow(0, "h1", "srv", 0, 0.0, stop=1.0),  # long-lived TCP
            Flow(1, "h2", "srv", 0, 0.1, stop=1.0),  # starts at 0.1 s
            Flow(2, "h3", "srv", int(60 * MBIT), 0.0),  # sized: 6 Mbit in all
            Flow(3, "u1", "srv", 0, 0.3, kind="udp", stop=0.5, rate_mbit=50.0)]


def _samples(rates: dict[str, list[float]], times: list[float]
             ) -> list[tuple[float, dict[str, int]]]:
    """Cumulative counts at ``times`` for per-period rates (Mbit/s)."""
    rows, totals = [], dict.fromkeys(rates, 0.0)
    for k, t in enumerate(times):
        if k:
            for key, series in rates.items():
                totals[key] += series[k - 1] * MBIT
        rows.append((t, {key: round(v) for key, v in totals.items()}))
    return rows


def test_jain_of_hand_computed_rates() -> None:
    # Two flows at 30 and 10 Mbit/s: (40)^2 / (2 * (900 + 100)) = 0.8.
    rows = _samples({"0": [30.0], "1": [10.0]}, [0.0, 0.1])
    grid = fr.on_grid([rows], PERIOD)
    flows = [Flow(0, "a", "s", 0, 0.0, stop=1.0), Flow(1, "b", "s", 0, 0.0, stop=1.0)]
    (row,) = fr.period_series(grid, flows, (0.0, 1.0), None)
    assert row["jain"] == pytest.approx(0.8)
    assert row["tcp_mbps"] == pytest.approx(40.0, rel=1e-6)
    assert row["flows"] == 2 and row["measured"] and not row["udp"]


def test_hosts_sampled_at_different_instants_meet_on_the_grid() -> None:
    # Host A samples on the grid; host B 30 ms late.  B's flow runs at a constant
    # 20 Mbit/s, so linear interpolation must recover exactly 20 in every period.
    a = _samples({"0": [10.0] * 4}, [0.0, 0.1, 0.2, 0.3, 0.4])
    b = [(t + 0.03, {"1": round(20.0 * MBIT * (t + 0.03) / PERIOD)})
         for t in (0.0, 0.1, 0.2, 0.3, 0.4)]
    grid = fr.on_grid([a, b], PERIOD)
    assert [round(t, 6) for t, _ in grid] == [0.0, 0.1, 0.2, 0.3, 0.4]
    deltas = [(g1["1"] - g0["1"]) * 8 / PERIOD / 1e6 for (_, g0), (_, g1)
              in zip(grid[1:], grid[2:], strict=False)]
    assert deltas == pytest.approx([20.0, 20.0, 20.0], rel=1e-4)
    assert fr.on_grid([], PERIOD) == [] and fr.on_grid([a], 0) == []


def test_existence_udp_and_windows() -> None:
    flows = _flows()
    # Periods 0..5 (0-0.1 s .. 0.5-0.6 s).  Flow 0: 10 Mbit/s throughout; flow 1 from
    # 0.1 s at 10; flow 2 at 30 until its 6 Mbit are in (two periods), then it no longer
    # exists; UDP 50 Mbit/s during 0.3-0.5 s.
    rows = _samples({"0": [10, 10, 10, 10, 10, 10], "1": [0, 10, 10, 10, 10, 10],
                     "2": [30, 30, 0, 0, 0, 0], "3": [0, 0, 0, 50, 50, 0]},
                    [0.1 * k for k in range(7)])
    series = fr.period_series(fr.on_grid([rows], PERIOD), flows, (0.1, 0.5),
                              fr.udp_window(flows))
    assert [r["flows"] for r in series] == [2, 3, 2, 2, 2, 2]
    # period 0: 10, 30 -> 40^2 / (2 * 1000) = 0.8; period 1: 10, 10, 30 ->
    # 50^2 / (3 * 1100) = 0.7576; later only flows 0 and 1 at 10 each -> 1.0
    assert series[0]["jain"] == pytest.approx(0.8)
    assert series[1]["jain"] == pytest.approx(2500 / 3300)
    assert series[2]["jain"] == pytest.approx(1.0)
    assert [round(r["udp_mbps"]) for r in series] == [0, 0, 0, 50, 50, 0]
    assert series[3]["total_mbps"] == pytest.approx(70.0, rel=1e-6)
    assert [r["measured"] for r in series] == [False, True, True, True, True, False]
    assert [r["udp"] for r in series] == [False, False, False, True, True, False]

    run = fr.run_row(series, PERIOD, (0.1, 0.5), fr.udp_window(flows))
    assert run["periods"] == 4 and run["flows"] == 3
    assert run["jain_mean"] == pytest.approx((2500 / 3300 + 3) / 4)
    assert run["jain_min"] == pytest.approx(2500 / 3300)
    assert run["jain_udp_mean"] == run["jain_udp_min"] == pytest.approx(1.0)
    # before the burst (starts at 0.3 s): measured periods 1 and 2
    assert run["jain_pre_udp"] == pytest.approx((2500 / 3300 + 1) / 2)
    assert run["tcp_mbps"] == pytest.approx((50 + 20 + 20 + 20) / 4, rel=1e-6)
    assert run["udp_mbps"] == pytest.approx(25.0, rel=1e-6)
    assert run["tcp_udp_mbps"] == pytest.approx(20.0, rel=1e-6)  # periods 3 and 4
    assert (run["udp_from"], run["udp_to"]) == (0.3, 0.5)


def test_clients_that_stop_and_start_again_count_only_while_running() -> None:
    # Client h1 runs 0-0.2 s, stops and starts again 0.4-0.6 s as a new connection
    # (flow 2); h2 runs throughout; h3 stops in the middle of period 3 (0.35 s).  After
    # a stop a client's last bytes still arrive (its send buffer drains): flow 0 gets 4
    # Mbit/s in period 2, flow 3 10 in period 3.
    flows = [Flow(0, "h1", "srv", 0, 0.0, stop=0.2), Flow(1, "h2", "srv", 0, 0.0, stop=0.6),
             Flow(2, "h1", "srv", 0, 0.4, stop=0.6), Flow(3, "h3", "srv", 0, 0.0, stop=0.35)]
    rows = _samples({"0": [10, 10, 4, 0, 0, 0], "1": [10, 10, 20, 20, 10, 10],
                     "2": [0, 0, 0, 0, 10, 30], "3": [20, 20, 20, 10, 0, 0]},
                    [0.1 * k for k in range(7)])
    series = fr.period_series(fr.on_grid([rows], PERIOD), flows, (0.0, 0.6), None)
    # Jain's index among the clients running during the whole period: a stopped client
    # is no zero (with flow 0 as a zero, period 4 would give 10, 10, 0 -> 0.667)
    assert [r["flows"] for r in series] == [3, 3, 2, 1, 2, 2]
    assert [r["jain"] for r in series] == pytest.approx(
        [1600 / 1800, 1600 / 1800, 1.0, 1.0, 1.0, 1600 / 2000])
    # Throughput counts every TCP byte the server received in the period, the stopped
    # clients' last ones too: what the bottleneck carried.
    assert [r["tcp_mbps"] for r in series] == pytest.approx([40, 40, 44, 30, 20, 40],
                                                            rel=1e-6)
    run = fr.run_row(series, PERIOD, (0.0, 0.6), None)
    assert run["tcp_mbps"] == pytest.approx(214 / 6, rel=1e-6) and run["flows"] == 3


def test_the_variable_scenario_is_judged_among_the_running_clients() -> None:
    # The paper's variable scenario on dumbbell:32,2,8: every connection receives 3
    # Mbit/s while it runs and 1 in the period after it stops (its last bytes), nothing
    # else.  Jain's index stays 1 with 32, 24, 16, 8, 16, 24, 32 clients running, and
    # the throughput is 3 per running client plus the stopped ones' last bytes.
    topo = parse("dumbbell:32,2,8")
    schedule = [ClientEvent(7.0, stop=4), ClientEvent(9.0, stop=4), ClientEvent(11.0, stop=4),
                ClientEvent(14.0, start=4), ClientEvent(16.0, start=4),
                ClientEvent(18.0, start=4)]
    flows = generate(LongLivedWorkload(udp_rate=0, schedule=schedule), topo, 32, seed=1,
                     duration=20.0)
    periods = 200
    rates = {str(f.id): [3.0 if f.start <= 0.1 * k and 0.1 * (k + 1) <= float(f.stop or 0)
                         + 1e-9 else 1.0 if abs(0.1 * k - float(f.stop or 0)) < 1e-9 else 0.0
                         for k in range(periods)] for f in flows}
    rows = _samples(rates, [0.1 * k for k in range(periods + 1)])
    series = fr.period_series(fr.on_grid([rows], PERIOD), flows, (5.0, 20.0), None)
    running = [32] * 70 + [24] * 20 + [16] * 20 + [8] * 30 + [16] * 20 + [24] * 20 + [32] * 20
    assert [r["flows"] for r in series] == running
    assert all(r["jain"] == pytest.approx(1.0) for r in series)
    stops = {70: 8, 90: 8, 110: 8}  # the period after each stop: 8 clients' last bytes
    assert [r["tcp_mbps"] for r in series] == pytest.approx(
        [3 * n + stops.get(k, 0) for k, n in enumerate(running)], rel=1e-6)
    run = fr.run_row(series, PERIOD, (5.0, 20.0), None)
    assert run["periods"] == 150 and run["jain_mean"] == pytest.approx(1.0)


def test_a_run_without_udp_or_flows_gives_empty_figures() -> None:
    run = fr.run_row([], PERIOD, (5.0, math.inf), None)
    assert run["periods"] == 0 and math.isnan(run["jain_mean"])
    assert math.isnan(run["jain_pre_udp"])
    assert run["measured_to"] is None and run["udp_from"] is None


def _fair_rows() -> list[dict[str, object]]:
    base = {"period": 0.1, "measured_from": 5, "measured_to": 20, "udp_from": 10,
            "udp_to": 15}
    return [
        {**base, "scheme": "conv", "load": 4, "seed": 1, "jain_mean": 0.5, "tcp_mbps": 90,
         "jain_udp_min": 0.2, "jain_pre_udp": 0.8, "tcp_udp_mbps": 70},
        {**base, "scheme": "conv", "load": 4, "seed": 2, "jain_mean": 0.7, "tcp_mbps": 90},
        {**base, "scheme": "uc3", "load": 4, "seed": 1, "jain_mean": 1.0, "tcp_mbps": 90,
         "clamps_applied": 10, "jain_pre_udp": 0.96, "tcp_udp_mbps": 77},
        {**base, "scheme": "uc3", "load": 4, "seed": 2, "jain_mean": 0.7, "tcp_mbps": 45,
         "clamps_applied": 30},
    ]


def test_summary_mean_ci_and_paired_ratio() -> None:
    summary = {(r.scheme, r.metric): r for r in fr.summarize(_fair_rows(), "conv")}
    conv, uc3 = summary[("conv", "jain_mean")], summary[("uc3", "jain_mean")]
    assert conv.mean == pytest.approx(0.6) and conv.seeds == 2
    # t(0.975, 1) = 12.706; sd = 0.1414 -> half-width 12.706 * 0.1 = 1.2706
    assert conv.ci == pytest.approx(1.2706, rel=1e-3)
    assert conv.ratio == 1.0  # against itself, as metrics.summarize has it
    # per seed: 1.0 / 0.5 = 2 and 0.7 / 0.7 = 1 -> geometric mean sqrt(2)
    assert uc3.ratio == pytest.approx(math.sqrt(2))
    assert summary[("uc3", "tcp_mbps")].ratio == pytest.approx(math.sqrt(0.5))
    clamps = summary[("uc3", "clamps_applied")]
    assert clamps.mean == 20 and math.isnan(clamps.ratio)
    assert summary[("conv", "jain_udp_min")].seeds == 1  # one seed had no value
    assert math.isnan(summary[("conv", "clamps_applied")].mean)


def test_render_one_row_per_scheme_baseline_first() -> None:
    rows = _fair_rows()
    text = fr.render(rows, fr.summarize(rows, "conv"), ["uc3", "conv"], "conv", "clients")
    lines = text.splitlines()
    assert lines[0].startswith("fairness: receiver throughput every 0.1 s, measured 5-20 s")
    header = next(line for line in lines if line.startswith("scheme"))
    assert "Jain min, UDP 10-15 s" in header and "Jain before UDP" in header
    assert "TCP Mbit/s, UDP 10-15 s" in header
    conv = next(line for line in lines if line.startswith("conv "))
    uc3 = next(line for line in lines if line.startswith("uc3 "))
    assert lines.index(conv) < lines.index(uc3)
    assert "0.600 ± 1.271" in conv and "0.200" in conv and "0.800" in conv
    assert re.search(r"0\.960 +1\.20 ", uc3)  # one seed each: mean only, ratio 0.96 / 0.8
    assert re.search(r" 77 +1\.10 ", uc3)  # TCP during the burst: 77 vs 70 on seed 1
    assert "1.41 [" in uc3 and "0.71 [" in uc3 and uc3.rstrip().endswith("20 ± 127")
    assert "clients = 4 (2 seeds)" in text
    assert fr.render([], [], ["conv"], "conv", "clients") == ""


def test_report_adds_the_section_csv_rows_and_plots(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    write_json(tmp_path / "meta.json", {"name": "x", "status": "complete", "spec": {
        "baseline": "conv", "sweep": "clients", "schemes": [{"name": "conv"},
                                                            {"name": "uc3"}]}})
    # Long-lived flows (size 0): throughput, no FCT.
    flows = [{"scheme": s, "load": 4, "seed": seed, "flow_id": 0, "size": 0,
              "class": "elephant", "status": "ok", "fct": 20.0, "bytes": 200_000_000,
              "measured": 1, "kind": "tcp"}
             for s in ("conv", "uc3") for seed in (1, 2)]
    write_csv(tmp_path / "flows.csv", list(flows[0]), flows)
    write_csv(tmp_path / fr.FAIRNESS_CSV, fr.COLUMNS, _fair_rows())
    series = [{"scheme": s, "load": 4, "seed": 1, "t": round(0.1 * k, 1), "flows": 2,
               "jain": 0.9, "tcp_mbps": 90, "measured": int(k > 50),
               "udp": int(100 < k <= 150)} for s in ("conv", "uc3") for k in range(1, 200)]
    write_csv(tmp_path / fr.SERIES_CSV, fr.SERIES_COLUMNS, series)

    figures = saved_figures(monkeypatch)
    result = report(tmp_path)

    assert "fairness: receiver throughput" in result.table
    assert (tmp_path / "summary.txt").read_text() == result.table
    with open(tmp_path / "summary.csv", newline="") as fh:
        metrics = {(r["scheme"], r["metric"]) for r in csv.DictReader(fh)}
    assert ("uc3", "jain_mean") in metrics and ("conv", "total_mbps") in metrics
    for name in ("jain_time_clients4.png", "fairness_bars.png", "throughput_elephant.png"):
        assert (tmp_path / "plots" / name).is_file(), name
        assert_readable(figures[name], name)
    assert not (tmp_path / "plots" / "fct_by_class.png").exists()
    # Jain's index above, TCP throughput below, a line per scheme against time
    jain, tput = panels(figures["jain_time_clients4.png"])
    assert jain.get_ylabel() == "Jain's index (TCP flows)" and tput.get_xlabel() == "time (s)"
    assert line_series(jain) == line_series(tput) == ["conv", "uc3"]
    # Figs. 6 and 7: a panel per measured metric, a bar per scheme; Jain's index of two
    # spread seeds (0.5, 0.7: half-width 12.7 * 0.1) has its whisker cut at 0, not -0.67
    bars = panels(figures["fairness_bars.png"])
    assert [ax.get_ylabel() for ax in bars] == [
        "mean Jain's index (TCP flows)", "mean TCP throughput (Mbit/s)",
        "TCP throughput, UDP burst (Mbit/s)"]
    for ax in bars:
        assert bar_series(ax) == ["conv", "uc3"] and ax.get_xlabel() == "clients"
        assert all(low >= 0 for low, _high in intervals(ax))
    assert "elephant throughput (Mbit/s)  80" in result.table
    assert "FCT" not in result.table
    json.loads((tmp_path / "meta.json").read_text())  # untouched, still valid
