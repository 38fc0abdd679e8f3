"""Nicira-extension fixtures for switch_ext, encoded by Ryu's own serializer.

Run with the project venv (Ryu 4.34)::

    .venv/bin/python tests/switch_ext/gen_nx_fixtures.py   # from the repository root

It writes ``switch_ext/tests/fixtures/nx_of13.json``: flow mods carrying every Nicira
action the switch implements (``ryu.ofproto.nx_actions``: resubmit, resubmit_table,
reg_load, reg_move, output_reg, learn with every flow-spec kind, fin_timeout, note, exit),
register matches (``reg0``..``reg7``, exact and masked), TCP-Path-like learn programs, a
packet out, and what the switch must refuse. ``switch_ext/tests/nx_vectors.rs`` decodes
each fixture, re-encodes it byte-identically and replays it into an in-memory datapath,
expecting no error for ``dp_ok`` ones and exactly the OpenFlow error in ``error`` for the
others. ``tests/switch_ext/test_nx_fixtures.py`` regenerates the file and fails if it
differs from the committed one.

Entries with ``"ryu": false`` are Ryu encodings edited by hand into what Ryu cannot
produce (a bad length, nonzero padding); they must be refused and are not re-encoded.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from ryu.ofproto import nicira_ext, ofproto_protocol
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "switch_ext", "tests", "fixtures", "nx_of13.json")

DP = ofproto_protocol.ProtocolDesc(version=ofp.OFP_VERSION)

OFPET_BAD_ACTION = 2
OFPET_BAD_MATCH = 4
OFPBAC_BAD_LEN = 1
OFPBAC_BAD_EXP_TYPE = 3
OFPBAC_BAD_ARGUMENT = 5
OFPBAC_MATCH_INCONSISTENT = 12
OFPBAC_BAD_SET_LEN = 14
OFPBAC_BAD_SET_ARGUMENT = 15
OFPBMC_BAD_FIELD = 6

TCP = {"eth_type": 0x0800, "ip_proto": 6}

# (name, match, error): an error means (type, code) the datapath answers.
Fixture = tuple[str, Any, tuple[int, int] | None]


def flow(actions: list[Any], table: int = 0, priority: int = 10, **match: Any) -> Any:
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    return parser.OFPFlowMod(
        DP, table_id=table, priority=priority, match=parser.OFPMatch(**match), instructions=inst
    )


def learn(specs: list[Any], **kw: Any) -> Any:
    args: dict[str, Any] = {"table_id": 1, "priority": 100, "idle_timeout": 10}
    args.update(kw)
    return parser.NXActionLearn(specs=specs, **args)


def five_tuple(reverse: bool) -> list[Any]:
    """Learn specs matching the packet's TCP 5-tuple (or its reverse), NXM names."""
    src, dst = ("ipv4_dst_nxm", "ipv4_src_nxm") if reverse else ("ipv4_src_nxm", "ipv4_dst_nxm")
    sport, dport = ("tcp_dst_nxm", "tcp_src_nxm") if reverse else ("tcp_src_nxm", "tcp_dst_nxm")
    return [
        parser.NXFlowSpecMatch(src=0x0800, dst=("eth_type_nxm", 0), n_bits=16),
        parser.NXFlowSpecMatch(src=6, dst=("ip_proto_nxm", 0), n_bits=8),
        parser.NXFlowSpecMatch(src=(src, 0), dst=("ipv4_src_nxm", 0), n_bits=32),
        parser.NXFlowSpecMatch(src=(dst, 0), dst=("ipv4_dst_nxm", 0), n_bits=32),
        parser.NXFlowSpecMatch(src=(sport, 0), dst=("tcp_src_nxm", 0), n_bits=16),
        parser.NXFlowSpecMatch(src=(dport, 0), dst=("tcp_dst_nxm", 0), n_bits=16),
    ]


