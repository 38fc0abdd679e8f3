"""THE rule (reproduction/verdict.py) on numbers computed by hand.

t quantiles by hand: t(0.975, 2) from the closed form for 2 degrees of freedom,
``(2p - 1) / sqrt(2 p (1 - p))`` = 0.95 / sqrt(0.04875) = 4.302652729749464; the others
from the table (t(0.975, 1) = 12.7062, t(0.975, 3) = 3.1824, t(0.975, 9) = 2.2622,
t(0.975, 16) = 2.1199, t(0.975, 17) = 2.1098), each checked against scipy below.
"""

from __future__ import annotations

import math

import pytest
from scipy import stats

from dcnlab.benchmarks.engine.reproduction import verdict as rule
from dcnlab.benchmarks.engine.reproduction.verdict import (
    DIRECTION,
    INCONCLUSIVE,
    OPPOSITE,
    REPRODUCED,
    Measured,
    per_flow,
    per_seed,
    seeds_needed,
    verdict,
)

T2 = 0.95 / math.sqrt(2 * 0.975 * 0.025)  # t(0.975, 2), closed form
TABLE = {1: 12.7062, 2: 4.3027, 3: 3.1824, 9: 2.2622, 16: 2.1199, 17: 2.1098}


def test_the_t_quantiles_used_by_hand_are_scipys() -> None:
    assert stats.t.ppf(0.975, 2) == pytest.approx(T2, abs=1e-12)
    for df, value in TABLE.items():
        assert stats.t.ppf(0.975, df) == pytest.approx(value, abs=1e-4)


def _ratios(logs: dict[int, float]) -> Measured:
    """scheme = 100 e^x per seed, baseline 100."""
    return per_seed("ratio", {s: 100 * math.exp(x) for s, x in logs.items()},
                    dict.fromkeys(logs, 100.0))


# x = -1, -0.9, -1.1: m = -1, s = 0.1, half = t2 * 0.1 / sqrt(3) on the log scale
TIGHT = {1: -1.0, 2: -0.9, 3: -1.1}
HALF = T2 * 0.1 / math.sqrt(3)


def test_ratio_interval_is_the_geometric_mean_of_per_seed_ratios() -> None:
    m = _ratios(TIGHT)
    assert (m.n, m.left_out, m.per, m.compare) == (3, 0, "seed", "ratio")
    assert m.centre == pytest.approx(-1.0) and m.spread == pytest.approx(0.1)
    assert m.estimate == pytest.approx(math.exp(-1))
    assert m.low == pytest.approx(math.exp(-1 - HALF))  # 0.28696
    assert m.high == pytest.approx(math.exp(-1 + HALF))  # 0.47162
    assert (round(m.low, 5), round(m.high, 5)) == (0.28696, 0.47162)


def test_each_verdict_of_a_ratio() -> None:
    m = _ratios(TIGHT)  # [0.28696, 0.47162], below 1
    assert verdict(m, 0.4, "lower") == REPRODUCED
    assert verdict(m, 0.5, "lower") == DIRECTION  # 0.5 > 0.47162
    assert verdict(m, 0.2, "lower") == DIRECTION  # 0.2 < 0.28696
    assert verdict(m, 2.0, "higher") == OPPOSITE
    higher = _ratios({s: -x for s, x in TIGHT.items()})  # [2.120, 3.485]
    assert verdict(higher, 2.5, "higher") == REPRODUCED
    assert verdict(higher, 0.5, "lower") == OPPOSITE
    wide = _ratios({1: -1.0, 2: -0.5, 3: -1.5})  # m = -1, s = 0.5: half 1.242 > 1
    assert wide.high == pytest.approx(math.exp(-1 + T2 * 0.5 / math.sqrt(3)))
    assert wide.high > 1 > wide.low
    assert verdict(wide, 0.4, "lower") == INCONCLUSIVE
    assert verdict(wide, 2.0, "higher") == INCONCLUSIVE


def test_a_paper_that_states_a_direction_only_gets_at_most_direction() -> None:
    assert verdict(_ratios(TIGHT), None, "lower") == DIRECTION
    assert verdict(_ratios(TIGHT), None, "higher") == OPPOSITE
    assert verdict(_ratios({1: -1.0, 2: -0.5, 3: -1.5}), None, "lower") == INCONCLUSIVE


def test_the_paper_value_on_an_edge_of_the_interval_is_inside() -> None:
    m = _ratios(TIGHT)
    assert verdict(m, m.low, "lower") == REPRODUCED
    assert verdict(m, m.high, "lower") == REPRODUCED
    assert verdict(m, math.nextafter(m.high, 1.0), "lower") == DIRECTION
    assert verdict(m, math.nextafter(m.low, 0.0), "lower") == DIRECTION
    # No change on the edge is inside too: inconclusive, not a direction.
    edge = Measured("ratio", "seed", 3, 0.5, 0.25, 1.0, math.log(0.5), 0.1)
    assert verdict(edge, 0.5, "lower") == INCONCLUSIVE
    assert verdict(Measured("difference", "seed", 3, 1.0, 0.0, 2.0, 1.0, 1.0), 1.0,
                   "higher") == INCONCLUSIVE


