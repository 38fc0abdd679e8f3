"""A lab for tests, without Mininet: plain network namespaces this test run creates.

- A management network: a bridge in the root namespace with this machine's side of it
  (``.1`` of a /24 in 100.64.0.0/10 that no address here overlaps) and a veth from every
  switch and host namespace to it.  The controller listens on ``.1``; the hosts' sshd
  on their own addresses.
- Hosts (:class:`EmulatedHosts`, and the hosts of :class:`EmulatedLab`): a namespace
  each, running a real OpenSSH server (Debian's openssh-server) with keys generated for
  the run; they share this machine's file system, as NFS-mounted lab servers would.
- Switches (:class:`EmulatedLab`): a namespace each with one ``dcnlab-switch``
  (switch_ext) process, connected to the controller over the management network, its
  ports veths cabled as a topology spec says (hosts' ``eth1``, and ``eth2``... of a
  multi-homed one, to their switch ports).
  They stand in for hardware: no link is emulated.

Everything is named with the run's prefix (``dl<pid>``) and removed in ``close()``: the
processes by the PIDs started here, then the namespaces (which takes their veths), the
bridge and the run's directory.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from waiting import wait_for

from dcnlab.topo.ext_switch import host_htb_commands

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
class Node:
    name: str
    netns: str
    address: str  # on the management network
    outside: str = ""  # its management veth's end on the bridge
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def ssh_address(self) -> str:
        return self.address


class _Run:
    """The run's prefix, directory, keys, management bridge and namespaces."""

    def __init__(self, prefix: str | None) -> None:
        self.prefix = prefix or f"dl{os.getpid() % 100000}"
        self.dir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.nodes: list[Node] = []
        self._made_privsep = False
        self._bridge: str | None = None
        self.subnet = _free_subnet()
        self.gateway = str(self.subnet.network_address + 1)

    def management(self) -> None:
        bridge = f"{self.prefix}br"
        _sh("ip", "link", "add", bridge, "type", "bridge")
        self._bridge = bridge
        _sh("ip", "addr", "add", f"{self.gateway}/24", "dev", bridge)
        _sh("ip", "link", "set", bridge, "up")

    def keys(self) -> None:
        for name in ("client_key", "host_key"):
            _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.dir / name))
        shutil.copy(self.dir / "client_key.pub", self.dir / "authorized_keys")
        if not PRIVSEP_DIR.exists():
            PRIVSEP_DIR.mkdir(mode=0o755)
            self._made_privsep = True

    def node(self, name: str, index: int) -> Node:
        """A namespace with a management address (.index of the subnet)."""
        netns = f"{self.prefix}{name}"
        _sh("ip", "netns", "add", netns)
        outside, inside = f"{self.prefix}m{index}", f"{self.prefix}i{index}"
        node = Node(name, netns, str(self.subnet.network_address + index), outside)
        self.nodes.append(node)
        _sh("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        _sh("ip", "link", "set", inside, "netns", netns)
        _sh("ip", "-n", netns, "link", "set", inside, "name", "mgmt")
        assert self._bridge is not None
        _sh("ip", "link", "set", outside, "master", self._bridge)
        _sh("ip", "link", "set", outside, "up")
        _sh("ip", "-n", netns, "addr", "add", f"{node.address}/24", "dev", "mgmt")
        _sh("ip", "-n", netns, "link", "set", "mgmt", "up")
        _sh("ip", "-n", netns, "link", "set", "lo", "up")
        return node

    def start(self, node: Node, argv: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(self.dir / log, "wb") as out:
            proc = subprocess.Popen(["ip", "netns", "exec", node.netns, *argv], stdout=out,
                                    stderr=subprocess.STDOUT)
        node.processes.append(proc)
        return proc

    def sshd(self, node: Node) -> None:
        config = self.dir / f"sshd_{node.name}.conf"
        config.write_text("\n".join([
            f"ListenAddress {node.address}", "Port 22", f"HostKey {self.dir / 'host_key'}",
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}",
            "PermitRootLogin prohibit-password", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
            f"PidFile {self.dir / f'sshd_{node.name}.pid'}", "Subsystem sftp internal-sftp",
            "LogLevel ERROR", ""]))
        proc = self.start(node, [SSHD, "-D", "-e", "-f", str(config)], f"sshd_{node.name}.log")
        wait_for(lambda: _listening(node.address, 22) or proc.poll() is not None, 10.0)
        if proc.poll() is not None:
            raise RuntimeError(f"sshd for {node.name} exited: "
                               f"{(self.dir / f'sshd_{node.name}.log').read_text()}")

    def close(self) -> None:
        for node in self.nodes:
            for proc in node.processes:
                if proc.poll() is None:
                    proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=10)
            # what runs in the namespace besides (sshd's per-login children, what the
            # tests started over SSH) lives in a namespace of this run: ours to end
            pids = subprocess.run(["ip", "netns", "pids", node.netns], capture_output=True,
                                  text=True).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run(["ip", "netns", "delete", node.netns], capture_output=True)
        if self._bridge is not None:
            subprocess.run(["ip", "link", "delete", self._bridge], capture_output=True)
        if self._made_privsep:
            with contextlib.suppress(OSError):
                PRIVSEP_DIR.rmdir()
        shutil.rmtree(self.dir, ignore_errors=True)


