"""Helpers for switch_ext network tests: namespaces/veths, stats file, fake controller.

Kept out of conftest.py under a unique module name so tests can import it no matter
which other conftest modules the suite has.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import socket
import struct
import subprocess

# ---------------------------------------------------------------------------------------
# Network helpers (tests marked `network`). Every name carries a run-specific prefix and
# only what this run created is ever deleted.


_COUNTER = itertools.count()
OFPT_HELLO = 0


def _run(cmd: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def network_available() -> str | None:
    """Why network tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ip", "ethtool"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


class Line:
    """N hosts, each in its own netns, wired by a veth to a switch port in the root ns.

    Host i has address 10.77.0.i/24 on interface ``{prefix}e{i}``; the switch side is
    ``{prefix}s{i}`` (OpenFlow port i).
    """

    def __init__(self, n_hosts: int = 2) -> None:
        self.prefix = f"sx{os.getpid()}{next(_COUNTER)}"
        self.n = n_hosts
        self.procs: list[subprocess.Popen] = []
        self.namespaces: list[str] = []
        self.links: list[str] = []

    def ns(self, i: int) -> str:
        return f"{self.prefix}h{i}"

    def sw_if(self, i: int) -> str:
        return f"{self.prefix}s{i}"

    def ip(self, i: int) -> str:
        return f"10.77.0.{i}"

    def setup(self) -> Line:
        for i in range(1, self.n + 1):
            ns, sw, host = self.ns(i), self.sw_if(i), f"{self.prefix}e{i}"
            _run(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
            _run(["ip", "link", "add", sw, "type", "veth", "peer", "name", host])
            self.links.append(sw)
            _run(["ip", "link", "set", host, "netns", ns])
            self.exec(i, ["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"])
            self.exec(i, ["ip", "addr", "add", f"{self.ip(i)}/24", "dev", host])
            self.exec(i, ["ip", "link", "set", "lo", "up"])
            self.exec(i, ["ip", "link", "set", host, "up"])
            _run(["sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1"], check=False)
            _run(["ip", "link", "set", sw, "up"])
            # Userspace switching needs real checksums and MTU-sized frames.
            _run(["ethtool", "-K", sw, "tx", "off", "tso", "off", "gso", "off"], check=False)
            self.exec(
                i, ["ethtool", "-K", host, "tx", "off", "tso", "off", "gso", "off"], check=False
            )
        return self

    def exec(self, i: int, cmd: list[str], check: bool = True, **kw):
        return _run(["ip", "netns", "exec", self.ns(i), *cmd], check=check, **kw)

    def popen(self, cmd: list[str], ns: int | None = None, **kw) -> subprocess.Popen:
        full = ["ip", "netns", "exec", self.ns(ns), *cmd] if ns else cmd
        p = subprocess.Popen(full, **kw)
        self.procs.append(p)
        return p

    def start_switch(
        self,
        binary: str,
        port_opts: dict[int, str] | None = None,
        args: list[str] | None = None,
        stats_file: str | None = None,
        stats_interval_ms: int = 50,
        log_path: str | None = None,
    ) -> subprocess.Popen:
        port_opts = port_opts or {}
        cmd = [binary, "--name", "s1", "--dpid", "1", "-v"]
        for i in range(1, self.n + 1):
            opt = port_opts.get(i, "")
            cmd += ["--port", f"{i}={self.sw_if(i)}" + (f",{opt}" if opt else "")]
        if stats_file:
            cmd += ["--stats-file", stats_file, "--stats-interval-ms", str(stats_interval_ms)]
        cmd += args or []
        if not log_path:
            return self.popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        # The child keeps its own descriptor; ours can close right away.
        with open(log_path, "w") as log:
            return self.popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def stop(self, p: subprocess.Popen) -> None:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)

    def cleanup(self) -> None:
        for p in reversed(self.procs):
            self.stop(p)
        for link in self.links:
            _run(["ip", "link", "del", link], check=False)
        for ns in self.namespaces:
            _run(["ip", "netns", "del", ns], check=False)


def read_stats(path: str) -> list[dict]:
    rows = []
    try:
        with open(path) as fh:
            for line in fh:
                if line.endswith("\n"):
                    rows.append(json.loads(line))
    except FileNotFoundError:
        pass
    return rows


class FakeController:
    """A scripted OpenFlow controller: one listening socket on loopback."""

    def __init__(self) -> None:
        self.port = free_tcp_port()
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", self.port))
        self.srv.listen(4)
        self.srv.settimeout(15)
        self.conn: socket.socket | None = None

    def accept(self) -> None:
        self.conn, _ = self.srv.accept()
        self.conn.settimeout(5)

    def recv(self) -> tuple[int, int, int, bytes]:
        assert self.conn is not None
        hdr = self._exact(8)
        version, typ, length, xid = struct.unpack("!BBHI", hdr)
        return version, typ, xid, hdr + self._exact(length - 8)

    def recv_type(self, want: int) -> tuple[int, bytes]:
        """Next message of type ``want`` (skipping e.g. port status or echo)."""
        for _ in range(50):
            _v, typ, xid, buf = self.recv()
            if typ == want:
                return xid, buf
        raise AssertionError(f"no message of type {want}")

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.conn.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def send(self, typ: int, xid: int, body: bytes = b"", version: int = 4) -> None:
        self.conn.sendall(struct.pack("!BBHI", version, typ, 8 + len(body), xid) + body)

    def handshake(self) -> None:
        self.accept()
        v, typ, _xid, _buf = self.recv()
        assert (v, typ) == (4, OFPT_HELLO)
        # Hello with a version bitmap element (only 1.3).
        self.send(OFPT_HELLO, 1, struct.pack("!HHI", 1, 8, 1 << 4))

    def close(self) -> None:
        if self.conn:
            self.conn.close()
            self.conn = None

    def shutdown(self) -> None:
        self.close()
        self.srv.close()
