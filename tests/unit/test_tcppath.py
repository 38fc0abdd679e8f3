"""TCP-Path (seed 001) in memory: the lock/confirm/expire/recover state machine, then the
app driven with fake datapaths, its per-flow entries replayed in the fake OpenFlow tables.
"""

from __future__ import annotations

import heapq
import json
from types import SimpleNamespace
from typing import Any

import pytest
from app_harness import app_from_topology
from ryu.lib.packet import ethernet, ipv4, packet, tcp
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser
from state_schema import mismatches

from dcnlab.apps.tcppath import TcpPath
from dcnlab.apps.tfe import Tfe, parse_filter
from dcnlab.controller.oftable import FakeDatapath, FakeNetwork, packet_ints, tcp_packet
from dcnlab.controller.view import HostLocation, NetworkView
from dcnlab.schemes.tcppath import frames
from dcnlab.schemes.tcppath.rules import COOKIE_TCPPATH, PRIO_FLOW, port_prefixes
from dcnlab.schemes.tcppath.state import (
    Attachment,
    ConfirmError,
    FlowKey,
    StartKind,
    TcpPathState,
    Verdict,
)
from dcnlab.schemes.tcppath.state_file import TcpPathControllerState
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


# -- the app, driven with fake datapaths -------------------------------------------------


def _ev(**msg: Any) -> SimpleNamespace:
    return SimpleNamespace(msg=SimpleNamespace(**msg))


def _connect(app: Any, dp: FakeDatapath) -> list[Any]:
    app._features(_ev(datapath=dp))
    msgs = dp.take()
    barrier = [m for m in msgs if isinstance(m, parser.OFPBarrierRequest)]
    app._barrier(_ev(datapath=dp, xid=barrier[0].xid))
    return msgs


def _replay(net: FakeNetwork, dpid: int, msgs: list[Any]) -> None:
    net.replay(dpid, [m for m in msgs
                      if isinstance(m, (parser.OFPFlowMod, parser.OFPGroupMod))])


TOPO = "spineleaf:4,4,2"


def _tcp_frame(src: HostLocation, dst: HostLocation, sport: int, dport: int, bits: int,
               dscp: int = 0) -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst=dst.mac, src=src.mac, ethertype=0x0800))
    pkt.add_protocol(ipv4.ipv4(src=src.ip, dst=dst.ip, proto=6, tos=dscp << 2))
    pkt.add_protocol(tcp.tcp(src_port=sport, dst_port=dport, bits=bits))
    pkt.serialize()
    return bytes(pkt.data)


def _fields(frame: bytes, in_port: int) -> dict[str, Any]:
    """The match fields of a frame, as FakeSwitch.lookup wants them."""
    if frame[12:14] == b"\x88\xb5":
        return {"in_port": in_port, "eth_type": 0x88B5}
    seg = frames.parse_tcp(frame)
    k = seg.key
    return packet_ints({"in_port": in_port, "eth_type": 0x0800, "eth_src": k.src_mac,
                        "eth_dst": k.dst_mac, "ipv4_src": k.src_ip, "ipv4_dst": k.dst_ip,
                        "ip_proto": 6, "ip_dscp": seg.dscp, "tcp_src": k.src_port,
                        "tcp_dst": k.dst_port, "tcp_flags": seg.flags})


