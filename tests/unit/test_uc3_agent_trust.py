"""The UC3 host agent's trust boundary, tested through the agent itself on loopback.

A fake clamp program stands in for BPF (no cgroup, no root); everything else is the real
agent: its listener, handshake, session and sequence checks, connection cap and auth
deadline.  An unauthenticated peer must learn nothing: not even a hello.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dcnlab.hosts.uc3_agent import agent as agent_mod
from dcnlab.hosts.uc3_agent import protocol as proto
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.client import AgentClient

SECRET = b"k" * 32
FLOW = Tuple4("10.0.0.1", 40000, "10.0.1.1", 5201)


class FakeProgram:
    """What the agent asks of its BPF program, remembered instead of enforced."""

    def __init__(self) -> None:
        self.cgroup = Path("/sys/fs/cgroup/dcnlab-test")
        self.pin_dir = None
        self.windows: dict[Tuple4, int] = {}

    def set(self, flow: Tuple4, window: int, expires_ns: int) -> None:
        self.windows[flow] = window

    def delete(self, flow: Tuple4) -> None:
        self.windows.pop(flow, None)

    def clear(self) -> int:
        n = len(self.windows)
        self.windows.clear()
        return n

    def stats(self) -> dict[str, int]:
        return {}

    def flow_samples(self) -> list:
        return []  # no cgroup, no flows

    def close(self, grace_s: float = 0.0) -> None:
        self.windows.clear()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunningAgent:
    def __init__(self, tmp_path: Path) -> None:
        self.port = _free_port()
        self.program = FakeProgram()
        cfg = agent_mod.AgentConfig(secret=SECRET, port=self.port, interval_s=0.1,
                                    timeout_s=5.0, tag="trust-test", work_dir=tmp_path)
        self.agent = agent_mod.Agent(cfg, program=self.program)  # type: ignore[arg-type]
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.agent.run(self.stop))
        finally:  # as asyncio.run does: connections still being served are cancelled
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

    def start(self) -> RunningAgent:
        self.thread.start()
        deadline = time.monotonic() + 10
        while self.agent._server is None:  # listening (no probe connection to count)
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("agent did not listen")
            time.sleep(0.02)
        return self

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(timeout=10)

    def keys(self) -> proto.Keys:
        return proto.Keys.derive(SECRET, proto.identity("127.0.0.1", self.port))


@pytest.fixture()
def running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningAgent]:
    monkeypatch.setattr(agent_mod, "AUTH_TIMEOUT_S", 0.5)
    ra = RunningAgent(tmp_path).start()
    try:
        yield ra
    finally:
        ra.close()


def _silent_close(sock: socket.socket, within: float) -> bytes:
    """Everything the agent sends before it closes (b"" when it says nothing)."""
    sock.settimeout(within)
    got = b""
    while True:
        data = sock.recv(4096)
        if not data:
            return got
        got += data


def _handshake(ra: RunningAgent) -> tuple[socket.socket, proto.FrameReader, bytes]:
    keys = ra.keys()
    sock = socket.create_connection(("127.0.0.1", ra.port), timeout=5)
    nonce = proto.new_nonce()
    sock.sendall(proto.encode({"type": "hello", "seq": 1, "nonce": nonce}, keys.c2a))
    reader = proto.FrameReader(keys.a2c, bytes.fromhex(nonce))
    hello = None
    while hello is None:
        reader.push(sock.recv(65536))
        hello = reader.pop()
    msg = proto.parse_agent(hello)
    assert msg.type == "hello" and msg.seq == 1 and msg.cgroup == str(ra.program.cgroup)
    session = proto.session_context(nonce, msg.nonce)
    reader.context = session
    return sock, reader, session


def _next(sock: socket.socket, reader: proto.FrameReader, kind: str) -> proto.AgentMessage:
    while True:
        while (raw := reader.pop()) is not None:
            msg = proto.parse_agent(raw)
            if msg.type == kind:
                return msg
        reader.push(sock.recv(65536))


def test_an_unauthenticated_peer_learns_nothing_and_is_closed(running: RunningAgent) -> None:
    with socket.create_connection(("127.0.0.1", running.port)) as silent:
        assert _silent_close(silent, 5) == b""  # no hello, closed at the auth deadline
    wrong = proto.Keys.derive(b"w" * 32, proto.identity("127.0.0.1", running.port))
    with socket.create_connection(("127.0.0.1", running.port)) as forger:
        forger.sendall(proto.encode({"type": "hello", "seq": 1, "nonce": proto.new_nonce()},
                                    wrong.c2a))
        assert _silent_close(forger, 5) == b""
    with socket.create_connection(("127.0.0.1", running.port)) as http:
        http.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert _silent_close(http, 5) == b""
    assert running.agent.refused == 3 and running.program.windows == {}


def test_another_agents_key_does_not_open_this_one(running: RunningAgent) -> None:
    other = proto.Keys.derive(SECRET, proto.identity("127.0.0.2", running.port))
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(proto.encode({"type": "hello", "seq": 1, "nonce": proto.new_nonce()},
                                  other.c2a))
        assert _silent_close(sock, 5) == b""


def test_replayed_frames_are_refused_in_and_across_sessions(running: RunningAgent) -> None:
    keys = running.keys()
    sock, reader, session = _handshake(running)
    alloc = proto.encode(proto.make_alloc(2, [proto.Clamp(FLOW, 12)]), keys.c2a, session)
    sock.sendall(alloc)
    assert _next(sock, reader, "ack").ack_seq == 2
    assert running.program.windows == {FLOW: 12}
    sock.sendall(alloc)  # the same frame again: its sequence number is not new
    assert "not above" in _next(sock, reader, "error").reason
    sock.close()
    second, reader2, _ = _handshake(running)
    second.sendall(alloc)  # recorded on the first session
    assert "HMAC" in _next(second, reader2, "error").reason
    assert _silent_close(second, 5) == b""  # and the connection is gone
    assert running.program.windows == {FLOW: 12}


def test_connections_beyond_the_cap_are_closed_at_once(running: RunningAgent) -> None:
    held = [socket.create_connection(("127.0.0.1", running.port))
            for _ in range(agent_mod.MAX_CONNECTIONS)]
    try:
        deadline = time.monotonic() + 5
        while len(running.agent.conns) < len(held) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(running.agent.conns) == agent_mod.MAX_CONNECTIONS
        with socket.create_connection(("127.0.0.1", running.port)) as extra:
            assert _silent_close(extra, 5) == b""
        assert running.agent.over_cap == 1
    finally:
        for sock in held:
            sock.close()


def test_the_controller_client_completes_the_handshake_and_clamps(
        running: RunningAgent) -> None:
    reports: list[proto.AgentMessage] = []
    client = AgentClient("127.0.0.1", running.port, SECRET, refresh_s=0.1,
                         on_report=lambda _name, msg: reports.append(msg)).start()
    try:
        assert client.wait_connected(10), client.last_error
        client.set_clamps({FLOW: 30})
        deadline = time.monotonic() + 10
        while (running.program.windows != {FLOW: 30} or not reports) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running.program.windows == {FLOW: 30}
        assert reports and all(r.seq > 1 for r in reports)
    finally:
        client.stop()
    wrong = AgentClient("127.0.0.1", running.port, b"w" * 32, max_backoff_s=0.2).start()
    try:
        assert not wrong.wait_connected(2)
        assert "closed the connection" in wrong.last_error
    finally:
        wrong.stop()
