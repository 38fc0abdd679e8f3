"""The controller process: ``ryu-manager`` with the run's app, inside the run namespace.

:class:`ControllerProcess` starts it (``mnexec -a <holder pid>``, in its own session so a
terminal Ctrl-C reaches the lifecycle first and the lifecycle stops ryu in order), waits
until it listens, tells whether it is still alive, counts the OpenFlow sessions it has
accepted, and stops it.  Its output goes to one log file across restarts; errors quote
the log's tail, which is usually where the reason is (an app that failed to import, a
port in use).

The controller listens on 127.0.0.1 *inside the run namespace*, where every switch
lives too, so its sockets in ``/proc/<holder>/net/tcp`` tell exactly and at once whether
it listens and how many switches are connected.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from mininet.node import RemoteController

from .errors import NetworkError

CONTROLLER_HOST = "127.0.0.1"
DEFAULT_CONTROLLER_PORT = 6653
LOG_TAIL_LINES = 40
TCP_ESTABLISHED, TCP_LISTEN = "01", "0A"  # states in /proc/net/tcp


class RemoteControllerInNamespace(RemoteController):
    """RemoteController without Mininet's telnet probe: the probe would run in the root
    namespace (the controller listens in the run namespace) and open a bogus OpenFlow
    connection.  :meth:`ControllerProcess.wait_listening` checks the listener instead."""

    def checkListening(self) -> None:
        return


class ControllerProcess:
    """One ``ryu-manager`` running ``app``; restartable (stop, then start again).

    ryu_manager: path of the program (from :func:`~.preflight.preflight`).
    app_args: extra ryu-manager arguments, placed before the app.
    env: environment on top of this process's own (the run-time contract's variables).
    cwd: where it runs (the run directory); log_file: appended to on every start.
    """

    def __init__(self, ryu_manager: str, app: str, app_args: Sequence[str], port: int,
                 env: Mapping[str, str], cwd: Path, log_file: Path,
                 listen_host: str = CONTROLLER_HOST) -> None:
        self.ryu_manager = ryu_manager
        self.listen_host = listen_host  # a lab's controller listens on its own address
        self.app = app
        self.app_args = list(app_args)
        self.port = port
        self.env = dict(env)
        self.cwd = cwd
        self.log_file = log_file
        self._proc: subprocess.Popen[bytes] | None = None
        self._netns_pid: int | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, netns_pid: int | None) -> int:
        """Start it in the namespace held by ``netns_pid`` (None: this process's own, as
        on a lab); returns its pid at once.

        The caller records the pid first (teardown must know it even if the controller
        never comes up), then calls :meth:`wait_listening`.
        """
        enter = ([shutil.which("mnexec") or "mnexec", "-a", str(netns_pid)]
                 if netns_pid is not None else [])
        cmd = [*enter, self.ryu_manager, "--ofp-tcp-listen-port", str(self.port),
               "--ofp-listen-host", self.listen_host, *self.app_args, self.app]
        self._netns_pid = netns_pid
        with open(self.log_file, "ab") as logfile:
            logfile.write(f"=== {time.strftime('%H:%M:%S')} "
                          f"{' '.join(cmd[len(enter):])}\n".encode())
            logfile.flush()
            # Own session: a terminal Ctrl-C reaches us, and we stop ryu in order.
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logfile,
                                          stderr=subprocess.STDOUT, start_new_session=True,
                                          env={**os.environ, **self.env}, cwd=str(self.cwd))
        return self._proc.pid

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; its sockets close with it."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)

    def check_alive(self) -> None:
        """Raise NetworkError, quoting the log, when it is not running."""
        if self._proc is None:
            raise NetworkError("ryu-manager is not running")
        code = self._proc.poll()
        if code is not None:
            raise NetworkError(
                f"ryu-manager exited with code {code} (app {self.app!r})\n"
                f"--- ryu-manager log tail ({self.log_file}) ---\n{self.log_tail()}")

    def wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.check_alive()
            for lip, lport, _rip, _rport, state in self._sockets():
                if state == TCP_LISTEN and lport == self.port and lip in (self.listen_host,
                                                                           "0.0.0.0"):
                    return
            time.sleep(0.1)
        raise NetworkError(f"ryu-manager did not listen on {self.listen_host}:{self.port} "
                           f"within {timeout:g} s\n--- ryu-manager log tail ---\n"
                           f"{self.log_tail()}")

    def sessions(self) -> int:
        """OpenFlow sessions it has accepted (ESTABLISHED at its port).

        The controller and every switch share the run namespace, so this is exact and
        instant for any switch kind.  (OVS refreshes Controller.is_connected in its
        database only every ~5 s, which would add seconds to every start and restart.)
        """
        return sum(1 for lip, lport, _rip, _rport, state in self._sockets()
                   if lport == self.port and lip == self.listen_host
                   and state == TCP_ESTABLISHED)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return tail(self.log_file, lines)

    def _sockets(self) -> list[tuple[str, int, str, int, str]]:
        holder = self._netns_pid if self._netns_pid is not None else self.pid
        if holder is None:
            raise NetworkError("ryu-manager was never started")
        return tcp_sockets(holder)


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a log, or a note saying there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def tcp_sockets(pid: int) -> list[tuple[str, int, str, int, str]]:
    """(local ip, local port, remote ip, remote port, state) in pid's network namespace."""
    rows = []
    try:
        with open(f"/proc/{pid}/net/tcp") as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                local, remote, state = fields[1], fields[2], fields[3]
                lip, lport = local.split(":")
                rip, rport = remote.split(":")
                rows.append((_hex_ip(lip), int(lport, 16), _hex_ip(rip), int(rport, 16), state))
    except (OSError, StopIteration, IndexError, ValueError):
        pass
    return rows


def _hex_ip(text: str) -> str:
    raw = int(text, 16).to_bytes(4, "little")
    return ".".join(str(b) for b in raw)
