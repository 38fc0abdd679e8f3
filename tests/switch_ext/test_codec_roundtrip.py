"""The switch's encoder, checked by an independent parser: Ryu's.

``dcnlab-switch --selftest-encode FILE`` drives an in-memory datapath (flow mods, group
mods, packets, stats requests, bad requests) and writes every switch-to-controller
message it produced. Each must parse with ``ryu.ofproto.ofproto_v1_3_parser`` into the
expected class with the expected fields.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from ryu.ofproto import ofproto_parser, ofproto_protocol
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

DP = ofproto_protocol.ProtocolDesc(version=ofp.OFP_VERSION)


@pytest.fixture(scope="module")
def samples(switch_binary, tmp_path_factory) -> dict[str, bytes]:
    path = tmp_path_factory.mktemp("selftest") / "samples.json"
    subprocess.run([switch_binary, "--selftest-encode", str(path)], check=True, timeout=60)
    with open(path) as fh:
        return {k: bytes.fromhex(v) for k, v in json.load(fh).items()}


def parse(buf: bytes):
    version, msg_type, msg_len, xid = ofproto_parser.header(buf)
    assert msg_len == len(buf)
    return ofproto_parser.msg(DP, version, msg_type, msg_len, xid, buf)


def test_every_sample_parses(samples):
    assert len(samples) >= 25
    for name, buf in samples.items():
        msg = parse(buf)
        assert msg is not None, name


def test_features_reply(samples):
    m = parse(samples["features_reply"])
    assert isinstance(m, parser.OFPSwitchFeatures)
    assert (m.datapath_id, m.n_buffers, m.n_tables, m.xid) == (1, 0, 4, 10)
    assert m.capabilities & ofp.OFPC_FLOW_STATS


def test_desc_reply_advertises_select_modes(samples):
    m = parse(samples["desc_reply"])
    assert isinstance(m, parser.OFPDescStatsReply)
    body = m.body
    assert body.mfr_desc.rstrip(b"\0") == b"dcnlab"
    assert body.hw_desc.rstrip(b"\0") == b"switch_ext"
    sw = body.sw_desc.rstrip(b"\0").decode()
    assert sw.startswith("dcnlab-switch ") and "select=hash,rr,random" in sw
    assert "experimenter=0x00dc0001" in sw
    # The Nicira subset, announced for apps that program it (apps/tcppath.py looks for nx=).
    nx = dict(kv.split("=", 1) for kv in sw.split("; ")[1:])["nx"].split(",")
    assert {"resubmit", "reg_load", "reg_move", "output_reg", "learn"} <= set(nx)
    assert body.dp_desc.rstrip(b"\0") == b"s1"


def test_port_desc_and_status(samples):
    m = parse(samples["port_desc_reply"])
    assert isinstance(m, parser.OFPPortDescStatsReply)
    assert [(p.port_no, p.name, p.hw_addr) for p in m.body] == [
        (1, b"s1-eth1", "02:00:00:00:00:01"),
        (2, b"s1-eth2", "02:00:00:00:00:02"),
    ]
    assert all(p.state == ofp.OFPPS_LIVE for p in m.body)
    st = parse(samples["port_status"])
    assert isinstance(st, parser.OFPPortStatus)
    assert st.reason == ofp.OFPPR_MODIFY
    assert st.desc.port_no == 2 and st.desc.state & ofp.OFPPS_LINK_DOWN


def test_packet_ins(samples):
    miss = parse(samples["packet_in.0"])
    assert isinstance(miss, parser.OFPPacketIn)
    assert miss.reason == ofp.OFPR_NO_MATCH and miss.buffer_id == ofp.OFP_NO_BUFFER
    assert miss.match["in_port"] == 1
    assert len(miss.data) == miss.total_len == 142
    act = parse(samples["packet_in.1"])
    assert act.reason == ofp.OFPR_ACTION and act.cookie == 0x1234 and act.table_id == 0
    assert act.match["in_port"] == 2
    # max_len 64, no buffering: the first 64 bytes, total_len tells the real size.
    assert len(act.data) == 64 and act.total_len == 142


def test_flow_stats_and_aggregate(samples):
    m = parse(samples["flow_stats_reply"])
    assert isinstance(m, parser.OFPFlowStatsReply)
    by_prio = {s.priority: s for s in m.body}
    assert set(by_prio) == {0, 100}
    s = by_prio[100]
    assert s.match["in_port"] == 2 and s.match["ipv4_dst"] == ("10.0.0.0", "255.255.255.0")
    assert s.packet_count == 1 and s.byte_count == 142 and s.cookie == 0x1234
    assert s.flags == ofp.OFPFF_SEND_FLOW_REM
    kinds = [type(i) for i in s.instructions]
    assert kinds == [parser.OFPInstructionActions, parser.OFPInstructionActions]
    set_field = s.instructions[0].actions[0]
    assert isinstance(set_field, parser.OFPActionSetField) and set_field.value == 10
    agg = parse(samples["aggregate_reply"])
    assert (agg.body.flow_count, agg.body.packet_count) == (2, 2)


def test_table_port_group_stats(samples):
    t = parse(samples["table_stats_reply"])
    assert [s.table_id for s in t.body] == [0, 1, 2, 3]
    assert t.body[0].active_count == 2 and t.body[0].lookup_count == 2
    p = parse(samples["port_stats_reply"])
    assert [s.port_no for s in p.body] == [1, 2]
    g = parse(samples["group_stats_reply"])
    assert [s.group_id for s in g.body] == [7]
    assert g.body[0].ref_count == 1 and g.body[0].packet_count == 1
    assert len(g.body[0].bucket_stats) == 2
    d = parse(samples["group_desc_reply"])
    assert d.body[0].type == ofp.OFPGT_SELECT
    assert [b.weight for b in d.body[0].buckets] == [1, 2]
    f = parse(samples["group_features_reply"])
    assert f.body.types == 0xF


def test_misc_replies(samples):
    assert isinstance(parse(samples["get_config_reply"]), parser.OFPGetConfigReply)
    echo = parse(samples["echo_reply"])
    assert isinstance(echo, parser.OFPEchoReply) and echo.data == b"ping"
    assert isinstance(parse(samples["barrier_reply"]), parser.OFPBarrierReply)
    role = parse(samples["role_reply"])
    assert role.role == ofp.OFPCR_ROLE_MASTER and role.generation_id == 5
    assert isinstance(parse(samples["get_async_reply"]), parser.OFPGetAsyncReply)
    q = parse(samples["queue_get_config_reply"])
    assert isinstance(q, parser.OFPQueueGetConfigReply) and q.port == 1
    exp = parse(samples["experimenter_reply"])
    assert isinstance(exp, parser.OFPExperimenter)
    assert exp.experimenter == 0x00DC0001 and exp.exp_type == 3
    assert exp.data == bytes([0, 0, 0, 7, 3, 0, 0, 0])  # group 7 -> random (switch default)


def test_errors(samples):
    e = parse(samples["error_flow_mod_failed"])
    assert isinstance(e, parser.OFPErrorMsg)
    assert (e.type, e.code) == (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_TABLE_ID)
    # The offending request is echoed (all of it here: it is shorter than 64 bytes).
    assert e.xid == 30 and e.data[1] == ofp.OFPT_FLOW_MOD and len(e.data) == 56
    e = parse(samples["error_bad_match"])
    assert (e.type, e.code) == (ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_PREREQ)
    e = parse(samples["error_bad_type"])
    assert (e.type, e.code) == (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE)


def test_flow_removed(samples):
    m = parse(samples["flow_removed"])
    assert isinstance(m, parser.OFPFlowRemoved)
    assert m.reason == ofp.OFPRR_DELETE and m.priority == 100 and m.cookie == 0x1234
    assert m.match["in_port"] == 2 and m.packet_count == 1


def test_nicira_flows_in_flow_stats_and_flow_removed(samples):
    """A learning flow and the flow it learned, as Ryu's own parser reads them."""
    (learner,) = parse(samples["nx_flow_stats_learner"]).body
    assert learner.match["reg0"] == (0, 0xFFFF) and learner.match["ip_proto"] == 17
    learn, resubmit, output_reg = learner.instructions[0].actions
    assert isinstance(learn, parser.NXActionLearn)
    assert (learn.table_id, learn.priority, learn.idle_timeout, learn.cookie) == (1, 7, 9, 0xBEEF)
    assert [type(s).__name__ for s in learn.specs] == [
        "NXFlowSpecMatch", "NXFlowSpecMatch", "NXFlowSpecMatch", "NXFlowSpecLoad",
        "NXFlowSpecOutput",
    ]
    assert learn.specs[2].src == ("ipv4_src_nxm", 0) and learn.specs[3].dst == ("reg0", 0)
    assert isinstance(resubmit, parser.NXActionResubmitTable) and resubmit.table_id == 1
    assert isinstance(output_reg, parser.NXActionOutputReg) and output_reg.src == "reg1"
    assert learner.packet_count == 1

    (learned,) = parse(samples["nx_flow_stats_learned"]).body
    assert (learned.table_id, learned.priority, learned.cookie) == (1, 7, 0xBEEF)
    assert (learned.idle_timeout, learned.flags) == (9, ofp.OFPFF_SEND_FLOW_REM)
    assert learned.match["eth_type"] == 0x0800 and learned.match["ip_proto"] == 17
    assert learned.match["ipv4_src"] == "10.0.0.1"
    load, output = learned.instructions[0].actions
    assert isinstance(load, parser.NXActionRegLoad)
    assert (load.dst, load.value, load.ofs_nbits) == ("reg0", 1, 15)  # in_port 1, reg0[0..15]
    assert isinstance(output, parser.OFPActionOutput) and output.port == 1
    assert learned.packet_count == 1  # the learning packet, resubmitted into it

    removed = parse(samples["nx_flow_removed"])
    assert isinstance(removed, parser.OFPFlowRemoved)
    assert (removed.table_id, removed.cookie, removed.reason) == (1, 0xBEEF, ofp.OFPRR_IDLE_TIMEOUT)
    assert removed.match["ipv4_src"] == "10.0.0.1"
