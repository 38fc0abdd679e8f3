"""The UC3 agent reads its cgroup's TCP flows in-process over sock_diag (root: it makes a
cgroup and moves a child process into it)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dcnlab.hosts.uc3_agent.sockdiag import FlowReader, parse_dump

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (cgroups)")]

CGROUP2 = Path("/sys/fs/cgroup/unified")

CHILD = r'''
import socket, sys, time
open(sys.argv[1], "w").write("0")  # into the cgroup before the socket exists
s = socket.create_connection(("127.0.0.1", int(sys.argv[2])))
print(s.getsockname()[1], flush=True)
for _ in range(200):
    s.sendall(b"x" * 65536)
time.sleep(30)
'''


@pytest.fixture
def cgroup(tmp_path: Path):
    path = CGROUP2 / f"dcnlab-sockdiag-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        for _ in range(50):  # the child's exit takes a moment to leave the cgroup
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


def test_only_the_cgroups_flows_are_read_with_their_tcp_info(cgroup: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(cgroup / "cgroup.procs"),
                              str(port)], stdout=subprocess.PIPE, text=True)
    outside = socket.create_connection(("127.0.0.1", port))  # ours: not in the cgroup
    conns = []
    try:
        conns = [server.accept()[0], server.accept()[0]]
        sport = int(child.stdout.readline())
        for c in conns:  # drain so the child's bytes get acknowledged
            c.setblocking(False)
        deadline = time.monotonic() + 10
        reader = FlowReader(cgroup)
        mine = []
        while time.monotonic() < deadline:
            for c in conns:
                try:
                    while c.recv(1 << 20):
                        pass
                except BlockingIOError:
                    pass
            mine = reader.read()
            if mine and mine[0].bytes_acked > 1_000_000:
                break
            time.sleep(0.05)
        assert [f.flow.lport for f in mine] == [sport]  # the child's flow, and only it
        flow = mine[0]
        assert flow.flow.remote == "127.0.0.1" and flow.flow.rport == port
        assert flow.rtt_us > 0 and flow.mss > 0 and flow.cwnd > 0
        assert flow.bytes_acked > 1_000_000
        everything = {f.flow.lport for f in FlowReader(None).read()}
        assert {sport, outside.getsockname()[1]} <= everything
        reader.close()
    finally:
        child.kill()  # ours
        child.wait()
        for c in [*conns, outside, server]:
            c.close()


def test_malformed_netlink_replies_are_errors_not_crashes() -> None:
    import struct

    from dcnlab.hosts.uc3_agent.sockdiag import SockDiagError

    with pytest.raises(SockDiagError):
        parse_dump(struct.pack("=IHHII", 4, 20, 0, 1, 0), None)  # length below the header
    with pytest.raises(SockDiagError):
        parse_dump(struct.pack("=IHHII", 16 + 4, 2, 0, 1, 0) + struct.pack("=i", -13), None)
    short = struct.pack("=IHHII", 16 + 8, 20, 0, 1, 0) + b"\0" * 8
    with pytest.raises(SockDiagError, match="inet_diag_msg"):
        parse_dump(short, None)
    assert parse_dump(struct.pack("=IHHII", 16, 3, 0, 1, 0), None) == ([], True)
