"""Lab hosts driven over SSH (asyncssh): run a command, start a process whose stdin and
stdout the caller reads and writes like a ``subprocess.Popen``'s, copy files both ways,
and stop, by process group, everything started.

asyncssh is asynchronous; the engine is not.  One event loop runs in a daemon thread
(:class:`SshLoop`) and every call waits for its coroutine there, with a deadline.  A
started process (:class:`RemoteProcess`) looks like a Popen to the engine's replay: its
``stdout`` is the local end of a socket pair (a real file descriptor for selectors), which
a task on the loop fills from the remote stdout; its ``stdin`` the local end of another,
which asyncssh forwards (closing it sends EOF).

Every remote command runs as ``echo "dcnlab-pid $$"; exec COMMAND`` in the login shell
sshd starts: that shell is the session's leader, so the command keeps its process id and
leads its own process group, and its children (a traffic agent's senders) are in the
group.  The first stdout line gives the id; :meth:`SshHost.stop_all` ends every group the
host still runs (SIGTERM, then SIGKILL), which is how a run leaves nothing behind on a
host, also after Ctrl-C or a lost connection (it reconnects to do so).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

import asyncssh

T = TypeVar("T")
PID_LINE = b"dcnlab-pid "
TAG_VAR = "DCNLAB_TAG"  # in every started process's environment: what the ledger finds
STOP_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a process group


class HostError(RuntimeError):
    """A host that cannot be reached or used; the message names it and says why."""


@dataclass(frozen=True)
class Target:
    """How to reach one host."""

    name: str
    address: str
    port: int = 22
    user: str = "root"
    key: str | None = None  # a private key file; None: agent and default keys
    connect_timeout: float = 10.0
    known_hosts: str | None = None  # None: host keys are not checked
    # a host that stops answering (powered off, cable pulled) is noticed after
    # keepalive x keepalive_count seconds: its processes end as lost, not hang the run
    keepalive: float = 5.0
    keepalive_count: int = 3

    def where(self) -> str:
        return f"{self.name} ({self.user}@{self.address}:{self.port})"


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: str
    stderr: str


class SshLoop:
    """An asyncio event loop in a daemon thread, shared by every host of a lab."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="dcnlab-ssh",
                                        daemon=True)
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run ``coro`` on the loop and wait for it (``TimeoutError`` after ``timeout``)."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def close(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5.0)
        if not self.loop.is_running():
            self.loop.close()


def _quote(command: str | Sequence[str]) -> str:
    return command if isinstance(command, str) else shlex.join(command)


