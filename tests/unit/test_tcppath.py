"""TCP-Path (seed 001) in memory: the lock/confirm/expire/recover state machine, then the
app driven with fake datapaths, its per-flow entries replayed in the fake OpenFlow tables.
"""

from __future__ import annotations

import heapq
from typing import Any

import pytest

from dcnlab.controller.tcppath_state import (
    Attachment,
    ConfirmError,
    FlowKey,
    StartKind,
    TcpPathState,
    Verdict,
)
from dcnlab.controller.view import HostLocation, NetworkView
from dcnlab.topo.spec import parse

SPINES, LEAVES = (1, 2, 3, 4), (5, 6, 7, 8)


@pytest.fixture
def view() -> NetworkView:
    return NetworkView.from_topology(parse("spineleaf:4,4,2"))


def _peer(view: NetworkView) -> Any:
    def peer(dpid: int, port: int) -> tuple[int, int] | None:
        far = view.peer(dpid, port)
        if far is None or not view.graph.edges[dpid, far[0]]["up"]:
            return None
        return far
    return peer


def _key(src: HostLocation, dst: HostLocation, sport: int = 40000,
         dport: int = 5001) -> FlowKey:
    return FlowKey(src.mac, src.ip, sport, dst.mac, dst.ip, dport)


def _at(h: HostLocation) -> Attachment:
    return Attachment(h.dpid, h.port)


def _race(state: TcpPathState, view: NetworkView, xid: int, src: int,
          delay: dict[tuple[int, int], float], now: float = 0.0) -> dict[Verdict, int]:
    """Flood exploration ``xid`` from switch ``src`` through the fabric, every copy
    taking ``delay[(a, b)]`` (default 1) to cross a->b; returns the verdict counts."""
    counts: dict[Verdict, int] = {v: 0 for v in Verdict}
    queue: list[tuple[float, int, int, int]] = []
    seq = 0

    def flood(dpid: int, t: float, skip: int | None) -> None:
        nonlocal seq
        for port in sorted(view.fabric_ports(dpid)):
            if port == skip:
                continue
            far = view.peer(dpid, port)
            assert far is not None
            if not view.graph.edges[dpid, far[0]]["up"]:
                continue  # the app floods on live fabric ports only
            seq += 1
            heapq.heappush(queue, (t + delay.get((dpid, far[0]), 1.0), seq, *far))

    flood(src, now, None)
    while queue:
        t, _, dpid, port = heapq.heappop(queue)
        verdict = state.copy(xid, dpid, port, now + t * 1e-3)
        counts[verdict] += 1
        if verdict is Verdict.FLOOD:
            flood(dpid, t, port)
    return counts


def _explore(state: TcpPathState, view: NetworkView, src: HostLocation, dst: HostLocation,
             delay: dict[tuple[int, int], float] | None = None, now: float = 0.0,
             sport: int = 40000) -> tuple[Any, dict[Verdict, int]]:
    started = state.start(_key(src, dst, sport), _at(src), _at(dst), now)
    assert started.kind is StartKind.NEW
    counts = _race(state, view, started.exploration.xid, src.dpid, delay or {}, now)
    return started.exploration, counts


# -- the state machine ----------------------------------------------------------------


def test_fastest_copy_locks_late_copies_dropped_and_synack_confirms(view: NetworkView) -> None:
    state = TcpPathState(_peer(view))
    h1, h5 = view.hosts[0], view.hosts[4]  # leaf 5 -> leaf 7
    # Spine 1 and 2 congested towards leaf 7: the copy through spine 3 wins.
    slow = {(1, 7): 50.0, (2, 7): 50.0, (4, 7): 5.0}
    expl, counts = _explore(state, view, h1, h5, slow)
    assert counts[Verdict.DELIVER] == 1
    assert counts[Verdict.LATE] > 0 and expl.late == counts[Verdict.LATE]
    assert expl.locks[7] == view.graph.edges[7, 3]["ports"][7]
    # Every switch forwarded at most one copy: the flood is loop-free and finite.
    assert counts[Verdict.FLOOD] == len(view.switches) - 2
    done = state.confirm(_key(h1, h5).reverse(), h5.dpid, h5.port, 0.1)
    assert done.replaced is None
    assert done.flow.dpids == [5, 3, 7]
    first, middle, last = done.flow.path
    assert first.to_src == h1.port and last.to_dst == h5.port
    assert view.peer(5, first.to_dst) == (3, middle.to_src)
    assert view.peer(3, middle.to_dst) == (7, last.to_src)


