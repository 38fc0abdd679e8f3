"""TCP-Path's data-plane mode in memory: the pipeline the app compiles, replayed in the
in-memory table model (multi-table, resubmit, registers, learn, VLAN tags), with copies
racing over links whose delays the test chooses.  No packet reaches the controller; the
app learns what it reports from the switches' flow statistics.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace
from typing import Any

import pytest
from app_harness import app_from_topology
from ryu.lib import hub
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser
from state_schema import mismatches

from dcnlab.apps.ecmp import Ecmp
from dcnlab.apps.tcppath import TcpPath
from dcnlab.apps.tfe import Tfe
from dcnlab.controller.oftable import FakeDatapath, SendResult, packet_ints, tcp_packet
from dcnlab.controller.rules import COOKIE_DCNLAB
from dcnlab.controller.view import HostLocation, NetworkView
from dcnlab.schemes.tcppath import dataplane as dpl
from dcnlab.schemes.tcppath import polling
from dcnlab.schemes.tcppath.inmemory import OVS, InMemoryFabric
from dcnlab.schemes.tcppath.inmemory import event as _ev
from dcnlab.schemes.tcppath.state_file import TcpPathControllerState

TOPO = "spineleaf:4,4,2"  # spines 1-4, leaves 5-8, two hosts per leaf
SPINES = (1, 2, 3, 4)
SYN, SYNACK, ACK = 0x002, 0x012, 0x010
SLOW = 0.5




class Fabric(InMemoryFabric):
    """The app (data-plane mode), fake datapaths and the fake network they program."""

    def __init__(self, app_cls: type, tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                 mfr: str = OVS[0], sw: str = OVS[1], topo: str = TOPO, **env: str) -> None:
        env.setdefault("DCNLAB_TCPPATH_IDLE", "10")
        # TCP-Path's own mechanics against the compiled routes; ARP-Path as the default
        # forwarding has tests of its own (test_arppath_app.py)
        env.setdefault("DCNLAB_TCPPATH_DEFAULT", "ecmp")
        app, spec = app_from_topology(app_cls, topo, tmp_path, monkeypatch, **env)
        self.removed: list[tuple[int, Any, int]] = []
        super().__init__(app, spec, mfr, sw)

    def handshake(self, via: int) -> tuple[HostLocation, HostLocation]:
        """h1 (leaf 5) opens a connection to h5 (leaf 7): its SYN's copies are fastest via
        spine ``via``, then h5's SYN-ACK confirms that path.  Returns (h1, h5)."""
        h1, h5 = self.host("h1"), self.host("h5")
        self.send(h1, h5, 40000, 5001, SYN, _fast_via(via))
        self.send(h5, h1, 5001, 40000, SYNACK)
        return h1, h5

    def send(self, src: HostLocation, dst: HostLocation, sport: int, dport: int, flags: int,
             delays: dict[tuple[int, int], float] | None = None, dscp: int = 0) -> SendResult:
        pkt = {**tcp_packet(src, dst, sport, dport), "tcp_flags": flags, "ip_dscp": dscp}
        return self.net.send(src.ip, pkt, delays)

    def age(self, now: float) -> None:
        """Time flows out at ``now``; flow-removed messages go to the app."""
        for dpid, gone in self.net.expire(now).items():
            for flow, reason in gone:
                if flow.flags & ofp.OFPFF_SEND_FLOW_REM:
                    self.app._flow_removed(_ev(datapath=self.dps[dpid], cookie=flow.cookie,
                                               reason=reason, match=dict(flow.match)))

    def flow_table(self, dpid: int) -> list[Any]:
        return [f for f in self.net.switches[dpid].table(dpl.T_FLOW)
                if f.cookie == dpl.COOKIE_FLOW]

    def path_holding_entries(self) -> list[int]:
        return sorted(d for d in self.net.switches if self.flow_table(d))

    def link_down(self, a: int, b: int, *reporters: int) -> None:
        """The link ``a`` - ``b`` goes down, and each of ``reporters`` (default: ``a``)
        reports its end of it to the app, as a switch's PORT_STATUS does."""
        self.view.set_port_up(a, _port(self.view, a, b), False)
        for dpid in reporters or (a,):
            desc = SimpleNamespace(port_no=_port(self.view, dpid, b if dpid == a else a),
                                   state=ofp.OFPPS_LINK_DOWN, config=0)
            ev = _ev(datapath=self.dps[dpid], reason=ofp.OFPPR_MODIFY, desc=desc)
            self.app._port_status(ev)
            self.app._tcppath_port_status(ev)


STEP = 0.002  # s: one reading of the test's clock to the next
DECODE_COST = 0.00001  # s per decoded entry


