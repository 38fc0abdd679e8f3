"""The flow tap's BPF program in the kernel (root; no network): BPF_PROG_TEST_RUN feeds
it frames and the map must hold what the C struct promises.  Every frame, whatever it
is, gets TC_ACT_OK (0): the tap never changes forwarding."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from dcnlab.benchmarks.engine import flowtap

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (loads BPF)")]

TC_ACT_OK = 0


@pytest.fixture
def tap(tmp_path: Path) -> Iterator[flowtap.FlowTap]:
    loaded = flowtap.FlowTap([], flowtap.object_path(tmp_path))
    try:
        yield loaded
    finally:
        loaded.close()


def _by_flow(tap: flowtap.FlowTap) -> dict[tuple[str, str, int, int, int], flowtap.TapEntry]:
    return {(e.src, e.dst, e.sport, e.dport, e.proto): e for e in tap.entries()}


def test_data_packets_are_counted_and_syns_set_apart(tap: flowtap.FlowTap) -> None:
    syn = flowtap.frame("10.0.0.1", "10.0.1.1", 30001, 5001, flags=0x02)
    data = flowtap.frame("10.0.0.1", "10.0.1.1", 30001, 5001, flags=0x10, payload=1448)
    assert tap.test_run(syn)[0] == TC_ACT_OK
    [entry] = tap.entries()
    assert (entry.pkts, entry.bytes, entry.first_ns, entry.syn_pkts) == (0, 0, 0, 1)
    assert entry.seen_ns > 0 and entry.iface == "1"  # test runs come in on ifindex 1
    for _ in range(3):
        assert tap.test_run(data)[0] == TC_ACT_OK
    [entry] = tap.entries()
    assert entry.pkts == 3 and entry.bytes == 3 * len(data) and entry.syn_pkts == 1
    assert entry.seen_ns <= entry.first_ns <= entry.last_ns
    # a SYN-ACK is a SYN too (the reverse direction: another key)
    synack = flowtap.frame("10.0.1.1", "10.0.0.1", 5001, 30001, flags=0x12)
    assert tap.test_run(synack)[0] == TC_ACT_OK
    reverse = _by_flow(tap)[("10.0.1.1", "10.0.0.1", 5001, 30001, 6)]
    assert (reverse.pkts, reverse.syn_pkts) == (0, 1)


def test_udp_ip_options_and_other_frames(tap: flowtap.FlowTap) -> None:
    udp = flowtap.frame("10.0.0.2", "10.0.1.2", 4000, 4001, proto=17, payload=18)
    assert tap.test_run(udp)[0] == TC_ACT_OK
    # an IPv4 header with one option word (IHL 6): the ports sit 4 bytes further
    plain = flowtap.frame("10.0.0.3", "10.0.1.3", 12345, 5001, payload=10)
    eth, ip, rest = plain[:14], bytearray(plain[14:34]), plain[34:]
    ip[0] = 0x46
    struct.pack_into("!H", ip, 2, 24 + len(rest))
    assert tap.test_run(eth + bytes(ip) + b"\x01\x01\x01\x01" + rest)[0] == TC_ACT_OK
    arp = b"\xff" * 6 + b"\x02" + b"\x00" * 5 + b"\x08\x06" + bytes(28)
    icmp = bytearray(flowtap.frame("10.0.0.4", "10.0.1.4", 0, 0))
    icmp[14 + 9] = 1
    truncated = flowtap.frame("10.0.0.5", "10.0.1.5", 1, 2)[:36]  # IP header, half a port
    for other in (arp, bytes(icmp), truncated):
        assert tap.test_run(other)[0] == TC_ACT_OK
    flows = _by_flow(tap)
    assert set(flows) == {("10.0.0.2", "10.0.1.2", 4000, 4001, 17),
                          ("10.0.0.3", "10.0.1.3", 12345, 5001, 6)}
    assert flows[("10.0.0.2", "10.0.1.2", 4000, 4001, 17)].bytes == len(udp)
    stats = tap.stats()
    assert stats == {"seen": 5, "counted": 2, "lost": 0}


def test_ipv4_under_congas_mpls_label_is_counted(tap: flowtap.FlowTap) -> None:
    """switch_ext's CONGA overlay puts one MPLS label (bottom of stack) before the IPv4
    header on fabric links: the tap reads the packet behind it and counts the label's
    bytes with the frame's; a label that is not the bottom of its stack is not read."""
    plain = flowtap.frame("10.0.0.6", "10.0.1.6", 30006, 5001, payload=100)
    label = struct.pack("!I", (0x12345 << 12) | (1 << 8) | 64)  # bottom of stack, TTL 64
    labelled = plain[:12] + b"\x88\x47" + label + plain[14:]
    not_bottom = plain[:12] + b"\x88\x47" + struct.pack("!I", (0x12345 << 12) | 64) \
        + plain[14:]
    for f in (labelled, labelled, not_bottom):
        assert tap.test_run(f)[0] == TC_ACT_OK
    [entry] = tap.entries()
    assert (entry.src, entry.dport, entry.pkts, entry.bytes) == (
        "10.0.0.6", 5001, 2, 2 * len(labelled))
    assert tap.stats() == {"seen": 3, "counted": 2, "lost": 0}


