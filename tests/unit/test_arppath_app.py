"""The ``arppath`` app in memory: over fake switches that say they are Open vSwitch it
installs ARP-Path's tables, learns paths and counters from flow statistics only, and
turns a link going down into Path Fail; over switches without the Nicira extensions it
says why it cannot run and never becomes ready."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from app_harness import app_from_topology
from ryu.ofproto import ofproto_v1_3 as ofp
from state_schema import mismatches

from dcnlab.apps.arppath import ArpPath
from dcnlab.apps.tfe import Tfe
from dcnlab.controller.oftable import SendResult, tcp_packet
from dcnlab.controller.view import HostLocation
from dcnlab.schemes.arppath import dataplane as apl
from dcnlab.schemes.arppath.view import from_state
from dcnlab.schemes.tcppath import dataplane as dpl
from dcnlab.schemes.tcppath.inmemory import OVS, InMemoryFabric
from dcnlab.schemes.tcppath.inmemory import event as _ev
from dcnlab.schemes.tcppath.state_file import TcpPathControllerState

TOPO = "spineleaf:4,4,2"  # spines 1-4, leaves 5-8, two hosts per leaf


class Fabric(InMemoryFabric):
    def __init__(self, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, mfr: str = OVS[0],
                 sw: str = OVS[1]) -> None:
        app, spec = app_from_topology(ArpPath, TOPO, tmp_path, monkeypatch)
        super().__init__(app, spec, mfr, sw)

    def arp(self, src: HostLocation, dst: HostLocation, reply: bool = False,
            delays: dict[tuple[int, int], float] | None = None) -> SendResult:
        return self.net.send(src.ip, {
            "eth_type": 0x0806, "eth_src": src.mac,
            "eth_dst": dst.mac if reply else "ff:ff:ff:ff:ff:ff"}, delays)

    def ip(self, src: HostLocation, dst: HostLocation) -> SendResult:
        return self.net.send(src.ip, {"eth_type": 0x0800, "eth_src": src.mac,
                                      "eth_dst": dst.mac, "ipv4_src": src.ip,
                                      "ipv4_dst": dst.ip, "ip_proto": 17})

    def read_arppath(self, dpid: int) -> None:
        """One switch's entries and counters asked for and answered (what the app sends
        in reply stays queued until :meth:`drain`)."""
        dp = self.dps[dpid]
        for req in self.app.part.requests(dp):
            body = self.net.switches[dpid].flow_stats(req.table_id, req.cookie,
                                                      req.cookie_mask)
            self.app._flow_stats(_ev(datapath=dp, xid=req.xid, body=body, flags=0))

    def poll_arppath(self) -> None:
        """One polling round, answered by every fake switch."""
        for dpid in self.dps:
            self.read_arppath(dpid)
        self.drain()  # what the app sent meanwhile (Path Fail's deletes) reaches the switches

    def link_down(self, a: int, b: int) -> None:
        port = self.view.graph.edges[a, b]["ports"][a]
        self.view.set_port_up(a, port, False)
        desc = SimpleNamespace(port_no=port, state=ofp.OFPPS_LINK_DOWN, config=0)
        self.app._port_status(_ev(datapath=self.dps[a], reason=ofp.OFPPR_MODIFY, desc=desc))
        self.drain()


def _fast_via(spine: int) -> dict[tuple[int, int], float]:
    return {(a, b): 0.0001 if spine in (a, b) else 0.01
            for a in range(1, 9) for b in range(1, 9) if a != b}


def test_paths_and_counters_come_from_flow_statistics(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(tmp_path, monkeypatch)
    assert fab.app.ready
    h1, h5 = fab.host("h1"), fab.host("h5")
    request = fab.arp(h1, h5, delays=_fast_via(2))
    assert request.punted == []  # ARP of a known host never reaches the controller
    assert fab.arp(h5, h1, reply=True).to(h1.ip)
    assert fab.ip(h1, h5).to(h5.ip)  # teaches h1's address along the path
    fab.poll_arppath()
    state = fab.app.state()["arppath"]  # type: ignore[typeddict-item]
    assert state["mode"] == "dataplane"
    assert from_state(state).path(fab.view, h1.mac, h5.mac) == [h1.dpid, 2, h5.dpid]
    # h1 at all eight switches (its broadcast's tree), h5 along its reply's path
    assert state["entries_total"] == 11 and state["entries_max"] == 11
    assert fab.app.counters["arppath_explorations"] == 1
    assert fab.app.counters["arppath_lock_frames"] == 0  # the reply took entries, not locks
    fab.poll_arppath()  # counters are totals as polled, not summed over polls
    assert fab.app.counters["arppath_explorations"] == 1


def test_a_link_down_deletes_what_every_switch_knows_of_the_addresses_over_it(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(tmp_path, monkeypatch)
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.arp(h1, h5, delays=_fast_via(2))
    fab.arp(h5, h1, reply=True)
    fab.ip(h1, h5)
    fab.poll_arppath()
    fab.link_down(2, h5.dpid)  # spine 2 - h5's leaf
    fab.poll_arppath()
    assert fab.app.counters["arppath_path_fail"] == 2  # h5's address at spine 2, h1's at h5's leaf
    learned = [f for sw in fab.net.switches.values() for f in sw.flows
               if f.cookie in (apl.COOKIE_FWD, apl.COOKIE_LOCK)]
    assert learned == []
    # the state file says what the controller deleted, and why: both, on every switch
    deleted = fab.app.state()["arppath"]["deleted"]  # type: ignore[typeddict-item]
    assert sorted((why, where, mac) for _, why, where, mac in deleted) == [
        ("path_fail", None, h1.mac), ("path_fail", None, h5.mac)]
    # the next frame explores again and the reply confirms a path over a live link
    sent = fab.ip(h1, h5)
    assert sent.to(h5.ip)
    fab.ip(h5, h1)
    fab.poll_arppath()
    state = fab.app.state()["arppath"]  # type: ignore[typeddict-item]
    path = from_state(state).path(fab.view, h1.mac, h5.mac)
    assert path is not None
    assert path[0] == h1.dpid and path[-1] == h5.dpid and path[1] != 2


def test_without_the_nicira_extensions_it_says_so_and_is_never_ready(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    fab = Fabric(tmp_path, monkeypatch, mfr="dcnlab", sw="dcnlab-switch 0.1")
    assert not fab.app.ready
    assert any("needs the Nicira extensions" in w for w in fab.app.warnings)
    assert fab.app.state()["arppath"]["mode"] == "unsupported"  # type: ignore[typeddict-item]


def test_tfe_forwards_what_it_does_not_explore_by_arp_path_by_default(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """TFE (and TCP-Path) with ARP-Path as the default forwarding, the paper's choice: a
    mouse follows the path its hosts' ARP exchange confirmed; an elephant is still explored
    by TCP-Path; both sections are in the state file, as its schema says."""
    app, spec = app_from_topology(Tfe, TOPO, tmp_path, monkeypatch)
    fab = InMemoryFabric(app, spec)
    assert app.ready and app.dataplane and app.arppath is not None
    assert {f.table_id for sw in fab.net.switches.values() for f in sw.flows} <= set(
        range(dpl.TABLES + apl.TABLES))
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.net.send(h1.ip, {"eth_type": 0x0806, "eth_src": h1.mac,
                         "eth_dst": "ff:ff:ff:ff:ff:ff"}, _fast_via(3))
    fab.net.send(h5.ip, {"eth_type": 0x0806, "eth_src": h5.mac, "eth_dst": h1.mac})
    mouse = {**tcp_packet(h1, h5, 20000, 5001), "tcp_flags": 0x002}
    sent = fab.net.send(h1.ip, mouse)
    assert sent.to(h5.ip) and sent.hops == 2  # over ARP-Path's path, via spine 3
    assert _spine_of(fab, sent) == 3
    elephant = {**tcp_packet(h1, h5, 40000, 5001), "tcp_flags": 0x002}
    assert fab.net.send(h1.ip, elephant, _fast_via(1)).hops > 2  # explored: copies flood
    fab.poll()
    for dpid, dp in fab.dps.items():
        for req in app.arppath.requests(dp):
            body = fab.net.switches[dpid].flow_stats(req.table_id, req.cookie, req.cookie_mask)
            app._flow_stats(_ev(datapath=dp, xid=req.xid, body=body, flags=0))
    state = app.state()
    assert mismatches(json.loads(json.dumps(state)), TcpPathControllerState) == []
    assert state["tcppath"]["default"] == "arppath"
    assert from_state(state["arppath"]).path(fab.view, h1.mac, h5.mac) == [h1.dpid, 3, h5.dpid]
    assert app.counters["tcppath_explorations"] == 1  # the elephant's only
    assert app.counters["arppath_explorations"] == 1  # h1's ARP request


def _spine_of(fab: InMemoryFabric, sent: SendResult) -> int:
    """The spine a 2-hop delivery crossed, from the ARP-Path entry of its source's edge."""
    (pkt,) = [p for _, p, _ in sent.delivered]
    src = next(h for h in fab.view.hosts if h.mac == format_mac(pkt["eth_src"]))
    dst_mac = format_mac(pkt["eth_dst"])
    table = [f for f in fab.net.switches[src.dpid].table(dpl.TABLES + apl.FWD)
             if f.cookie == apl.COOKIE_FWD and format_mac(dict(f.match)["eth_dst"]) == dst_mac]
    peer = fab.view.peer(src.dpid, table[0].actions[0].port)
    assert peer is not None
    return peer[0]


