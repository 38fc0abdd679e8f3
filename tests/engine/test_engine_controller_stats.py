"""controller_stats: a run's share of cumulative counters and its per-flow table size."""

from __future__ import annotations

import math

from dcnlab.benchmarks.engine import controller_stats as cs


def _state(counters: dict[str, int], series: list[list[float]] | None = None) -> dict:
    state: dict = {"counters": counters}
    if series is not None:
        state["tcppath"] = {"series": series}
    return state


def test_counters_are_differences_between_snapshots() -> None:
    before = _state({"packet_in": 100, "tcppath_explorations": 7})
    after = _state({"packet_in": 160, "tcppath_explorations": 10, "tcppath_copy_late": 4},
                   series=[])
    stats = cs.run_stats(before, after, 0.0, 1.0)
    assert stats["packet_in"] == 60
    assert stats["explorations"] == 3
    assert stats["late_dropped"] == 4  # absent before: counted from zero
    assert "copy_packet_in" not in stats  # the app never kept it


def test_entries_use_only_samples_inside_the_run() -> None:
    series = [[9.0, 500], [10.0, 2], [10.5, 4], [11.0, 6], [12.5, 900], ["bad"], None]
    stats = cs.run_stats(None, _state({}, series), 10.0, 11.0, "dcnlab.apps.tcppath")
    assert stats["entries_samples"] == 3
    assert stats["entries_mean"] == 4.0
    assert stats["entries_max"] == 6


def test_app_without_per_flow_entries_reports_zero_and_missing_state_nothing() -> None:
    assert cs.run_stats(None, _state({"packet_in": 3}), 0, 1)["entries_mean"] == 0.0
    # the table size comes from the section the scheme declares, not from any section
    ecmp = cs.run_stats(None, _state({}, [[0.5, 7]]), 0, 1, "dcnlab.apps.ecmp")
    assert ecmp["entries_mean"] == 0.0
    assert cs.run_stats(_state({}), None, 0, 1) == {}


def test_render_gives_share_of_the_largest_table() -> None:
    rows = [
        {"scheme": "ecmp", "load": "0.1", "seed": "1", "entries_mean": "0"},
        {"scheme": "tcppath", "load": "0.1", "seed": "1", "entries_mean": "200",
         "explorations": "50"},
        {"scheme": "tcppath", "load": "0.1", "seed": "2", "entries_mean": "100",
         "explorations": "30"},
        {"scheme": "tfe", "load": "0.1", "seed": "1", "entries_mean": "9", "explorations": ""},
    ]
    text = cs.render(rows, ["ecmp", "tcppath", "tfe"], "load")
    line = next(s for s in text.splitlines() if s.startswith("per-flow entries, mean"))
    assert "150" in line and "6.0%" in line and "0 (0.0%)" in line
    assert "explorations" in text
    assert cs.render([], ["ecmp"], "load") == ""
    assert math.isnan(cs._mean(["", None, "x"]))
