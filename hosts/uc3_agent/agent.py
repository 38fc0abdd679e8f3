"""dcnlab-agent: report this host's TCP flows and enforce the controller's window clamps.

Runs inside a host (a Mininet host's namespace, or a real server as a daemon).  It
listens on TCP for controllers (the Ryu app's :class:`~.client.AgentClient` connects), on
loopback unless told otherwise (dcnlab runs give it the host's management address), and
trusts a connection only after the controller's ``hello`` verifies (see
:mod:`.protocol`): until then it says nothing, and a peer that has not authenticated
within ``AUTH_TIMEOUT_S``, or sends a frame that does not verify, is closed without a
word.  At most ``MAX_CONNECTIONS`` connections are served at once.  An authenticated
controller gets a ``report`` every interval, and its ``alloc`` messages go to the BPF map.

Fail open, twice over:
- the agent deletes every clamp when no valid controller message arrived for
  ``timeout`` seconds;
- every map entry carries a lease (``expires_ns`` = last valid controller message +
  timeout) that the BPF program honours by itself, so clamps lift even if the agent
  was killed.

Bad input is logged and answered with an ``error`` message; a frame that fails the HMAC
or breaks the framing closes that connection and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import protocol as proto
from .bpf import ClampProgram, Tuple4
from .flows import FlowSampler

log = logging.getLogger("dcnlab.agent")

DEFAULT_PORT = 6690
DEFAULT_LISTEN = "127.0.0.1"
READ_CHUNK = 65536
MAX_CONNECTIONS = 4  # a controller, a standby, a tool: more is someone knocking
AUTH_TIMEOUT_S = 5.0  # to send a hello that verifies; the controller sends it at once
# The state file is for people and the engine (counters at the end of a run), not for
# control: rewriting it every report was three quarters of an agent's CPU (a rename
# costs ~0.2 ms), so it is rewritten at most this often, and at start and stop.
STATE_PERIOD_S = 1.0


@dataclass
class AgentConfig:
    secret: bytes
    listen: str = DEFAULT_LISTEN
    port: int = DEFAULT_PORT
    interval_s: float = 0.2  # report period
    timeout_s: float = 2.0  # controller silence before clamps are removed
    tag: str = ""  # names the cgroup/pins: dcnlab-<tag>; default agent-<pid>
    work_dir: Path | None = None
    state_file: Path | None = None
    name: str = ""


class _Conn:
    """One controller connection: its keys, session, sequence numbers and writer."""

    def __init__(self, writer: asyncio.StreamWriter, secret: bytes) -> None:
        self.writer = writer
        local = writer.get_extra_info("sockname")  # the address the controller dialled
        self.keys = proto.Keys.derive(secret, proto.identity(local[0], local[1]))
        self.reader = proto.FrameReader(self.keys.c2a)
        self.context = b""  # bound into the MACs we send: nonce_c, then the session
        self.seq_in = proto.SeqCheck()
        self.seq_out = 0
        self.authenticated = False
        self.peer = str(writer.get_extra_info("peername"))

    def send(self, message: dict[str, Any]) -> None:
        self.seq_out += 1
        message["seq"] = self.seq_out
        self.writer.write(proto.encode(message, self.keys.a2c, self.context))


def write_state(cfg: AgentConfig, program: ClampProgram, name: str, *, stopped: bool,
                clamps: int, rejected: int, refused: int, over_cap: int) -> None:
    """The agent's state file (for people and the engine), replaced atomically; the BPF
    program's counters while it runs."""
    assert cfg.state_file is not None
    state = {"agent": name, "pid": os.getpid(), "stopped": stopped,
             "cgroup": str(program.cgroup),
             "pins": str(program.pin_dir) if program.pin_dir else None,
             "port": cfg.port, "clamps": clamps, "rejected": rejected, "refused": refused,
             "over_cap": over_cap, "bpf": program.stats() if not stopped else {}}
    tmp = cfg.state_file.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(cfg.state_file)