def test_duplicate_copy_on_the_locked_port_is_not_late(view: NetworkView) -> None:
    state = TcpPathState(_peer(view))
    h1, h5 = view.hosts[0], view.hosts[4]
    xid = state.start(_key(h1, h5), _at(h1), _at(h5), 0.0).exploration.xid
    assert state.copy(xid, 1, 1, 0.001) is Verdict.FLOOD
    assert state.copy(xid, 1, 1, 0.002) is Verdict.DUPLICATE
    assert state.copy(xid, 1, 2, 0.003) is Verdict.LATE
    assert state.copy(xid + 99, 1, 1, 0.003) is Verdict.UNKNOWN


def test_unconfirmed_locks_expire(view: NetworkView) -> None:
    state = TcpPathState(_peer(view), lock_timeout=3.0)
    h1, h5 = view.hosts[0], view.hosts[4]
    expl, _ = _explore(state, view, h1, h5)
    assert state.expire(2.0) == []
    assert state.expire(3.5) == [expl]
    assert not state.explorations and not state.current
    assert state.copy(expl.xid, 1, 1, 3.6) is Verdict.UNKNOWN
    with pytest.raises(ConfirmError) as err:
        state.confirm(_key(h1, h5).reverse(), h5.dpid, h5.port, 3.6)
    assert err.value.reason == "unknown"


def test_syn_retransmission(view: NetworkView) -> None:
    state = TcpPathState(_peer(view))
    h1, h5 = view.hosts[0], view.hosts[4]
    key = _key(h1, h5)
    # Lost exploration (never delivered): the retransmission starts a fresh one whose
    # copies do not mix with the old one's.
    first = state.start(key, _at(h1), _at(h5), 0.0).exploration
    again = state.start(key, _at(h1), _at(h5), 1.0)
    assert again.kind is StartKind.NEW and again.superseded is first
    assert state.copy(first.xid, 1, 1, 1.001) is Verdict.UNKNOWN
    counts = _race(state, view, again.exploration.xid, h1.dpid, {}, 1.0)
    assert counts[Verdict.DELIVER] == 1
    # Delivered but no SYN-ACK yet: the next retransmission is re-delivered, same locks.
    third = state.start(key, _at(h1), _at(h5), 2.0)
    assert third.kind is StartKind.REDELIVER and third.exploration is again.exploration
    done = state.confirm(key.reverse(), h5.dpid, h5.port, 2.1)
    # Confirmed: a further retransmission follows the path.
    assert state.start(key, _at(h1), _at(h5), 2.2).kind is StartKind.CONFIRMED
    assert state.flows[key.connection] is done.flow


def test_synack_on_unexpected_port_or_before_delivery_confirms_nothing(
        view: NetworkView) -> None:
    state = TcpPathState(_peer(view))
    h1, h2, h5 = view.hosts[0], view.hosts[1], view.hosts[4]
    key = _key(h1, h5)
    xid = state.start(key, _at(h1), _at(h5), 0.0).exploration.xid
    with pytest.raises(ConfirmError) as err:
        state.confirm(key.reverse(), h5.dpid, h5.port, 0.01)
    assert err.value.reason == "not_delivered"
    _race(state, view, xid, h1.dpid, {}, 0.0)
    for dpid, port in ((h5.dpid, 1), (h1.dpid, h1.port), (h5.dpid, h5.port + 1)):
        with pytest.raises(ConfirmError) as err:
            state.confirm(key.reverse(), dpid, port, 0.1)
        assert err.value.reason == "unexpected_port"
    assert not state.flows
    # A SYN-ACK of another connection is unknown.
    with pytest.raises(ConfirmError):
        state.confirm(_key(h2, h5).reverse(), h5.dpid, h5.port, 0.1)
    state.confirm(key.reverse(), h5.dpid, h5.port, 0.1)
    assert len(state.flows) == 1