def fixtures() -> Iterator[Fixture]:
    ofs = nicira_ext.ofs_nbits
    # -- every action, alone
    yield "resubmit", flow([parser.NXActionResubmit()]), None
    yield "resubmit_in_port", flow([parser.NXActionResubmit(in_port=3)]), None
    yield "resubmit_table", flow([parser.NXActionResubmitTable(table_id=2)]), None
    yield "resubmit_table_current", flow([parser.NXActionResubmitTable()], table=1), None
    resubmit_in_port = parser.NXActionResubmitTable(in_port=4, table_id=0)
    yield "resubmit_table_in_port", flow([resubmit_in_port]), None
    for r in range(8):
        act = parser.NXActionRegLoad(ofs_nbits=ofs(0, 31), dst=f"reg{r}", value=0x1000 + r)
        yield f"reg_load_reg{r}", flow([act]), None
    yield (
        "reg_load_bits",
        flow([parser.NXActionRegLoad(ofs_nbits=ofs(4, 11), dst="reg3", value=0xAB)]),
        None,
    )
    yield (
        "reg_load_ipv4_dst_nxm",
        flow(
            [parser.NXActionRegLoad(ofs_nbits=ofs(0, 7), dst="ipv4_dst_nxm", value=77)],
            eth_type=0x0800,
        ),
        None,
    )
    yield (
        "reg_load_eth_dst_oxm",
        flow([parser.NXActionRegLoad(ofs_nbits=ofs(0, 47), dst="eth_dst", value=0x020000000009)]),
        None,
    )
    yield (
        "reg_move_in_port_oxm",
        flow([parser.NXActionRegMove(src_field="in_port", dst_field="reg0", n_bits=32)]),
        None,
    )
    yield (
        "reg_move_in_port_nxm",
        flow([parser.NXActionRegMove(src_field="in_port_nxm", dst_field="reg1", n_bits=16)]),
        None,
    )
    yield (
        "reg_move_tcp_src_bits",
        flow(
            [
                parser.NXActionRegMove(
                    src_field="tcp_src_nxm", dst_field="reg2", n_bits=8, src_ofs=8, dst_ofs=24
                )
            ],
            **TCP,
        ),
        None,
    )
    yield (
        "reg_move_reg_to_reg",
        flow([parser.NXActionRegMove(src_field="reg4", dst_field="reg5", n_bits=32)]),
        None,
    )
    yield (
        "output_reg",
        flow([parser.NXActionOutputReg(ofs_nbits=ofs(0, 15), src="reg0", max_len=0)]),
        None,
    )
    yield (
        "output_reg_high_bits",
        flow([parser.NXActionOutputReg(ofs_nbits=ofs(16, 31), src="reg7", max_len=128)]),
        None,
    )
    yield "note", flow([parser.NXActionNote(note=[0xAA, 0xBB, 0xCC])]), None
    yield "note_long", flow([parser.NXActionNote(note=list(range(1, 15)))]), None
    yield "exit", flow([parser.NXActionExit()]), None
    fin = parser.NXActionFinTimeout(fin_idle_timeout=1, fin_hard_timeout=5)
    yield "fin_timeout", flow([fin]), None

    # -- learn: one spec kind each, then all together with every header field
    match_field = parser.NXFlowSpecMatch(src=("in_port", 0), dst=("in_port", 0), n_bits=32)
    match_other = parser.NXFlowSpecMatch(src=("reg1", 0), dst=("reg2", 8), n_bits=16)
    match_imm = parser.NXFlowSpecMatch(src=0x0800, dst=("eth_type_nxm", 0), n_bits=16)
    load_field = parser.NXFlowSpecLoad(src=("in_port_nxm", 0), dst=("reg0", 0), n_bits=16)
    load_imm = parser.NXFlowSpecLoad(src=0x2A, dst=("reg3", 4), n_bits=8)
    output = parser.NXFlowSpecOutput(src=("in_port", 0), n_bits=32)
    output_nxm = parser.NXFlowSpecOutput(src=("in_port_nxm", 0), n_bits=16)
    yield "learn_match_field", flow([learn([match_field])]), None
    yield "learn_match_other_field", flow([learn([match_other])]), None
    yield "learn_match_immediate", flow([learn([match_imm])]), None
    yield "learn_load_field", flow([learn([load_field])]), None
    yield "learn_load_immediate", flow([learn([load_imm])]), None
    yield "learn_output_field", flow([learn([output])]), None
    yield "learn_output_nxm_field", flow([learn([output_nxm])]), None
    yield "learn_no_specs", flow([learn([])]), None
    # NX_LEARN_F_SEND_FLOW_REM | NX_LEARN_F_DELETE_LEARNED
    yield "learn_delete_learned", flow([learn([match_imm], flags=3, cookie=0x77)]), None
    yield (
        "learn_everything",
        flow(
            [
                learn(
                    [match_imm, match_field, match_other, load_field, load_imm, output],
                    table_id=3,
                    priority=0x1234,
                    idle_timeout=7,
                    hard_timeout=9,
                    cookie=0x0102030405060708,
                    flags=1,  # NX_LEARN_F_SEND_FLOW_REM
                    fin_idle_timeout=2,
                    fin_hard_timeout=3,
                )
            ]
        ),
        None,
    )
    yield (
        "learn_vlan_tci_and_ip",
        flow(
            [
                learn(
                    [
                        parser.NXFlowSpecMatch(src=("vlan_tci", 0), dst=("vlan_tci", 0), n_bits=12),
                        parser.NXFlowSpecMatch(src=0x0800, dst=("eth_type", 0), n_bits=16),
                        parser.NXFlowSpecMatch(
                            src=("ipv4_src", 0), dst=("ipv4_dst", 0), n_bits=32
                        ),
                    ]
                )
            ],
            eth_type=0x0800,
        ),
        None,
    )

    # -- register matches
    for r in range(8):
        yield f"match_reg{r}", flow([], table=1, **{f"reg{r}": 0x100 + r}), None
    yield "set_field_reg", flow([parser.OFPActionSetField(reg2=0xBEEF)]), None
    yield "match_reg_masked", flow([], table=1, reg0=(0x1200, 0xFF00)), None
    yield (
        "match_regs_and_oxm",
        flow([], table=2, in_port=1, reg1=5, eth_type=0x0800, reg7=(1, 1)),
        None,
    )

    # -- a TCP-Path-like program: first-arrival lock and reverse path by learn, reply out
    #    by resubmit + output_reg, exactly as an app would send it
    yield (
        "tcppath_reply",
        flow(
            [
                parser.NXActionResubmitTable(table_id=2),
                parser.NXActionOutputReg(ofs_nbits=ofs(0, 15), src="reg0", max_len=0),
            ],
            priority=20,
            in_port=4,
            **TCP,
        ),
        None,
    )
    reverse = five_tuple(True) + [load_field]
    yield (
        "tcppath_learn_lock",
        flow(
            [
                learn(five_tuple(False), table_id=1, priority=100, idle_timeout=5, flags=1),
                learn(reverse, table_id=2, priority=100, idle_timeout=5, cookie=0xC2),
                parser.OFPActionOutput(4),
            ],
            table=1,
            priority=0,
            **TCP,  # the fields the learn reads need it (OVS checks prerequisites)
        ),
        None,
    )
    yield (
        "tcppath_goto",
        parser.OFPFlowMod(
            DP,
            table_id=0,
            priority=10,
            match=parser.OFPMatch(**TCP),
            instructions=[
                parser.OFPInstructionActions(
                    ofp.OFPIT_APPLY_ACTIONS,
                    [parser.NXActionRegLoad(ofs_nbits=ofs(0, 7), dst="reg6", value=1)],
                ),
                parser.OFPInstructionGotoTable(1),
            ],
        ),
        None,
    )
    yield (
        "packet_out_resubmit",
        parser.OFPPacketOut(
            DP,
            ofp.OFP_NO_BUFFER,
            ofp.OFPP_CONTROLLER,
            [
                parser.NXActionRegLoad(ofs_nbits=ofs(0, 15), dst="reg0", value=2),
                parser.NXActionResubmitTable(table_id=1),
                parser.NXActionOutputReg(ofs_nbits=ofs(0, 15), src="reg0", max_len=0),
            ],
            bytes(range(60)),
        ),
        None,
    )

    # -- refused by the datapath (they decode and re-encode; the datapath checks them)
    yield (
        "bad_learn_table",
        flow([learn([match_imm], table_id=200)]),
        (OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT),
    )
    yield (
        "bad_learn_flags",
        flow([learn([match_imm], flags=4)]),  # NX_LEARN_F_WRITE_RESULT
        (OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT),
    )
    yield (
        "bad_reg_load_value",
        flow([parser.NXActionRegLoad(ofs_nbits=ofs(0, 3), dst="reg0", value=16)]),
        (OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT),
    )
    yield (
        "bad_reg_load_range",
        flow([parser.NXActionRegLoad(ofs_nbits=ofs(24, 39), dst="reg0", value=1)]),
        (OFPET_BAD_ACTION, OFPBAC_BAD_SET_LEN),
    )
    yield (
        "bad_reg_load_unknown_field",
        flow([parser.NXActionRegLoad(ofs_nbits=ofs(0, 31), dst="tun_ipv4_src", value=1)]),
        (OFPET_BAD_MATCH, OFPBMC_BAD_FIELD),
    )
    yield (
        "bad_reg_move_read_only_dst",
        flow([parser.NXActionRegMove(src_field="reg0", dst_field="vlan_tci", n_bits=16)]),
        (OFPET_BAD_ACTION, OFPBAC_BAD_SET_ARGUMENT),
    )
    yield (
        "bad_output_reg_range",
        flow([parser.NXActionOutputReg(ofs_nbits=ofs(8, 23), src="in_port_nxm", max_len=0)]),
        (OFPET_BAD_ACTION, OFPBAC_BAD_SET_LEN),
    )
    yield (
        "bad_learn_prereq_order",  # the learned tcp_src before eth_type and ip_proto
        flow([learn(list(reversed(five_tuple(False))))], **TCP),
        (OFPET_BAD_ACTION, OFPBAC_MATCH_INCONSISTENT),
    )
    yield (
        "bad_reg_move_prereq",  # tcp_dst read by a flow that does not match TCP
        flow([parser.NXActionRegMove(src_field="tcp_dst_nxm", dst_field="reg0", n_bits=16)]),
        (OFPET_BAD_ACTION, OFPBAC_MATCH_INCONSISTENT),
    )
    yield (
        "bad_learn_spec_field",
        flow([learn([parser.NXFlowSpecMatch(src=("pkt_mark", 0), dst=("reg0", 0), n_bits=32)])]),
        (OFPET_BAD_MATCH, OFPBMC_BAD_FIELD),
    )


