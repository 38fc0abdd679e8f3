"""The in-memory table model's pipeline (:meth:`FakeSwitch.process`): several tables,
goto_table, resubmit and its depth limit, registers, output_reg, learn (add or modify),
timeouts, VLAN push/pop, and the OpenFlow rule that a packet never leaves by its in-port.
"""

from __future__ import annotations

from typing import Any

from ryu.ofproto import ofproto_protocol
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.controller import ofmsg
from dcnlab.controller.oftable import FakeSwitch
from dcnlab.controller.rules import FlowEntry, match

DP = ofproto_protocol.ProtocolDesc(ofp.OFP_VERSION)
PKT = {"eth_type": 0x0800, "ip_proto": 6, "eth_src": 0xA, "eth_dst": 0xB, "tcp_src": 1000,
       "tcp_dst": 80}


def _switch(*entries: FlowEntry) -> FakeSwitch:
    sw = FakeSwitch(1)
    for e in entries:
        sw.apply(ofmsg.flow_add(DP, e))
    return sw


def _ports(sw: FakeSwitch, in_port: int = 1, pkt: dict[str, Any] | None = None) -> list[int]:
    return [e.port for e in sw.process(dict(pkt or PKT), in_port)]


def test_goto_table_runs_the_next_table_after_the_actions() -> None:
    sw = _switch(FlowEntry(1, match(), (("output", 3),), table_id=2))
    sw.apply(parser.OFPFlowMod(DP, table_id=0, priority=1, match=parser.OFPMatch(),
                               instructions=[
                                   parser.OFPInstructionActions(
                                       ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(2)]),
                                   parser.OFPInstructionGotoTable(2)]))
    assert _ports(sw) == [2, 3]


def test_resubmit_continues_after_the_looked_up_flow_and_a_miss_does_nothing() -> None:
    sw = _switch(
        FlowEntry(1, match(), (("resubmit", 1), ("resubmit", 5), ("output", 4)), table_id=0),
        FlowEntry(1, match(), (("load", "reg1", 0, 16, 3), ("output", 2)), table_id=1),
    )
    assert _ports(sw) == [2, 4]


def test_resubmit_loop_is_cut_at_the_depth_limit() -> None:
    sw = _switch(FlowEntry(1, match(), (("resubmit", 0), ("output", 2)), table_id=0))
    assert _ports(sw) == [] and sw.dropped_depth == 1


def test_registers_start_at_zero_and_output_reg_never_returns_to_the_in_port() -> None:
    sw = _switch(
        FlowEntry(9, match(reg1=0), (("move", "tcp_dst", 0, "reg1", 0, 16),
                                     ("resubmit", 0)), table_id=0),
        FlowEntry(1, match(), (("output_reg", "reg1", 0, 16),), table_id=0),
    )
    assert _ports(sw, in_port=1) == [80]
    assert _ports(sw, in_port=80) == []  # the register names the in-port: dropped


def test_learn_adds_then_modifies_keeping_counts_and_resetting_timeouts() -> None:
    learn = ("learn", 1, 10, 5, 0, 0x77, 0, (
        ("match", "eth_type", 0, 0x0800, 16), ("match", "ip_proto", 0, 6, 8),
        ("match", "eth_dst", 0, ("eth_src", 0), 48), ("output", ("in_port_nxm", 0), 16)))
    sw = _switch(FlowEntry(1, match(eth_type=0x0800, ip_proto=6), (learn,), table_id=0))
    sw.process(dict(PKT), 7)
    (learned,) = sw.table(1)
    assert dict(learned.match)["eth_dst"] == 0xA and learned.idle_timeout == 5
    assert learned.actions[0].port == 7 and learned.cookie == 0x77
    back = {**PKT, "eth_src": 0xB, "eth_dst": 0xA}
    sw.apply(ofmsg.flow_add(DP, FlowEntry(5, match(eth_src=0xB), (("resubmit", 1),),
                                          table_id=0)))
    sw.clock = 3.0
    assert _ports(sw, in_port=2, pkt=back) == [7]
    sw.clock = 4.0
    sw.process(dict(PKT), 8)  # learn again: same match, new port, counts kept
    (learned,) = sw.table(1)
    assert learned.actions[0].port == 8 and learned.packets == 1
    assert sw.expire(8.5) == [] and sw.table(1)  # idle 5 s from the modification at 4 s
    (gone,) = sw.expire(9.0)
    assert gone[1] == ofp.OFPRR_IDLE_TIMEOUT and not sw.table(1)


def test_vlan_push_set_pop_and_masked_vlan_match() -> None:
    sw = _switch(
        FlowEntry(5, match(vlan_vid=(0x1000, 0x1000)), (("pop_vlan",), ("output", 3))),
        FlowEntry(1, match(), (("push_vlan", 0x8100), ("set_field", "vlan_vid", 0x1005),
                               ("output", 2), ("resubmit", 0))),
    )
    out = sw.process(dict(PKT), 1)
    assert [(e.port, e.packet.get("vlan_vid")) for e in out] == [(2, 0x1005), (3, None)]


def test_non_strict_delete_by_match_cookie_and_out_port() -> None:
    sw = _switch(
        FlowEntry(5, match(in_port=1, eth_dst=0xB), (("output", 2),), table_id=3, cookie=9),
        FlowEntry(5, match(in_port=2, eth_dst=0xB), (("output", 1),), table_id=3, cookie=9),
        FlowEntry(5, match(in_port=1, eth_dst=0xC), (("output", 2),), table_id=3, cookie=8),
    )
    def delete(out_port: int = ofp.OFPP_ANY, **fields: Any) -> None:
        sw.apply(parser.OFPFlowMod(DP, cookie=9, cookie_mask=0xFF, table_id=3,
                                   command=ofp.OFPFC_DELETE, out_port=out_port,
                                   out_group=ofp.OFPG_ANY, match=parser.OFPMatch(**fields)))
    delete(out_port=1)
    assert len(sw.table(3)) == 2
    delete(in_port=1)  # the cookie-8 entry is not ours to delete
    assert [f.cookie for f in sw.table(3)] == [8]
