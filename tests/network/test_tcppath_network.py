"""TCP-Path and TFE in controller mode (``DCNLAB_TCPPATH_MODE=controller``, kept for
comparison with the data plane, see test_tcppath_dataplane_network) on a real network:
spine-leaf 4x4x4, userspace Open vSwitch, 10 Mbit/s.

Connections complete (sequential and concurrent) and every path the switches hold is
loop-free (walked in the switches' own tables); new flows avoid a spine loaded by a long
transfer; per-flow entries vanish after the idle timeout; a path whose link goes down
recovers under a live transfer; TFE installs nothing for non-elephants; malformed punts
and a switch refusing entries (table full) are counted, never fatal.
"""

from __future__ import annotations

import json
import random
import re
import socket
import struct
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from waiting import wait_for

from dcnlab.schemes.tcppath import frames, polling
from dcnlab.schemes.tcppath.check import tcppath_congestion
from dcnlab.topo.network import Network
from dcnlab.topo.readiness import in_host, wait_listening
from dcnlab.topo.spec import TopologySpec

pytestmark = pytest.mark.network

TOPO = "spineleaf:4,4,4"
IDLE = 3  # s: short idle timeout, so ageing is observable within the test
MODE = {"DCNLAB_TCPPATH_MODE": "controller"}
PORT = 7000
TOOL = [sys.executable, "-m", "dcnlab.benchmarks.tcp_connect"]


@pytest.fixture(scope="module")
def net() -> Iterator[Network]:
    with Network(TOPO, app="dcnlab.apps.tcppath",
                 app_env={"DCNLAB_TCPPATH_IDLE": str(IDLE), **MODE}) as n:
        servers = [h.popen([*TOOL, "serve", "--port", str(PORT)]) for h in n.hosts]
        try:
            _wait_servers(n.hosts)
            yield n
        finally:
            for p in servers:
                p.kill()
                p.wait()


def _wait_servers(hosts: list[Any]) -> None:
    for h in hosts:
        wait_listening(in_host(h), PORT, what=f"echo server on {h.name}")


def wait_state(net: Network, done: Any, timeout: float = 20.0) -> Any:
    """The controller's state once ``done(state)`` holds (or at the deadline, for the
    assertions to say what it was): the app writes its state file every 0.2 s at most, and
    in data-plane mode learns its counters and paths from flow-statistics rounds."""
    def ready() -> Any:
        state: Any = net.state() or {}
        return state if state and done(state) else None
    return wait_for(ready, timeout, interval=0.2) or net.state() or {}


def counters(net: Network) -> dict[str, int]:
    return (net.state() or {}).get("counters", {})


def grew(before: dict[str, int], state: Any, name: str) -> int:
    """How much counter ``name`` grew since ``before`` (tests share a module's network, so
    a counter says what this test did only as a difference)."""
    return state.get("counters", {}).get(name, 0) - before.get(name, 0)


def read_after(net: Network, state: Any, section: str, moment: float) -> bool:
    """Every switch of the network had its entries read (data-plane polling, the app's
    ``section`` of the state) in answer to a request sent after ``moment``
    (time.time()): what the switches did before then is in the state."""
    return polling.read_after(state, section, moment, [sw.dpid for sw in net.spec.switches])


def state_written_after(net: Network, moment: float) -> Any:
    """The first state the app wrote after ``moment`` (time.time()): in controller mode
    what the switches punted before then has been counted in it."""
    state = wait_state(net, lambda s: s.get("updated", 0) > moment)
    assert state.get("updated", 0) > moment, ("no state written since", moment, state)
    return state


def _edge(spec: TopologySpec, host: str) -> str:
    return spec.host(host).interfaces[0].switch


