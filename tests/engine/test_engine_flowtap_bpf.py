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

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (loads BPF)")

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


def test_a_repeated_flow_costs_one_map_entry(tap: flowtap.FlowTap) -> None:
    data = flowtap.frame("10.0.0.1", "10.0.1.1", 30001, 5001, payload=100)
    ret, _ns = tap.test_run(data, repeat=1000)
    assert ret == TC_ACT_OK
    [entry] = tap.entries()
    assert entry.pkts == 1000 and entry.bytes == 1000 * len(data)
