"""Asymmetry and failures on real networks, both switch kinds: one link's own rate
(``link@A-B=rate=...`` in the topology spec) reaches the data plane in both directions,
and the engine's fabric-event scheduler (events.py) cuts and restores a link at the
planned times of a running transfer: nothing crosses while it is cut."""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import pytest

from dcnlab.benchmarks.engine import events
from dcnlab.topo.network import Network
from dcnlab.topo.readiness import in_host, wait_listening

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")]

LEARNING_SWITCH = "ryu.app.simple_switch_13"  # one spine: a tree
# h1 - s2 (leaf) - s1 (spine) - s3 (leaf) - h2; the h1 leaf's uplink at half the rate
SPEC = "spineleaf:1,2,1,rate=10M,link@s1-s2=rate=5M"


def _udp(net: Network, client: str, server: str, port: int, args: str,
         started: Any = None) -> list[dict[str, Any]]:
    """UDP from ``server`` to ``client`` (-R): the client's intervals. ``started`` is
    called just before the client starts."""
    srv = net.host(server).popen(["iperf3", "-s", "-1", "-p", str(port)])
    try:
        wait_listening(in_host(net.host(server)), port, what="iperf3 server")
        if started is not None:
            started()
        out = net.host(client).cmd(f"timeout 30 iperf3 -c {net.host(server).IP()} -p {port} "
                                   f"-R -u -l 1400 -J {args}")
        result: dict[str, Any] = json.loads(out[out.index("{"):])
    finally:
        if srv.poll() is None:
            srv.kill()
        srv.wait()
    return list(result["intervals"])


def _received_mbps(net: Network, client: str, server: str, port: int) -> list[float]:
    """UDP offered at 6 Mbit/s (the slower link carries 5) for 4 s: the client's
    one-second intervals, sorted; then waits until the backlog it left in the slower
    link's buffer has drained. Offered at 12 Mbit/s (past the hosts' 10), the stream
    reached the receiver seconds late, or hardly at all, in 3 of 7 runs on ovs (ext:
    never); cause not found."""
    got = sorted(iv["sum"]["bits_per_second"] / 1e6
                 for iv in _udp(net, client, server, port, "-t 4 -b 6M"))
    _wait_drained(net)
    return got


def _wait_drained(net: Network, deadline_s: float = 20.0) -> None:
    """Until a ping between h1 and h2 takes under 50 ms: the next stream's start (its
    first datagram crosses the slower link too) must not wait behind the last one's
    backlog (at 5 Mbit/s a 1000-packet buffer is 2.3 s)."""
    h1, h2 = net.host("h1"), net.host("h2")
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        out = h1.cmd(f"ping -c1 -W1 {h2.IP()}")
        match = re.search(r"time=([\d.]+) ms", out)
        if match and float(match.group(1)) < 50:
            return
    raise AssertionError(f"the path h1-h2 still queues after {deadline_s:g} s: {out!r}")


def _cut_and_restored(net: Network) -> tuple[list[dict[str, Any]], list[tuple[float, float]]]:
    """s1-s3 (spine to h2's leaf: the only path) cut 1.5 s into a 4.5 s UDP stream at
    3 Mbit/s and restored at 3 s by the engine's scheduler: its rows, and the receiver's
    (interval end, Mbit/s)."""
    tl = events.timeline([events.Event(1.5, "cut", "s1-s3"),
                          events.Event(3.0, "restore", "s3-s1")])
    sched = events.Scheduler(tl, lambda link, up: net.set_link(*link.split("-"), up))
    try:
        intervals = _udp(net, "h1", "h2", 5203, "-t 4.5 -b 3M -i 0.25",
                         started=lambda: sched.start(time.monotonic()))
    finally:
        sched.stop()
    return (sched.rows("ecmp", 0.1, 1),
            [(iv["sum"]["end"], iv["sum"]["bits_per_second"] / 1e6) for iv in intervals])


# One network per kind for both claims: CI has a time budget.
@pytest.mark.parametrize("kind", ["ext", "ovs"])
def test_a_slower_link_and_a_cut_one_on_the_data_plane(kind: str) -> None:
    with Network(SPEC, app=LEARNING_SWITCH, switch=kind) as net:
        assert net.mn.pingAll(timeout=1) == 0 or net.mn.pingAll(timeout=1) == 0
        towards_h1 = _received_mbps(net, "h1", "h2", 5201)
        towards_h2 = _received_mbps(net, "h2", "h1", 5202)
        rows, got = _cut_and_restored(net)
        assert net.mn.pingAll(timeout=1) == 0  # whole again
    # 1400-byte datagrams in 1442-byte frames: 5 Mbit/s of frames is 4.85 of payload, and
    # every other link (10 Mbit/s) would carry 9.71. The median: one stalled interval
    # does not decide.
    for received in (towards_h1, towards_h2):
        assert 4.4 <= received[len(received) // 2] <= 5.0, (kind, towards_h1, towards_h2)
    # the cut: applied on time (never early, within a scheduler slice or so) ...
    assert [(r["type"], r["ok"]) for r in rows] == [("cut", True), ("restore", True)], rows
    for r in rows:
        assert r["planned"] <= r["t"] <= r["planned"] + 0.5, rows
    # ... and nothing crossed while it lasted. The client's clock starts a little after
    # T0 (its connection setup), so an interval ending at e covers T0 + [e - 0.25, e]
    # shifted later by that: the intervals wholly inside the cut end in [2.0, 2.75].
    cut = [v for end, v in got if 1.5 + 0.5 <= end <= 3.0 - 0.25]
    before = [v for end, v in got if end <= 1.5]
    after = [v for end, v in got if end >= 3.0 + 0.75]
    assert cut and all(v == 0 for v in cut), (kind, rows, got)
    assert before and min(before) > 2.0 and after and max(after) > 2.0, (kind, rows, got)
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}
