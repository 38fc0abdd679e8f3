"""ARP-Path's data-plane tables in memory: the compiled routes rebuilt into standalone
ARP-Path on every switch of spineleaf:4,4,2, replayed in the in-memory table model with
copies racing over links whose delays the test chooses.  The pipeline alone: no app."""

from __future__ import annotations

from typing import Any

import pytest

from dcnlab.controller.compiler import SELECT_GROUPS, compile_policy
from dcnlab.controller.fabric_ports import switch_ports
from dcnlab.controller.oftable import FakeNetwork, SendResult
from dcnlab.controller.view import HostLocation, NetworkView
from dcnlab.schemes.arppath import dataplane as apl
from dcnlab.schemes.arppath.view import ArpPathView, stats_requests
from dcnlab.topo.spec import parse

TOPO = "spineleaf:4,4,2"  # spines 1-4, leaves 5-8, two hosts per leaf
SPINES = (1, 2, 3, 4)
IDLE, LOCK = 10, 3
BASE = 1


class Fabric:
    def __init__(self) -> None:
        self.view = NetworkView.from_topology(parse(TOPO))
        compiled = compile_policy(self.view, SELECT_GROUPS)
        for dpid, rules in compiled.items():
            apl.attach(rules, switch_ports(self.view, dpid), BASE, IDLE, LOCK)
        self.net = FakeNetwork(self.view)
        self.net.install(compiled)

    def host(self, name: str) -> HostLocation:
        return next(h for h in self.view.hosts if h.name == name)

    def arp_request(self, src: HostLocation, target: HostLocation,
                    delays: dict[tuple[int, int], float] | None = None) -> SendResult:
        return self.net.send(src.ip, {"eth_type": 0x0806, "eth_src": src.mac,
                                      "eth_dst": "ff:ff:ff:ff:ff:ff", "arp_op": 1,
                                      "arp_spa": src.ip, "arp_tpa": target.ip}, delays)

    def frame(self, src: HostLocation, dst: HostLocation, eth_type: int = 0x0806,
              delays: dict[tuple[int, int], float] | None = None) -> SendResult:
        pkt: dict[str, Any] = {"eth_type": eth_type, "eth_src": src.mac, "eth_dst": dst.mac}
        if eth_type == 0x0800:
            pkt.update(ipv4_src=src.ip, ipv4_dst=dst.ip, ip_proto=17)
        return self.net.send(src.ip, pkt, delays)

    def fwd(self, dpid: int) -> dict[int, int]:
        """eth_dst -> output port of the learned forwarding entries of ``dpid``."""
        out = {}
        for f in self.net.switches[dpid].table(BASE + apl.FWD):
            if f.cookie == apl.COOKIE_FWD:
                out[dict(f.match)["eth_dst"]] = f.actions[0].port
        return out

    def count(self, kind: int) -> int:
        return sum(f.packets for sw in self.net.switches.values() for f in sw.flows
                   if f.cookie == apl.COOKIE_COUNT | kind)


def _fast_via(spine: int) -> dict[tuple[int, int], float]:
    """Links to and from ``spine`` fast, every other fabric link slow."""
    return {(a, b): 0.0001 if spine in (a, b) else 0.01
            for a in range(1, 9) for b in range(1, 9) if a != b}


def _mac(text: str) -> int:
    return int(text.replace(":", ""), 16)


@pytest.fixture()
def fab() -> Fabric:
    return Fabric()


def test_a_broadcast_reaches_every_host_once_over_the_fastest_copies(fab: Fabric) -> None:
    h1, h5 = fab.host("h1"), fab.host("h5")
    sent = fab.arp_request(h1, h5, _fast_via(2))
    heard = sorted(ip for ip, _, _ in sent.delivered)
    assert heard == sorted(h.ip for h in fab.view.hosts if h is not h1)  # each host once
    assert all("vlan_vid" not in pkt for _, pkt, _ in sent.delivered)  # untagged
    assert sent.punted == []  # the controller hears no ARP of a known host
    assert fab.count(apl.COUNT_EXPLORE) == 1
    assert fab.count(apl.COUNT_LATE) > 0  # the slow copies died
    # every switch locked h1 to the port its first copy came from: h1's leaf and spine 2
    # lead towards it; h1's leaf itself to h1's port
    locks = {d: [f for f in sw.table(BASE + apl.LOCK_DST) if f.cookie == apl.COOKIE_LOCK]
             for d, sw in fab.net.switches.items()}
    assert all(len(v) == 1 for v in locks.values()), locks


