"""Switch kind ``ext`` (dcnlab-switch under Mininet, topo/ext_switch.py).

The first tests check the pure parts (options, link parameters -> ``--port`` options, the
command line) without a network.  The ``network`` tests (root) build real networks with
``ryu.app.simple_switch_13`` and check that the switch forwards, that the spec's link
parameters reach it (rate and delay measured end to end), that each switch writes its
stats file, and that a run leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from dcnlab.topo import ext_switch as ext
from dcnlab.topo.network import EmulationWarning, Network, process_running
from dcnlab.topo.spec import LinkParams, TopologySpec, parse
from dcnlab.topo.switches import SwitchKindError, get_switch_kind

LEARNING_SWITCH = "ryu.app.simple_switch_13"  # fine on loop-free trees (one spine)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)")
pytestmark = pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning")

# Documented in switch_ext/README.md, "Stats file".
STATS_FIELDS = {"ts", "mono_ns", "switch", "dpid", "connected", "packet_ins_dropped",
                "resubmit_drops", "learn_failures", "ports", "balancers"}
PORT_FIELDS = {"port", "name", "up", "qlen", "qlen_bytes", "qlen_max", "qlen_bytes_max",
               "in_flight", "rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "drops",
               "tx_dropped", "ce_marks", "rx_errors"}


# ---------------------------------------------------------------------------
# Without a network


def test_kind_is_registered_and_emulates_links() -> None:
    kind = get_switch_kind("ext")
    assert kind.emulates_links and not kind.needs_ovs
    assert "tc" in kind.requires and "ethtool" in kind.requires


def test_fabric_egress_gets_the_link_parameters_as_given() -> None:
    params = LinkParams(rate_mbit=10.0, delay_us=5000, jitter_us=1000, buffer_pkts=20,
                        ecn_threshold_pkts=10)
    assert ext.egress_options(params, towards_host=False) == [
        "rate=10000000", "delay=5000us", "jitter=1000us", "buffer=20p", "ecn=10p"]


def test_host_egress_carries_both_directions_of_delay() -> None:
    params = LinkParams(rate_mbit=0.5, delay_us=2000, jitter_us=300, buffer_bytes=65536)
    assert ext.egress_options(params, towards_host=True) == [
        "rate=500000", "delay=4000us", "jitter=600us", "buffer=65536b"]
    assert ext.egress_options(params, towards_host=True, fold_host_delay=False)[1] == (
        "delay=2000us")


def test_buffer_without_rate_is_dropped_with_a_warning() -> None:
    with pytest.warns(EmulationWarning, match="need a link rate"):
        opts = ext.egress_options(LinkParams(delay_us=10, buffer_pkts=5), towards_host=False)
    assert opts == ["delay=10us"]
    assert ext.egress_options(LinkParams(), towards_host=True) == []


def test_disciplines_reach_the_ports_they_are_scoped_to_verbatim() -> None:
    params = parse("spineleaf:1,2,1,rate=10M,buffer=20,ecn=5,ingress@host=abq/k=20p/mode=ece,"
                   "egress@fabric=droptail/buffer=5p/ecn=3p").default_params
    # Host-facing: the default drop-tail from buffer=/ecn=, plus the ingress discipline.
    assert ext.port_options(params, towards_host=True, fold_host_delay=False) == [
        "rate=10000000", "buffer=20p", "ecn=5p", "ingress=abq/k=20p/mode=ece"]
    # Fabric-facing: egress= replaces the drop-tail and its buffer=/ecn=; no ingress.
    assert ext.port_options(params, towards_host=False) == [
        "rate=10000000", "egress=droptail/buffer=5p/ecn=3p"]
    assert ext.egress_options(params, towards_host=True) == [
        "rate=10000000", "buffer=20p", "ecn=5p"]
    cmd = ext.switch_command("/bin/sw", "s2", 2, None,
                             [(1, "s2-eth1", ext.port_options(params, False)),
                              (2, "s2-eth2", ext.port_options(params, True))],
                             ext.ExtOptions(), None)
    assert cmd[cmd.index("--port") + 1] == (
        "1=s2-eth1,rate=10000000,egress=droptail/buffer=5p/ecn=3p")
    assert "2=s2-eth2,rate=10000000,buffer=20p,ecn=5p,ingress=abq/k=20p/mode=ece" in cmd


def test_egress_discipline_without_rate_is_dropped_with_a_warning() -> None:
    params = LinkParams(delay_us=10, egress_host="droptail/buffer=5p", ingress_host="abq")
    with pytest.warns(EmulationWarning, match="egress=droptail/buffer=5p ignored"):
        opts = ext.port_options(params, towards_host=True, fold_host_delay=False)
    # The ingress side has no queue of its own to form: it is passed on.
    assert opts == ["delay=10us", "ingress=abq"]


def test_a_discipline_on_ovs_warns_like_delay_does() -> None:
    net = Network("spineleaf:1,1,1,rate=10M,ingress@host=abq/k=20p", app=LEARNING_SWITCH)
    with pytest.warns(EmulationWarning, match="queue discipline .* needs --switch ext; "
                                              "ignored on ovs"):
        net._warn_emulation()
    assert net.warnings


def test_plan_ports_follows_the_spec() -> None:
    spec = parse("spineleaf:1,2,1,delay=5ms")
    leaf = ext.plan_ports(spec, "s2")  # s1 is the spine, s2/s3 the leaves
    assert sorted(leaf) == [1, 2]
    assert (leaf[1].peer, leaf[1].peer_is_host) == ("s1", False)
    assert (leaf[2].peer, leaf[2].peer_port, leaf[2].peer_is_host) == ("h1", 0, True)
    assert leaf[2].params.delay_us == 5000
    assert {p.peer for p in ext.plan_ports(spec, "s1").values()} == {"s2", "s3"}


def test_switch_command_line() -> None:
    opts = ext.ExtOptions.from_mapping({"select_mode": "random", "seed": 7, "verbose": 0,
                                        "extra_args": ["--probe-interval-ms", "1000"]})
    cmd = ext.switch_command("/bin/sw", "d1x9-s3", 3, "tcp:127.0.0.1:6653",
                             [(1, "d1x9-s3-eth1", ["rate=10000000"]), (2, "d1x9-s3-eth2", [])],
                             opts, Path("/run/s3.stats.jsonl"))
    text = " ".join(cmd)
    assert text.startswith("/bin/sw --name d1x9-s3 --dpid 0x3 --controller tcp:127.0.0.1:6653")
    assert "--port 1=d1x9-s3-eth1,rate=10000000 --port 2=d1x9-s3-eth2 " in text
    assert "--select-mode random --fail-mode secure --seed 10 " in text  # seed + dpid
    assert "--stats-file /run/s3.stats.jsonl --stats-interval-ms 100" in text
    assert "-v" not in cmd and cmd[-2:] == ["--probe-interval-ms", "1000"]


@pytest.mark.parametrize("options, message", [
    ({"select": "rr"}, "unknown switch option"),
    ({"select_mode": "per-packet"}, "unknown load balancer 'per-packet'; known: hash, rr, random"),
    ({"select_mode": "rr/k=1"}, "load balancer 'rr' has no option 'k'"),
    ({"fail_mode": "open"}, "secure or standalone"),
    ({"stats_interval_ms": 0}, "positive integer"),
    ({"seed": "7"}, "non-negative integer"),
    ({"extra_args": "--batch 8"}, "list of strings"),
])
def test_bad_switch_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(SwitchKindError, match=message):
        ext.ExtOptions.from_mapping(options)


def test_missing_binary_says_how_to_build_it(tmp_path: Path) -> None:
    with pytest.raises(SwitchKindError, match=r"cd switch_ext && cargo build --release"):
        ext.find_binary(str(tmp_path / "dcnlab-switch"))


def test_stats_reader_skips_a_partial_last_line(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert ext.read_stats(path) == [{"a": 1}, {"a": 2}]
    assert ext._last_stats(path) == {"a": 2}
    assert ext._last_stats(tmp_path / "none") is None


# ---------------------------------------------------------------------------
# On a network


def _binary_or_skip() -> None:
    try:
        ext.find_binary()
    except SwitchKindError as exc:
        pytest.skip(str(exc))


def _ping_all(net: Network) -> None:
    loss = net.mn.pingAll(timeout=1)
    if loss:  # a learning switch may drop the very first packets while it learns
        loss = net.mn.pingAll(timeout=1)
    assert loss == 0


def _rtts(src: Any, dst: Any, count: int = 30) -> list[float]:
    out = src.cmd(f"ping -c{count} -i0.05 -W1 {dst.IP()}")
    rtts = [float(x) for x in re.findall(r"time=([\d.]+) ms", out)]
    assert len(rtts) >= count - 2, out
    return rtts


def _iperf3(src: Any, dst: Any, args: str) -> dict[str, Any]:
    dst.cmd("iperf3 -s -1 >/dev/null 2>&1 &")
    time.sleep(0.3)
    out = src.cmd(f"timeout 40 iperf3 -c {dst.IP()} -J {args}")
    return json.loads(out[out.index("{"):])


TRANSFER = """
import hashlib, socket, sys
role, addr, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "recv":
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((addr, 5001))
    srv.listen(1)
    print("listening", flush=True)
    conn, _ = srv.accept()
    digest, total = hashlib.sha256(), 0
    while chunk := conn.recv(65536):
        digest.update(chunk)
        total += len(chunk)
    print(total, digest.hexdigest(), flush=True)