def _inter_leaf_pairs(spec: TopologySpec, n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    names = [h.name for h in spec.hosts]
    pairs = []
    while len(pairs) < n:
        a, b = rng.sample(names, 2)
        if _edge(spec, a) != _edge(spec, b):
            pairs.append((a, b))
    return pairs


def _client(net: Network, src: str, dst: str, sport: int, count: int = 1) -> Any:
    return net.host(src).popen([*TOOL, "connect", "--host", net.host(dst).IP(), "--port",
                                str(PORT), "--sport", str(sport), "--count", str(count)],
                               stdout=-1)


def _rows(proc: Any) -> list[dict[str, Any]]:
    out, _ = proc.communicate(timeout=60)
    return json.loads(out)["connections"]


_FLOW_RE = re.compile(r"cookie=0xdd[0-9a-f]+.*?in_port=(\d+),dl_src=([0-9a-f:]+),"
                      r"dl_dst=([0-9a-f:]+),tp_src=(\d+),tp_dst=(\d+) actions=output:(\d+)")


def _per_flow_tables(net: Network) -> dict[str, dict[tuple, int]]:
    """Per switch: (in_port, eth_src, eth_dst, tcp_src, tcp_dst) -> output port."""
    out = {}
    for s in net.spec.switches:
        text = net.ovs.ofctl("-O", "OpenFlow13", "dump-flows", net.switch(s.name).name)
        out[s.name] = {(int(m[1]), m[2], m[3], int(m[4]), int(m[5])): int(m[6])
                       for m in _FLOW_RE.finditer(text)}
    return out


def _walk(net: Network, tables: dict[str, dict[tuple, int]], src: str, dst: str,
          sport: int, dport: int) -> list[str]:
    """Follow one direction of a connection through the switches' per-flow entries."""
    spec = net.spec
    links = {}
    for lk in spec.fabric_links():
        links[(lk.a, lk.a_port)] = (lk.b, lk.b_port)
        links[(lk.b, lk.b_port)] = (lk.a, lk.a_port)
    s_if, d_if = spec.host(src).interfaces[0], spec.host(dst).interfaces[0]
    sw, in_port, seen = s_if.switch, s_if.port, []
    while True:
        assert sw not in seen, f"loop {seen + [sw]}"
        seen.append(sw)
        out = tables[sw].get((in_port, s_if.mac, d_if.mac, sport, dport))
        assert out is not None, f"no entry at {sw} for {src}:{sport}->{dst}:{dport}"
        if (sw, out) == (d_if.switch, d_if.port):
            return seen
        sw, in_port = links[(sw, out)]


def test_connections_complete_on_loop_free_paths(net: Network) -> None:
    spec = net.spec
    before = counters(net)
    sequential = _inter_leaf_pairs(spec, 50, seed=1)
    for i, (a, b) in enumerate(sequential):
        (row,) = _rows(_client(net, a, b, 41000 + i))
        assert row["ok"], (a, b, row)
    concurrent = _inter_leaf_pairs(spec, 20, seed=2)
    procs = [_client(net, a, b, 42000 + i) for i, (a, b) in enumerate(concurrent)]
    rows = [r for p in procs for r in _rows(p)]
    assert all(r["ok"] for r in rows), rows
    tables = _per_flow_tables(net)  # well within the idle timeout
    for i, (a, b) in enumerate(concurrent):
        there = _walk(net, tables, a, b, 42000 + i, PORT)
        back = _walk(net, tables, b, a, PORT, 42000 + i)
        assert there == back[::-1] and there[0] == _edge(spec, a)
    state = wait_state(net, lambda s: grew(before, s, "tcppath_confirmed") >= 70)
    assert grew(before, state, "tcppath_confirmed") >= 70, (before, state["counters"])
    for f in state["tcppath"]["recent"]:
        assert len(set(f["path"])) == len(f["path"]), f
    assert state["counters"].get("errors", 0) == 0


def test_entries_vanish_after_idle_timeout(net: Network) -> None:
    before = counters(net)
    (row,) = _rows(_client(net, "h1", "h16", 43000))
    assert row["ok"]
    assert any(_per_flow_tables(net).values())
    # The switches expire the entries IDLE s after the last packet (Open vSwitch checks
    # its timeouts about once a second); the app hears of it by flow-removed messages.
    gone = wait_for(lambda: not any(_per_flow_tables(net).values()), IDLE + 15, 0.5)
    assert gone, _per_flow_tables(net)
    state = wait_state(net, lambda s: s["tcppath"]["flow_entries_total"] == 0
                       and grew(before, s, "tcppath_flows_aged") >= 1)
    assert state["tcppath"]["flow_entries_total"] == 0
    assert grew(before, state, "tcppath_flows_aged") >= 1, (before, state["counters"])


def test_new_flows_avoid_a_loaded_spine(net: Network) -> None:
    fields, failures = tcppath_congestion(net, net.spec)
    assert not failures, fields
    assert fields["congestion_avoided_fraction"] >= 0.8  # ECMP: ~25 % would hit it


def _raw_send(net: Network, host: str, frame: bytes) -> None:
    iface = net.host(host).defaultIntf().name
    code = ("import socket,sys;s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);"
            f"s.bind(({iface!r},0));s.send(bytes.fromhex(sys.argv[1]))")
    net.host(host).cmd(f"{sys.executable} -c \"{code}\" {frame.hex()}")


def test_malformed_punts_are_counted_not_fatal(net: Network) -> None:
    spec = net.spec
    h1, h5 = spec.host("h1").interfaces[0], spec.host("h5").interfaces[0]
    eth = bytes.fromhex(h5.mac.replace(":", "")) + bytes.fromhex(h1.mac.replace(":", ""))
    ip = socket.inet_aton
    syn_hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, 1, 0, 64, 6, 0, ip(h1.ip), ip(h5.ip))
    tcp_hdr = struct.pack("!HHIIBBHHH", 44000, PORT, 0, 0, 0x50, 0x02, 1000, 0, 0)
    syn = eth + b"\x08\x00" + syn_hdr + tcp_hdr
    before = (net.state() or {})["counters"]
    for frame in (eth + b"\x88\xb5" + b"junk" * 12,
                  frames.exploration(0xFFFF_FFF0, frames.KIND_REQUEST, syn),
                  eth + b"\x88\xb5" + b"TCPP\x01\x01\x00\x00\x00\x07" + b"\x00" * 40):
        _raw_send(net, "h1", frame)

    def delta(state: Any, name: str) -> int:
        return state["counters"].get(name, 0) - before.get(name, 0)
    # The well-formed copy is refused for coming from a host; the others do not parse.
    state = wait_state(net, lambda s: delta(s, "tcppath_copy_from_host") >= 1
                       and delta(s, "tcppath_bad_punt") >= 2)
    state = state_written_after(net, time.time())  # nothing more is on its way
    assert delta(state, "tcppath_copy_from_host") == 1, (before, state["counters"])
    assert delta(state, "tcppath_bad_punt") == 2, (before, state["counters"])
    assert net.state()["pid"] == net.controller_pid
    (row,) = _rows(_client(net, "h1", "h5", 44001))
    assert row["ok"]