def test_each_verdict_of_a_difference() -> None:
    # d = 5, 7, 9: m = 7, s = 2, half = t2 * 2 / sqrt(3) = 4.96827: [2.03172, 11.96828]
    m = per_seed("difference", {1: 55.0, 2: 57.0, 3: 59.0}, {1: 50.0, 2: 50.0, 3: 50.0})
    half = T2 * 2 / math.sqrt(3)
    assert (m.estimate, m.centre, m.spread) == (pytest.approx(7), pytest.approx(7),
                                                 pytest.approx(2))
    assert (m.low, m.high) == (pytest.approx(7 - half), pytest.approx(7 + half))
    assert round(m.low, 5) == 2.03172
    assert verdict(m, 5, "higher") == REPRODUCED
    assert verdict(m, 15, "higher") == DIRECTION
    assert verdict(m, -3, "lower") == OPPOSITE
    noisy = per_seed("difference", {1: 51.0, 2: 49.0, 3: 53.0}, dict.fromkeys((1, 2, 3), 50.0))
    assert noisy.low < 0 < noisy.high
    assert verdict(noisy, -5, "lower") == INCONCLUSIVE


def test_one_seed_has_no_interval_and_zero_spread_a_point() -> None:
    one = per_seed("ratio", {1: 2.0}, {1: 4.0})
    assert one.n == 1 and one.estimate == 0.5 and not one.has_interval
    assert verdict(one, 0.5, "lower") == INCONCLUSIVE
    assert seeds_needed(one) == "unknown"  # s undefined
    # s = 0: every seed the same ratio; the interval is that point
    flat = per_seed("ratio", {1: 1.0, 2: 2.0, 3: 4.0}, {1: 2.0, 2: 4.0, 3: 8.0})
    assert flat.spread == 0 and flat.low == flat.high == pytest.approx(0.5)
    assert verdict(flat, 0.5, "lower") == REPRODUCED
    assert verdict(flat, 0.4, "lower") == DIRECTION


def test_seeds_left_out_are_counted() -> None:
    """A ratio needs both values, positive: seed 2's scheme value is 0 (no log) and seed
    3's missing; seed 4 has neither value and is no seed of this comparison."""
    m = per_seed("ratio", {1: 2.0, 2: 0.0, 3: None}, {1: 4.0, 2: 4.0, 3: 4.0, 4: None})
    assert (m.n, m.left_out) == (1, 2)
    d = per_seed("difference", {1: 2.0, 2: 0.0, 3: math.nan}, {1: 4.0, 2: 4.0, 3: 4.0})
    assert (d.n, d.left_out) == (2, 1)  # a difference of 0 - 4 is a difference


def test_seeds_needed_by_hand() -> None:
    # m = -1, s = 0.5 (log scale): n = 2: 12.7062 * 0.5 / 1.4142 = 4.49; n = 3:
    # 4.3027 * 0.5 / 1.7321 = 1.242; n = 4: 3.1824 * 0.5 / 2 = 0.7956 < 1  ->  4
    assert seeds_needed(_ratios({1: -1.0, 2: -0.5, 3: -1.5})) == "4"
    # d = 1, -1, 3: m = 1, s = 2: n = 17: 2.1199 * 2 / 4.1231 = 1.028; n = 18:
    # 2.1098 * 2 / 4.2426 = 0.9946 < 1  ->  18
    noisy = per_seed("difference", {1: 51.0, 2: 49.0, 3: 53.0}, dict.fromkeys((1, 2, 3), 50.0))
    assert (noisy.centre, noisy.spread) == (pytest.approx(1), pytest.approx(2))
    assert TABLE[16] * 2 / math.sqrt(17) > 1 > TABLE[17] * 2 / math.sqrt(18)
    assert seeds_needed(noisy) == "18"
    # m = 0.01, s = 0.1: needs t * 0.1 / sqrt(n) < 0.01, n > ~390: none up to 100
    tiny = Measured("ratio", "seed", 3, math.exp(0.01), 0.8, 1.2, 0.01, 0.1)
    assert seeds_needed(tiny) == "> 100"
    # m at no change: no number of seeds decides it
    assert seeds_needed(_ratios({1: -0.5, 2: 0.5})) == "unknown"


def test_per_flow_recovers_the_spread_from_the_interval() -> None:
    # 10 pairs, ratio 0.5 in [0.4, 0.625]: half = log(1.25), s = half * sqrt(10) / t(9)
    m = per_flow(0.5, 0.4, 0.625, 10)
    assert (m.per, m.compare, m.n) == ("flow", "ratio", 10)
    assert m.spread == pytest.approx(math.log(1.25) * math.sqrt(10) / TABLE[9], rel=1e-4)
    assert verdict(m, 0.5, "lower") == REPRODUCED
    # the same spread a per-seed comparison of those values has
    seeded = _ratios({1: -1.0, 2: -0.5, 3: -1.5})
    again = per_flow(seeded.estimate, seeded.low, seeded.high, seeded.n)
    assert again.spread == pytest.approx(seeded.spread)
    assert seeds_needed(again) == seeds_needed(seeded) == "4"
    assert not per_flow(0.5, math.nan, math.nan, 1).has_interval


def test_the_rule_names_every_verdict_once() -> None:
    for name in rule.VERDICTS:
        assert rule.RULE.count(f"**{name}**") == 1
