"""UC3 allocator: hand-computed cases (shares, water-filling, reallocation, windows)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from dcnlab.schemes.uc3.alloc import (
    Allocator,
    AllocConfig,
    AllocError,
    Ema,
    FlowInput,
    Rounding,
    ShareMethod,
    bottlenecks,
    fair_shares,
    max_min_shares,
    reallocate,
    under_using,
    window_segments,
)

# f1 crosses A (100) and B (30); f2, f3 only A.  A: 100/3 = 33.3 per flow, B: 30/1.
PATHS = {"f1": ["A", "B"], "f2": ["A"], "f3": ["A"]}
CAP = {"A": 100.0, "B": 30.0}


def test_bottleneck_is_the_tightest_per_flow_share() -> None:
    got = bottlenecks(PATHS, CAP)
    assert got["f1"] == ("B", 30.0)
    assert got["f2"][0] == "A" and got["f2"][1] == pytest.approx(100 / 3)
    assert fair_shares(PATHS, CAP)["f3"] == pytest.approx(100 / 3)


def test_dumbbell_bottleneck_counts_all_competing_flows() -> None:
    # 4 flows share the 100 Mbit/s core; access links are 100 each -> 25 each.
    paths = {f"c{i}": [f"acc{i}", "core"] for i in range(4)}
    cap = {"core": 100.0} | {f"acc{i}": 100.0 for i in range(4)}
    assert fair_shares(paths, cap) == {f"c{i}": 25.0 for i in range(4)}


def test_water_filling_gives_leftover_to_the_others() -> None:
    # B freezes f1 at 30; A has 70 left for f2 and f3: 35 each.
    assert max_min_shares(PATHS, CAP) == {"f1": 30.0, "f2": 35.0, "f3": 35.0}


def test_water_filling_three_levels() -> None:
    paths = {"a": ["L1"], "b": ["L1", "L2"], "c": ["L2", "L3"], "d": ["L3"]}
    cap = {"L1": 10.0, "L2": 4.0, "L3": 12.0}
    # L2: 4/2 = 2 -> b, c = 2; L1: 8 left for a; L3: 10 left for d.
    assert max_min_shares(paths, cap) == {"a": 8.0, "b": 2.0, "c": 2.0, "d": 10.0}


def test_unknown_link_and_empty_path_are_clear_errors() -> None:
    with pytest.raises(AllocError, match="unknown capacity"):
        fair_shares({"f": ["X"]}, {})
    with pytest.raises(AllocError, match="empty path"):
        fair_shares({"f": []}, {})


def test_ema_first_sample_initialises_then_smooths() -> None:
    ema = Ema(0.5)
    assert ema.update("f", 10.0) == 10.0
    assert ema.update("f", 20.0) == 15.0
    assert ema.update("f", 20.0) == 17.5
    ema.forget([])
    assert ema.values == {}
    with pytest.raises(AllocError):
        Ema(0.0)


SHARES = {"f1": 25.0, "f2": 25.0, "f3": 25.0, "f4": 25.0}
SMOOTHED = {"f1": 5.0, "f2": 24.0, "f3": 25.0, "f4": 30.0}
EDGE = {f: "R2" for f in SHARES}


def test_reallocation_gives_unused_to_filling_flows_of_the_edge() -> None:
    # beta 0.8: only f1 (5 < 20) under-uses; 20 unused -> +20/3 to f2, f3, f4.
    got = reallocate(SHARES, SMOOTHED, EDGE, beta=0.8)
    assert got["f1"] == 25.0  # keeps its fair share
    for flow in ("f2", "f3", "f4"):
        assert got[flow] == pytest.approx(25 + 20 / 3)


def test_larger_beta_reallocates_more() -> None:
    # beta 1.0: f2 (24 < 25) under-uses too: 20 + 1 unused -> +10.5 to f3 and f4.
    got = reallocate(SHARES, SMOOTHED, EDGE, beta=1.0)
    assert got == {"f1": 25.0, "f2": 25.0, "f3": 35.5, "f4": 35.5}
    # beta 0.1: 5 < 2.5 is false, nothing moves.
    assert reallocate(SHARES, SMOOTHED, EDGE, beta=0.1) == SHARES


def test_reallocation_stays_within_an_edge() -> None:
    edge = {"f1": "R2", "f2": "R3", "f3": "R3", "f4": "R3"}
    got = reallocate(SHARES, SMOOTHED, edge, beta=0.8)
    # f1's edge has no filling flow: its 20 stay unallocated; R3 has nothing unused.
    assert got == SHARES


def test_flow_without_sample_counts_as_filling() -> None:
    got = reallocate({"a": 10.0, "b": 10.0}, {"a": 2.0}, {"a": "E", "b": "E"}, beta=0.8)
    assert got == {"a": 10.0, "b": 18.0}


def test_a_flow_held_at_its_window_is_not_under_using() -> None:
    # f1 measures 5 < 20, but its cwnd has reached its allocated window: the queue the
    # others build holds it down, not a lack of demand, so nothing of its share moves.
    assert reallocate(SHARES, SMOOTHED, EDGE, beta=0.8, window_limited={"f1"}) == SHARES
    # Held or not, the others keep their own reading: f2 (24 < 25) still under-uses at
    # beta 1.0 and its 1 goes to f3 and f4 (f1, held, is filling and takes a third).
    got = reallocate(SHARES, SMOOTHED, EDGE, beta=1.0, window_limited={"f1"})
    assert got == {"f1": pytest.approx(25 + 1 / 3), "f2": 25.0,
                   "f3": pytest.approx(25 + 1 / 3), "f4": pytest.approx(25 + 1 / 3)}
    assert under_using(25.0, 5.0, 0.8, window_limited=False)
    assert not under_using(25.0, 5.0, 0.8, window_limited=True)
    assert not under_using(25.0, None, 0.8, window_limited=False)


# A segment occupies mss + 66 bytes on the wire (Ethernet 14, IPv4 20, TCP 20 and the
# timestamp option 12): an MSS of 934 makes 1000-byte frames, 1434 makes 1500.
@pytest.mark.parametrize(("rate", "rtt", "mss", "up", "rnd", "down"), [
    (10e6, 0.010, 934, 13, 13, 12),  # 12,500 B / 1,000 B = 12.5 frames: half rounds up
    (9.92e6, 0.010, 934, 13, 12, 12),  # 12,400 / 1,000 = 12.4
    (9.6e6, 0.010, 934, 12, 12, 12),  # 12.0 exactly (float noise must not add one)
    (1.2e6, 0.020, 1434, 2, 2, 2),  # 3,000 / 1,500 = 2.0
    (100e6, 0.0121, 1448, 100, 100, 99),  # 151,250 / 1,514 = 99.90...
])
def test_window_rounding_modes(rate: float, rtt: float, mss: int, up: int, rnd: int,
                               down: int) -> None:
    assert window_segments(rate, rtt, mss, Rounding.UP) == up
    assert window_segments(rate, rtt, mss, "round") == rnd
    assert window_segments(rate, rtt, mss, Rounding.DOWN) == down


def test_header_bytes_zero_counts_payload_only() -> None:
    # The count before frames were considered: 12,500 B of payload in 1,000 B segments.
    assert window_segments(10e6, 0.010, 1000, "down", header_bytes=0) == 12
    with pytest.raises(AllocError):
        window_segments(10e6, 0.010, 1000, "down", header_bytes=-1)


def test_rounded_down_windows_fit_the_link_on_the_wire() -> None:
    # Two flows share a 100 Mbit/s link with a 10 ms RTT: 125,000 bytes in flight fill it.
    # Each gets 50 Mbit/s, 62,500 B per RTT: 41 frames of 1,514 B (41.28 rounded down),
    # 2 x 41 x 1,514 = 124,148 B <= 125,000.  Counting payload only, 62,500 / 1,448 =
    # 43.16 -> 43 segments, 2 x 43 x 1,514 = 130,204 B: 4 % more than the link carries,
    # which becomes a standing queue.
    bdp_wire = 100e6 / 8 * 0.010
    down = window_segments(50e6, 0.010, 1448, "down")
    assert down == 41 and 2 * down * 1514 <= bdp_wire
    payload = window_segments(50e6, 0.010, 1448, "down", header_bytes=0)
    assert payload == 43 and 2 * payload * 1514 > bdp_wire


def test_window_bounds() -> None:
    assert window_segments(0.0, 0.01, 1448, "down") == 1
    assert window_segments(1e12, 1.0, 536, "up") == 65535
    with pytest.raises(AllocError):
        window_segments(1e6, 0.01, 0)
    with pytest.raises(ValueError):
        window_segments(1e6, 0.01, 1448, "sideways")


def _flows(tputs: dict[str, float | None]) -> dict[str, FlowInput]:
    return {f: FlowInput(path=(f"acc-{f}", "core"), rtt_s=0.010, mss=1250, throughput_bps=t,
                         edge="R2") for f, t in tputs.items()}


def test_allocator_round_trip_with_reallocation() -> None:
    cap = {"core": 100e6, "acc-a": 100e6, "acc-b": 100e6}
    alloc = Allocator(AllocConfig(alpha=0.5, beta=0.8, rounding=Rounding.DOWN))
    got = alloc.allocate(_flows({"a": 10e6, "b": 50e6}), cap)
    # shares 50 Mbit/s each; a under-uses (10 < 40) -> b gets 50 + 40 = 90 Mbit/s.
    assert got["a"].under_using and not got["b"].under_using
    assert got["a"].rate_bps == 50e6 and got["b"].rate_bps == pytest.approx(90e6)
    # windows, in 1,316-byte frames (1,250 + 66): 62,500 B / 1,316 = 47.49 -> 47;
    # 90 Mbit/s: 112,500 / 1,316 = 85.49 -> 85 (rounding down).
    assert (got["a"].window, got["b"].window) == (47, 85)
    # Next round a recovers to 60: EMA 35 < 40 still under-uses; then 45 >= 40 fills.
    got = alloc.allocate(_flows({"a": 60e6, "b": 50e6}), cap)
    assert got["a"].under_using
    got = alloc.allocate(_flows({"a": 60e6, "b": 50e6}), cap)
    assert not got["a"].under_using and got["b"].rate_bps == 50e6

    # A window-limited flow (cwnd at its clamp) keeps its share to itself however low
    # its throughput reads.
    held = {f: replace(i, window_limited=(f == "a"))
            for f, i in _flows({"a": 5e6, "b": 50e6}).items()}
    got = Allocator(AllocConfig(beta=0.8)).allocate(held, cap)
    assert not got["a"].under_using and got["b"].rate_bps == 50e6


def test_allocator_without_reallocation_and_maxmin() -> None:
    cap = {"core": 100e6, "acc-a": 100e6, "acc-b": 20e6}
    cfg = AllocConfig(reallocation=False, method=ShareMethod.MAXMIN)
    got = Allocator(cfg).allocate(_flows({"a": 1e6, "b": None}), cap)
    # b is held to 20 by its access link; max-min gives a the remaining 80.
    assert got["b"].rate_bps == 20e6 and got["a"].rate_bps == 80e6
    got = Allocator(AllocConfig(reallocation=False)).allocate(_flows({"a": 1e6, "b": None}), cap)
    assert got["a"].rate_bps == 50e6  # the paper's share: core 100 / 2 flows
