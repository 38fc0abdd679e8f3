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


def test_broadcast_overhead_counts_the_copies_the_leaves_received_during_the_run() -> None:
    def state(copies: dict[str, int]) -> dict:
        return {"counters": {}, "tcppath": {"series": [], "copies_in": copies,
                                            "copy_bytes": 78}}

    before = state({"1": 10, "2": 10, "5": 100})
    after = state({"1": 13, "2": 15, "5": 400, "6": 50})  # 5 and 6 are spines
    stats = cs.run_stats(before, after, 0, 1, "dcnlab.apps.tfe", leaves={"1", "2"},
                         leaf_rx=78 * 8 + 100_000)
    assert stats["leaf_copy_bytes"] == 8 * 78 and stats["leaf_rx_bytes"] == 78 * 8 + 100_000
    assert math.isclose(stats["bcast_data_pct"], 100 * 8 * 78 / 100_000)
    unknown = cs.run_stats(before, after, 0, 1, "dcnlab.apps.tcppath", leaves={"1"})
    assert unknown["leaf_copy_bytes"] == 3 * 78 and "bcast_data_pct" not in unknown
    # ECMP explores nothing: no overhead columns at all
    assert "leaf_copy_bytes" not in cs.run_stats(before, after, 0, 1, "dcnlab.apps.ecmp",
                                                 leaves={"1"}, leaf_rx=1000)
    table = cs.render([{"scheme": "tfe", "load": "0.4", "seed": "1",
                        "bcast_data_pct": str(stats["bcast_data_pct"])}], ["tfe"], "load")
    assert "exploration / data bytes at leaves (%)" in table and "0.624" in table
