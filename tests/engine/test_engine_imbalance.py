"""Uplink imbalance (imbalance.py) on constructed stats lines: which ports are up ports,
the per-interval ratio, idle intervals left out, per-run figures and the report's
section, rows and CDF."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from figure_content import assert_readable, line_series, panels, saved_figures
from results_dir import minimal_results

from dcnlab.benchmarks.engine import imbalance, report
from dcnlab.benchmarks.engine.results import write_csv
from dcnlab.topo.spec import parse

FATTREE = parse("fattree:4")  # 100 Mbit/s everywhere
MBIT_IN_100MS = 12_500  # bytes: 1 Mbit/s over a 0.1 s interval, 1% of 100 Mbit/s


def _line(ts: float, tx: dict[int, int]) -> dict:
    return {"ts": ts, "ports": [{"port": p, "tx_bytes": b} for p, b in tx.items()]}


def test_up_ports_have_their_link_rates() -> None:
    ups = imbalance.uplinks(FATTREE)
    assert len(ups) == 16  # 8 edge and 8 aggregation switches; cores have no up ports
    assert ups["s7"] == {1: 1e8, 2: 1e8} and ups["s5"] == {3: 1e8, 4: 1e8}
    slow = imbalance.uplinks(parse("fattree:4,link@s1-s5=rate=10M"))
    assert slow["s5"] == {3: 1e7, 4: 1e8}


def test_samples_ratio_and_idle_intervals() -> None:
    ports = {1: 1e8, 2: 1e8}
    lines = [_line(10.0, {1: 0, 2: 0}),
             _line(10.1, {1: MBIT_IN_100MS, 2: 3 * MBIT_IN_100MS}),  # 1% and 3%
             _line(10.2, {1: MBIT_IN_100MS + 100, 2: 3 * MBIT_IN_100MS}),  # idle: left out
             _line(10.3, {1: 41 * MBIT_IN_100MS, 2: 3 * MBIT_IN_100MS}),  # all on port 1
             {"ts": "bad"}]
    rows = imbalance.samples(ports, lines, t0=10.0)
    assert [r["t"] for r in rows] == [0.1, 0.3]
    assert rows[0]["imbalance"] == pytest.approx(1.5) and rows[0]["mean_util"] == 0.02
    assert rows[1]["imbalance"] == pytest.approx(2.0)  # everything on one of two ports
    # unequal rates: the same bytes are twice the utilization on a half-rate port
    half = imbalance.samples({1: 5e7, 2: 1e8}, lines[:2], t0=10.0)
    assert half[0]["imbalance"] == pytest.approx(0.03 / 0.025)  # 2% and 3%
    # no rates: bytes alone
    bare = imbalance.samples({1: math.nan, 2: math.nan}, lines[:2], t0=10.0)
    assert bare[0]["imbalance"] == pytest.approx(1.5) and math.isnan(bare[0]["mean_util"])


def test_run_rows_cover_every_switch_with_parallel_paths() -> None:
    lines = {"s7": [_line(0.0, {1: 0, 2: 0}), _line(0.1, {1: 20_000, 2: 20_000})],
             "s1": [_line(0.0, {1: 0}), _line(0.1, {1: 99_999})]}  # a core: no up ports
    rows = imbalance.run_rows("ecmp", 0.4, 2, FATTREE, lines, t0=0.0)
    assert rows == [{"scheme": "ecmp", "load": 0.4, "seed": 2, "switch": "s7", "t": 0.1,
                     "imbalance": 1.0, "mean_util": 0.016}]


def _results(out: Path) -> None:
    minimal_results(out, ("ecmp", "drill"), 0.4)
    rows = []
    for seed in (1, 2):
        for k in range(20):
            rows.append({"scheme": "ecmp", "load": 0.4, "seed": seed, "switch": "s7",
                         "t": k / 10, "imbalance": 1.0 + k / 10 * seed, "mean_util": 0.5})
            rows.append({"scheme": "drill", "load": 0.4, "seed": seed, "switch": "s7",
                         "t": k / 10, "imbalance": 1.0 + k / 40 * seed, "mean_util": 0.5})
    write_csv(out / imbalance.IMBALANCE_CSV, imbalance.COLUMNS, rows)


def test_report_has_the_section_rows_and_cdf(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "res"
    _results(out)
    figures = saved_figures(monkeypatch)
    result = report(out)
    section = result.table[result.table.index("Uplink imbalance"):].splitlines()
    mean = next(ln for ln in section if ln.startswith("mean"))
    # ecmp: 1 + 0.95 * seed on average (1.95, 2.9); drill a quarter of the excess
    assert mean.split()[1] == "2.42" and "x0.57" in mean
    with open(out / "summary.csv", newline="") as fh:
        got = {(r["scheme"], r["metric"]) for r in csv.DictReader(fh)
               if r["class"] == imbalance.CLASS}
    assert got == {(s, m) for s in ("ecmp", "drill") for m in imbalance.METRICS}
    cdf = figures["imbalance_cdf.png"]
    assert_readable(cdf, "imbalance_cdf.png")
    assert line_series(panels(cdf)[0]) == ["ecmp (n=40)", "drill (n=40)"]