class Lab:
    """App + fake datapaths + fake tables + a fake wire with per-link delays."""

    def __init__(self, app_cls: type, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                 topo: str = TOPO, **env: str) -> None:
        # These tests drive controller mode (punts); test_tcppath_dataplane the data plane.
        env.setdefault("DCNLAB_TCPPATH_MODE", "controller")
        self.app, spec = app_from_topology(app_cls, topo, tmp_path, monkeypatch, **env)
        self.clock = 100.0
        self.app.now = lambda: self.clock
        self.dps = {s.dpid: FakeDatapath(s.dpid) for s in spec.switches}
        self.view = NetworkView.from_topology(spec)
        self.net = FakeNetwork(self.view)
        self.delay: dict[tuple[int, int], float] = {}
        self.delivered: list[tuple[str, bytes]] = []  # (host ip, frame)
        self.packet_outs = 0
        for dpid, dp in self.dps.items():
            _replay(self.net, dpid, _connect(self.app, dp))
        self.hosts = {h.ip: h for h in self.view.hosts}

    def punt(self, dpid: int, in_port: int, frame: bytes) -> None:
        self.app._packet_in(_ev(datapath=self.dps[dpid], match={"in_port": in_port},
                                data=frame))

    def send(self, src: HostLocation, frame: bytes) -> None:
        """A host sends a frame: its edge switch's table decides (punt or forward)."""
        queue: list[tuple[float, int, int, int, bytes]] = []
        self._arrive(queue, src.dpid, src.port, frame, 0.0)
        self.run(queue)

    def _arrive(self, queue: list, dpid: int, in_port: int, frame: bytes, t: float) -> None:
        ways = self.net.switches[dpid].alternatives(_fields(frame, in_port))
        for port in ways[0]:  # a select group: its first bucket
            if port == ofp.OFPP_CONTROLLER:
                self.clock = 100.0 + t
                self.punt(dpid, in_port, frame)
                self._drain(queue, t)
            else:
                self._out(queue, dpid, port, frame, t)

    def _out(self, queue: list, dpid: int, port: int, frame: bytes, t: float) -> None:
        far = self.view.peer(dpid, port)
        if far is None:
            host = next(h for h in self.view.hosts if (h.dpid, h.port) == (dpid, port))
            self.delivered.append((host.ip, frame))
            return
        if not self.view.graph.edges[dpid, far[0]]["up"]:
            return
        d = self.delay.get((dpid, far[0]), 0.001)
        heapq.heappush(queue, (t + d, id(frame) + len(queue), far[0], far[1], frame))

    def _drain(self, queue: list, t: float) -> None:
        """Apply what the app sent: entries to the fake tables, packet-outs to the wire."""
        for dpid, dp in self.dps.items():
            msgs = dp.take()
            _replay(self.net, dpid, msgs)
            for m in msgs:
                if isinstance(m, parser.OFPPacketOut):
                    self.packet_outs += 1
                    for a in m.actions:
                        self._out(queue, dpid, a.port, m.data, t)

    def run(self, queue: list) -> None:
        while queue:
            t, _, dpid, in_port, frame = heapq.heappop(queue)
            self._arrive(queue, dpid, in_port, frame, t)

    def connect(self, src: HostLocation, dst: HostLocation, sport: int = 40000,
                dport: int = 5001, dscp: int = 0) -> None:
        """SYN from src; when it reaches dst, dst answers SYN-ACK."""
        self.delivered.clear()
        self.send(src, _tcp_frame(src, dst, sport, dport, 0x002, dscp))
        syns = [f for ip, f in self.delivered if ip == dst.ip]
        assert len(syns) == 1, self.delivered
        self.delivered.clear()
        self.send(dst, _tcp_frame(dst, src, dport, sport, 0x012, dscp))
        assert [ip for ip, _ in self.delivered] == [src.ip]

    def per_flow_entries(self) -> int:
        return sum(1 for sw in self.net.switches.values() for f in sw.flows
                   if f.priority == PRIO_FLOW)

    def trace(self, src: HostLocation, dst: HostLocation, sport: int, dport: int) -> Any:
        pkt = {**tcp_packet(src, dst, sport, dport), "tcp_flags": 0x010, "ip_dscp": 0}
        return self.net.trace(src.ip, pkt)


def _h(lab: Lab, name: str) -> HostLocation:
    return next(h for h in lab.view.hosts if h.name == name)


