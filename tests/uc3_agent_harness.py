"""A UC3 host agent on loopback for tests, with either engine.

- ``python``: the reference loop (:class:`~dcnlab.hosts.uc3_agent.agent.Agent`) in a
  thread of the test process, with a :class:`FakeProgram` (no root, no BPF) or the real
  :class:`~dcnlab.hosts.uc3_agent.bpf.ClampProgram`;
- ``native``: ``dcnlab-uc3-agentd`` as a child process, on a real ClampProgram loaded
  here (root), exactly as ``python -m dcnlab.hosts.uc3_agent`` hands it over.

Either way the test talks to it over TCP as a controller does, and reads what it did
from the program (fake or real map) and its counters (attributes, or the state file).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from dcnlab.hosts.uc3_agent import agent as agent_mod
from dcnlab.hosts.uc3_agent import native
from dcnlab.hosts.uc3_agent import protocol as proto
from dcnlab.hosts.uc3_agent.bpf import ClampProgram, Tuple4

SECRET = b"k" * 32
ENGINES = ("python", "native")


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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def native_skip_reason() -> str | None:
    """Why the native engine cannot run here (None: it can)."""
    if native.binary() is None:
        return f"{native.BINARY} not built (scripts/setup.sh)"
    if os.geteuid() != 0:
        return "the native engine needs a real BPF program: root"
    return None


class RunningAgent:
    def __init__(self, engine: str, tmp_path: Path, *, real: bool = False,
                 interval_s: float = 0.1, timeout_s: float = 5.0) -> None:
        self.engine = engine
        self.port = free_port()
        self.tag = f"h{os.getpid()}-{self.port}"
        self.state_file = tmp_path / "state.json"
        self.log = tmp_path / "agent.log"
        work = tmp_path / "work"
        work.mkdir()
        self.cfg = agent_mod.AgentConfig(
            secret=SECRET, port=self.port, interval_s=interval_s, timeout_s=timeout_s,
            tag=self.tag, work_dir=work, state_file=self.state_file, name="test-agent")
        self.program: Any = ClampProgram(self.tag, work) if real or engine == "native" \
            else FakeProgram()
        self.agent: agent_mod.Agent | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @property
    def cgroup(self) -> str:
        return str(self.program.cgroup)

    def _run(self) -> None:
        assert self.agent is not None
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
        try:
            if self.engine == "native":
                with open(self.log, "wb") as log:
                    self.proc = native.spawn(self.cfg, self.program, "test-agent",
                                             stdout=log, stderr=subprocess.STDOUT)
                native.wait_listening(self.state_file, self.proc)
                return self
            self.agent = agent_mod.Agent(self.cfg, program=self.program)
            self.thread.start()
            deadline = time.monotonic() + 10
            while self.agent._server is None:  # listening (no probe connection to count)
                if time.monotonic() > deadline or not self.thread.is_alive():
                    raise RuntimeError("agent did not listen")
                time.sleep(0.02)
            return self
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.terminate()  # ours, started above
            self.proc.wait(timeout=10)
            self.program.close(grace_s=0.2)
        elif self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop.set)
            self.thread.join(timeout=10)
        else:
            self.program.close()

    def keys(self) -> proto.Keys:
        return proto.Keys.derive(SECRET, proto.identity("127.0.0.1", self.port))

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    # -- what the agent did ----------------------------------------------------

    def windows(self) -> dict[Tuple4, int]:
        """The clamps the agent has put in its program's map."""
        if isinstance(self.program, FakeProgram):
            return dict(self.program.windows)
        out = {}
        for raw, (window, _expires) in self.program.entries().items():
            flow = Tuple4.from_key(raw)
            assert flow is not None
            out[flow] = window
        return out

    def counter(self, name: str) -> int:
        """rejected, refused, over_cap: the agent's own (Python) or its state file's."""
        if self.agent is not None:
            return int(getattr(self.agent, name))
        try:
            return int(json.loads(self.state_file.read_text())[name])
        except (OSError, ValueError, KeyError):
            return -1

    def wait_counter(self, name: str, want: int, timeout: float = 5.0) -> int:
        """The counter once it equals ``want`` (the native agent writes its state file
        once a second), or its value at the deadline."""
        deadline = time.monotonic() + timeout
        while (got := self.counter(name)) != want and time.monotonic() < deadline:
            time.sleep(0.05)
        return got

    def wait_windows(self, want: dict[Tuple4, int], timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        while (got := self.windows()) != want and time.monotonic() < deadline:
            time.sleep(0.02)
        return got


# -- a controller's side, by hand ------------------------------------------------


def silent_close(sock: socket.socket, within: float) -> bytes:
    """Everything the agent sends before it closes (b"" when it says nothing)."""
    sock.settimeout(within)
    got = b""
    while True:
        data = sock.recv(4096)
        if not data:
            return got
        got += data


def handshake(ra: RunningAgent) -> tuple[socket.socket, proto.FrameReader, bytes]:
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
    assert msg.type == "hello" and msg.seq == 1 and msg.cgroup == ra.cgroup
    assert msg.agent == "test-agent"
    session = proto.session_context(nonce, msg.nonce)
    reader.context = session
    return sock, reader, session


def next_message(sock: socket.socket, reader: proto.FrameReader,
                 kind: str) -> proto.AgentMessage:
    while True:
        while (raw := reader.pop()) is not None:
            msg = proto.parse_agent(raw)
            if msg.type == kind:
                return msg
        data = sock.recv(65536)
        if not data:
            raise ConnectionError(f"closed before a {kind}")
        reader.push(data)