else:
    data = bytes(i * 7 % 251 for i in range(size))
    with socket.create_connection((addr, 5001), timeout=30) as conn:
        conn.sendall(data)
    print(size, hashlib.sha256(data).hexdigest(), flush=True)
"""


def _tcp_transfer(src: Any, dst: Any, size: int, script: Path) -> tuple[str, str]:
    """Send ``size`` bytes over one TCP connection; (sender's, receiver's) "bytes sha256"."""
    script.write_text(TRANSFER)
    dst.sendCmd(f"timeout 60 python3 {script} recv {dst.IP()} {size}")
    greeting, deadline = "", time.monotonic() + 10
    while "listening" not in greeting and time.monotonic() < deadline:
        greeting += dst.monitor(timeoutms=500)
    assert "listening" in greeting, greeting
    sent = src.cmd(f"timeout 60 python3 {script} send {dst.IP()} {size}").strip()
    received = dst.waitOutput().strip()
    return sent, received.splitlines()[-1] if received else ""


def _links_crossed(spec: TopologySpec, a: str, b: str) -> int:
    """Hops between two nodes of the spec (every hop is one emulated link)."""
    adjacent: dict[str, set[str]] = {}
    for lk in spec.links:
        adjacent.setdefault(lk.a, set()).add(lk.b)
        adjacent.setdefault(lk.b, set()).add(lk.a)
    dist, todo = {a: 0}, deque([a])
    while todo:
        node = todo.popleft()
        for nxt in adjacent[node] - dist.keys():
            dist[nxt] = dist[node] + 1
            todo.append(nxt)
    return dist[b]


@pytest.mark.network
@needs_root
def test_spineleaf_ping_tcp_stats_and_nothing_left_behind(tmp_path: Path) -> None:
    _binary_or_skip()
    net = Network(parse("spineleaf:1,2,2"), app=LEARNING_SWITCH, switch="ext",
                  switch_options={"select_mode": "random"})
    with net:
        switches = net.switches
        pids = [sw.switch_pid for sw in switches]
        assert all(pid is not None and process_running(pid) for pid in pids)
        assert all(sw.connected() for sw in switches)
        assert net.leftovers()["links"] == []  # switch ports live in the run namespace
        _ping_all(net)

        h1, h4 = net.host("h1"), net.host("h4")  # different leaves: through the spine
        # 1 MB at the family's default 10 Mbit/s: about a second; every byte must arrive.
        sent, received = _tcp_transfer(h1, h4, 1 << 20, tmp_path / "transfer.py")
        assert sent.startswith(f"{1 << 20} ") and received == sent

        time.sleep(0.3)  # one more stats interval, so the counters include the transfer
        for sw in switches:
            assert sw.stats_file.parent == net.run_dir and sw.stats_file.exists()
            last = sw.stats()
            assert last is not None and STATS_FIELDS <= set(last)
            assert last["switch"] == sw.name and last["connected"] is True
            spec_ports = ext.plan_ports(net.spec, sw.spec_name)
            assert sorted(p["port"] for p in last["ports"]) == sorted(spec_ports)
            for port in last["ports"]:
                assert PORT_FIELDS <= set(port), port
            assert len(sw.stats_history()) >= 2
            # The select mode from switch_options reached the process.
            assert "default=random" in sw.log_file.read_text()
        spine = net.port_stats("s1")  # the lifecycle's port counters, from the stats file
        assert sum(row["rx_bytes"] or 0 for row in spine.values()) >= 1 << 20
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}
    assert not any(process_running(pid) for pid in pids if pid is not None)
    assert not net.run_dir.exists()


@pytest.fixture(scope="module")
def rated_net() -> Any:
    """spineleaf:1,2,1 at 10 Mbit/s, no delay: the hosts' pacing and the RTT baseline."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    _binary_or_skip()
    with Network("spineleaf:1,2,1,rate=10M", app=LEARNING_SWITCH, switch="ext") as net:
        _ping_all(net)
        yield net
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}


