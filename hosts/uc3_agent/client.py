"""Controller side: keep a connection to each host agent, push clamps, collect reports.

Plain sockets and threads, so it works in a Ryu app (ryu-manager monkey-patches both into
green threads) and in tests.  Agents come and go: each :class:`AgentClient` reconnects
with backoff, and after every (re)connection re-sends the current allocation, because an
agent that restarted (or timed out) has no clamps.  Between allocations it sends the
allocation again every ``refresh_s`` as the keepalive that keeps the agent's leases alive.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable

from . import protocol as proto
from .bpf import Tuple4

log = logging.getLogger(__name__)

ReportCallback = Callable[[str, proto.AgentMessage], None]


class AgentClient:
    """One agent.  ``set_clamps`` is thread-safe and never blocks on the network."""

    def __init__(self, host: str, port: int, secret: bytes, *, name: str = "",
                 on_report: ReportCallback | None = None, refresh_s: float = 0.5,
                 connect_timeout_s: float = 2.0, max_backoff_s: float = 5.0) -> None:
        self.host, self.port = host, port
        self.name = name or f"{host}:{port}"
        self.secret = proto.check_secret(secret)
        self.on_report = on_report
        self.refresh_s = refresh_s
        self.connect_timeout_s = connect_timeout_s
        self.max_backoff_s = max_backoff_s
        self.last_report: proto.AgentMessage | None = None
        self.last_error = ""
        self.errors_from_agent: list[str] = []
        self._clamps: dict[Tuple4, int] = {}
        self._dirty = threading.Event()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._thread: threading.Thread | None = None

    # -- public API --------------------------------------------------------

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    def start(self) -> AgentClient:
        self._thread = threading.Thread(target=self._run, name=f"uc3-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def wait_connected(self, timeout: float) -> bool:
        return self._connected.wait(timeout)

    def set_clamps(self, clamps: dict[Tuple4, int]) -> None:
        """The full set of windows this agent must enforce (an empty dict lifts all)."""
        with self._lock:
            self._clamps = dict(clamps)
        self._dirty.set()

    # -- connection loop ---------------------------------------------------

    def _run(self) -> None:
        backoff = 0.2
        while not self._stop.is_set():
            try:
                self._session()
                backoff = 0.2
            except (OSError, proto.ProtocolError) as exc:
                if str(exc) != self.last_error:
                    log.warning("agent %s: %s", self.name, exc)
                self.last_error = str(exc)
            finally:
                self._connected.clear()
            self._stop.wait(backoff)
            backoff = min(backoff * 2, self.max_backoff_s)

    def _session(self) -> None:
        sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout_s)
        with contextlib.closing(sock):
            # The keys are the agent's: its address as dialled (see protocol.py).
            peer = sock.getpeername()
            keys = proto.Keys.derive(self.secret, proto.identity(peer[0], peer[1]))
            nonce = proto.new_nonce()
            sock.sendall(proto.encode({"type": "hello", "seq": 1, "nonce": nonce}, keys.c2a))
            reader = proto.FrameReader(keys.a2c, bytes.fromhex(nonce))
            hello = self._read_hello(sock, reader)
            session = proto.session_context(nonce, hello.nonce)
            reader.context = session
            log.info("agent %s connected (%s, cgroup %s)", self.name, hello.agent, hello.cgroup)
            sock.settimeout(None)
            receiver = threading.Thread(target=self._receive,
                                        args=(sock, reader, proto.SeqCheck(hello.seq)),
                                        daemon=True)
            receiver.start()
            self._connected.set()
            self._dirty.set()  # (re)send the allocation on every new connection
            seq = 1  # our hello
            while not self._stop.is_set() and receiver.is_alive():
                self._dirty.wait(self.refresh_s)
                self._dirty.clear()
                with self._lock:
                    clamps = [proto.Clamp(f, w) for f, w in self._clamps.items()]
                seq += 1
                sock.sendall(proto.encode(proto.make_alloc(seq, clamps), keys.c2a, session))
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            receiver.join(timeout=2)

    def _read_hello(self, sock: socket.socket, reader: proto.FrameReader
                    ) -> proto.AgentMessage:
        """The agent's hello, bound to our nonce (frames after it stay buffered)."""
        deadline = time.monotonic() + self.connect_timeout_s
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("agent closed the connection (wrong secret, or not "
                                      "the agent at this address?)")
            reader.push(data)
            raw = reader.pop()
            if raw is not None:
                hello = proto.parse_agent(raw)
                if hello.type != "hello" or hello.seq != 1:
                    raise proto.ProtocolError(f"expected hello (seq 1), got {hello.type}")
                return hello
        raise TimeoutError("no hello from agent")

    def _receive(self, sock: socket.socket, reader: proto.FrameReader,
                 seq: proto.SeqCheck) -> None:
        """Agent messages until the connection ends; a frame that does not verify or
        repeats a sequence number (a replay) ends it, a malformed message is skipped."""
        try:
            while True:
                while (raw := reader.pop()) is not None:
                    try:
                        msg = proto.parse_agent(raw)
                    except proto.ProtocolError as exc:
                        log.warning("agent %s sent a bad message: %s", self.name, exc)
                        continue
                    seq.check(msg.seq)
                    self._dispatch(msg)
                data = sock.recv(65536)
                if not data:
                    return
                reader.push(data)
        except (OSError, proto.ProtocolError) as exc:
            if not self._stop.is_set():
                log.warning("agent %s: %s", self.name, exc)
                self.last_error = str(exc)

    def _dispatch(self, msg: proto.AgentMessage) -> None:
        if msg.type == "report":
            self.last_report = msg
            if self.on_report is not None:
                try:
                    self.on_report(self.name, msg)
                except Exception:  # noqa: BLE001 - a callback bug must not kill the link
                    log.exception("report callback failed for agent %s", self.name)
        elif msg.type == "error":
            log.warning("agent %s rejected a message: %s", self.name, msg.reason)
            self.errors_from_agent.append(msg.reason)
            del self.errors_from_agent[:-20]


class AgentPool:
    """All agents of a network, by name; add/remove as hosts come and go."""

    def __init__(self, secret: bytes, on_report: ReportCallback | None = None,
                 refresh_s: float = 0.5) -> None:
        self.secret = secret
        self.on_report = on_report
        self.refresh_s = refresh_s
        self.agents: dict[str, AgentClient] = {}

    def ensure(self, name: str, host: str, port: int) -> AgentClient:
        client = self.agents.get(name)
        if client is None or (client.host, client.port) != (host, port):
            if client is not None:
                client.stop()
            client = AgentClient(host, port, self.secret, name=name, on_report=self.on_report,
                                 refresh_s=self.refresh_s).start()
            self.agents[name] = client
        return client

    def remove(self, name: str) -> None:
        client = self.agents.pop(name, None)
        if client is not None:
            client.stop()

    def retain(self, names: Iterable[str]) -> None:
        keep = set(names)
        for name in [n for n in self.agents if n not in keep]:
            self.remove(name)

    def close(self) -> None:
        for name in list(self.agents):
            self.remove(name)