def test_the_reply_confirms_the_winning_path_for_both_addresses(fab: Fabric) -> None:
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.arp_request(h1, h5, _fast_via(2))
    # every switch learned h1 from the first copy it took: the way back along the tree
    for dpid in fab.net.switches:
        port = fab.fwd(dpid)[_mac(h1.mac)]
        if dpid == h1.dpid:
            assert port == h1.port
        elif dpid in SPINES:
            assert fab.view.peer(dpid, port)[0] == h1.dpid  # spines: down to h1's leaf
        else:
            assert fab.view.peer(dpid, port)[0] == 2  # other leaves: up to spine 2, fastest
    reply = fab.frame(h5, h1)  # ARP reply, unicast: back along the tree, via spine 2
    assert [ip for ip, _, _ in reply.delivered] == [h1.ip]
    # every switch it crossed learned the replier's address from it
    assert {d for d in fab.net.switches if _mac(h5.mac) in fab.fwd(d)} == {h1.dpid, 2,
                                                                          h5.dpid}
    assert fab.view.peer(h1.dpid, fab.fwd(h1.dpid)[_mac(h5.mac)])[0] == 2
    # from now on frames both ways follow the entries: one copy each, no exploration
    explorations = fab.count(apl.COUNT_EXPLORE)
    there = fab.frame(h1, h5, 0x0800)
    back = fab.frame(h5, h1, 0x0800)
    assert [ip for ip, _, _ in there.delivered] == [h5.ip] and there.hops == 2
    assert [ip for ip, _, _ in back.delivered] == [h1.ip] and back.hops == 2
    assert fab.count(apl.COUNT_EXPLORE) == explorations


def test_an_aged_entry_is_explored_again_by_the_next_frame(fab: Fabric) -> None:
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.arp_request(h1, h5, _fast_via(2))
    fab.frame(h5, h1)
    fab.net.expire(IDLE + LOCK + 1.0)  # every learned entry (locks, forwarding) aged out
    assert not any(fab.fwd(d) for d in fab.net.switches)
    fab.net.clock = IDLE + LOCK + 2.0
    sent = fab.frame(h1, h5, 0x0800, _fast_via(3))
    assert [ip for ip, _, _ in sent.delivered] == [h5.ip]  # only its destination
    assert fab.count(apl.COUNT_EXPLORE) == 2
    assert fab.count(apl.COUNT_DEAD_END) > 0  # the other edges dropped the copies
    fab.frame(h5, h1, 0x0800)  # the destination's next frame confirms, via spine 3 now
    assert fab.view.peer(h1.dpid, fab.fwd(h1.dpid)[_mac(h5.mac)])[0] == 3


def test_a_frame_with_no_entry_inside_the_fabric_takes_the_default_routes(
        fab: Fabric) -> None:
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.arp_request(h1, h5, _fast_via(2))
    fab.frame(h5, h1)
    fab.net.switches[2].flows = [f for f in fab.net.switches[2].flows
                                 if f.cookie != apl.COOKIE_FWD]  # spine 2 forgot them
    sent = fab.frame(h1, h5, 0x0800)
    assert [ip for ip, _, _ in sent.delivered] == [h5.ip]
    assert fab.count(apl.COUNT_FABRIC_MISS) == 1


def _polled(fab: Fabric) -> ArpPathView:
    """The controller's view after answering its flow-stats requests from every switch."""
    view = ArpPathView()
    for dpid, sw in fab.net.switches.items():
        for xid, req in enumerate(stats_requests(None, BASE)):
            body = sw.flow_stats(req.table_id, req.cookie, req.cookie_mask)
            view.reply(dpid, xid, body, False)
    return view


