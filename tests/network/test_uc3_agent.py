"""UC3 host agent on a real network: BPF cwnd clamps steer a live flow's throughput.

spineleaf:1,1,2 on switch_ext with 5 ms per switch egress (RTT ~10 ms) and 100 Mbit/s
links.  In h1: the agent, a sender that joins the agent's cgroup before connecting, and a
small controller driver (an AgentClient reached over h1's loopback; the test process lives
in another namespace).  One flow to h2 is clamped to 10, 20, then 40 segments mid-flow;
each phase's throughput must be within 20 % of window x MSS x 8 / RTT (RTT measured by
the kernel during that phase).  Then unauthenticated and malformed frames are rejected and
logged without disturbing the clamp, and after the controller goes silent the agent
removes the clamp and the flow speeds up (fail open).  Once per engine: the Python loop
and the native one (``dcnlab-uc3-agentd``), driven by the same client.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from dcnlab.hosts.uc3_agent import native
from dcnlab.topo.network import Network
from dcnlab.topo.spec import parse

pytestmark = pytest.mark.network

CGROUP2 = Path("/sys/fs/cgroup/unified")
AGENT_PORT = 46690
SINK_PORT = 5301
TOLERANCE = 0.20
SETTLE_S, MEASURE_S = 1.5, 3.0

DRIVER = r'''
import sys, time
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.client import AgentClient
secret = open(sys.argv[1], "rb").read().strip()
client = AgentClient("127.0.0.1", int(sys.argv[2]), secret, refresh_s=0.3).start()
print("connected" if client.wait_connected(10) else "not connected", flush=True)
for line in sys.stdin:
    cmd = line.split()
    if cmd[0] == "clamp":
        flow = Tuple4(cmd[1], int(cmd[2]), cmd[3], int(cmd[4]))
        client.set_clamps({flow: int(cmd[5])})
    elif cmd[0] == "silence":
        client.stop()
    print("ok", flush=True)
'''

SENDER = r'''
import os, socket, sys, time
open(sys.argv[1], "w").write(str(os.getpid()))  # join the clamp cgroup first
s = socket.create_connection((sys.argv[2], int(sys.argv[3])))
print(s.getsockname()[1], flush=True)
buf = b"x" * 65536
end = time.time() + float(sys.argv[4])
while time.time() < end:
    s.sendall(buf)
'''

SINK = r'''
import socket, sys
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", int(sys.argv[1]))); srv.listen(4)
print("listening", flush=True)
c, _ = srv.accept()
while c.recv(1 << 20):
    pass
'''

BAD_FRAMES = r'''
import socket, sys
from dcnlab.hosts.uc3_agent import protocol as proto
port = int(sys.argv[1])
def answer(blob):
    """What the agent says to a peer that sends ``blob`` before it closes the peer."""
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(blob); s.settimeout(10)
    got = b""
    while data := s.recv(4096):
        got += data
    s.close()
    return got
keys = proto.Keys.derive(b"w" * 32, proto.identity("127.0.0.1", port))
said = [answer(proto.encode({"type": "hello", "seq": 1, "nonce": proto.new_nonce()},
                            keys.c2a)),
        answer(b"GET / HTTP/1.0\r\n\r\n")]
print("silent" if said == [b"", b""] else f"said {said!r}", flush=True)
'''


def _ss(host: Any, lport: int) -> dict[str, float]:
    out = host.cmd(f"ss -tinH state established src :{lport}")
    fields = dict(re.findall(r"\b(rtt|mss|cwnd|bytes_acked):([\d.]+)", out))
    return {k: float(v.split("/")[0]) for k, v in fields.items()}


def _measure(host: Any, lport: int) -> dict[str, float]:
    """Throughput from bytes_acked over MEASURE_S, RTT as the mean of the kernel's srtt."""
    first, t0 = _ss(host, lport), time.monotonic()
    rtts, cwnds = [], []
    while time.monotonic() - t0 < MEASURE_S:
        time.sleep(0.25)
        sample = _ss(host, lport)
        rtts.append(sample["rtt"])
        cwnds.append(sample["cwnd"])
    last, t1 = _ss(host, lport), time.monotonic()
    tput = (last["bytes_acked"] - first["bytes_acked"]) * 8 / (t1 - t0)
    return {"tput_bps": tput, "rtt_ms": sum(rtts) / len(rtts), "mss": last["mss"],
            "cwnd_max": max(cwnds)}