def _connects_despite_a_full_table(net: Network, sport: int) -> None:
    """A new connection completes on the default routes while switches refuse its
    per-flow entries; the app counts the refusals and keeps running."""
    before = counters(net)
    (row,) = _rows(_client(net, "h2", "h7", sport))
    assert row["ok"], row
    state = wait_state(net, lambda s: grew(before, s, "tcppath_table_full") >= 1)
    assert grew(before, state, "tcppath_table_full") >= 1, (before, state["counters"])
    assert state["pid"] == net.controller_pid


def test_table_full_falls_back_to_default_path(net: Network) -> None:
    # Every spine refuses new entries (Open vSwitch's flow limit with "refuse").
    spines = [s.name for s in net.spec.switches if s.tier == "spine"]
    for name in spines:
        br = net.switch(name).name
        # Room for the static entries only (live per-flow entries would age out later).
        count = net.ovs.ofctl("-O", "OpenFlow13", "dump-flows", br).count("cookie=0xdc0")
        net.ovs.vsctl("--", "--id=@ft", "create", "Flow_Table", f"flow_limit={count}",
                      "overflow_policy=refuse", "--", "set", "Bridge", br,
                      "flow_tables:0=@ft")
    try:
        _connects_despite_a_full_table(net, 44100)
    finally:
        for name in spines:
            net.ovs.vsctl("clear", "Bridge", net.switch(name).name, "flow_tables")


def test_path_recovers_when_its_link_goes_down(net: Network) -> None:
    spec = net.spec
    src, dst = "h3", "h14"
    spine: str | None = None
    server = net.host(dst).popen(["iperf3", "-s", "-1", "-p", "5310"])
    client = None
    try:
        wait_listening(in_host(net.host(dst)), 5310, what="iperf3 server")
        client = net.host(src).popen(["iperf3", "-c", net.host(dst).IP(), "-p", "5310",
                                      "-n", "6M", "--cport", "45500", "--connect-timeout",
                                      "3000"])
        deadline, path = time.time() + 10, []
        while time.time() < deadline and not path:
            path = [f["path"] for f in (net.state() or {})["tcppath"]["recent"]
                    if f["sport"] == 45500]
            time.sleep(0.2)
        assert path and len(path[-1]) == 3
        spine = next(s.name for s in spec.switches if s.dpid == path[-1][1])
        before = counters(net)
        net.set_link(spine, _edge(spec, dst), up=False)
        assert client.wait(timeout=60) == 0
        state = wait_state(net, lambda s: grew(before, s, "tcppath_path_fail") >= 1
                           and grew(before, s, "tcppath_recovered") >= 1)
        assert grew(before, state, "tcppath_path_fail") >= 1, (before, state["counters"])
        assert grew(before, state, "tcppath_recovered") >= 1, (before, state["counters"])
        new = [f["path"] for f in state["tcppath"]["recent"] if f["sport"] == 45500][-1]
        assert path[-1][1] not in new, new
    finally:
        for p in (client, server):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        if spine is not None:
            net.set_link(spine, _edge(spec, dst), up=True)


