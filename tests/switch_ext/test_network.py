"""dcnlab-switch on real veths between network namespaces (marker ``network``).

Each test builds its own namespaces and veths with a run-specific prefix and removes
them in ``finally`` (the ``line`` fixture). Link-emulation tests run the switch in
``--fail-mode standalone`` without a controller (a MAC-learning switch), so they measure
the egress scheduler and nothing else; the smoke test uses Ryu's simple_switch_13.
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import textwrap

import pytest
from swext_net import read_stats
from waiting import wait_for

from dcnlab.topo.readiness import wait_listening

pytestmark = pytest.mark.network

STANDALONE = ["--fail-mode", "standalone"]


def ping_ok(line, src: int, dst: int, attempts: int = 20) -> bool:
    for _ in range(attempts):
        r = line.exec(src, ["ping", "-c", "1", "-W", "1", line.ip(dst)], check=False)
        if r.returncode == 0:
            return True
    return False


def ping_rtts(line, src: int, dst: int, count: int = 20) -> list[float]:
    r = line.exec(src, ["ping", "-c", str(count), "-i", "0.05", line.ip(dst)], check=False)
    return [float(x) for x in re.findall(r"time=([\d.]+) ms", r.stdout)]


def iperf3(line, server: int, client: int, args: list[str], seconds: int = 5) -> dict:
    port = "15201"
    srv = line.popen(["iperf3", "-s", "-1", "-p", port], ns=server, stdout=subprocess.DEVNULL)
    try:
        wait_listening(_in_ns(line, server), int(port), what="iperf3 server")
        r = line.exec(
            client,
            ["iperf3", "-c", line.ip(server), "-p", port, "-t", str(seconds), "-J", *args],
            check=False,
            timeout=seconds + 30,
        )
        return json.loads(r.stdout)
    finally:
        line.stop(srv)


def connected(stats_path: str) -> bool:
    rows = read_stats(stats_path)
    return bool(rows) and rows[-1]["connected"]


def test_ping_through_simple_switch_13(line, ryu_app, switch_binary, tmp_path):
    port = ryu_app("ryu.app.simple_switch_13")
    stats = str(tmp_path / "stats.jsonl")
    sw = line.start_switch(
        switch_binary,
        args=["--controller", f"tcp:127.0.0.1:{port}"],
        stats_file=stats,
        log_path=str(tmp_path / "switch.log"),
    )
    assert wait_for(lambda: connected(stats), timeout=15), (tmp_path / "switch.log").read_text()
    assert ping_ok(line, 1, 2), (tmp_path / "switch.log").read_text()
    r = line.exec(1, ["ping", "-c", "5", "-i", "0.1", line.ip(2)], check=False)
    assert " 0% packet loss" in r.stdout, r.stdout
    assert sw.poll() is None


def test_rate_limit_10mbit(line, switch_binary):
    if not _have("iperf3"):
        pytest.skip("needs iperf3")
    opts = "rate=10M,buffer=100p"
    line.start_switch(switch_binary, {1: opts, 2: opts}, STANDALONE)
    assert ping_ok(line, 1, 2)
    res = iperf3(line, server=2, client=1, args=[], seconds=5)
    mbps = res["end"]["sum_received"]["bits_per_second"] / 1e6
    # Shaped: never above the rate (payload bits are fewer than wire bits), and most of it
    # used; the floor leaves room for a loaded machine's scheduling, not for a broken shaper.
    assert 8.0 <= mbps <= 10.0, mbps


def test_delay_adds_rtt(line, switch_binary):
    sw = line.start_switch(switch_binary, {}, STANDALONE)
    assert ping_ok(line, 1, 2)
    base = statistics.median(ping_rtts(line, 1, 2))
    line.stop(sw)
    line.start_switch(switch_binary, {1: "delay=5ms", 2: "delay=5ms"}, STANDALONE)
    assert ping_ok(line, 1, 2)
    delayed = statistics.median(ping_rtts(line, 1, 2))
    # At least the configured 10 ms (a frame never leaves early); a loaded machine may add
    # scheduling latency on top, never take it away.
    assert 9.5 <= delayed - base <= 15.0, (base, delayed)


def test_drop_tail_buffer(line, switch_binary, tmp_path):
    if not _have("iperf3"):
        pytest.skip("needs iperf3")
    stats = str(tmp_path / "stats.jsonl")
    line.start_switch(
        switch_binary,
        {2: "rate=10M,buffer=20p"},
        STANDALONE,
        stats_file=stats,
        stats_interval_ms=10,
    )
    assert ping_ok(line, 1, 2)
    iperf3(line, server=2, client=1, args=["-u", "-b", "40M", "-l", "1200"], seconds=3)
    port2 = _port_rows_until_drained(stats, 2)
    assert max(p["qlen_max"] for p in port2) == 20
    assert all(p["qlen"] <= 20 for p in port2)
    assert port2[-1]["drops"] > 100
    assert port2[-1]["tx_dropped"] >= port2[-1]["drops"]


def test_named_droptail_discipline_and_its_stats(line, switch_binary, tmp_path):
    """egress=droptail/buffer=20p is the same queue as buffer=20p; its own counters appear
    per port under "egress" (and "ingress" is null without an ingress discipline)."""
    if not _have("iperf3"):
        pytest.skip("needs iperf3")
    stats = str(tmp_path / "stats.jsonl")
    line.start_switch(
        switch_binary,
        {2: "rate=10M,egress=droptail/buffer=20p"},
        STANDALONE,
        stats_file=stats,
        stats_interval_ms=10,
    )
    assert ping_ok(line, 1, 2)
    iperf3(line, server=2, client=1, args=["-u", "-b", "40M", "-l", "1200"], seconds=2)
    port2 = _port_rows_until_drained(stats, 2)
    assert max(p["qlen_max"] for p in port2) == 20
    last = port2[-1]
    assert last["drops"] > 100
    assert last["egress"]["kind"] == "droptail"
    assert last["egress"]["drops"] == last["drops"]
    assert last["egress"]["enqueued"] > 0 and last["egress"]["ce_marks"] == 0
    assert last["ingress"] is None and last["rx_dropped"] == 0


RECEIVER = textwrap.dedent(
    """
    import socket, sys, json
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_RECVTOS, 1)
    s.bind(("0.0.0.0", 9999))
    s.settimeout(1.5)
    counts = {}
    while True:
        try:
            data, anc, flags, addr = s.recvmsg(2048, 64)
        except socket.timeout:
            break
        for level, typ, val in anc:
            if level == socket.IPPROTO_IP and typ == socket.IP_TOS:
                ecn = val[0] & 3
                counts[ecn] = counts.get(ecn, 0) + 1
    print(json.dumps(counts))
    """
)

SENDER = textwrap.dedent(
    """
    import socket, sys, time
    dst, tos, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos)
    payload = b"x" * 1000
    for i in range(n):
        s.sendto(payload, (dst, 9999))
        if i % 50 == 49:
            time.sleep(0.004)  # ~100 Mbit/s offered: 10x the bottleneck
    """
)


def _ecn_counts(line, tos: int, n: int = 1500) -> dict[int, int]:
    rx = line.popen(
        ["python3", "-c", RECEIVER], ns=2, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    wait_listening(_in_ns(line, 2), 9999, udp=True, what="ECN receiver")
    line.exec(1, ["python3", "-c", SENDER, line.ip(2), str(tos), str(n)], timeout=60)
    out, _err = rx.communicate(timeout=60)
    return {int(k): v for k, v in json.loads(out).items()}


def test_ecn_marks_only_ect(line, switch_binary, tmp_path):
    stats = str(tmp_path / "stats.jsonl")
    line.start_switch(
        switch_binary,
        {2: "rate=10M,buffer=200p,ecn=10p"},
        STANDALONE,
        stats_file=stats,
    )
    assert ping_ok(line, 1, 2)

    def marks() -> int:  # every packet sent so far has left the queue and been counted
        return _port_rows_until_drained(stats, 2)[-1]["ce_marks"]

    before = marks()
    ect = _ecn_counts(line, tos=0x02)
    after_ect = marks()
    # Marked packets arrive as CE with a valid IP checksum (the kernel drops bad ones).
    assert ect.get(3, 0) > 0, ect
    assert after_ect - before == ect.get(3, 0)
    not_ect = _ecn_counts(line, tos=0x00)
    assert set(not_ect) == {0}, not_ect
    assert marks() == after_ect


def _in_ns(line, i: int):
    """Commands in host ``i``'s namespace, as waiting.listening runs them."""
    return lambda argv: line.exec(i, argv, check=False).stdout


def _port_rows_until_drained(stats: str, port: int, timeout: float = 10.0) -> list[dict]:
    """Port ``port``'s rows of the stats file up to the first one the switch wrote after
    this call with the port's queue empty: the traffic sent before the call has then been
    forwarded, dropped or marked, and counted (rows written before may miss the last)."""
    written = len(read_stats(stats))

    def drained() -> list[dict] | None:
        rows = [next(p for p in r["ports"] if p["port"] == port) for r in read_stats(stats)]
        done = next((i for i in range(written, len(rows)) if rows[i]["qlen"] == 0), None)
        return None if done is None else rows[:done + 1]

    rows = wait_for(drained, timeout, interval=0.02)
    assert rows, f"no stats row with port {port}'s queue empty within {timeout} s"
    return rows


def _have(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None