class _SteppingClock:
    """The time module as the app sees it, except perf_counter(), which advances STEP
    seconds at every call: a cost the test chooses, not the machine's speed."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def perf_counter(self) -> float:
        self.now += self.step
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def _fast_via(spine: int) -> dict[tuple[int, int], float]:
    """Leaf 5's uplinks are slow except the one to ``spine``."""
    return {(5, s): SLOW for s in SPINES if s != spine}


def _port(view: NetworkView, dpid: int, peer: int) -> int:
    return view.graph.edges[dpid, peer]["ports"][dpid]


def test_copies_are_told_apart_by_their_exact_generation_on_entry(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #15: a datapath cache (Open vSwitch's megaflows) wildcards every bit no entry
    looks at.  With one masked entry for all generations, a re-exploration's copies matched
    the cached decisions about the previous exploration's late copies (drop) and the new
    exploration died at every switch until the cache was revalidated.  Copies enter the
    pipeline by an entry matching their generation's VLAN id exactly, on every port."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    vids = {dpl.OFPVID_PRESENT | dpl.EXPLORE_VID | g for g in range(dpl.GENERATIONS)}
    for dpid, sw in fab.net.switches.items():
        entries = [dict(f.match) for f in sw.table(dpl.T_MAIN)
                   if dpl.kind_of(f.cookie) == dpl.COUNT_COPY_IN]
        assert all(isinstance(m["vlan_vid"], int) for m in entries)  # not masked
        if dpid in SPINES:
            fabric = fab.view.fabric_ports(dpid)
            assert {(m["in_port"], m["vlan_vid"]) for m in entries} == {
                (p, v) for p in fabric for v in vids}
        else:  # a leaf explores only the copies for its own hosts
            macs = {h.mac for h in fab.view.hosts_on(dpid)}
            assert {(m["eth_dst"], m["vlan_vid"]) for m in entries} == {
                (mac, v) for mac in macs for v in vids}


def _lock_port(fab: Fabric, dpid: int) -> int:
    (lock,) = [f for f in fab.net.switches[dpid].table(dpl.T_LOCK)]
    (load,) = lock.actions
    return load.value


def test_rules_fit_eight_tables_and_carry_no_punt_for_tcp(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    assert fab.app.dataplane and fab.app.ready
    for sw in fab.net.switches.values():
        assert {f.table_id for f in sw.flows} <= set(range(dpl.TABLES))
        punts = [f for f in sw.flows if any(
            isinstance(a, parser.OFPActionOutput) and a.port == ofp.OFPP_CONTROLLER
            for a in f.actions)]
        # ARP and LLDP only: TCP and exploration copies never go to the controller.
        assert sorted(dict(f.match)["eth_type"] for f in punts) == [0x0806, 0x88CC]


def test_an_app_restarted_on_the_network_removes_the_previous_apps_pipeline(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``dcnlab check`` measures ECMP by restarting the controller with the ECMP app on the
    same switches.  Its resync used to delete only the compiled policy's cookie, so the
    data-plane pipeline and its learned entries stayed ahead of ECMP's entries and the
    "ECMP" connections were still explored (issue #15).  Every dcnlab cookie goes."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    fab.handshake(via=2)
    learned = [f for sw in fab.net.switches.values() for f in sw.flows
               if f.cookie in (dpl.COOKIE_FLOW, dpl.COOKIE_LOCK, dpl.COOKIE_SEEN)]
    assert learned
    (tmp_path / "ecmp").mkdir()
    ecmp, _ = app_from_topology(Ecmp, TOPO, tmp_path / "ecmp", monkeypatch)
    for dpid in fab.dps:
        dp = FakeDatapath(dpid)
        ecmp.resync(dp)
        fab.net.replay(dpid, [m for m in dp.take() if isinstance(
            m, (parser.OFPFlowMod, parser.OFPGroupMod))])
    for dpid, sw in fab.net.switches.items():
        assert {f.cookie for f in sw.flows} == {COOKIE_DCNLAB}
        assert len(sw.flows) == len(ecmp.compiled()[dpid].flows)
    # A new connection now takes ECMP's routes: delivered, nothing explored or learned.
    h1, h5 = fab.host("h1"), fab.host("h5")
    before = sum(len(sw.flows) for sw in fab.net.switches.values())
    assert len(fab.send(h1, h5, 40001, 5001, SYN).to(h5.ip)) == 1
    assert sum(len(sw.flows) for sw in fab.net.switches.values()) == before


@pytest.mark.parametrize("fast", SPINES)
def test_race_locks_the_first_arrival_and_drops_later_copies(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, fast: int) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.host("h1"), fab.host("h5")  # leaf 5 -> leaf 7
    syn = fab.send(h1, h5, 40000, 5001, SYN, _fast_via(fast))
    assert not syn.punted
    # Delivered once, untagged, although four copies reached leaf 7.
    (got,) = syn.to(h5.ip)
    assert "vlan_vid" not in got and got["tcp_flags"] == SYN
    assert not syn.to(h1.ip)
    # Every switch locked the reverse direction to the port its first copy came in on.
    assert _lock_port(fab, 7) == _port(fab.view, 7, fast)
    assert _lock_port(fab, fast) == _port(fab.view, fast, 5)
    assert _lock_port(fab, 5) == h1.port
    leaf7 = fab.net.switches[7]
    late = [f for f in leaf7.flows if f.cookie == dpl.COOKIE_COUNT | dpl.COUNT_LATE]
    first = [f for f in leaf7.flows if f.cookie == dpl.COOKIE_COUNT | dpl.COUNT_FIRST]
    assert first[0].packets == 1 and late[0].packets == len(SPINES) - 1
    assert not fab.path_holding_entries()  # nothing confirmed yet
    # The SYN-ACK walks the locks back and learns both directions on that path only.
    synack = fab.send(h5, h1, 5001, 40000, SYNACK)
    assert [p["tcp_flags"] for p in synack.to(h1.ip)] == [SYNACK] and synack.hops == 2
    assert fab.path_holding_entries() == sorted([5, 7, fast])
    for dpid in (5, fast, 7):
        assert len(fab.flow_table(dpid)) == 2
    # Once the locks are gone (hard timeout 3 s; entries idle 10 s) both directions follow
    # the per-flow entries alone, on that path, untagged.
    fab.net.expire(4.0)
    assert not any(sw.table(dpl.T_LOCK) for sw in fab.net.switches.values())
    for a, b, sp, dp in ((h1, h5, 40000, 5001), (h5, h1, 5001, 40000)):
        res = fab.send(a, b, sp, dp, ACK, {(5, fast): SLOW, (7, fast): SLOW})
        (pkt,) = res.to(b.ip)
        assert res.hops == 2 and "vlan_vid" not in pkt
    assert sum(f.packets for f in fab.flow_table(fast)) == 2
    assert not any(sw.dropped_depth for sw in fab.net.switches.values())


def test_app_reads_its_counters_and_paths_from_flow_stats(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.handshake(via=3)
    fab.poll()
    c = fab.app.counters
    assert c["tcppath_explorations"] == 1 and c["tcppath_confirmed"] == 1
    assert c["tcppath_copy_late"] > 0 and c.get("tcppath_copy_packet_in", 0) == 0
    assert c.get("packet_in", 0) == 0
    state = fab.app.state()
    tp = state["tcppath"]
    assert tp["mode"] == "dataplane" and tp["flow_entries_total"] == 6
    paths = {(f["src"], f["sport"]): f["path"] for f in tp["recent"]}
    assert paths[(h1.ip, 40000)] == [5, 3, 7] and paths[(h5.ip, 5001)] == [7, 3, 5]
    assert tp["copies_in"]["7"] == len(SPINES)
    assert mismatches(json.loads(json.dumps(state)), TcpPathControllerState) == []
    fab.poll()  # the same flows again: nothing new
    assert fab.app.counters["tcppath_confirmed"] == 1


def test_a_polling_round_asks_one_switch_after_another_and_walks_paths_once_at_its_end(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #15: asking every switch at once and walking every path after each reply kept
    Ryu's single event loop busy for 50-220 ms every poll once about 1000 per-flow entries
    had piled up, and ARP (answered by the controller) waited behind it."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.handshake(via=2)
    # The round's cost, measured by the app with time.perf_counter() around each reply and
    # around the walk, comes from a clock the test runs: STEP per reading.  Decoding is
    # counted at a set cost per entry (the app measures it once at start).
    clock = _SteppingClock(STEP)
    monkeypatch.setattr(sys.modules[TcpPath.__module__], "time", clock)
    fab.app.polling.decode_cost = DECODE_COST
    replies: list[int] = []  # entries per reply, in the order the app took them
    take = fab.app._flow_stats

    def flow_stats(ev: Any) -> None:
        replies.append(len(ev.msg.body))
        take(ev)

    monkeypatch.setattr(fab.app, "_flow_stats", flow_stats)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # the switches answer while the round goes on
        sleeps.append(seconds)
        if len(sleeps) == 1:
            first = min(fab.dps)
            for req in [m for m in fab.dps[first].take()
                        if isinstance(m, parser.OFPFlowStatsRequest)]:
                fab.answer(first, req)

    monkeypatch.setattr(hub, "sleep", sleep)
    fab.app.poll_round()
    requests = {d: [m for m in dp.take() if isinstance(m, parser.OFPFlowStatsRequest)]
                for d, dp in fab.dps.items()}
    requests.pop(min(fab.dps))  # answered during the round
    assert all(len(r) == 2 for r in requests.values())  # per-flow and counting entries
    # Spread over the round: one gap per switch, together the round's interval, however
    # many switches have answered on the way.
    assert len(sleeps) == len(fab.dps) and len(set(sleeps)) == 1
    assert sum(sleeps) == pytest.approx(fab.app.polling.interval)
    *first, last = sorted(requests)
    for dpid in first:
        for req in requests[dpid]:
            fab.answer(dpid, req)
    assert fab.app.counters["tcppath_confirmed"] == 0 and not fab.app.recent
    for req in requests[last]:
        fab.answer(last, req)
    assert fab.app.counters["tcppath_confirmed"] == 1
    assert [f["path"] for f in fab.app.recent] == [[5, 2, 7], [7, 2, 5]]
    # The round: the first switch's two replies, both replies of the six switches after
    # it, and the last switch's per-flow reply (its first request), which completes it.
    in_round = replies[:2 + 2 * 6 + 1]
    assert len(replies) == 2 + 2 * 7
    # Its cost: each of those 15 replies' entries decoded, STEP spent on each of them, and
    # STEP walking the paths (the last switch's counting reply counts in the next round).
    cost = sum(in_round) * DECODE_COST + 15 * STEP + STEP
    polled = fab.app.state()["tcppath"]["polling"]
    assert polled["round_cost_ms"] == pytest.approx(1e3 * cost, abs=0.005)  # 2 decimals
    # ... which sets the next interval so that reading stays within its share of a core:
    # the round was made to cost more than MIN_INTERVAL allows, less than MAX_INTERVAL
    assert polling.MIN_INTERVAL < cost / polling.BUDGET < polling.MAX_INTERVAL
    assert fab.app.polling.interval == pytest.approx(cost / polling.BUDGET)
    assert polled["interval"] == pytest.approx(cost / polling.BUDGET, abs=0.0005)


def test_a_switch_that_never_answers_delays_the_walk_by_one_round_only(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.handshake(via=4)
    fab.app.polling.start_round(sorted(fab.dps))
    fab.poll([d for d in fab.dps if d != 1])  # spine 1 is silent
    assert not fab.app.recent
    monkeypatch.setattr(hub, "sleep", lambda _: None)
    fab.app.poll_round()  # the next round starts: the last one's replies are walked
    assert [f["path"] for f in fab.app.recent] == [[5, 4, 7], [7, 4, 5]]


def test_ageing_then_re_exploration_of_a_flow_still_sending(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch, DCNLAB_TCPPATH_IDLE="2")
    h1, h5 = fab.handshake(via=3)
    assert fab.path_holding_entries() == [3, 5, 7]
    fab.age(1.0)  # used 1 s ago: still there
    assert fab.path_holding_entries() == [3, 5, 7]
    fab.age(4.0)  # idle 4 s > 2 s: gone, with flow-removed messages
    assert fab.path_holding_entries() == []
    assert not any(sw.table(dpl.T_LOCK) or [f for f in sw.table(dpl.T_SEEN)
                                            if f.cookie == dpl.COOKIE_SEEN]
                   for sw in fab.net.switches.values())  # locks: hard 3 s
    assert fab.app.counters["tcppath_flows_aged"] == 2  # each direction, at its source
    assert fab.app.counters["tcppath_flow_entries_aged"] == 6
    # The flow sends again, now spine 2 is the fast one: its next packet is explored ...
    data = fab.send(h1, h5, 40000, 5001, ACK, _fast_via(2))
    (got,) = data.to(h5.ip)
    assert "vlan_vid" not in got and got["tcp_flags"] == ACK and data.hops > 2
    # ... packets sent while the exploration is pending take the default routes ...
    pending = fab.send(h1, h5, 40000, 5001, ACK, _fast_via(2))
    assert len(pending.to(h5.ip)) == 1 and pending.hops == 2
    # ... and the other direction's first packet confirms the new path.
    fab.send(h5, h1, 5001, 40000, ACK)
    assert fab.path_holding_entries() == [2, 5, 7]
    # The second exploration's copies carried the tuple's next generation (VLAN id).
    (gen,) = [f for f in fab.net.switches[5].table(dpl.T_SEEN) if f.cookie == dpl.COOKIE_GEN]
    assert gen.actions[0].value == 2
    fab.poll()
    assert fab.app.counters["tcppath_explorations"] == 2
    assert [f["path"] for f in fab.app.state()["tcppath"]["recent"]
            if f["sport"] == 40000] == [[5, 2, 7]]


def test_same_edge_connection_is_explored_locally(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h2 = fab.host("h1"), fab.host("h2")  # both on leaf 5
    syn = fab.send(h1, h2, 40000, 5001, SYN)
    assert len(syn.to(h2.ip)) == 1 and syn.hops == 0
    fab.send(h2, h1, 5001, 40000, SYNACK)
    assert fab.path_holding_entries() == [5]


def test_path_fail_removes_the_flow_everywhere_and_its_next_packet_recovers(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.handshake(via=3)
    fab.poll()
    fab.link_down(3, 7)  # the link spine 3 - leaf 7 goes down
    fab.drain()
    assert fab.path_holding_entries() == []
    assert fab.app.counters["tcppath_path_fail"] == 1
    fab.net.expire(5.0)  # the exploration's locks are long gone
    fab.send(h1, h5, 40000, 5001, ACK)  # spine 3 cannot reach leaf 7 now
    fab.send(h5, h1, 5001, 40000, ACK)
    path = fab.path_holding_entries()
    assert 3 not in path and 5 in path and 7 in path and len(path) == 3
    fab.poll()
    assert fab.app.counters["tcppath_recovered"] == 1


@pytest.mark.parametrize("mfr,sw", [("Nicira, Inc.", "Open vSwitch"),
                                    ("dcnlab", "dcnlab-switch; nx=learn,resubmit")])
def test_tfe_explores_elephants_only(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                     mfr: str, sw: str) -> None:
    fab = Fabric(Tfe, tmp_path, monkeypatch, mfr=mfr, sw=sw)
    assert fab.app.dataplane
    h1, h5 = fab.host("h1"), fab.host("h5")
    mouse = fab.send(h1, h5, 20000, 5001, SYN)  # source port <= 30000, DSCP 0
    assert len(mouse.to(h5.ip)) == 1 and mouse.hops == 2
    fab.send(h5, h1, 5001, 20000, SYNACK)
    assert fab.path_holding_entries() == []
    for sport, dscp in ((30001, 0), (20001, 8)):  # elephant by port, by DSCP
        syn = fab.send(h1, h5, sport, 5001, SYN, _fast_via(4), dscp=dscp)
        assert len(syn.to(h5.ip)) == 1 and syn.hops > 2
        fab.send(h5, h1, 5001, sport, SYNACK)
    assert fab.path_holding_entries() == [4, 5, 7]
    assert len(fab.flow_table(4)) == 4


def test_falls_back_to_controller_mode_without_the_extensions(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch, mfr="dcnlab", sw="dcnlab-switch 0.1")
    assert not fab.app.dataplane and fab.app.ready
    assert any("falling back to controller mode" in w for w in fab.app.warnings)
    h1, h5 = fab.host("h1"), fab.host("h5")
    assert fab.send(h1, h5, 40000, 5001, SYN).punted  # controller mode punts the SYN


def test_controller_mode_on_request_and_bad_mode(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(TcpPath, tmp_path, monkeypatch, DCNLAB_TCPPATH_MODE="controller")
    assert not fab.app.dataplane and not fab.app.warnings
    with pytest.raises(ValueError, match="DCNLAB_TCPPATH_MODE"):
        app_from_topology(TcpPath, TOPO, tmp_path, monkeypatch, DCNLAB_TCPPATH_MODE="fast")


def test_only_the_client_side_re_explores(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """After ageing, the server's packets (source port below 32768) take the default
    routes; the client's next packet explores, and the server's answer confirms."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch, DCNLAB_TCPPATH_IDLE="2")
    h1, h5 = fab.handshake(via=3)
    fab.age(4.0)
    server = fab.send(h5, h1, 5001, 40000, ACK)
    assert len(server.to(h1.ip)) == 1 and server.hops == 2
    assert not any(sw.table(dpl.T_LOCK) for sw in fab.net.switches.values())
    client = fab.send(h1, h5, 40000, 5001, ACK, _fast_via(1))
    assert len(client.to(h5.ip)) == 1 and client.hops > 2
    fab.send(h5, h1, 5001, 40000, ACK)
    assert fab.path_holding_entries() == [1, 5, 7]


def test_copies_never_climb_back_up_through_another_leaf(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Valley-free flooding: a copy that came down to a leaf that is not its destination
    stops there, even when the detour up again would win the race."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.host("h1"), fab.host("h5")
    # Only leaf 5 -> spine 3 is fast, and spine 3 -> leaf 7 is slow: the detour
    # 5-3-6-x-7 would arrive first if leaf 6 flooded its copy back up.
    delays = {**_fast_via(3), (3, 7): SLOW * 2}
    syn = fab.send(h1, h5, 40000, 5001, SYN, delays)
    assert len(syn.to(h5.ip)) == 1
    fab.send(h5, h1, 5001, 40000, SYNACK)
    path = fab.path_holding_entries()
    assert len(path) == 3 and 6 not in path and 8 not in path
    leaf6 = fab.net.switches[6]
    dead_end = [f.packets for f in leaf6.flows
                if f.cookie == dpl.COOKIE_COUNT | dpl.COUNT_DEAD_END]
    assert sum(dead_end) == len(SPINES)  # one copy from every spine, all dropped on entry


def test_copies_for_another_edge_are_dropped_on_entry_without_learning(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #15: at a leaf that is not the destination, a copy used to learn a seen entry
    and a lock (which no packet could use) before flooding to no port.  On Open vSwitch
    that made the copy's datapath flow match its tuple: every copy at every other leaf was
    an upcall.  Now MAIN drops it by in-port and VLAN id alone: the same forwarding, the
    same copies on the wire (counted), no learned state, and a decision that holds for any
    tuple."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.host("h1"), fab.host("h5")  # leaf 5 -> leaf 7; leaves 6 and 8 dead ends
    fab.handshake(via=2)
    for leaf in (6, 8):
        sw = fab.net.switches[leaf]
        assert not sw.table(dpl.T_SEEN) and not sw.table(dpl.T_LOCK)
        hit = [f for t in range(dpl.TABLES) for f in sw.table(t) if f.packets]
        # one drop per spine's port, on entry: nothing else matched
        assert len(hit) == len(SPINES) and all(f.packets == 1 for f in hit)
        for f in hit:
            assert dpl.kind_of(f.cookie) == dpl.COUNT_DEAD_END and not f.actions
            assert set(dict(f.match)) == {"in_port", "vlan_vid"}
    # A copy for one of the leaf's own hosts is still explored there (h3 is on leaf 6).
    h3 = fab.host("h3")
    assert fab.view.hosts_on(6) and h3.mac in {h.mac for h in fab.view.hosts_on(6)}
    syn = fab.send(h1, h3, 40001, 5001, SYN, _fast_via(4))
    assert len(syn.to(h3.ip)) == 1 and not syn.to(h5.ip)
    assert _lock_port(fab, 6) == _port(fab.view, 6, 4)
    # The copies still count as received where they arrived, as the paper counts them.
    fab.poll()
    tp = fab.app.state()["tcppath"]
    assert tp["copies_in"]["8"] == 2 * len(SPINES)
    # two SYNs, each reaching two other leaves from every spine
    assert fab.app.counters["tcppath_copy_dead_end"] == 2 * 2 * len(SPINES)


def test_three_layers_explore_down_to_every_rack_and_stop_at_the_others(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The paper's three-layer fabric (4 planes, 2 pods of 2 racks): a SYN's copies climb
    to every plane and come down into every pod; fabric switches flood them on to their
    racks, and every rack but the destination's drops them on entry, learning nothing."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch, topo="threelayer:2,2,1,1")
    edges = sorted(d for d in fab.view.switches if fab.view.hosts_on(d))
    src, dst = fab.view.hosts[0], fab.view.hosts[-1]
    assert len(edges) == 4 and src.dpid != dst.dpid
    syn = fab.send(src, dst, 40000, 5001, SYN)
    (got,) = syn.to(dst.ip)
    assert "vlan_vid" not in got and len(syn.delivered) == 1
    synack = fab.send(dst, src, 5001, 40000, SYNACK)
    assert len(synack.to(src.ip)) == 1
    path = fab.path_holding_entries()
    assert len(path) == 5 and src.dpid in path and dst.dpid in path  # rack-fabric-spine-...
    others = [d for d in edges if d not in (src.dpid, dst.dpid)]
    for dpid in others:
        sw = fab.net.switches[dpid]
        assert not sw.table(dpl.T_SEEN) and not sw.table(dpl.T_LOCK)
        dead = sum(f.packets for f in sw.table(dpl.T_MAIN)
                   if dpl.kind_of(f.cookie) == dpl.COUNT_DEAD_END)
        assert dead == 4  # one copy from each of the pod's 4 fabric switches
    # The destination's pod: each fabric switch saw a copy and flooded it down.
    down = [d for d in fab.view.switches if d not in edges and fab.view.graph.has_edge(d, dst.dpid)]
    assert len(down) == 4 and all(fab.net.switches[d].table(dpl.T_SEEN) for d in down)


def test_path_fail_is_level_triggered_and_never_reports_a_path_over_a_dead_link(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #15: after Path Fail deleted a flow's entries, the controller recorded the old
    path again (as a recovery) from a flow-stats reply to a request sent before the
    deletion, and Open vSwitch re-added the deleted learned entries (its revalidators
    refresh a learned flow for a datapath flow that still had packets to account for), so
    the flow's last recorded path crossed the failed link.  A path over a link that is
    down is never reported, and entries on it are deleted again at every poll."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.handshake(via=3)
    fab.poll()
    old = {d: list(fab.flow_table(d)) for d in (3, 5, 7)}
    stale = {d: fab.net.switches[d].flow_stats(dpl.T_FLOW, dpl.COOKIE_FLOW, dpl.COOKIE_ALL)
             for d in (3, 5, 7)}
    fab.link_down(3, 7)  # the link spine 3 - leaf 7 goes down
    fab.drain()
    assert fab.path_holding_entries() == []
    # Replies to requests sent before the deletion arrive afterwards: the old path is not
    # reported again, nor counted as recovered, and its entries are deleted again.
    for dpid, body in stale.items():
        fab.app._flow_stats(_ev(datapath=fab.dps[dpid], xid=9000 + dpid, body=body, flags=0))
    assert fab.app.counters.get("tcppath_recovered", 0) == 0
    assert not [f for f in fab.app.state()["tcppath"]["recent"][1:] if f["sport"] == 40000]
    # The switches re-add the deleted entries (as Open vSwitch's revalidators do) ...
    for dpid, flows in old.items():
        for flow in flows:
            fab.net.switches[dpid].add(flow)
    assert fab.path_holding_entries() == [3, 5, 7]
    fab.poll()  # ... the next poll finds entries on the dead link and deletes them again
    assert fab.app.counters["tcppath_path_fail_repeated"] >= 1
    fab.drain()
    assert fab.path_holding_entries() == []
    assert fab.app.counters.get("tcppath_recovered", 0) == 0
    assert fab.app.counters["tcppath_path_fail"] == 1  # one connection, failed once
    # The flow's next packets explore a path that avoids the dead link.
    fab.net.expire(5.0)
    fab.send(h1, h5, 40000, 5001, ACK)
    fab.send(h5, h1, 5001, 40000, ACK)
    path = fab.path_holding_entries()
    assert 3 not in path and 5 in path and 7 in path and len(path) == 3
    fab.poll()
    assert fab.app.counters["tcppath_recovered"] == 1
    recorded = [f["path"] for f in fab.app.state()["tcppath"]["recent"] if f["sport"] == 40000]
    assert recorded[0] == [5, 3, 7] and all(3 not in p for p in recorded[1:]), recorded


def test_path_fail_deletes_at_the_connections_edges_last(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The client's edge losing its entries starts the re-exploration at once; its copies
    must not meet deletes still on their way to other switches (they would wipe the new
    locks there and leave the new path unconfirmed).  The edges' per-flow entries are
    deleted only once every switch has answered a barrier sent after its deletes."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.host("h1"), fab.host("h5")  # on leaves 5 and 7
    fab.send(h1, h5, 40000, 5001, SYN, _fast_via(3))
    fab.send(h5, h1, 5001, 40000, SYNACK)
    fab.poll()
    fab.link_down(3, 7, 3, 7)  # both ends report it
    fab.drain(barriers=False)
    # Locks and seen entries are gone everywhere, and so are the per-flow entries but the
    # edges' (leaf 7's on the dead port too): they wait for the barriers' answers.
    assert fab.path_holding_entries() == [5, 7]
    assert not any(sw.table(dpl.T_LOCK) or [f for f in sw.table(dpl.T_SEEN)
                                            if f.cookie == dpl.COOKIE_SEEN]
                   for sw in fab.net.switches.values())
    fab.send(h1, h5, 40000, 5001, ACK)  # forwarded by the old entries (and lost), and ...
    assert not any(sw.table(dpl.T_LOCK) for sw in fab.net.switches.values())  # no exploring
    # One deletion barrier per switch (the second report of the same link started no
    # second deletion); the edges' per-flow entries go once the last one is answered.  The
    # other barriers end the recompiled routes' changes (the base app's): answered first,
    # they release nothing.
    deletion = [(d, x) for d, x in fab.unanswered if (d, x) in fab.app._fail_barriers]
    assert sorted(d for d, _ in deletion) == sorted(fab.dps)
    for d, xid in fab.unanswered:
        if (d, xid) not in deletion:
            fab.app._barrier(_ev(datapath=fab.dps[d], xid=xid))
    for d, xid in deletion:
        assert fab.path_holding_entries() == [5, 7]
        fab.app._barrier(_ev(datapath=fab.dps[d], xid=xid))
        fab.drain(barriers=False)
    fab.drain()
    assert fab.path_holding_entries() == []
    # The re-exploration starts now and finds every switch clean: a complete new path.
    fab.net.expire(5.0)
    fab.send(h1, h5, 40000, 5001, ACK, _fast_via(2))
    fab.send(h5, h1, 5001, 40000, ACK)
    assert fab.path_holding_entries() == [2, 5, 7]
    fab.poll()
    assert fab.app.counters["tcppath_recovered"] == 1
    assert fab.app.counters["tcppath_path_fail"] == 1


def test_a_failed_connection_confirmed_at_its_edge_alone_explores_again(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue #15: on Open vSwitch a re-exploration after Path Fail can start without any
    copy leaving the client's edge (a revalidator executes the explore entry's learn
    actions for a busy datapath flow, and the next revalidation already finds the seen
    entry).  The other direction, on the default routes, then confirms the connection at
    the client's edge alone and no complete path forms.  Played here by the edge's
    uplinks dropping the copies: a while after the deletion the controller deletes the
    half-confirmed connection again, and its next exploration completes."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    clock = [100.0]
    monkeypatch.setattr(fab.app, "now", lambda: clock[0])
    h1, h5 = fab.handshake(via=3)
    fab.poll()
    fab.link_down(3, 7)
    fab.drain()
    fab.net.expire(5.0)
    # The exploration starts at leaf 5 (seen, lock, generation) but no copy leaves it.
    uplinks = [(5, s) for s in SPINES]
    for a, b in uplinks:
        fab.view.set_port_up(a, _port(fab.view, a, b), False)
    explored = fab.send(h1, h5, 40000, 5001, ACK)
    assert not explored.to(h5.ip)
    for a, b in uplinks:
        fab.view.set_port_up(a, _port(fab.view, a, b), True)
    pending = fab.send(h1, h5, 40000, 5001, ACK)  # pending: the default routes
    assert len(pending.to(h5.ip)) == 1
    fab.send(h5, h1, 5001, 40000, ACK)  # confirms at leaf 5 only
    assert fab.path_holding_entries() == [5]
    fab.poll()
    assert fab.app.counters.get("tcppath_path_fail_retried", 0) == 0  # not yet
    clock[0] += 1.5
    fab.poll()
    assert fab.app.counters["tcppath_path_fail_retried"] == 1
    fab.drain()
    assert fab.path_holding_entries() == []
    fab.send(h1, h5, 40000, 5001, ACK, _fast_via(2))  # explores again, copies go out
    fab.send(h5, h1, 5001, 40000, ACK)
    assert fab.path_holding_entries() == [2, 5, 7]
    fab.poll()
    assert fab.app.counters["tcppath_recovered"] == 1
    clock[0] += 5.0
    fab.poll()  # a complete path: no more retries
    assert fab.app.counters["tcppath_path_fail_retried"] == 1


def test_each_connection_floods_its_copies_in_a_port_order_of_its_own(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A switch emits a packet's copies in the order of its output actions, so a fixed
    list let the first port's copy win every race on an idle fabric.  FLOOD's entries
    rotate the port list by the low bits of the source port: every copy still leaves by
    every port, each connection starts at a port of its own, and over many connections
    every port comes first, at the source's edge and at the spines alike."""
    fab = Fabric(TcpPath, tmp_path, monkeypatch)
    h1, h5 = fab.host("h1"), fab.host("h5")
    leaf = fab.net.switches[h1.dpid]
    uplinks = sorted(_port(fab.view, h1.dpid, s) for s in SPINES)
    spine = fab.net.switches[SPINES[0]]
    from_leaf = _port(fab.view, SPINES[0], h1.dpid)
    downlinks = sorted(p for p in (_port(fab.view, SPINES[0], leaf_id) for leaf_id in (5, 6, 7, 8))
                       if p != from_leaf)
    first_up, first_down = [], []
    for sport in range(40000, 40064):
        pkt = packet_ints({**tcp_packet(h1, h5, sport, 5001), "tcp_flags": SYN})
        out = leaf.process(pkt, h1.port)
        assert sorted(e.port for e in out) == uplinks, out  # every uplink, in some order
        first_up.append(out[0].port)
        copy = next(e.packet for e in out if e.port == _port(fab.view, h1.dpid, SPINES[0]))
        down = spine.process(copy, from_leaf)
        assert sorted(e.port for e in down) == downlinks, down
        first_down.append(down[0].port)
    assert set(first_up) == set(uplinks), first_up
    assert set(first_down) == set(downlinks), first_down
    # evenly: 64 ports over 4 uplinks
    assert sorted(first_up.count(p) for p in uplinks) == [16, 16, 16, 16]