def _stolen_ticks() -> int:
    """Time the hypervisor gave this machine's CPUs to something else so far (the steal
    column of /proc/stat, in USER_HZ ticks): named in a failure, since no process here
    runs while it grows."""
    return int(Path("/proc/stat").read_text().split("\n", 1)[0].split()[8])


@pytest.mark.network
@needs_root
def test_rate_10m_reaches_the_switch() -> None:
    # Without the hosts' htb the switches are the only shapers on the path (a veth pair
    # alone carries Gbit/s). UDP offered at 12 Mbit/s keeps the first switch's egress
    # backlogged (its 100-packet buffer drops the excess; unbounded by default), and a
    # backlogged emulated link sends at its rate however late the switch gets the CPU:
    # departures are computed at enqueue (switch_ext/src/linkem.rs). A TCP flow's rate
    # also depends on when its sender and receiver run; twice, in full suite runs, one
    # came out at 8.3-9.0 Mbit/s in every one-second interval, which neither 4 busy
    # loops nor the switches at nice 19 beside 2 of them brought about here
    # (9.44-9.58). TCP through ext is checked by the transfer test above.
    _binary_or_skip()
    with Network("spineleaf:1,2,1,rate=10M,buffer=100", app=LEARNING_SWITCH, switch="ext",
                 switch_options={"host_shaping": False}) as net:
        _ping_all(net)
        h1, h2 = net.host("h1"), net.host("h2")
        assert "htb" not in h2.cmd(f"tc qdisc show dev {h2.intfNames()[0]}")
        drops_before = _tx_dropped(net)
        stolen = _stolen_ticks()
        # -R: h2 sends, so the client's one-second intervals are what h1 received.
        result = _iperf3(h1, h2, "-t 5 -R -u -b 12M -l 1400")
        stolen = _stolen_ticks() - stolen
        dropped = _tx_dropped(net) - drops_before
    received = sorted(iv["sum"]["bits_per_second"] / 1e6 for iv in result["intervals"])
    why = f"received {received} Mbit/s, switch drops {dropped}, stolen ticks {stolen}"
    # The excess 2 Mbit/s is dropped at the first switch's egress: it was backlogged.
    assert dropped > 0, why
    # 1400-byte datagrams are 1442-byte frames: 10 Mbit/s of frames is 9.71 Mbit/s of
    # payload. The median interval: a stall of the receiver costs one interval at most.
    assert 9.3 <= received[len(received) // 2] <= 10.0, why


def _tx_dropped(net: Network) -> int:
    return sum(row["tx_dropped"] or 0 for sw in net.switches
               for row in net.port_stats(sw.spec_name).values())


@pytest.mark.network
@needs_root
def test_hosts_are_paced_at_the_link_rate(rated_net: Network) -> None:
    # The host's uplink is paced by htb at the link rate (see topo/ext_switch.py).
    h1 = rated_net.host("h1")
    qdisc = h1.cmd(f"tc class show dev {h1.intfNames()[0]}")
    assert "rate 10Mbit" in qdisc, qdisc


@pytest.mark.network
@needs_root
def test_delay_5ms_adds_one_delay_per_link_crossed(rated_net: Network) -> None:
    baseline = statistics.median(_rtts(rated_net.host("h1"), rated_net.host("h2")))
    spec = parse("spineleaf:1,2,1,rate=10M,delay=5ms")  # same rate: same serialization
    with Network(spec, app=LEARNING_SWITCH, switch="ext") as net:
        _ping_all(net)
        rtt = statistics.median(_rtts(net.host("h1"), net.host("h2")))
        leaf = net.switch("s2")
        assert "delay=5000us" in " ".join(leaf.argv)  # towards the spine
        assert "delay=10000us" in " ".join(leaf.argv)  # towards h1: both directions
    crossed = _links_crossed(spec, "h1", "h2")
    assert crossed == 4
    expected = 2 * crossed * 5.0  # there and back, 5 ms per link
    # At least the configured delay per link crossed (never early); a loaded machine may
    # add scheduling latency on top.
    assert expected - 1.0 <= rtt - baseline <= expected + 8.0, (rtt, baseline, expected)
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}


@pytest.mark.network
@needs_root
def test_missing_binary_fails_clearly_and_leaves_nothing(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ext.BINARY_ENV, str(tmp_path / "dcnlab-switch"))
    net = Network("spineleaf:1,1,1", app=LEARNING_SWITCH, switch="ext")
    with pytest.raises(SwitchKindError, match="cargo build --release"):
        net.start()
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}
