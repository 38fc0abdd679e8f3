"""Delivered throughput over time (throughput.py) on constructed stats lines: host-facing
ports only, intervals spread over the bins they overlap, switches added up, the figure."""

from __future__ import annotations

from pathlib import Path

import pytest
from figure_content import assert_readable, line_series, panels, saved_figures
from results_dir import minimal_results

from dcnlab.benchmarks.engine import events, report, throughput
from dcnlab.benchmarks.engine.results import write_csv
from dcnlab.topo.spec import parse

SPINELEAF = parse("spineleaf:1,2,1")  # s1 spine; s2, s3 leaves with one host each


def _line(ts: float, tx: dict[int, int]) -> dict:
    return {"ts": ts, "ports": [{"port": p, "tx_bytes": b} for p, b in tx.items()]}


def test_host_ports_are_the_switch_ends_of_host_links() -> None:
    ports = throughput.host_ports(SPINELEAF)
    assert set(ports) == {"s2", "s3"} and all(len(p) == 1 for p in ports.values())
    fattree = throughput.host_ports(parse("fattree:4"))
    assert len(fattree) == 8 and all(len(p) == 2 for p in fattree.values())  # edges


def test_intervals_split_over_bins_and_switches_add_up() -> None:
    (s2_host,), (s3_host,) = (throughput.host_ports(SPINELEAF)[s] for s in ("s2", "s3"))
    uplink = 3 - s2_host  # the leaf's other port (1 or 2): towards the spine, not counted
    lines = {
        # 1 Mbit in 0.2 s from t=0.05: 5 Mbit/s, a quarter of it in bin 0, half in bin 1
        "s2": [_line(100.05, {s2_host: 0, uplink: 0}),
               _line(100.25, {s2_host: 125_000, uplink: 999_999})],
        # 2 Mbit/s over [0, 0.1)
        "s3": [_line(100.0, {s3_host: 0}), _line(100.1, {s3_host: 25_000})],
    }
    got = throughput.series(SPINELEAF, lines, t0=100.0)
    assert [t for t, _ in got] == [0.0, 0.1, 0.2]
    assert [v for _, v in got] == pytest.approx([5 * 0.5 + 2, 5.0, 5 * 0.5])
    assert throughput.series(SPINELEAF, {}, t0=0.0) == []


def test_report_draws_the_time_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "res"
    minimal_results(out, ("ecmp", "conga"), 0.5)
    write_csv(out / throughput.THROUGHPUT_CSV, throughput.COLUMNS, [
        {"scheme": s, "load": 0.5, "seed": seed, "t": k / 10, "mbps": 50 + k + seed}
        for s in ("ecmp", "conga") for seed in (1, 2) for k in range(30)])
    figures = saved_figures(monkeypatch)
    files = {p.name for p in report(out).files}
    assert "throughput_time_load0.50.png" in files
    fig = figures["throughput_time_load0.50.png"]
    assert_readable(fig, "throughput_time_load0.50.png")
    (ax,) = panels(fig)
    assert line_series(ax) == ["ecmp", "conga"] and "seed 1" in ax.get_title()


def _series(levels: list[tuple[float, float]], until: float) -> list[tuple[float, float]]:
    """Bins of 0.1 s from 0 to ``until``: each (from t, Mbit/s) holds until the next."""
    out, k = [], 0
    while k * 0.1 < until - 1e-9:
        t = round(k * 0.1, 1)
        out.append((t, next(v for start, v in reversed(levels) if t >= start - 1e-9)))
        k += 1
    return out


def test_recovery_after_a_cut() -> None:
    dip = _series([(0, 50.0), (5.0, 0.0), (5.5, 30.0), (6.0, 48.0)], 8.0)
    assert throughput.recovery_s(dip, 5.0) == pytest.approx(1.0)  # 48 >= 0.9 * 50
    assert throughput.recovery_s(dip, 5.03) == pytest.approx(0.97)  # from the event
    flat = _series([(0, 50.0)], 8.0)
    assert throughput.recovery_s(flat, 5.0) == 0.0  # never dipped
    assert throughput.recovery_s(_series([(0, 0.0), (6, 50.0)], 8.0), 5.0) is None  # idle
    assert throughput.recovery_s(_series([(0, 50.0), (5.0, 10.0)], 8.0), 5.0) is None


def test_report_gives_recovery_per_cut_and_marks_events(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "res"
    minimal_results(out, ("ecmp", "conga"), 0.5)
    rows, event_rows = [], []
    for scheme, back in (("ecmp", 6.0), ("conga", 5.3)):
        for seed in (1, 2):
            for t, v in _series([(0, 50.0), (5.0, 0.0), (back, 49.0)], 8.0):
                rows.append({"scheme": scheme, "load": 0.5, "seed": seed, "t": t, "mbps": v})
            for kind, planned in (("cut", 5.0), ("restore", 7.0)):
                event_rows.append({"scheme": scheme, "load": 0.5, "seed": seed, "event": 0,
                                   "type": kind, "link": "s1-s17", "planned": planned,
                                   "t": planned + 0.02, "ok": True, "error": ""})
    write_csv(out / throughput.THROUGHPUT_CSV, throughput.COLUMNS, rows)
    write_csv(out / events.EVENTS_CSV, events.COLUMNS, event_rows)
    figures = saved_figures(monkeypatch)
    table = report(out).table
    line = next(ln for ln in table.splitlines() if ln.startswith("cut s1-s17 at 5 s"))
    assert line.split()[5:] == ["0.98", "±", "0", "0.28", "±", "0"]  # back at 6.0, 5.3
    assert "Fabric events: 8 link changes in all runs, 8 applied, at most 20 ms" in table
    (ax,) = panels(figures["throughput_time_load0.50.png"])
    marks = [t.get_text() for t in ax.texts]
    assert marks == ["cut s1-s17", "restore s1-s17"]
