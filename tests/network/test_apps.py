"""The apps on a real network: Mininet, userspace Open vSwitch, ryu-manager, TCP.

Claims about the network are tested on the network: all-pairs ping, TCP transfers that
complete, ECMP spreading concurrent flows over the cores (from OpenFlow port stats), a
core link failing under a live transfer, and a restarted controller.
"""

from __future__ import annotations

import time

import pytest
from waiting import wait_for

from dcnlab.check import all_pairs_ping, check, inter_pod_pairs
from dcnlab.topo.network import Network
from dcnlab.topo.readiness import in_host, wait_listening
from dcnlab.topo.spec import parse

pytestmark = pytest.mark.network

LONG_TRANSFER = "40M"  # ~3.5 s at 100 Mbit/s: long enough to fail a link under it


@pytest.mark.parametrize("app", ["ecmp", "single_path"])
@pytest.mark.parametrize("topo", ["fattree:4", "spineleaf:4,4,4"])
def test_ping_transfers_and_spread(topo: str, app: str) -> None:
    result = check(topo, app, "ovs")
    f = result.fields
    assert f["pingall"] == 1.0, result.line()
    assert f["tcp_completed"] == f["tcp_flows"] == 16, result.line()
    assert f["ryu_errors"] == 0, result.line()
    if app == "ecmp":
        assert f["cores_used"] >= 3, result.line()
    assert result.ok, result.line()


def _core_tx(net: Network, cores: list[str]) -> dict[str, int]:
    stats = (net.state() or {}).get("port_stats", {})
    spec = net.spec
    return {c: sum(p["tx_bytes"] for p in stats.get(str(spec.switch(c).dpid), {}).values())
            for c in cores}


def _transfer(net: Network, src: str, dst: str, size: str, port: int) -> tuple:
    server = net.host(dst).popen(["iperf3", "-s", "-1", "-p", str(port)])
    wait_listening(in_host(net.host(dst)), port, what="iperf3 server")
    client = net.host(src).popen(["iperf3", "-c", net.host(dst).IP(), "-p", str(port),
                                  "-n", size, "--connect-timeout", "3000"])
    return server, client


def _finish(*procs: object, timeout: float = 60.0) -> int | None:
    rc = None
    try:
        rc = procs[-1].wait(timeout=timeout)  # type: ignore[attr-defined]
    finally:
        for p in procs:
            if p.poll() is None:  # type: ignore[attr-defined]
                p.kill()  # type: ignore[attr-defined]
                p.wait()  # type: ignore[attr-defined]
    return rc


@pytest.mark.parametrize("app", ["ecmp", "single_path"])
def test_core_link_down_under_a_transfer(app: str) -> None:
    spec = parse("fattree:4")
    cores = [s.name for s in spec.switches if s.tier == "core"]
    src, dst = inter_pod_pairs(spec, 1)[0]
    with Network(spec, app=f"dcnlab.apps.{app}") as net:
        before = _core_tx(net, cores)
        server, client = _transfer(net, src, dst, LONG_TRANSFER, 5301)

        def moved() -> dict[str, int]:  # bytes per core since the transfer began
            return {c: v - before[c] for c, v in _core_tx(net, cores).items()}

        # Port statistics are polled every second: wait until they show the transfer.
        carried = wait_for(lambda: (m := moved()) and max(m.values()) > 1_000_000 and m, 20)
        assert carried, moved()
        busy = max(carried, key=carried.get)
        # Fail the busy core's link into the source pod: the flow's path breaks.
        src_pod = spec.switch(spec.host(src).interfaces[0].switch).pod
        agg = next(lk.a if lk.b == busy else lk.b for lk in spec.fabric_links()
                   if busy in (lk.a, lk.b) and spec.switch(lk.a if lk.b == busy else lk.b).pod
                   == src_pod)
        net.set_link(agg, busy, up=False)
        rc = _finish(server, client)
        assert rc == 0, f"transfer {src}->{dst} did not complete after {agg}-{busy} failed"
        state = net.state() or {}
        assert state["links_down"], state
        assert net.mn.pingAll(timeout=2) == 0.0
        net.set_link(agg, busy, up=True)
        restored = wait_for(lambda: not (net.state() or {}).get("links_down", [None]), 10)
        assert restored, net.state()
        assert net.mn.pingAll(timeout=2) == 0.0


def test_controller_restart_restores_forwarding() -> None:
    with Network("fattree:4", app="dcnlab.apps.ecmp") as net:
        assert net.mn.pingAll(timeout=2) == 0.0
        old_pid = net.controller_pid
        net.restart_controller()
        state = net.state() or {}
        assert state["pid"] == net.controller_pid != old_pid
        assert state["ready"] and len(state["synced"]) == 20
        assert net.mn.pingAll(timeout=2) == 0.0
        src, dst = inter_pod_pairs(net.spec, 1)[0]
        assert _finish(*_transfer(net, src, dst, "4M", 5302)) == 0


def test_discovery_mode_learns_fabric_and_hosts() -> None:
    # A real lab has no topology file: LLDP finds links, ARP locates hosts.
    with Network("spineleaf:2,2,2", app="dcnlab.apps.ecmp",
                 app_env={"DCNLAB_TOPOLOGY": ""}) as net:
        deadline = time.time() + 30
        while time.time() < deadline:  # LLDP rounds, then the app's settle time
            state = net.state() or {}
            if state.get("links") == 4 and state.get("settled"):
                break
            time.sleep(0.3)
        assert state.get("links") == 4 and state.get("settled"), state
        # A host is located by its first ARP; the controller answers once the routes to
        # it are on every switch, so no first packet is lost (one ping per pair).
        lost, _ = all_pairs_ping(net.mn.hosts)
        assert lost == [], lost
        state = wait_for(lambda: (s := net.state() or {}).get("hosts") == 4 and s, 10)
        assert state, net.state()
        assert state["mode"] == "discovery"
        assert state["counters"].get("arp_from_fabric", 0) == 0