def format_mac(value: int) -> str:
    text = f"{value:012x}"
    return ":".join(text[i:i + 2] for i in range(0, 12, 2))


def test_an_entry_dangling_in_two_walks_is_deleted_and_whole_chains_stay(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A switch forwards an address towards a neighbour that has no entry for it (the
    neighbour lost it first): once a walk saw it and the neighbour's next read still has
    none, that entry goes, on that switch only, and the address's next frames teach the
    path again."""
    fab = Fabric(tmp_path, monkeypatch)
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.arp(h1, h5, delays=_fast_via(2))
    fab.arp(h5, h1, reply=True)
    spine = fab.net.switches[2]
    spine.flows = [f for f in spine.flows if f.cookie != apl.COOKIE_FWD]  # spine 2 forgot
    fab.poll_arppath()
    assert fab.app.counters["arppath_repaired"] == 0  # seen once: perhaps a stale read
    fab.poll_arppath()  # spine 2 read again: it still knows neither
    # h5 at h1's edge, h1 at the three other edges (learned from h1's broadcast via spine 2)
    assert fab.app.counters["arppath_repaired"] == 4
    edges = {h.dpid for h in fab.view.hosts}
    deleted = fab.app.state()["arppath"]["deleted"]  # type: ignore[typeddict-item]
    assert sorted((why, where, mac) for _, why, where, mac in deleted) == sorted(
        [("repair", h1.dpid, h5.mac)] + [("repair", e, h1.mac) for e in edges - {h1.dpid}])
    kept = {(d, format_mac(dict(f.match)["eth_dst"])) for d, sw in fab.net.switches.items()
            for f in sw.flows if f.cookie == apl.COOKIE_FWD}
    # each host at its own edge, and h1 at the other spines (down to h1's edge): whole
    assert kept == {(h1.dpid, h1.mac), (h5.dpid, h5.mac), (1, h1.mac), (3, h1.mac),
                    (4, h1.mac)}
    explorations = fab.app.counters["arppath_explorations"]
    fab.net.expire(fab.app.part.lock_timeout + 1.0)  # h1's exploration over; entries live
    assert fab.ip(h1, h5).to(h5.ip)
    fab.ip(h5, h1)
    fab.poll_arppath()
    assert fab.app.counters["arppath_explorations"] == explorations + 1
    state = fab.app.state()["arppath"]  # type: ignore[typeddict-item]
    assert from_state(state).path(fab.view, h1.mac, h5.mac) is not None


def test_a_chain_learned_again_between_two_reads_is_not_repaired(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk saw h5's edge forwarding h1 into spine 2, which had forgotten h1.  Spine 2 is
    read again (still without h1: the stale entries go at once), then h1's next frame
    crosses spine 2 and teaches h1 there and at h5's edge again, and only then are the
    other switches read.  The chain is whole when the round ends and must stay: deleting
    by the round's reads, spine 2's taken before the frame, would cut it (the pairs
    ``dcnlab check`` found without a path after a ping that went through); spine 2's
    next read clears it."""
    fab = Fabric(tmp_path, monkeypatch)
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.arp(h1, h5, delays=_fast_via(2))
    fab.arp(h5, h1, reply=True)
    spine = fab.net.switches[2]
    spine.flows = [f for f in spine.flows if not (  # spine 2 forgot h1 (and only h1)
        f.cookie == apl.COOKIE_FWD and format_mac(dict(f.match)["eth_dst"]) == h1.mac)]
    fab.poll_arppath()
    assert fab.app.counters["arppath_repaired"] == 0

    def read(dpid: int) -> None:  # its repairs reach the switches before the next frame
        fab.read_arppath(dpid)
        fab.drain()

    read(2)
    edges = {h.dpid for h in fab.view.hosts}
    assert fab.app.counters["arppath_repaired"] == 3  # h1 at the three other edges
    assert fab.ip(h1, h5).to(h5.ip)  # h1's edge still forwards h5 into spine 2: whole
    for dpid in sorted(set(fab.dps) - {2}):
        read(dpid)  # the round ends: its walk suspects h5's edge again, by spine 2's read
    read(2)  # which the next round brings up to date
    state = fab.app.state()["arppath"]  # type: ignore[typeddict-item]
    assert from_state(state).path(fab.view, h5.mac, h1.mac) == [h5.dpid, 2, h1.dpid]
    assert sorted((why, where, mac) for _, why, where, mac in state["deleted"]) == sorted(
        ("repair", e, h1.mac) for e in edges - {h1.dpid})
    assert fab.app.counters["arppath_repaired"] == 3