def test_simultaneous_open_keeps_one_path_per_connection(view: NetworkView) -> None:
    state = TcpPathState(_peer(view))
    h1, h5 = view.hosts[0], view.hosts[4]
    ab, ba = _key(h1, h5, 6000, 7000), _key(h5, h1, 7000, 6000)
    x1 = state.start(ab, _at(h1), _at(h5), 0.0).exploration
    x2 = state.start(ba, _at(h5), _at(h1), 0.0).exploration
    assert x1.xid != x2.xid
    _race(state, view, x1.xid, h1.dpid, {(1, 7): 9.0, (2, 7): 9.0, (3, 7): 9.0})  # via 4
    _race(state, view, x2.xid, h5.dpid, {(7, 1): 9.0, (7, 3): 9.0, (7, 4): 9.0})  # via 2
    first = state.confirm(ba, h5.dpid, h5.port, 0.1)  # h5's SYN-ACK confirms h1's SYN
    second = state.confirm(ab, h1.dpid, h1.port, 0.1)  # and h1's confirms h5's
    assert first.flow.dpids == [5, 4, 7] and second.flow.dpids == [7, 2, 5]
    assert second.replaced is first.flow
    assert list(state.flows.values()) == [second.flow]
    assert state.remove_flow(first.flow.serial) is None  # already replaced


def test_same_edge_is_local(view: NetworkView) -> None:
    state = TcpPathState(_peer(view))
    h1, h2 = view.hosts[0], view.hosts[1]
    started = state.start(_key(h1, h2), _at(h1), _at(h2), 0.0)
    assert started.kind is StartKind.LOCAL
    done = state.confirm(_key(h1, h2).reverse(), h2.dpid, h2.port, 0.01)
    assert [(h.dpid, h.to_src, h.to_dst) for h in done.flow.path] == [(5, h1.port, h2.port)]


def test_link_down_invalidates_flows_and_recovery_finds_another_path(
        view: NetworkView) -> None:
    state = TcpPathState(_peer(view))
    h1, h5 = view.hosts[0], view.hosts[4]
    key = _key(h1, h5)
    _explore(state, view, h1, h5, {(2, 7): 9.0, (3, 7): 9.0, (4, 7): 9.0})  # via spine 1
    flow = state.confirm(key.reverse(), h5.dpid, h5.port, 0.1).flow
    assert flow.dpids == [5, 1, 7]
    # An unrelated flow via spine 2 survives.
    h2, h6 = view.hosts[1], view.hosts[5]
    _explore(state, view, h2, h6, {(1, 7): 9.0, (3, 7): 9.0, (4, 7): 9.0})
    other = state.confirm(_key(h2, h6).reverse(), h6.dpid, h6.port, 0.1).flow
    port = view.graph.edges[1, 7]["ports"][1]
    view.set_port_up(1, port, False)
    assert state.link_down(1, port) == [flow]
    assert state.link_down(7, view.graph.edges[1, 7]["ports"][7]) == []  # other end: done
    assert list(state.flows.values()) == [other]
    # Path Recovery: a new exploration from the source edge, confirmed on arrival.
    rec = state.start(key, _at(h1), _at(h5), 1.0, recovery=True)
    assert rec.kind is StartKind.NEW
    counts = _race(state, view, rec.exploration.xid, h1.dpid, {(1, 7): 0.1}, 1.0)
    assert counts[Verdict.DELIVER] == 1
    new = state.confirm_recovery(rec.exploration.xid, 1.1).flow
    assert 1 not in new.dpids[1:-1] and new.dpids[0] == 5 and new.dpids[-1] == 7


def test_walk_refuses_a_path_over_a_link_gone_down(view: NetworkView) -> None:
    state = TcpPathState(_peer(view))
    h1, h5 = view.hosts[0], view.hosts[4]
    _explore(state, view, h1, h5, {(2, 7): 9.0, (3, 7): 9.0, (4, 7): 9.0})  # via spine 1
    view.set_port_up(7, view.graph.edges[1, 7]["ports"][7], False)
    with pytest.raises(ConfirmError) as err:
        state.confirm(_key(h1, h5).reverse(), h5.dpid, h5.port, 0.1)
    assert err.value.reason == "broken"
