"""first_path's rules in memory: one path per pair, and every destination behind an
uplink through the lowest uplink port (so a fat-tree's inter-pod traffic shares one
aggregation switch per pod and one core switch)."""

from __future__ import annotations

from dcnlab.apps.first_path import FirstPort
from dcnlab.controller.compiler import compile_policy
from dcnlab.controller.oftable import FakeNetwork, packet_ints, tcp_packet
from dcnlab.controller.view import NetworkView
from dcnlab.topo.spec import parse


def test_every_flow_up_a_switch_takes_its_lowest_uplink() -> None:
    view = NetworkView.from_topology(parse("fattree:4"))
    net = FakeNetwork(view)
    net.install(compile_policy(view, FirstPort()))
    uplinks: dict[int, set[int]] = {}
    for src in view.hosts:
        for dst in view.hosts:
            if src is dst:
                continue
            trace = net.trace(src.ip, tcp_packet(src, dst))
            assert trace.clean and trace.paths == {dst.ip: 1}, (src.ip, dst.ip)
            if dst.dpid != src.dpid:
                pkt = {**packet_ints(tcp_packet(src, dst)), "in_port": src.port}
                ways = net.switches[src.dpid].alternatives(pkt)
                assert len(ways) == 1 and len(ways[0]) == 1
                uplinks.setdefault(src.dpid, set()).add(ways[0][0])
    edge_ports = {dpid: {p for a, ap, b, bp, _up in view.links()
                         for d, p in ((a, ap), (b, bp)) if d == dpid}
                  for dpid in uplinks}
    for dpid, used in uplinks.items():
        assert used == {min(edge_ports[dpid])}, (dpid, used)


def test_pick_is_the_lowest_port_whatever_the_destination() -> None:
    policy = FirstPort()
    assert {policy.pick(7, (3, 1, 2), key) for key in range(10)} == {1}