class EmulatedHosts:
    """``count`` hosts with sshd (no switches); the client's key is ``key``."""

    def __init__(self, count: int, prefix: str | None = None) -> None:
        self._run = _Run(prefix)
        self.hosts: list[Node] = []
        try:
            self._run.management()
            self._run.keys()
            for i in range(1, count + 1):
                host = self._run.node(f"h{i}", 100 + i)
                self._run.sshd(host)
                self.hosts.append(host)
        except BaseException:
            self.close()
            raise

    @property
    def key(self) -> Path:
        return self._run.dir / "client_key"

    @property
    def host_key(self) -> Path:
        """Every host's public host key (one for all: known_hosts lines)."""
        return self._run.dir / "host_key.pub"

    @property
    def gateway(self) -> str:
        """This machine's address on the management network."""
        return self._run.gateway

    def stop_sshd(self, host: Node) -> None:
        """The host's sshd goes away (a host lost mid-run)."""
        for proc in host.processes:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)

    def cut(self, host: Node, up: bool = False) -> None:
        """The host drops off the management network (a pulled cable, a crash), or
        comes back with ``up``; its data-plane links stay."""
        _sh("ip", "link", "set", host.outside, "up" if up else "down")

    def close(self) -> None:
        self._run.close()


class EmulatedLab(EmulatedHosts):
    """A topology spec's switches (switch_ext in namespaces, for hardware) and hosts
    (namespaces with sshd), cabled as the spec says; :meth:`lab_file` describes it."""

    def __init__(self, topology: str, prefix: str | None = None,
                 port_options: Sequence[str] = (), emulate_links: bool = False) -> None:
        """``port_options``: switch_ext ``--port`` options every port gets, as a
        hardware port has its rate (``rate=10000000``); ``emulate_links``: each port
        also gets its topology link's (rate, delay, jitter: what a lab operator starts
        switch_ext switches with for a topology such as twopath, whose paths differ by
        their links), and each host interface sends at its link's rate (htb, as on
        Mininet, as a NIC of that rate would)."""
        from dcnlab.topo.ext_switch import (
            ExtOptions,
            find_binary,
            plan_ports,
            switch_command,
        )
        from dcnlab.topo.ext_switch import port_options as link_port_options
        from dcnlab.topo.spec import parse

        self.topology = parse(topology)
        self.controller_port = random.randint(20000, 29999)
        self._run = _Run(prefix)
        self.hosts = []
        self.switches: list[Node] = []
        try:
            self._run.management()
            self._run.keys()
            for j, sw in enumerate(self.topology.switches, start=1):
                self.switches.append(self._run.node(sw.name, 10 + j))
            for i, h in enumerate(self.topology.hosts, start=1):
                host = self._run.node(h.name, 100 + i)
                self._run.sshd(host)
                self.hosts.append(host)
            ports = self._cable(emulate_links)
            binary = find_binary()
            for sw, node in zip(self.topology.switches, self.switches, strict=True):
                plans = plan_ports(self.topology, sw.name)
                argv = switch_command(
                    binary, sw.name, sw.dpid,
                    f"tcp:{self._run.gateway}:{self.controller_port}",
                    [(number, intf, [*port_options, *(
                        link_port_options(plans[number].params, plans[number].peer_is_host)
                        if emulate_links else [])])
                     for number, intf in sorted(ports[sw.name])],
                    ExtOptions(), None)
                self._run.start(node, argv, f"switch_{sw.name}.log")
        except BaseException:
            self.close()
            raise

    def _cable(self, shape_hosts: bool) -> dict[str, list[tuple[int, str]]]:
        """Every link of the topology as a veth pair between two namespaces; returns each
        switch's (port number, interface)."""
        prefix = self._run.prefix
        netns = {n.name: n.netns for n in [*self.switches, *self.hosts]}
        ports: dict[str, list[tuple[int, str]]] = {sw.name: [] for sw in self.topology.switches}
        for k, link in enumerate(self.topology.links):
            a, b = f"{prefix}l{k}a", f"{prefix}l{k}b"
            _sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            for end, node, port in ((a, link.a, link.a_port), (b, link.b, link.b_port)):
                _sh("ip", "link", "set", end, "netns", netns[node])
                if node in ports:
                    ports[node].append((port, end))
                    _sh("ip", "-n", netns[node], "link", "set", end, "up")
        for h in self.topology.hosts:
            ns = netns[h.name]
            for index, iface in enumerate(h.interfaces):  # eth1, eth2, ... in spec order
                k, link = next((k, lk) for k, lk in enumerate(self.topology.links)
                               if (lk.a, lk.a_port) == (h.name, index)
                               or (lk.b, lk.b_port) == (h.name, index))
                host_end = f"{prefix}l{k}{'a' if link.a == h.name else 'b'}"
                dev = f"eth{index + 1}"
                _sh("ip", "-n", ns, "link", "set", host_end, "name", dev)
                _sh("ip", "-n", ns, "link", "set", dev, "address", iface.mac)
                _sh("ip", "-n", ns, "addr", "add", f"{iface.ip}/{iface.prefixlen}", "dev", dev)
                _sh("ip", "-n", ns, "link", "set", dev, "up")
                for off in ("tx", "rx", "sg", "tso", "gso", "gro"):  # as Mininet hosts do
                    subprocess.run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, off,
                                    "off"], capture_output=True)
                rate = link.params.rate_mbit
                if shape_hosts and rate is not None:
                    _sh("ip", "netns", "exec", ns, "sh", "-c", host_htb_commands(dev, rate))
        return ports

    def lab_file(self) -> dict[str, Any]:
        """The lab file (as a mapping) that describes this lab."""
        by_name = {h.name: h for h in self.topology.hosts}
        return {
            "controller": {"listen": f"{self._run.gateway}:{self.controller_port}"},
            "ssh": {"user": "root", "key": str(self.key), "connect_timeout": "5s"},
            "switch_kind": "ext", "python": sys.executable,
            "switches": [{"dpid": sw.dpid, "name": sw.name}
                         for sw in self.topology.switches],
            "hosts": [{"name": n.name, "ssh": n.address, "interface": "eth1",
                       "address": by_name[n.name].ip,
                       "switch": by_name[n.name].interfaces[0].switch,
                       "port": by_name[n.name].interfaces[0].port,
                       "extra_interfaces": [
                           {"interface": f"eth{k + 1}", "address": x.ip, "switch": x.switch,
                            "port": x.port}
                           for k, x in enumerate(by_name[n.name].interfaces) if k > 0]}
                      for n in self.hosts],
        }


def _listening(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        try:
            s.connect((address, port))
            return True
        except OSError:
            return False
