"""queueseries: the bottleneck port's queue over a run, from switch_ext stats lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dcnlab.benchmarks.engine import queueseries


def _line(ts: float, qlen: int, qlen_max: int, hist: list[list[int]], drops: int,
          held: int | None = None) -> dict:
    port = {"port": 2, "qlen": qlen, "qlen_max": qlen_max, "drops": drops,
            "qout": {"hist": hist}, "ingress": None if held is None else {"held": held}}
    other = {"port": 1, "qlen": 99, "qlen_max": 99, "drops": 0, "qout": {"hist": [[99, 1]]}}
    return {"ts": ts, "ports": [other, port]}


def test_series_takes_each_interval_from_the_histogram_difference() -> None:
    # 100 ms intervals: the first all at 0; the second half at 0, half at 10 frames
    lines = [_line(100.0, 0, 0, [[0, 1_000]], 5),
             _line(100.1, 0, 0, [[0, 100_001_000]], 5),
             _line(100.2, 10, 12, [[0, 150_001_000], [10, 50_000_000]], 8, held=1)]
    rows = queueseries.series(lines, port=2, t0=99.5)
    assert [r["t"] for r in rows] == [0.6, 0.7]
    assert rows[0] == {"t": 0.6, "qlen": 0, "qlen_max": 0, "qout_mean": 0.0, "qin": None,
                       "drops": 0}
    assert rows[1]["qout_mean"] == 5.0 and rows[1]["qlen_max"] == 12
    assert rows[1]["drops"] == 3 and rows[1]["qin"] == 1


def test_an_interval_without_time_has_no_mean() -> None:
    same = [[0, 1_000]]
    rows = queueseries.series([_line(1.0, 0, 0, same, 0), _line(1.1, 0, 0, same, 0)], 2, 1.0)
    assert rows[0]["qout_mean"] is None


def test_run_rows_follow_the_bottleneck_and_skip_unknown_ones() -> None:
    lines = {"s1": [_line(1.0, 0, 0, [[0, 1]], 0), _line(1.1, 3, 4, [[0, 1], [3, 9]], 0)]}
    rows = queueseries.run_rows("ecmp", 10.0, 2, lines, "s1:2", 1.0)
    assert len(rows) == 1 and rows[0]["port"] == "s1:2" and rows[0]["qout_mean"] == 3.0
    assert (rows[0]["scheme"], rows[0]["load"], rows[0]["seed"]) == ("ecmp", 10.0, 2)
    assert queueseries.run_rows("ecmp", 10.0, 2, lines, "", 1.0) == []  # OVS: no bottleneck
    assert queueseries.run_rows("ecmp", 10.0, 2, lines, "s9:2", 1.0) == []
    assert queueseries.run_rows("ecmp", 10.0, 2, lines, "s1:x", 1.0) == []


def test_plot_draws_a_file_per_sweep_value_for_the_first_seed(tmp_path: Path) -> None:
    rows = [{"scheme": s, "load": str(load), "seed": str(seed), "port": "s1:2",
             "t": str(t / 10), "qlen": "1", "qlen_max": "4", "qout_mean": "2.5", "qin": "",
             "drops": "0"}
            for s in ("a", "b") for load in (4, 8) for seed in (2, 3) for t in range(5)]
    files = queueseries.plot(rows, tmp_path, "load", ["a", "b", "c"])
    assert [f.name for f in files] == ["queue_time_load4.png", "queue_time_load8.png"]
    assert all(f.stat().st_size > 0 for f in files)


def _write_series(path: Path, rows: list[dict]) -> None:
    import csv

    path.mkdir(parents=True)
    with open(path / queueseries.QUEUE_CSV, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=queueseries.COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def test_course_figure_puts_each_scenario_of_one_scheme_on_one_axis(tmp_path: Path) -> None:
    from dcnlab.benchmarks import queue_course

    for clients in (4, 64):
        _write_series(tmp_path / "res" / f"clients{clients}", [
            {"scheme": s, "load": clients, "seed": seed, "port": "s1:3", "t": t / 10,
             "qlen": 1, "qlen_max": 2, "qout_mean": clients / 4 + t, "qin": "", "drops": 0}
            for s in ("conventional", "realloc-down") for seed in (1, 2) for t in range(5)])
    courses = queueseries.read_courses(tmp_path / "res", "realloc-down")
    assert list(courses) == ["clients4 4 seed 1", "clients64 64 seed 1"]
    assert all(len(rows) == 5 for rows in courses.values())
    assert list(queueseries.read_courses(tmp_path / "res", "realloc-down", seed=2)) == [
        "clients4 4 seed 2", "clients64 64 seed 2"]
    out = tmp_path / "fig8.png"
    assert queue_course.main([str(tmp_path / "res"), "--scheme", "realloc-down", "--out",
                              str(out), "--scenarios", "clients64,clients4"]) == 0
    assert out.stat().st_size > 0
    assert queue_course.main([str(tmp_path / "res"), "--scheme", "nosuch", "--out",
                              str(tmp_path / "x.png")]) == 1
    assert not (tmp_path / "x.png").exists()


def test_course_figure_of_several_schemes_in_a_window(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--scheme a,b draws a course per scheme; --window keeps the rows inside it (what
    the plot was given is checked, not only that a file exists); a bad window is a
    usage error."""
    from dcnlab.benchmarks import queue_course

    _write_series(tmp_path / "res", [
        {"scheme": s, "load": 80, "seed": 1, "port": "s1:1", "t": t / 10, "qlen": 1,
         "qlen_max": 2, "qout_mean": t, "qin": "", "drops": 0}
        for s in ("droptail_tcp", "ecn_dctcp") for t in range(20)])
    drawn: dict[str, Any] = {}

    def spy(courses: Any, path: Path, title: str, window: Any = None) -> Path:
        drawn.update(courses=dict(courses), window=window)
        return real(courses, path, title, window=window)

    real = queueseries.course_plot
    monkeypatch.setattr(queueseries, "course_plot", spy)
    out = tmp_path / "fig1c.png"
    assert queue_course.main([str(tmp_path / "res"), "--scheme", "droptail_tcp,ecn_dctcp",
                              "--window", "0.5,1", "--out", str(out)]) == 0
    assert list(drawn["courses"]) == ["droptail_tcp: 80 seed 1", "ecn_dctcp: 80 seed 1"]
    assert drawn["window"] == (0.5, 1.0) and out.stat().st_size > 0
    with pytest.raises(SystemExit):
        queue_course.main([str(tmp_path / "res"), "--scheme", "ecn_dctcp", "--window",
                           "1,0.5", "--out", str(out)])
