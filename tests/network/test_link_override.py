"""Static asymmetry: one link's own rate (``link@A-B=rate=...`` in the topology spec)
reaches the data plane on both switch kinds, in both directions, and the other links
keep theirs."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from dcnlab.topo.network import Network
from dcnlab.topo.readiness import in_host, wait_listening

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")]

LEARNING_SWITCH = "ryu.app.simple_switch_13"  # one spine: a tree
# h1 - s2 (leaf) - s1 (spine) - s3 (leaf) - h2; the h1 leaf's uplink at half the rate
SPEC = "spineleaf:1,2,1,rate=10M,link@s1-s2=rate=5M"


def _received_mbps(net: Network, client: str, server: str, port: int) -> list[float]:
    """UDP offered at 12 Mbit/s from ``server`` to ``client`` (-R) for 4 s: the client's
    one-second intervals, sorted."""
    srv = net.host(server).popen(["iperf3", "-s", "-1", "-p", str(port)])
    try:
        wait_listening(in_host(net.host(server)), port, what="iperf3 server")
        out = net.host(client).cmd(f"timeout 30 iperf3 -c {net.host(server).IP()} -p {port} "
                                   "-t 4 -R -u -b 12M -l 1400 -J")
        result: dict[str, Any] = json.loads(out[out.index("{"):])
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()
    return sorted(iv["sum"]["bits_per_second"] / 1e6 for iv in result["intervals"])


@pytest.mark.parametrize("kind", ["ext", "ovs"])
def test_one_link_at_half_the_rate_in_both_directions(kind: str) -> None:
    with Network(SPEC, app=LEARNING_SWITCH, switch=kind) as net:
        assert net.mn.pingAll(timeout=1) == 0 or net.mn.pingAll(timeout=1) == 0
        towards_h1 = _received_mbps(net, "h1", "h2", 5201)
        towards_h2 = _received_mbps(net, "h2", "h1", 5202)
    # 1400-byte datagrams in 1442-byte frames: 5 Mbit/s of frames is 4.85 of payload, and
    # every other link (10 Mbit/s) would carry 9.71. The median: one stalled interval
    # does not decide.
    for received in (towards_h1, towards_h2):
        assert 4.4 <= received[len(received) // 2] <= 5.0, (kind, towards_h1, towards_h2)
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}
