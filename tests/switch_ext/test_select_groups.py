"""Select groups on a real switch: one flow over two ports, per mode (marker ``network``).

A scripted controller (messages built with Ryu's serializer) installs a select group
{port 2, port 3} for everything from port 1, optionally sets the group's mode with the
dcnlab experimenter message, then h1 pings h2's address: ``hash`` keeps the single flow
on one port, ``rr`` alternates, ``random`` sprays. Port carrier changes must produce
OFPT_PORT_STATUS.
"""

from __future__ import annotations

import struct
import time

import pytest
from ryu.ofproto import ofproto_protocol
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser
from swext_net import FakeController, read_stats
from waiting import wait_for

pytestmark = pytest.mark.network

DP = ofproto_protocol.ProtocolDesc(version=ofp.OFP_VERSION)
N = 200


def send(fake: FakeController, msg, xid: int) -> None:
    msg.set_xid(xid)
    msg.serialize()
    fake.conn.sendall(bytes(msg.buf))


def program(fake: FakeController, mode: int | None) -> None:
    buckets = [
        parser.OFPBucket(weight=1, watch_port=p, actions=[parser.OFPActionOutput(p)])
        for p in (2, 3)
    ]
    send(fake, parser.OFPGroupMod(DP, ofp.OFPGC_ADD, ofp.OFPGT_SELECT, 1, buckets), 10)
    if mode is not None:
        body = struct.pack("!IB3x", 1, mode)
        send(fake, parser.OFPExperimenter(DP, 0x00DC0001, 1, body), 11)
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionGroup(1)])]
    send(
        fake,
        parser.OFPFlowMod(DP, priority=10, match=parser.OFPMatch(in_port=1), instructions=inst),
        12,
    )
    send(fake, parser.OFPBarrierRequest(DP), 13)
    xid, _ = fake.recv_type(ofp.OFPT_BARRIER_REPLY)
    assert xid == 13


def tx(stats: str) -> dict[int, int]:
    time.sleep(0.2)
    return {p["port"]: p["tx_packets"] for p in read_stats(stats)[-1]["ports"]}


@pytest.mark.parametrize("line", [3], indirect=True)
@pytest.mark.parametrize(
    "cli_mode, exp_mode, check",
    [
        ("hash", None, lambda a, b: min(a, b) == 0 and a + b == N),
        ("hash", 2, lambda a, b: abs(a - b) <= 1 and a + b == N),  # experimenter -> rr
        ("rr", None, lambda a, b: abs(a - b) <= 1 and a + b == N),
        ("random", None, lambda a, b: min(a, b) > N // 4 and a + b == N),
    ],
)
def test_one_flow_over_two_ports(line, switch_binary, tmp_path, cli_mode, exp_mode, check):
    fake = FakeController()
    try:
        stats = str(tmp_path / "stats.jsonl")
        line.start_switch(
            switch_binary,
            args=["--controller", f"tcp:127.0.0.1:{fake.port}", "--select-mode", cli_mode],
            stats_file=stats,
        )
        fake.handshake()
        program(fake, exp_mode)
        # A static neighbour: no ARP, so every frame from h1 is the one ICMP flow.
        line.exec(
            1,
            [
                "ip",
                "neigh",
                "replace",
                line.ip(2),
                "lladdr",
                "02:00:00:00:00:02",
                "dev",
                f"{line.prefix}e1",
            ],
        )
        before = tx(stats)
        line.exec(
            1,
            ["ping", "-c", str(N), "-i", "0.005", "-W", "0.1", line.ip(2)],
            check=False,
            timeout=60,
        )
        after = tx(stats)
        a, b = after[2] - before[2], after[3] - before[3]
        assert check(a, b), (cli_mode, exp_mode, a, b)
    finally:
        fake.shutdown()


def test_port_status_on_carrier_change(line, switch_binary):
    fake = FakeController()
    try:
        line.start_switch(switch_binary, args=["--controller", f"tcp:127.0.0.1:{fake.port}"])
        fake.handshake()
        time.sleep(0.3)
        line.exec(2, ["ip", "link", "set", f"{line.prefix}e2", "down"])

        def port2_down():
            _xid, buf = fake.recv_type(ofp.OFPT_PORT_STATUS)
            msg = parser.OFPPortStatus.parser(DP, 4, ofp.OFPT_PORT_STATUS, len(buf), 0, buf)
            return msg.desc.port_no == 2 and msg.desc.state & ofp.OFPPS_LINK_DOWN

        assert wait_for(port2_down, timeout=5)
    finally:
        fake.shutdown()