def test_app_explores_confirms_and_installs_a_loop_free_path(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(TcpPath, tmp_path, monkeypatch)
    h1, h5 = _h(lab, "h1"), _h(lab, "h5")  # leaf 5 -> leaf 7
    lab.delay = {(5, 1): 0.5, (5, 2): 0.5, (5, 4): 0.5}  # only the way via spine 3 is fast
    lab.connect(h1, h5)
    c = lab.app.counters
    assert c["tcppath_explorations"] == 1 and c["tcppath_confirmed"] == 1
    assert c["tcppath_copy_late"] > 0 and c["tcppath_copy_packet_in"] > 0
    flow = next(iter(lab.app.paths.flows.values()))
    assert flow.dpids == [5, 3, 7]
    assert lab.per_flow_entries() == 6
    state = lab.app.state()["tcppath"]
    assert state["flow_entries_total"] == 6 and state["recent"][0]["path"] == [5, 3, 7]
    # The section, as the state file carries it, is the one the schema declares.
    lab.app.tick(lab.clock)  # one sample in the entry-count series
    assert lab.app.state()["tcppath"]["series"] and state["copies_in"]
    assert mismatches(json.loads(json.dumps(lab.app.state())), TcpPathControllerState) == []
    for a, b, sp, dp in ((h1, h5, 40000, 5001), (h5, h1, 5001, 40000)):
        trace = lab.trace(a, b, sp, dp)
        assert trace.clean and trace.paths == {b.ip: 1}, trace
    # Other traffic between the same hosts still takes every ECMP path.
    assert lab.trace(h1, h5, 40001, 5001).paths == {h5.ip: 4}


def test_every_pair_gets_a_loop_free_delivered_path(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(TcpPath, tmp_path, monkeypatch)
    hosts = lab.view.hosts
    for i, a in enumerate(hosts):
        for b in hosts:
            if a is not b:
                lab.connect(a, b, sport=41000 + i)
    assert lab.app.counters["tcppath_confirmed"] == len(hosts) * (len(hosts) - 1)
    for i, a in enumerate(hosts):
        for b in hosts:
            if a is not b:
                trace = lab.trace(a, b, 41000 + i, 5001)
                assert trace.clean and trace.paths == {b.ip: 1}, (a.ip, b.ip, trace)
                back = lab.trace(b, a, 5001, 41000 + i)
                assert back.clean and back.paths == {a.ip: 1}


def test_syn_retransmission_after_delivery_is_redelivered(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(TcpPath, tmp_path, monkeypatch)
    h1, h5 = _h(lab, "h1"), _h(lab, "h5")
    syn = _tcp_frame(h1, h5, 40000, 5001, 0x002)
    lab.send(h1, syn)
    lab.send(h1, syn)  # the SYN-ACK was lost: the host retransmits
    assert [ip for ip, _ in lab.delivered] == [h5.ip, h5.ip]
    assert lab.app.counters["tcppath_explorations"] == 1
    assert lab.app.counters["tcppath_syn_redeliver"] == 1


def test_synack_on_unexpected_port_and_bad_input_are_counted(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(TcpPath, tmp_path, monkeypatch)
    h1, h2, h5 = _h(lab, "h1"), _h(lab, "h2"), _h(lab, "h5")
    lab.send(h1, _tcp_frame(h1, h5, 40000, 5001, 0x002))
    # A SYN-ACK for it punted from another host port of the destination edge.
    lab.punt(h5.dpid, h5.port + 1, _tcp_frame(h5, h1, 5001, 40000, 0x012))
    assert lab.app.counters["tcppath_synack_unexpected_port"] == 1
    assert lab.app.counters["tcppath_synack_relayed"] == 1  # it still reaches h1
    assert not lab.app.paths.flows
    for dp in lab.dps.values():
        dp.take()
    bad = [b"", b"\x08\x00" * 7, _tcp_frame(h1, h5, 1, 2, 0x002)[:30],
           _tcp_frame(h1, h5, 1, 2, 0x010),  # not a SYN
           frames.exploration(99999, frames.KIND_REQUEST, _tcp_frame(h1, h5, 1, 2, 0x002)),
           b"\xff" * 12 + b"\x88\xb5" + b"TCPP\x09\x01" + b"\x00" * 40]
    before = dict(lab.app.counters)
    for frame in bad:
        lab.punt(h1.dpid, 1, frame)
        lab.punt(h1.dpid, h1.port, frame)
    assert lab.app.counters["tcppath_copy_unknown"] - before.get("tcppath_copy_unknown", 0) == 1
    assert lab.app.counters["tcppath_bad_punt"] > before.get("tcppath_bad_punt", 0)
    # A SYN punted from a fabric port is never explored (it would loop).
    fabric_before = lab.app.counters["tcppath_punt_from_fabric"]
    lab.punt(5, 1, _tcp_frame(h2, h5, 40002, 5001, 0x002))
    assert lab.app.counters["tcppath_punt_from_fabric"] == fabric_before + 1
    assert all(not isinstance(m, parser.OFPPacketOut) for dp in lab.dps.values()
               for m in dp.take())


def test_table_full_error_drops_the_flow_to_the_default_path(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(TcpPath, tmp_path, monkeypatch)
    h1, h5 = _h(lab, "h1"), _h(lab, "h5")
    lab.send(h1, _tcp_frame(h1, h5, 40000, 5001, 0x002))
    lab.punt(h5.dpid, h5.port, _tcp_frame(h5, h1, 5001, 40000, 0x012))
    # Capture what went to the spine and pretend the spine's table was full.
    flow = next(iter(lab.app.paths.flows.values()))
    spine = flow.dpids[1]
    mods = [m for m in lab.dps[spine].take() if isinstance(m, parser.OFPFlowMod)]
    for dpid, dp in lab.dps.items():
        if dpid != spine:
            _replay(lab.net, dpid, dp.take())
    err = SimpleNamespace(datapath=lab.dps[spine], xid=mods[0].xid,
                          type=ofp.OFPET_FLOW_MOD_FAILED, code=ofp.OFPFMFC_TABLE_FULL)
    lab.app._tcppath_error(SimpleNamespace(msg=err))
    lab.app._error(SimpleNamespace(msg=err))  # the base reports it as well
    assert lab.app.counters["tcppath_table_full"] == 1
    assert not lab.app.paths.flows
    for dpid, dp in lab.dps.items():
        _replay(lab.net, dpid, dp.take())
    trace = lab.trace(h1, h5, 40000, 5001)
    assert trace.clean and set(trace.paths) == {h5.ip}


def test_flow_removed_takes_the_whole_path_down(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(TcpPath, tmp_path, monkeypatch, DCNLAB_TCPPATH_IDLE="2")
    h1, h5 = _h(lab, "h1"), _h(lab, "h5")
    lab.connect(h1, h5)
    flow = next(iter(lab.app.paths.flows.values()))
    idle = [f for f in lab.net.switches[5].flows if f.priority == PRIO_FLOW]
    assert idle and all(f.cookie == COOKIE_TCPPATH | flow.serial for f in idle)
    removed = SimpleNamespace(datapath=lab.dps[5], cookie=COOKIE_TCPPATH | flow.serial,
                              reason=ofp.OFPRR_IDLE_TIMEOUT)
    lab.net.switches[5].flows = [f for f in lab.net.switches[5].flows
                                 if f.priority != PRIO_FLOW]
    lab.app._flow_removed(SimpleNamespace(msg=removed))
    for dpid, dp in lab.dps.items():
        _replay(lab.net, dpid, dp.take())
    assert lab.per_flow_entries() == 0 and not lab.app.paths.flows
    assert lab.app.counters["tcppath_flows_aged"] == 1
    # An old delete notice for a newer flow of the same connection changes nothing.
    lab.connect(h1, h5)
    lab.app._flow_removed(SimpleNamespace(msg=SimpleNamespace(
        datapath=lab.dps[5], cookie=COOKIE_TCPPATH | flow.serial,
        reason=ofp.OFPRR_IDLE_TIMEOUT)))
    assert len(lab.app.paths.flows) == 1


def test_unconfirmed_locks_expire_in_the_app(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(TcpPath, tmp_path, monkeypatch)
    h1, h5 = _h(lab, "h1"), _h(lab, "h5")
    lab.send(h1, _tcp_frame(h1, h5, 40000, 5001, 0x002))
    lab.app.tick(lab.clock + 10)
    assert lab.app.counters["tcppath_expired"] == 1 and not lab.app.paths.explorations
    lab.punt(h5.dpid, h5.port, _tcp_frame(h5, h1, 5001, 40000, 0x012))
    assert lab.app.counters["tcppath_synack_unknown"] == 1


def test_link_down_recovers_the_path(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    lab = Lab(TcpPath, tmp_path, monkeypatch)
    h1, h5 = _h(lab, "h1"), _h(lab, "h5")
    lab.delay = {(5, 2): 0.5, (5, 3): 0.5, (5, 4): 0.5}  # via spine 1
    lab.connect(h1, h5)
    assert next(iter(lab.app.paths.flows.values())).dpids == [5, 1, 7]
    port = lab.view.graph.edges[1, 7]["ports"][1]
    desc = SimpleNamespace(port_no=port, state=ofp.OFPPS_LINK_DOWN, config=0)
    lab.view.set_port_up(1, port, False)  # the fake wire
    lab.delay = {}
    ev = _ev(datapath=lab.dps[1], reason=ofp.OFPPR_MODIFY, desc=desc)
    lab.app._port_status(ev)
    lab.app._tcppath_port_status(ev)
    queue: list = []
    lab._drain(queue, 0.0)
    lab.run(queue)
    assert lab.app.counters["tcppath_path_fail"] == 1
    assert lab.app.counters["tcppath_recovered"] == 1
    flow = next(iter(lab.app.paths.flows.values()))
    assert len(flow.dpids) == 3 and flow.dpids[0] == 5 and flow.dpids[-1] == 7
    assert flow.dpids[1] != 1
    for a, b, sp, dp in ((h1, h5, 40000, 5001), (h5, h1, 5001, 40000)):
        trace = lab.trace(a, b, sp, dp)
        assert trace.clean and trace.paths == {b.ip: 1}, trace
    assert lab.per_flow_entries() == 2 * len(flow.path)


@pytest.mark.parametrize("mfr", ["Nicira, Inc.", "dcnlab"])
def test_tfe_explores_elephants_only(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                     mfr: str) -> None:
    lab = Lab(Tfe, tmp_path, monkeypatch)
    for dpid, dp in lab.dps.items():
        lab.app.switch_described(dp, mfr, "hw", "sw")
        _replay(lab.net, dpid, dp.take())
    h1, h5 = _h(lab, "h1"), _h(lab, "h5")
    # A mouse (source port below 30001, DSCP 0): no exploration, no entry.  Open vSwitch
    # classifies it in its table (masked tcp_src) and it takes ECMP; on a switch that
    # cannot mask ports the controller classifies it and relays the SYN to its host.
    lab.delivered.clear()
    lab.send(h1, _tcp_frame(h1, h5, 20000, 5001, 0x002))
    assert [ip for ip, _ in lab.delivered] == [h5.ip]
    assert lab.app.counters["tcppath_explorations"] == 0 and lab.per_flow_entries() == 0
    assert lab.app.counters["tcppath_not_elephant"] == (0 if mfr.startswith("Nicira") else 1)
    lab.connect(h1, h5, sport=30001)  # elephant by port
    lab.connect(h1, h5, sport=20001, dscp=8)  # elephant by DSCP
    assert lab.app.counters["tcppath_confirmed"] == 2
    assert lab.per_flow_entries() == 12


def test_tfe_filter_settings() -> None:
    f = parse_filter("30001-65535", "nonzero")
    assert f.matches(30001, 0) and not f.matches(30000, 0) and f.matches(80, 46)
    assert parse_filter("40000-40010", "off").ports == (40000, 40010)
    assert parse_filter("off", "8,46").dscp == frozenset({8, 46})
    for ports, dscp in (("x", "off"), ("off", "off"), ("10-5", "off"), ("off", "64")):
        with pytest.raises(ValueError):
            parse_filter(ports, dscp)


@pytest.mark.parametrize("lo,hi", [(30001, 65535), (0, 65535), (5, 5), (1000, 2047),
                                   (30001, 60999)])
def test_port_prefixes_cover_the_range_exactly(lo: int, hi: int) -> None:
    covered = set()
    for value, mask in port_prefixes(lo, hi):
        block = {p for p in range(65536) if p & mask == value}
        assert not covered & block
        covered |= block
    assert covered == set(range(lo, hi + 1))