def test_a_repeated_flow_costs_one_map_entry(tap: flowtap.FlowTap) -> None:
    data = flowtap.frame("10.0.0.1", "10.0.1.1", 30001, 5001, payload=100)
    ret, _ns = tap.test_run(data, repeat=1000)
    assert ret == TC_ACT_OK
    [entry] = tap.entries()
    assert entry.pkts == 1000 and entry.bytes == 1000 * len(data)


HELPER_SCRIPT = r"""
set -e
ip link set lo up
tap() {  # attach to lo, let a TCP exchange run, stop; output into $1
    ( sleep 1.5; echo stop ) | "$PY" -m dcnlab.benchmarks.engine.flowtap --obj "$OBJ" \
        --out "$1" --interval 0.1 lo &
    sleep 0.7
    "$PY" -c 'import socket
srv = socket.create_server(("127.0.0.1", 5999))
cli = socket.create_connection(("127.0.0.1", 5999))
con, _ = srv.accept()
cli.sendall(b"x" * 100000)
got = 0
while got < 100000:
    got += len(con.recv(65536))
'
    wait
}
tap "$OUT/first"
echo "after first: $(tc qdisc show dev lo | grep -c clsact || true)"
tc qdisc add dev lo clsact
tap "$OUT/second"
echo "after second: $(tc qdisc show dev lo | grep -c clsact || true)"
echo "filters: $(tc filter show dev lo ingress | grep -c bpf || true)"
tc qdisc del dev lo clsact
mkfifo "$OUT/commands"
"$PY" -m dcnlab.benchmarks.engine.flowtap --obj "$OBJ" --out "$OUT/killed" lo \
    < "$OUT/commands" &
helper=$!
exec 3> "$OUT/commands"  # an open writer: the helper waits for a command
sleep 1.5
echo "while attached: $(tc qdisc show dev lo | grep -c clsact || true)"
kill -TERM "$helper"
wait "$helper" || true
exec 3>&-
echo "after SIGTERM: $(tc qdisc show dev lo | grep -c clsact || true)"
"""


def test_the_helper_counts_and_removes_only_what_it_added(tmp_path: Path) -> None:
    """In a private network namespace (unshare -n; gone with the shell): the helper
    attaches to lo, sees a TCP exchange, samples lo's counters, and leaves lo as it
    found it -- no clsact qdisc when there was none, the existing one kept otherwise,
    and no filter either way; also when it is ended by SIGTERM."""
    import subprocess
    import sys
    import time

    env = {**os.environ, "PY": sys.executable, "OBJ": str(flowtap.object_path(tmp_path)),
           "OUT": str(tmp_path)}
    began = time.monotonic()
    proc = subprocess.run(["unshare", "-n", "sh", "-c", HELPER_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    # Each helper lived inside this run: its CPU time (user + system, all its threads)
    # is at most that long times the CPUs it may run on.  A bound on what the field
    # measures, not on the machine's speed: the slower the machine, the looser it is.
    cpu_bound = (time.monotonic() - began) * len(os.sched_getaffinity(0))
    assert proc.returncode == 0, proc.stderr
    assert "after first: 0" in proc.stdout, proc.stdout
    assert "after second: 1" in proc.stdout and "filters: 0" in proc.stdout, proc.stdout
    # stopped by SIGTERM (TapSession.kill) it detaches too
    assert "while attached: 1" in proc.stdout and "after SIGTERM: 0" in proc.stdout
    for run in ("first", "second"):
        taps = flowtap.read(tmp_path / run / flowtap.TAPS_JSON)
        links = flowtap.read(tmp_path / run / flowtap.LINKS_JSON)
        data = [e for e in taps["entries"] if e["dport"] == 5999 and e["proto"] == 6]
        assert len(data) == 1 and data[0]["iface"] == "lo"
        assert data[0]["bytes"] >= 100000 and data[0]["syn_pkts"] == 1
        assert taps["stats"]["lost"] == 0
        # > 0: starting Python and loading the BPF object take milliseconds of CPU, far
        # above the field's 1 ms rounding (0 would mean it counted nothing); <= the bound
        # above (+ the rounding): not a count of something else, such as nanoseconds or
        # the whole machine's time
        assert 0 < taps["helper_cpu_s"] <= cpu_bound + 0.0005, (taps["helper_cpu_s"],
                                                                 cpu_bound)
        tx = [s["tx"]["lo"] for s in links["samples"]]
        assert len(tx) >= 5 and tx == sorted(tx) and tx[-1] - tx[0] >= 100000


def test_a_missing_interface_is_a_clear_error(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    obj = flowtap.object_path(tmp_path)
    with pytest.raises(flowtap.TapError, match="no interface 'dcnlab-nosuch0'"):
        flowtap.FlowTap(["dcnlab-nosuch0"], obj)
    assert flowtap.main(["--obj", str(obj), "--out", str(tmp_path / "o"),
                         "dcnlab-nosuch0"]) == 1
    assert "flowtap: no interface 'dcnlab-nosuch0'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
