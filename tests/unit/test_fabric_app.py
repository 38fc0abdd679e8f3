"""The Ryu app base, driven in memory: fake datapaths record what the app sends, and
the fake OpenFlow tables replay exactly those messages.

Covers: resync on connect and readiness after barriers, ARP answered by the controller,
bad punted packets, a fabric port going down (only differences are sent and every pair
still reaches its destination), and a switch reconnecting.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest
from ryu.lib.packet import arp as ryu_arp
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.controller import arp
from dcnlab.controller.fabric_app import FabricApp
from dcnlab.controller.oftable import FakeDatapath, FakeNetwork, tcp_packet
from dcnlab.controller.view import NetworkView
from dcnlab.topo.spec import parse


def _ev(**msg: Any) -> SimpleNamespace:
    return SimpleNamespace(msg=SimpleNamespace(**msg))


@pytest.fixture
def fabric(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> tuple:
    topo = parse("fattree:4")
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(topo.to_dict()))
    monkeypatch.setenv("DCNLAB_TOPOLOGY", str(path))
    monkeypatch.setenv("DCNLAB_STATS_INTERVAL", "0")
    monkeypatch.delenv("DCNLAB_STATE_FILE", raising=False)
    app = FabricApp()
    dps = {s.dpid: FakeDatapath(s.dpid) for s in topo.switches}
    net = FakeNetwork(NetworkView.from_topology(topo))
    return app, dps, net


def _connect(app: FabricApp, dp: FakeDatapath) -> list[Any]:
    app._features(_ev(datapath=dp))
    msgs = dp.take()
    barrier = [m for m in msgs if isinstance(m, parser.OFPBarrierRequest)]
    assert len(barrier) == 1
    app._barrier(_ev(datapath=dp, xid=barrier[0].xid))
    return msgs


def _replay(net: FakeNetwork, dpid: int, msgs: list[Any]) -> None:
    net.replay(dpid, [m for m in msgs
                      if isinstance(m, (parser.OFPFlowMod, parser.OFPGroupMod))])


def _all_pairs_clean(app: FabricApp, net: FakeNetwork) -> None:
    for src in app.view.hosts:
        for dst in app.view.hosts:
            if src is not dst:
                trace = net.trace(src.ip, tcp_packet(src, dst))
                assert trace.clean and set(trace.paths) == {dst.ip}, (src.ip, dst.ip, trace)


def test_connect_resync_ready_and_forwarding(fabric: tuple) -> None:
    app, dps, net = fabric
    for dpid, dp in dps.items():
        assert not app.ready
        _replay(net, dpid, _connect(app, dp))
    assert app.ready and app.state()["ready"]
    _all_pairs_clean(app, net)


def test_port_down_sends_only_differences(fabric: tuple) -> None:
    app, dps, net = fabric
    for dpid, dp in dps.items():
        _replay(net, dpid, _connect(app, dp))
    edge = next(d for d in app.view.switches if app.view.graph.nodes[d]["tier"] == "edge")
    agg = next(iter(app.view.graph.adj[edge]))
    port = app.view.graph.edges[edge, agg]["ports"][edge]
    desc = SimpleNamespace(port_no=port, state=ofp.OFPPS_LINK_DOWN, config=0)
    app._port_status(_ev(datapath=dps[edge], reason=ofp.OFPPR_MODIFY, desc=desc))
    net.view.set_port_up(edge, port, False)  # the fake wiring follows the real link
    touched = 0
    for dpid, dp in dps.items():
        msgs = dp.take()
        touched += bool(msgs)
        assert not any(isinstance(m, parser.OFPFlowMod) and m.command == ofp.OFPFC_DELETE
                       for m in msgs), "a port change must not wipe a switch"
        _replay(net, dpid, msgs)
    assert 2 <= touched < len(dps)
    assert app.state()["links_down"] == [[min(edge, agg), max(edge, agg)]]
    _all_pairs_clean(app, net)


def test_reconnect_resyncs_from_scratch(fabric: tuple) -> None:
    app, dps, net = fabric
    for dpid, dp in dps.items():
        _replay(net, dpid, _connect(app, dp))
    dp = dps[min(dps)]
    app._disconnected(SimpleNamespace(datapath=dp))
    assert not app.ready
    msgs = _connect(app, dp)
    first = msgs[2]  # after the desc and port-desc requests: delete ours, then install
    assert isinstance(first, parser.OFPFlowMod) and first.command == ofp.OFPFC_DELETE
    _replay(net, dp.id, msgs)
    assert app.ready
    _all_pairs_clean(app, net)


def _arp_request(src: Any, target_ip: str) -> bytes:
    req = arp.ArpPacket(ryu_arp.ARP_REQUEST, src.mac, src.ip, arp.ZERO_MAC, target_ip,
                        src.mac, arp.BROADCAST)
    return arp.probe(req)


def test_arp_answered_by_controller(fabric: tuple) -> None:
    app, dps, _ = fabric
    for dp in dps.values():
        _connect(app, dp)
    src, dst = app.view.hosts[0], app.view.hosts[-1]
    dp = dps[src.dpid]
    app._packet_in(_ev(datapath=dp, match={"in_port": src.port},
                       data=_arp_request(src, dst.ip)))
    (out,) = dp.take()
    assert isinstance(out, parser.OFPPacketOut)
    assert [a.port for a in out.actions] == [src.port]
    reply = arp.parse(out.data)
    assert (reply.opcode, reply.src_ip, reply.src_mac, reply.dst_ip) == (
        ryu_arp.ARP_REPLY, dst.ip, dst.mac, src.ip)
    assert app.counters["arp_replied"] == 1
    assert all(not d.sent for d in dps.values())  # nothing flooded anywhere


def test_bad_punted_packets_are_counted_not_fatal(fabric: tuple) -> None:
    app, dps, _ = fabric
    for dp in dps.values():
        _connect(app, dp)
    host = app.view.hosts[0]
    dp = dps[host.dpid]
    for data in (b"", b"\x00" * 13, b"\xff" * 60, _arp_request(host, "10.0.0.2")[:30]):
        app._packet_in(_ev(datapath=dp, match={"in_port": host.port}, data=data))
    app._packet_in(_ev(datapath=dp, match={}, data=_arp_request(host, "10.0.0.2")))
    assert app.counters["packet_in_bad"] == 5
    assert not dp.sent


def test_arp_from_fabric_port_and_spoofed_hosts_are_ignored(fabric: tuple) -> None:
    app, dps, _ = fabric
    for dp in dps.values():
        _connect(app, dp)
    host = app.view.hosts[0]
    fabric_port = next(iter(app.view.fabric_ports(host.dpid)))
    dp = dps[host.dpid]
    app._packet_in(_ev(datapath=dp, match={"in_port": fabric_port},
                       data=_arp_request(host, "10.0.0.2")))
    assert app.counters["arp_from_fabric"] == 1 and not dp.sent
    # A host claiming another host's address is not learned in topology mode.
    other = app.view.hosts[5]
    spoof = arp.ArpPacket(ryu_arp.ARP_REQUEST, "02:00:00:00:00:66", other.ip, arp.ZERO_MAC,
                          host.ip, "02:00:00:00:00:66", arp.BROADCAST)
    app._packet_in(_ev(datapath=dp, match={"in_port": host.port}, data=arp.probe(spoof)))
    assert app.counters["arp_unexpected_host"] == 1
    assert app.view.host_by_ip(other.ip) == other