def test_tfe_installs_entries_for_elephants_only() -> None:
    with Network(TOPO, app="dcnlab.apps.tfe", app_env=MODE) as net:
        server = net.host("h9").popen([*TOOL, "serve", "--port", str(PORT)])
        try:
            _wait_servers([net.host("h9")])
            rows = _rows(_client(net, "h1", "h9", 20000, count=5))  # mice: port <= 30000
            assert all(r["ok"] for r in rows)
            state = state_written_after(net, time.time())
            assert state["counters"].get("tcppath_explorations", 0) == 0
            assert state["tcppath"]["flow_entries_max"] == 0
            assert not any(_per_flow_tables(net).values())
            rows = _rows(_client(net, "h1", "h9", 40000, count=2))  # elephants
            assert all(r["ok"] for r in rows)
            wait_state(net, lambda s: s["counters"].get("tcppath_confirmed", 0) >= 2)
            counters = state_written_after(net, time.time())["counters"]
            assert counters.get("tcppath_confirmed", 0) == 2, json.dumps(counters)
        finally:
            server.kill()
            server.wait()



@pytest.mark.parametrize("app", ["tcppath", "tfe"])
def test_on_switch_ext(app: str) -> None:
    """switch_ext: concurrent connections complete and loaded spines are avoided (TFE
    classifies in the controller there: switch_ext refuses masked TCP ports)."""
    with Network(TOPO, app=f"dcnlab.apps.{app}", switch="ext", app_env=MODE) as net:
        servers = [h.popen([*TOOL, "serve", "--port", str(PORT)]) for h in net.hosts]
        try:
            _wait_servers(net.hosts)
            pairs = _inter_leaf_pairs(net.spec, 20, seed=3)
            procs = [_client(net, a, b, 42000 + i) for i, (a, b) in enumerate(pairs)]
            rows = [r for p in procs for r in _rows(p)]
            assert all(r["ok"] for r in rows), rows
            fields, failures = tcppath_congestion(net, net.spec)
            assert not failures, fields
            state = net.state() or {}
            assert state["counters"].get("errors", 0) == 0, state["warnings"]
            for f in state["tcppath"]["recent"]:
                assert len(set(f["path"])) == len(f["path"]), f
        finally:
            for p in servers:
                p.kill()
                p.wait()


def _static_entries_per_table(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> int:
    """The most entries the tcppath app installs in one table of one switch before any
    flow: what the app compiles, computed in memory as the switch will receive it."""
    from collections import Counter

    from dcnlab.apps.tcppath import TcpPath
    from dcnlab.topo.spec import parse

    path = tmp_path / "topo.json"
    path.write_text(json.dumps(parse(TOPO).to_dict()))
    monkeypatch.setenv("DCNLAB_TOPOLOGY", str(path))
    monkeypatch.setenv("DCNLAB_STATS_INTERVAL", "0")
    monkeypatch.delenv("DCNLAB_STATE_FILE", raising=False)
    monkeypatch.setenv("DCNLAB_TCPPATH_MODE", "controller")
    compiled = TcpPath().compiled()
    return max(n for rules in compiled.values()
               for n in Counter(f.table_id for f in rules.flows).values())


def test_table_full_falls_back_to_default_path_on_ext(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    # switch_ext's --max-flows: room for the static entries only, so every per-flow entry
    # is refused with TABLE_FULL; the connection still completes on the default routes.
    limit = _static_entries_per_table(monkeypatch, tmp_path)
    monkeypatch.delenv("DCNLAB_TOPOLOGY")
    with Network(TOPO, app="dcnlab.apps.tcppath", switch="ext",
                 switch_options={"max_flows": limit},
                 app_env={"DCNLAB_TCPPATH_IDLE": str(IDLE), **MODE}) as n:
        server = n.host("h7").popen([*TOOL, "serve", "--port", str(PORT)])
        try:
            _wait_servers([n.host("h7")])
            _connects_despite_a_full_table(n, 44200)
        finally:
            server.kill()
            server.wait()