def raw_fixtures() -> Iterator[tuple[str, bytes, tuple[int, int]]]:
    """What Ryu cannot produce, made from its encodings: the decoder's refusals."""

    def encode(msg: Any) -> bytearray:
        msg.set_xid(999)
        msg.serialize()
        return bytearray(msg.buf)

    # An NX subtype the switch does not implement (ct_clear, subtype 43).
    ct = encode(flow([parser.NXActionCTClear()]))
    yield "bad_subtype_ct_clear", bytes(ct), (OFPET_BAD_ACTION, OFPBAC_BAD_EXP_TYPE)
    # resubmit_table with a nonzero pad byte (the last byte of the message).
    b = encode(flow([parser.NXActionResubmitTable(table_id=1)]))
    b[-1] = 1
    yield "bad_resubmit_pad", bytes(b), (OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT)
    # exit with its length field 8 bytes too long (instruction and message grown to match).
    b = encode(flow([parser.NXActionExit()]))
    b += bytes(8)
    b[2:4] = len(b).to_bytes(2, "big")
    at = len(b) - 24  # the instruction header precedes the 16-byte action + 8 extra
    b[at - 6 : at - 4] = (8 + 24).to_bytes(2, "big")
    b[at + 2 : at + 4] = (24).to_bytes(2, "big")
    yield "bad_exit_len", bytes(b), (OFPET_BAD_ACTION, OFPBAC_BAD_LEN)
    # A learn spec with destination type 3.
    b = encode(flow([learn([match_imm_spec()])]))
    spec = len(b) - 16  # spec header: 10-byte spec then 6 bytes of padding
    b[spec] |= 0x18
    yield "bad_learn_spec_type", bytes(b), (OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT)


def match_imm_spec() -> Any:
    return parser.NXFlowSpecMatch(src=0x0800, dst=("eth_type_nxm", 0), n_bits=16)


def build() -> dict[str, Any]:
    out = []
    for xid, (name, msg, error) in enumerate(fixtures(), start=1):
        msg.set_xid(xid)
        msg.serialize()
        out.append({"name": name, "ryu": True, "error": error, "hex": bytes(msg.buf).hex()})
    for name, raw, error in raw_fixtures():
        out.append({"name": name, "ryu": False, "error": error, "hex": raw.hex()})
    return {
        "generator": "tests/switch_ext/gen_nx_fixtures.py (ryu.ofproto.nx_actions)",
        "ryu_version": importlib.metadata.version("ryu"),
        "fixtures": out,
    }


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1) + "\n"


def main() -> int:
    doc = build()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as fh:
        fh.write(render(doc))
    n = len(doc["fixtures"])
    print(f"wrote {n} fixtures to {os.path.relpath(OUT, ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