def test_the_controller_reads_paths_and_counters_from_flow_statistics(fab: Fabric) -> None:
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.arp_request(h1, h5, _fast_via(2))
    fab.frame(h5, h1)
    view = _polled(fab)
    assert view.path(fab.view, h1.mac, h5.mac) == [h1.dpid, 2, h5.dpid]
    assert view.path(fab.view, h5.mac, h1.mac) == [h5.dpid, 2, h1.dpid]
    assert view.path(fab.view, h1.mac, fab.host("h3").mac) is None  # never confirmed
    # h1 everywhere (its broadcast's tree), h5 along its reply's path
    assert view.entries_per_switch() == {d: 2 if d in (h1.dpid, 2, h5.dpid) else 1
                                         for d in fab.net.switches}
    totals = view.totals()
    assert totals["arppath_explorations"] == 1 and totals["arppath_lock_frames"] == 0
    assert totals["arppath_copy_late"] == fab.count(apl.COUNT_LATE) > 0
    # a link of the path goes down: what every switch knows of both addresses must go
    fab.view.set_port_up(2, fab.view.graph.edges[2, h5.dpid]["ports"][2], False)
    assert view.macs_over_dead_links(fab.view, 2) == {h5.mac}
    assert view.macs_over_dead_links(fab.view, h5.dpid) == {h1.mac}
    assert view.path(fab.view, h1.mac, h5.mac) is None


def test_one_exchange_leaves_both_paths_whole_over_stale_entries(fab: Fabric) -> None:
    """The pair's paths must be whole after one exchange even where old entries were left:
    here the other edges still forward h1 into spine 2, which forgot h1, and h1's edge forgot
    h5, so h1's next frame explores (fastest via spine 3 now).  The exploration's copies
    teach h1's address along their tree, over the stale entry, and the reply teaches
    h5's.  (Learning the explorer only from its next frame left h5's edge pointing into
    spine 2: the pairs without a path in ``dcnlab check``.)"""
    h1, h5 = fab.host("h1"), fab.host("h5")
    fab.arp_request(h1, h5, _fast_via(2))
    fab.frame(h5, h1)

    def forget(dpid: int, mac: str) -> None:
        sw = fab.net.switches[dpid]
        sw.flows = [f for f in sw.flows if not (
            f.cookie == apl.COOKIE_FWD and dict(f.match)["eth_dst"] == _mac(mac))]

    forget(2, h1.mac)
    forget(h1.dpid, h5.mac)
    fab.net.expire(LOCK + 1.0)  # the first exploration's locks are gone
    # every other leaf learned h1 behind spine 2 from the first exploration's copies
    assert _polled(fab).dangling(fab.view) == {(d, h1.mac) for d in (6, 7, 8)}
    sent = fab.frame(h1, h5, 0x0800, _fast_via(3))
    assert [ip for ip, _, _ in sent.delivered] == [h5.ip]
    assert fab.count(apl.COUNT_EXPLORE) == 2
    back = fab.frame(h5, h1, 0x0800)
    assert [ip for ip, _, _ in back.delivered] == [h1.ip]
    view = _polled(fab)
    assert view.dangling(fab.view) == set()
    assert view.path(fab.view, h1.mac, h5.mac) == [h1.dpid, 3, h5.dpid]
    assert view.path(fab.view, h5.mac, h1.mac) == [h5.dpid, 3, h1.dpid]


def test_breaks_name_the_neighbour_to_read_again_and_loops_have_none() -> None:
    """A break is an entry forwarding an address to a polled neighbour without one (that
    neighbour is named: its next read confirms or clears it); an entry whose chain breaks
    further on is not one yet; a chain between spines and leaves that comes back to
    itself lists each of its entries, with no neighbour to ask."""
    view = NetworkView.from_topology(parse("spineleaf:4,4,2"))
    h1 = next(h for h in view.hosts if h.name == "h1")
    leaf, other = h1.dpid, h1.dpid + 1

    def port(a: int, b: int) -> int:
        return int(view.graph.edges[a, b]["ports"][a])

    tables: dict[int, dict[str, int]] = {d: {} for d in range(1, 9)}
    tables[other][h1.mac] = port(other, 2)  # spine 2 has no entry: a break
    tables[other + 1][h1.mac] = port(other + 1, 3)  # spine 3 forwards to leaf `other`...
    tables[3][h1.mac] = port(3, other)  # ...which breaks at spine 2: not a break yet
    assert ArpPathView(tables=tables).breaks(view) == {
        (other, h1.mac): (port(other, 2), 2)}
    tables[2][h1.mac] = port(2, other)  # spine 2 -> leaf `other` -> spine 2: a loop
    assert ArpPathView(tables=tables).breaks(view) == {
        (other, h1.mac): (port(other, 2), None), (2, h1.mac): (port(2, other), None)}
    tables[2][h1.mac] = port(2, leaf)  # spine 2 towards h1's own edge: all whole
    assert ArpPathView(tables=tables).breaks(view) == {}