class Agent:
    def __init__(self, config: AgentConfig, program: ClampProgram | None = None) -> None:
        self.cfg = config
        proto.check_secret(config.secret)
        self.tag = config.tag or f"agent-{os.getpid()}"
        self.name = config.name or self.tag
        self.work_dir = config.work_dir or Path(f"/run/dcnlab-{self.tag}")
        self.program = program
        self.clamps: dict[Tuple4, int] = {}
        self.last_controller = 0.0  # monotonic time of the last valid controller message
        self.rejected = 0  # messages from authenticated controllers that were refused
        self.refused = 0  # connections closed before they authenticated
        self.over_cap = 0  # connections closed at once: MAX_CONNECTIONS were open
        self.conns: set[_Conn] = set()
        self.sampler = FlowSampler()
        self._server: asyncio.base_events.Server | None = None
        self._state_written = float("-inf")  # monotonic time of the last state file

    # -- lifecycle ---------------------------------------------------------

    async def run(self, stop: asyncio.Event | None = None) -> None:
        stop = stop or asyncio.Event()
        created = not self.work_dir.exists()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.program is None:
            self.program = ClampProgram(self.tag, self.work_dir)
        try:
            self._server = await asyncio.start_server(self._serve, self.cfg.listen, self.cfg.port)
            log.info("agent %s listening on %s:%d, cgroup %s", self.name, self.cfg.listen,
                     self.cfg.port, self.program.cgroup)
            self._write_state()
            while not stop.is_set():
                self._tick()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.cfg.interval_s)
        finally:
            if self._server is not None:
                self._server.close()
            for conn in list(self.conns):
                conn.writer.close()
            self.program.close(grace_s=0.2)
            self.clamps.clear()
            self._write_state(stopped=True)
            if created:  # leave nothing behind that this run made
                (self.work_dir / "clamp.bpf.o").unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    self.work_dir.rmdir()

    def _tick(self) -> None:
        now = time.monotonic()
        if self.clamps and now - self.last_controller > self.cfg.timeout_s:
            log.warning("controller silent for %.1f s: removing %d clamp(s) (fail open)",
                        now - self.last_controller, len(self.clamps))
            self._clear()
        # The program keeps every flow of our cgroup in a map (and only those): no fork
        # of `ss`, no dump of every socket on the machine.
        assert self.program is not None
        flows = [f for f in self.program.flow_samples() if f.flow.lport != self.cfg.port]
        stats = self.sampler.sample(flows, self.clamps, now)
        for conn in list(self.conns):
            if conn.authenticated:
                self._send(conn, {"type": "report", "flows": [s.to_dict() for s in stats]})
        if now - self._state_written >= STATE_PERIOD_S:
            self._write_state()

    def _write_state(self, stopped: bool = False) -> None:
        if self.cfg.state_file is None or self.program is None:
            return
        write_state(self.cfg, self.program, self.name, stopped=stopped,
                    clamps=len(self.clamps), rejected=self.rejected, refused=self.refused,
                    over_cap=self.over_cap)
        self._state_written = time.monotonic()

    # -- clamps --------------------------------------------------------------

    def _lease(self) -> int:
        return time.monotonic_ns() + int(self.cfg.timeout_s * 1e9)

    def _apply(self, msg: proto.ControllerMessage) -> None:
        assert self.program is not None
        wanted = {c.flow: c.window for c in msg.clamps}
        if msg.replace:
            for flow in [f for f in self.clamps if f not in wanted]:
                self.program.delete(flow)
                del self.clamps[flow]
        self.clamps.update(wanted)
        self._refresh_leases()

    def _refresh_leases(self) -> None:
        assert self.program is not None
        expires = self._lease()
        for flow, window in self.clamps.items():
            self.program.set(flow, window, expires)

    def _clear(self) -> None:
        assert self.program is not None
        self.program.clear()
        self.clamps.clear()

    # -- connections -----------------------------------------------------------

    def _send(self, conn: _Conn, message: dict[str, Any]) -> None:
        try:
            conn.send(message)
        except (OSError, proto.ProtocolError) as exc:
            log.warning("sending to %s failed: %s", conn.peer, exc)

    def _reject(self, conn: _Conn, reason: str) -> None:
        self.rejected += 1
        log.error("rejected message from %s: %s", conn.peer, reason)
        self._send(conn, {"type": "error", "reason": reason[:proto.MAX_STRING]})

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.conns) >= MAX_CONNECTIONS:
            self.over_cap += 1
            log.warning("refused a connection from %s: %d already open",
                        writer.get_extra_info("peername"), len(self.conns))
            writer.close()
            return
        conn = _Conn(writer, self.cfg.secret)
        self.conns.add(conn)
        log.info("connection from %s", conn.peer)
        try:
            if not await self._authenticate(conn, reader):
                return
            await writer.drain()
            while True:
                try:
                    while (raw := conn.reader.pop()) is not None:
                        self._handle(conn, raw)
                except proto.ProtocolError as exc:  # framing or MAC: cannot go on
                    self._reject(conn, str(exc))
                    break
                await writer.drain()
                data = await reader.read(READ_CHUNK)
                if not data:
                    break
                try:
                    conn.reader.push(data)
                except proto.ProtocolError as exc:
                    self._reject(conn, str(exc))
                    break
        except (ConnectionError, OSError) as exc:
            log.info("connection %s ended: %s", conn.peer, exc)
        finally:
            self.conns.discard(conn)
            writer.close()
            log.info("controller %s disconnected", conn.peer)

    async def _authenticate(self, conn: _Conn, reader: asyncio.StreamReader) -> bool:
        """Wait for the controller's hello; answer it and bind the session.  Anything
        else (silence past the deadline, a frame that does not verify) closes the
        connection without a word: an unauthenticated peer learns nothing."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + AUTH_TIMEOUT_S
        while True:
            remaining = deadline - loop.time()
            try:
                if remaining <= 0:
                    raise TimeoutError
                data = await asyncio.wait_for(reader.read(READ_CHUNK), remaining)
            except TimeoutError:
                self._refuse(conn, f"no hello within {AUTH_TIMEOUT_S:g} s")
                return False
            if not data:
                return False
            try:
                conn.reader.push(data)
                raw = conn.reader.pop()
                if raw is None:
                    continue
                hello = proto.parse_controller(raw)
                if hello.type != "hello" or hello.seq != 1:
                    raise proto.ProtocolError(f"expected hello (seq 1), got {hello.type}")
            except proto.ProtocolError as exc:
                self._refuse(conn, str(exc))
                return False
            break
        assert self.program is not None
        nonce = proto.new_nonce()
        conn.seq_in = proto.SeqCheck(hello.seq)
        conn.context = bytes.fromhex(hello.nonce)
        self._send(conn, {"type": "hello", "agent": self.name, "nonce": nonce,
                          "cgroup": str(self.program.cgroup)})
        conn.context = conn.reader.context = proto.session_context(hello.nonce, nonce)
        conn.authenticated = True
        log.info("controller %s authenticated", conn.peer)
        return True

    def _refuse(self, conn: _Conn, reason: str) -> None:
        self.refused += 1
        log.warning("closed unauthenticated connection from %s: %s", conn.peer, reason)

    def _handle(self, conn: _Conn, raw: dict[str, Any]) -> None:
        try:
            msg = proto.parse_controller(raw)
            conn.seq_in.check(msg.seq)
            if msg.type == "hello":
                raise proto.ProtocolError("hello on an established session")
        except proto.ProtocolError as exc:
            self._reject(conn, str(exc))
            return
        conn.authenticated = True
        self.last_controller = time.monotonic()
        try:
            if msg.type == "alloc":
                self._apply(msg)
            elif msg.type == "clear":
                self._clear()
            else:  # keepalive
                self._refresh_leases()
        except Exception as exc:  # noqa: BLE001 - a BPF failure must not end the agent
            self._reject(conn, f"{msg.type} failed: {exc}")
            return
        self._send(conn, {"type": "ack", "ack_seq": msg.seq, "clamps": len(self.clamps)})