def _state_reaches(path: Path, key: str, minimum: int, timeout: float = 10.0) -> int:
    """The agent's state-file counter ``key`` once it is at least ``minimum``, or its last
    value when ``timeout`` runs out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = int(json.loads(path.read_text())[key])
        except (OSError, ValueError, KeyError):
            value = -1
        if value >= minimum or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def _send(proc: Any, line: str) -> None:
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "ok"


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    paths = {}
    for name, text in (("driver.py", DRIVER), ("sender.py", SENDER), ("sink.py", SINK),
                       ("bad.py", BAD_FRAMES)):
        paths[name] = tmp_path / name
        paths[name].write_text(text)
    paths["secret"] = tmp_path / "secret"
    paths["secret"].write_text(secrets.token_hex(24))
    paths["state"] = tmp_path / "agent.json"
    paths["log"] = tmp_path / "agent.log"
    tmp_path.chmod(0o755)
    return paths


@pytest.mark.parametrize("engine", ["python", "native"])
def test_clamps_follow_allocations_and_fail_open(files: dict[str, Path], engine: str) -> None:
    if engine == "native" and native.binary() is None:
        pytest.skip(f"{native.BINARY} not built (scripts/setup.sh)")
    py = sys.executable
    spec = parse("spineleaf:1,1,2,delay=5ms,rate=100M")
    procs: list[Any] = []
    with Network(spec, app="dcnlab.apps.ecmp", switch="ext") as net:
        h1, h2 = net.host("h1"), net.host("h2")
        tag = f"{net.prefix}uc3"
        try:
            with open(files["log"], "w") as log:
                agent = h1.popen([py, "-m", "dcnlab.hosts.uc3_agent", "--listen",
                                  "127.0.0.1", "--port", str(AGENT_PORT), "--secret-file",
                                  str(files["secret"]), "--timeout", "2", "--interval", "0.2",
                                  "--tag", tag, "--state-file", str(files["state"]),
                                  "--engine", engine],
                                 stdout=log, stderr=log)
            procs.append(agent)
            deadline = time.monotonic() + 20
            while not files["state"].exists() and time.monotonic() < deadline:
                assert agent.poll() is None, files["log"].read_text()
                time.sleep(0.1)
            state = json.loads(files["state"].read_text())
            cgroup = Path(state["cgroup"])  # as the agent sees it (h1's mount namespace)
            assert cgroup.name == f"dcnlab-{tag}"
            assert (CGROUP2 / cgroup.name).is_dir()  # the same hierarchy, seen from here

            sink = h2.popen([py, str(files["sink.py"]), str(SINK_PORT)], text=True)
            procs.append(sink)
            assert sink.stdout.readline().strip() == "listening"
            sender = h1.popen([py, str(files["sender.py"]), str(cgroup / "cgroup.procs"),
                               h2.IP(), str(SINK_PORT), "40"], text=True)
            procs.append(sender)
            lport = int(sender.stdout.readline())
            driver = h1.popen([py, str(files["driver.py"]), str(files["secret"]),
                               str(AGENT_PORT)], text=True, stdin=subprocess.PIPE)
            procs.append(driver)
            assert driver.stdout.readline().strip() == "connected"

            results = {}
            for window in (10, 20, 40):
                _send(driver, f"clamp {h1.IP()} {lport} {h2.IP()} {SINK_PORT} {window}")
                time.sleep(SETTLE_S)
                m = _measure(h1, lport)
                expected = window * m["mss"] * 8 / (m["rtt_ms"] / 1000)
                results[window] = (m, expected)
                print(f"clamp {window}: {m['tput_bps'] / 1e6:.2f} Mbit/s, expected "
                      f"{expected / 1e6:.2f} (rtt {m['rtt_ms']:.2f} ms, mss {m['mss']:.0f}, "
                      f"cwnd max {m['cwnd_max']:.0f})")
            for window, (m, expected) in results.items():
                assert m["cwnd_max"] <= window, (window, m)
                assert abs(m["tput_bps"] - expected) <= TOLERANCE * expected, (window, m,
                                                                               expected)

            # Unauthenticated and malformed frames: closed without a word, logged, clamp
            # untouched.
            bad = h1.popen([py, str(files["bad.py"]), str(AGENT_PORT)], text=True)
            assert bad.stdout.readline().strip() == "silent"
            bad.wait(timeout=10)
            time.sleep(0.5)
            log_text = files["log"].read_text()
            assert "closed unauthenticated connection" in log_text
            assert "HMAC mismatch" in log_text and "bad magic" in log_text
            # The state file is rewritten at most once a second (both engines).
            assert _state_reaches(files["state"], "refused", 2) >= 2
            assert _ss(h1, lport)["cwnd"] <= 40

            # Controller silence: the agent lifts the clamp, the flow speeds up.
            clamped = results[40][0]["tput_bps"]
            _send(driver, "silence")
            time.sleep(2.0 + 1.0 + SETTLE_S)
            assert "fail open" in files["log"].read_text()
            freed = _measure(h1, lport)
            print(f"after fail-open: {freed['tput_bps'] / 1e6:.2f} Mbit/s, "
                  f"cwnd max {freed['cwnd_max']:.0f}")
            assert freed["cwnd_max"] > 40
            assert freed["tput_bps"] > 1.3 * clamped
        finally:
            for proc in reversed(procs):
                if proc.poll() is None:
                    proc.terminate()
                    try:
                        proc.wait(timeout=5)
                    except Exception:  # noqa: BLE001 - then by force, it is ours
                        proc.kill()
        # The agent removed its cgroup on SIGTERM.
        assert not (CGROUP2 / f"dcnlab-{tag}").exists()
