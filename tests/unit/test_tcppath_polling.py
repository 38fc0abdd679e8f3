"""How data-plane TCP-Path paces its flow-statistics rounds (dcnlab.schemes.tcppath.polling)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.schemes.tcppath import polling
from dcnlab.schemes.tcppath.polling import BUDGET, MAX_INTERVAL, MIN_INTERVAL, FlowPolling


def test_the_sample_entry_is_a_per_flow_entry_ryu_decodes_whole() -> None:
    raw = polling._sample_entry(7)
    stats = parser.OFPFlowStats.parser(raw, 0)
    assert stats.length == len(raw) and stats.priority == 800
    assert dict(stats.match.items())["tcp_src"] == 32768 + 7
    assert [a.port for i in stats.instructions for a in i.actions] == [2]


def test_decoding_cost_is_the_best_of_three_passes_per_entry(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Three passes over 16 entries that the clock says took 32, 16 and 48 ms: the best
    # pass, 16 ms, over 16 entries is 1 ms per entry.  (How fast this machine decodes is
    # benchmarks/tcppath_polling.py's to say.)
    readings = iter([0.0, 0.032, 1.0, 1.016, 2.0, 2.048])
    clock = SimpleNamespace(perf_counter=lambda: next(readings))
    monkeypatch.setattr(polling, "time", clock)
    assert polling.decode_cost_per_entry(samples=16) == pytest.approx(0.001)
    assert next(readings, None) is None  # two readings per pass, three passes


def test_decoding_cost_is_a_measurement_not_a_default() -> None:
    assert polling.decode_cost_per_entry(samples=16) > 0


@pytest.mark.parametrize(("cost", "interval"), [
    (0.0, MIN_INTERVAL),
    (BUDGET * MIN_INTERVAL, MIN_INTERVAL),
    (BUDGET * 1.0, 1.0),  # 50 ms of work every second: 5 % of a core
    (BUDGET * MAX_INTERVAL * 10, MAX_INTERVAL),
])
def test_the_interval_keeps_a_round_within_its_budget(cost: float, interval: float) -> None:
    assert polling.interval_for(cost) == pytest.approx(interval)


def test_a_round_completes_when_its_last_switch_answers_and_sets_the_next_interval() -> None:
    p = FlowPolling(decode_cost=1e-4)
    assert p.start_round([1, 2, 3]) is False
    p.decoded(600)  # 60 ms of decoding
    p.spent(0.01)
    assert not p.answered(1) and not p.answered(2)
    assert not p.answered(1)  # a second reply from the same switch changes nothing
    assert p.answered(3)
    assert p.last_cost == pytest.approx(0.07)
    assert p.rounds == 0  # counted once its paths are walked
    p.walked(0.01)
    assert p.rounds == 1
    assert p.last_cost == pytest.approx(0.08)
    assert p.interval == pytest.approx(0.08 / BUDGET)
    assert p.answered(2)  # outside any round (asked by hand): walk at once


def test_a_round_a_switch_never_completed_is_finished_by_the_next() -> None:
    p = FlowPolling(decode_cost=1e-4)
    p.start_round([1, 2])
    p.decoded(2000)
    assert not p.answered(1)
    assert p.start_round([1, 2]) is True  # switch 2 never answered: walk what came
    p.walked(0.0)
    assert p.rounds == 1  # a round cut short counts too: its switches were all asked
    assert p.last_cost == pytest.approx(0.2) and p.interval == MAX_INTERVAL
    assert p.awaiting == {1, 2}


def test_read_at_is_the_time_of_the_request_an_answer_belongs_to(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A switch answers its requests in order: each answer is dated by the oldest request
    not yet answered, so a reader waiting for 'read after T' never takes an answer to an
    earlier request for a later one."""
    now = iter([10.0, 11.0, 12.0])
    monkeypatch.setattr(polling.time, "time", lambda: next(now))
    p = FlowPolling(decode_cost=1e-4)
    p.start_round([1, 2])
    p.asked(1)  # 10.0
    p.asked(1)  # 11.0: asked again before the first answer came
    p.asked(2)  # 12.0
    assert p.read_at == {}
    p.answered(1)
    assert p.read_at == {1: 10.0}  # the first request's answer, not the second's
    p.answered(1)
    p.answered(2)
    assert p.read_at == {1: 11.0, 2: 12.0}
    p.answered(2)  # an answer to no request of ours (asked by hand): the date stays
    assert p.read_at == {1: 11.0, 2: 12.0}


def test_read_after_wants_every_switch_asked_after_the_moment() -> None:
    """A round counted after a moment may have read its first switches before it (the
    arppath check found pinged pairs without paths that way): only every switch's own
    request time says what the state holds."""
    state = {"arppath": {"polling": {"rounds": 36, "read_at": {"1": 99.9, "2": 100.4}}}}
    assert not polling.read_after(state, "arppath", 100.0, [1, 2])
    assert polling.read_after(state, "arppath", 99.0, [1, 2])
    assert not polling.read_after(state, "arppath", 99.0, [1, 2, 3])  # 3 never read
    assert not polling.read_after({}, "arppath", 0.0, [1])
