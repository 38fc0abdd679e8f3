"""The UC3 agent's BPF program keeps the flows of its cgroup in a map, and only those
(root: it loads the program on a cgroup of its own and moves this process into it)."""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path

import pytest

from dcnlab.hosts.uc3_agent.bpf import FLOW_VALUE, KEY, ClampProgram, Tuple4, flow_sample

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (cgroups, BPF)")]


def test_the_map_holds_the_cgroups_flows_with_their_figures(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    outside = socket.create_connection(("127.0.0.1", port))  # before joining: not ours
    program = ClampProgram(f"flowmap-{os.getpid()}", tmp_path)
    try:
        with program.member():
            inside = socket.create_connection(("127.0.0.1", port))
        peers = [server.accept()[0], server.accept()[0]]
        inside.sendall(b"x" * (1 << 20))
        got = b""
        while len(got) < (1 << 20):  # the inside flow's bytes are read, and so acked
            got += peers[1].recv(1 << 20)
        # The program records a flow's figures when the kernel takes an RTT sample, on an
        # ACK of new data: the ACKs of the last bytes may have given none.  One more byte
        # each round brings one (up to 5 s).
        me = inside.getsockname()[1]
        deadline = time.monotonic() + 5
        while True:
            time.sleep(0.1)
            flows = {f.flow.lport: f for f in program.flow_samples()}
            if flows.get(me) is None or flows[me].bytes_acked >= 1 << 20 \
                    or time.monotonic() > deadline:
                break
            inside.sendall(b"y")
            assert peers[1].recv(1) == b"y"
        assert set(flows) == {me}  # not the flow opened outside, not the listener's end
        sample = flows[me]
        assert sample.flow == Tuple4("127.0.0.1", me, "127.0.0.1", port)
        assert sample.rtt_us > 0 and sample.mss > 0 and sample.cwnd > 0
        assert sample.bytes_acked >= 1 << 20
        inside.close()
        deadline = time.monotonic() + 5
        while program.flow_samples() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert program.flow_samples() == []  # a closed socket leaves the map
    finally:
        program.close()
        for s in (outside, server):
            s.close()


def test_map_records_decode() -> None:
    key = KEY.pack(socket.AF_INET6, bytes(15) + b"\x01", bytes(15) + b"\x02", 40000, 80)
    flow = Tuple4.from_key(key)
    assert flow == Tuple4("::1", 40000, "::2", 80)
    assert Tuple4.from_key(KEY.pack(99, bytes(16), bytes(16), 1, 2)) is None
    # 10 packets of 1,448 B delivered in 1 ms: 115.84 Mbit/s; srtt as the kernel's us.
    sample = flow_sample(flow, FLOW_VALUE.pack(2500, 1448, 20, 0, 123, 10, 1000, 7))
    assert (sample.rtt_us, sample.mss, sample.cwnd, sample.bytes_acked) == (2500, 1448, 20, 123)
    assert sample.delivery_bps == pytest.approx(10 * 1448 * 8 / 1e-3)
    assert flow_sample(flow, FLOW_VALUE.pack(1, 1, 1, 0, 0, 5, 0, 0)).delivery_bps == 0.0
    assert struct.calcsize("=IIIIQIIQ") == FLOW_VALUE.size == 40