class SshHost:
    """One lab host: a connection (reopened when lost) and the processes started on it.

    ``ledger``: a local file that keeps, across sessions, what was started and not yet
    stopped (pid, command, start time): a run that lost the host could not stop them, and
    the next one that reaches it does (:meth:`stop_leftovers`)."""

    def __init__(self, target: Target, loop: SshLoop, ledger: Path | None = None) -> None:
        self.target = target
        self.name = target.name
        self._loop = loop
        self._conn: asyncssh.SSHClientConnection | None = None
        self._lock = threading.Lock()
        self.started: dict[int, str] = {}  # pid -> command, until seen ended
        self.ledger = ledger

    # -- connection ----------------------------------------------------------------

    async def _connect(self) -> asyncssh.SSHClientConnection:
        t = self.target
        try:
            return await asyncssh.connect(
                t.address, t.port, username=t.user,
                client_keys=[t.key] if t.key else (),
                known_hosts=t.known_hosts, connect_timeout=t.connect_timeout,
                keepalive_interval=t.keepalive, keepalive_count_max=t.keepalive_count)
        except asyncssh.PermissionDenied:
            raise HostError(f"host {t.where()}: authentication failed (is the key "
                            f"{t.key or 'from the agent or ~/.ssh'} in the user's "
                            "authorized_keys?)") from None
        except asyncssh.HostKeyNotVerifiable as exc:
            raise HostError(f"host {t.where()}: its host key is not the one in "
                            f"{t.known_hosts} ({exc.reason})") from None
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            why = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or \
                str(exc) or type(exc).__name__
            raise HostError(f"host {t.where()}: cannot connect: {why}") from None

    def _connection(self) -> asyncssh.SSHClientConnection:
        with self._lock:
            conn = self._conn
            if conn is None or conn.is_closed():
                conn = self._loop.call(self._connect(), self.target.connect_timeout + 5.0)
                self._conn = conn
            return conn

    def connect(self) -> None:
        """Open the connection now (raises HostError saying why it cannot)."""
        self._connection()

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                self._loop.call(conn.wait_closed(), 5.0)

    # -- commands ------------------------------------------------------------------

    def run(self, command: str | Sequence[str], *, timeout: float = 60.0,
            input: str | None = None, check: bool = False) -> Completed:  # noqa: A002
        """Run a command to its end; ``check``: a non-zero status raises HostError."""
        conn = self._connection()
        text = _quote(command)
        try:
            done = self._loop.call(conn.run(text, input=input, check=False), timeout)
        except TimeoutError:
            raise HostError(f"host {self.name}: {text!r} still running after "
                            f"{timeout:g} s") from None
        except (OSError, asyncssh.Error) as exc:
            raise HostError(f"host {self.name}: {text!r}: the connection failed: "
                            f"{exc}") from None
        code = done.returncode if done.returncode is not None else -1
        status = code if code >= 0 else 128 - code  # killed by a signal: as a shell says
        result = Completed(status, str(done.stdout or ""), str(done.stderr or ""))
        if check and result.returncode != 0:
            raise HostError(f"host {self.name}: {text!r} exited with {result.returncode}: "
                            f"{(result.stderr or result.stdout).strip()[-500:]}")
        return result

    def cmd(self, command: str | Sequence[str], timeout: float = 60.0) -> str:
        """stdout and stderr of a command, as Mininet's ``host.cmd`` gives them."""
        done = self.run(command, timeout=timeout)
        return done.stdout + done.stderr

    def popen(self, argv: str | Sequence[str], stdin: Any = None, stdout: Any = None,
              stderr: Any = None) -> RemoteProcess:
        """Start a process; ``stdin``/``stdout`` may be ``subprocess.PIPE`` (a local
        file object to write/read), ``DEVNULL`` or None; ``stderr`` an open binary file
        (copied there), ``STDOUT``, ``DEVNULL`` or None."""
        conn = self._connection()
        text = _quote(argv)
        tag = uuid.uuid4().hex  # in its environment and its children's: found by it
        self._ledger_put(tag, {"command": text})  # before it runs: a start cut short too
        proc = RemoteProcess(self, text, stdin, stdout, stderr, tag)
        try:
            self._loop.call(proc._start(conn), self.target.connect_timeout + 10.0)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            proc._close_local()
            raise HostError(f"host {self.name}: cannot start {text!r}: "
                            f"{exc or type(exc).__name__}") from None
        self.started[proc.pid] = text
        return proc

    # -- the ledger ----------------------------------------------------------------

    def _ledger(self) -> dict[str, dict[str, str]]:
        if self.ledger is None:
            return {}
        try:
            data = json.loads(self.ledger.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _ledger_put(self, tag: str, entry: dict[str, str]) -> None:
        if self.ledger is None:
            return
        entries = self._ledger()
        entries[tag] = entry
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        self.ledger.write_text(json.dumps(entries))

    def stop_leftovers(self) -> list[str]:
        """End what an earlier session started here and could not stop: every process
        whose environment carries a tag it recorded (the command and its children,
        also when the session was lost before it learned the pid); returns their
        commands."""
        stopped = []
        for tag, entry in self._ledger().items():
            if not re.fullmatch(r"[0-9a-f]{32}", tag):
                continue
            found = self.run(f"grep -lsa {TAG_VAR}={tag} /proc/[0-9]*/environ "
                             "| cut -d/ -f3", timeout=15.0).stdout.split()
            pids = " ".join(p for p in found if p.isdigit())
            if pids:
                self.run(f"kill -TERM {pids} 2>/dev/null; sleep {STOP_GRACE:g}; "
                         f"kill -KILL {pids} 2>/dev/null; true", timeout=30.0)
                stopped.append(str(entry.get("command", "")))
        if self.ledger is not None:
            self.ledger.unlink(missing_ok=True)
        return stopped

    # -- files ---------------------------------------------------------------------

    def put(self, local: Path, remote: str, timeout: float = 120.0) -> None:
        async def go(conn: asyncssh.SSHClientConnection) -> None:
            async with conn.start_sftp_client() as sftp:
                await sftp.put(str(local), remote)

        self._files(go, f"copy {local} to {remote}", timeout)

    def get(self, remote: str, local: Path, timeout: float = 120.0) -> None:
        async def go(conn: asyncssh.SSHClientConnection) -> None:
            async with conn.start_sftp_client() as sftp:
                await sftp.get(remote, str(local))

        self._files(go, f"copy {remote} to {local}", timeout)

    def _files(self, go: Any, what: str, timeout: float) -> None:
        conn = self._connection()
        try:
            self._loop.call(go(conn), timeout)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            why = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            raise HostError(f"host {self.name}: {what}: {why}") from None

    # -- stopping ------------------------------------------------------------------

    def signal_group(self, pid: int, sig: int) -> None:
        self.run(f"kill -{int(sig)} -- -{int(pid)} 2>/dev/null || true", timeout=15.0)

    def stop_all(self) -> list[str]:
        """End every process group started here that still runs (SIGTERM, then SIGKILL
        after STOP_GRACE), and, with a ledger, every process carrying one of its tags
        (a start whose pid never came back); returns what was still running.
        Reconnects if needed."""
        stopped: list[str] = []
        if self.started:
            pids = " ".join(str(p) for p in self.started)
            alive = self.run(f"for p in {pids}; do kill -0 $p 2>/dev/null && echo $p; done",
                             timeout=15.0).stdout.split()
            stopped = [self.started[int(p)] for p in alive]
            if alive:
                groups = " ".join(f"-{p}" for p in alive)
                self.run(f"kill -TERM -- {groups} 2>/dev/null; sleep {STOP_GRACE:g}; "
                         f"kill -KILL -- {groups} 2>/dev/null; true", timeout=30.0)
        stopped += [c for c in self.stop_leftovers() if c not in stopped]
        self.started.clear()
        return stopped


class RemoteProcess:
    """A process on a lab host, with the parts of ``subprocess.Popen`` the engine uses:
    ``stdin``, ``stdout``, ``pid``, ``returncode``, ``poll``, ``wait``, ``kill``,
    ``terminate``, ``send_signal``."""

    def __init__(self, host: SshHost, command: str, stdin: Any, stdout: Any,
                 stderr: Any, tag: str = "") -> None:
        self.host = host
        self.command = command
        self.tag = tag
        self.args = command
        self.pid = 0
        self.returncode: int | None = None
        self.error = ""  # why it ended, when not by itself (the connection was lost)
        self._ended = threading.Event()
        self._want = (stdin, stdout, stderr)
        self.stdin: IO[bytes] | None = None
        self.stdout: IO[bytes] | None = None
        self._socks: list[socket.socket] = []
        self._err: IO[bytes] | None = None
        self._task: asyncio.Task[None] | None = None

    async def _start(self, conn: asyncssh.SSHClientConnection) -> None:
        stdin, stdout, stderr = self._want
        kwargs: dict[str, Any] = {"encoding": None}
        if stdin == subprocess.PIPE:
            local, remote = socket.socketpair()
            self._socks.append(remote)
            self.stdin = local.makefile("wb", buffering=0)
            local.close()  # the file object keeps its own descriptor
            kwargs["stdin"] = remote
        else:
            kwargs["stdin"] = subprocess.DEVNULL
        out_sock: socket.socket | None = None
        if stdout == subprocess.PIPE:
            local, out_sock = socket.socketpair()
            self.stdout = local.makefile("rb", buffering=0)
            local.close()
        if stderr == subprocess.STDOUT:
            kwargs["stderr"] = asyncssh.STDOUT
        elif stderr in (None, subprocess.DEVNULL):
            kwargs["stderr"] = subprocess.DEVNULL
        else:  # an open file: a copy of its descriptor outlives the caller's close
            self._err = os.fdopen(os.dup(stderr.fileno()), "wb", buffering=0)
            kwargs["stderr"] = self._err
        tag = f"export {TAG_VAR}={self.tag}; " if self.tag else ""
        process = await conn.create_process(
            f'echo "dcnlab-pid $$"; {tag}exec {self.command}', **kwargs)
        line = await process.stdout.readline()
        if not line.startswith(PID_LINE):
            process.close()
            raise OSError(f"no process id from the remote shell (got {line[:80]!r})")
        self.pid = int(line[len(PID_LINE):].strip())
        self._task = asyncio.ensure_future(self._pump(process, out_sock,
                                                      stdout == subprocess.PIPE))

    async def _pump(self, process: asyncssh.SSHClientProcess[bytes],
                    out: socket.socket | None, pipe: bool) -> None:
        """Copy the remote stdout to the local socket (or drop it), then record the exit
        status; the local reader then sees end of file."""
        try:
            while True:
                data = await process.stdout.read(65536)
                if not data:
                    break
                if out is not None and pipe:
                    with contextlib.suppress(OSError):
                        await asyncio.get_running_loop().sock_sendall(out, data)
            done = await process.wait()
            # the exit status, or minus the signal that ended it (as Popen's returncode)
            self.returncode = done.returncode if done.returncode is not None else -1
        except (OSError, asyncssh.Error) as exc:
            self.returncode = -signal.SIGHUP  # the connection went away under it
            self.error = f"connection lost: {exc}"
        finally:
            if out is not None:
                with contextlib.suppress(OSError):
                    out.close()
            self._close_remote_ends()
            self._ended.set()

    def _close_remote_ends(self) -> None:
        for s in self._socks:
            with contextlib.suppress(OSError):
                s.close()
        if self._err is not None:
            with contextlib.suppress(OSError):
                self._err.close()

    def _close_local(self) -> None:
        for f in (self.stdin, self.stdout):
            if f is not None:
                with contextlib.suppress(OSError):
                    f.close()
        self._close_remote_ends()

    # -- Popen's interface ---------------------------------------------------------

    def communicate(self, timeout: float | None = None) -> tuple[bytes, None]:
        """Its whole stdout (when started with ``stdout=PIPE``; else b"") once it ended,
        as ``Popen.communicate`` gives it; TimeoutExpired after ``timeout`` seconds."""
        chunks: list[bytes] = []
        reader = None
        if self.stdout is not None:
            stdout = self.stdout
            reader = threading.Thread(target=lambda: chunks.append(stdout.read() or b""),
                                      daemon=True)
            reader.start()
        began = time.monotonic()
        self.wait(timeout)
        if reader is not None:  # the pump closes the stream's far end when it ends
            left = None if timeout is None else max(0.1, timeout - (time.monotonic() - began))
            reader.join(left)
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.command, timeout or 0.0)
        return (chunks[0] if chunks else b""), None

    def poll(self) -> int | None:
        return self.returncode if self._ended.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.command, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None and self.pid:
            self.host.signal_group(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while self.poll() is None and time.monotonic() < deadline:
            self._ended.wait(0.1)
