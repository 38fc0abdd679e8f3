"""Lab hosts for tests, without Mininet: each host is a network namespace this test run
creates, reached from the root namespace over its own management veth (a /30 in
100.64.0.0/10, picked so it clashes with no address on this machine), and running a real
OpenSSH server (Debian's openssh-server) with keys generated for the run.

Everything is named with the run's prefix (``dl<pid>``) and removed in ``close()``: the
sshd processes by the PIDs started here, then the namespaces (which takes their veths).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from waiting import wait_for

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = Path("/run/sshd")  # sshd refuses to start without it


def _sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def available() -> str | None:
    """None when emulated lab hosts can be built here, else why not."""
    if os.geteuid() != 0:
        return "needs root (namespaces, veths, sshd)"
    if not Path(SSHD).exists():
        return f"{SSHD} is missing (apt-get install openssh-server: scripts/setup.sh)"
    if shutil.which("ssh-keygen") is None:
        return "ssh-keygen is missing (openssh-client)"
    return None


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 100.64.0.0/10 that overlaps no address on this machine."""
    text = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    used = [ipaddress.IPv4Interface(word).network for line in text.splitlines()
            for word in line.split()[3:4]]
    for _ in range(100):
        net = ipaddress.IPv4Network(f"100.{random.randint(64, 127)}.{random.randint(0, 255)}"
                                    ".0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise RuntimeError("no free /24 in 100.64.0.0/10")


@dataclass
class LabHost:
    name: str
    netns: str
    ssh_address: str  # the namespace side of its management veth
    sshd: subprocess.Popen[bytes] | None = None


class EmulatedHosts:
    """``count`` namespaces with sshd, one key pair for the client (``key``)."""

    def __init__(self, count: int, prefix: str | None = None) -> None:
        self.prefix = prefix or f"dl{os.getpid() % 100000}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.hosts: list[LabHost] = []
        self._made_privsep = False
        self._subnet = _free_subnet()
        try:
            self._keys()
            for i in range(1, count + 1):
                self.hosts.append(self._host(i))
        except BaseException:
            self.close()
            raise

    @property
    def key(self) -> Path:
        return self.dir / "client_key"

    def _keys(self) -> None:
        for name in ("client_key", "host_key"):
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.dir / name))
        shutil.copy(self.dir / "client_key.pub", self.dir / "authorized_keys")
        if not PRIVSEP_DIR.exists():
            PRIVSEP_DIR.mkdir(mode=0o755)
            self._made_privsep = True

    def _host(self, i: int) -> LabHost:
        name = f"h{i}"
        netns = f"{self.prefix}{name}"
        outside, inside = f"{self.prefix}m{i}", f"{self.prefix}n{i}"
        base = int(self._subnet.network_address) + 4 * (i - 1)
        ours, theirs = ipaddress.IPv4Address(base + 1), ipaddress.IPv4Address(base + 2)
        _sh("ip", "netns", "add", netns)
        host = LabHost(name, netns, str(theirs))
        self.hosts.append(host)  # close() removes it even if the rest fails
        _sh("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        _sh("ip", "link", "set", inside, "netns", netns)
        _sh("ip", "addr", "add", f"{ours}/30", "dev", outside)
        _sh("ip", "link", "set", outside, "up")
        _sh("ip", "-n", netns, "addr", "add", f"{theirs}/30", "dev", inside)
        _sh("ip", "-n", netns, "link", "set", inside, "up")
        _sh("ip", "-n", netns, "link", "set", "lo", "up")
        config = self.dir / f"sshd_{name}.conf"
        config.write_text("\n".join([
            f"ListenAddress {theirs}", "Port 22", f"HostKey {self.dir / 'host_key'}",
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            f"PidFile {self.dir / f'sshd_{name}.pid'}", "Subsystem sftp internal-sftp",
            "LogLevel ERROR", ""]))
        log = open(self.dir / f"sshd_{name}.log", "wb")  # noqa: SIM115 - sshd keeps it
        host.sshd = subprocess.Popen(["ip", "netns", "exec", netns, SSHD, "-D", "-e", "-f",
                                      str(config)], stdout=log, stderr=subprocess.STDOUT)
        log.close()
        wait_for(lambda: _listening(str(theirs)) or host.sshd.poll() is not None, 10.0)
        if host.sshd.poll() is not None:
            raise RuntimeError(f"sshd for {name} exited: "
                               f"{(self.dir / f'sshd_{name}.log').read_text()}")
        self.hosts.pop()  # appended again by the caller
        return host

    def stop_sshd(self, host: LabHost) -> None:
        """The host's sshd goes away (a host lost mid-run)."""
        if host.sshd is not None and host.sshd.poll() is None:
            host.sshd.kill()
            host.sshd.wait(timeout=10)

    def close(self) -> None:
        for host in self.hosts:
            with contextlib.suppress(Exception):
                self.stop_sshd(host)
            subprocess.run(["ip", "netns", "delete", host.netns], capture_output=True)
        if self._made_privsep:
            with contextlib.suppress(OSError):
                PRIVSEP_DIR.rmdir()
        shutil.rmtree(self.dir, ignore_errors=True)


def _listening(address: str) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        try:
            s.connect((address, 22))
            return True
        except OSError:
            time.sleep(0.05)
            return False
