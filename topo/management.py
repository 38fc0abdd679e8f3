"""An out-of-band management network between the run namespace and every host.

The controller (ryu-manager) lives in the run namespace; a scheme's host agents live in
the hosts.  The data plane must not carry their conversation: it would compete with the
traffic it is controlling and pass through the switches under test.  So, when a
:class:`~dcnlab.topo.network.Network` is built with ``management=True``:

- a Linux bridge ``<prefix>mg`` in the run namespace, address ``192.168.0.1/16``;
- per host (spec order, 1-based index i) a veth pair: ``<prefix>m<i>`` enslaved to the
  bridge, ``<prefix>hN-mg`` in the host with ``192.168.0.1 + i``/16.

192.168.0.0/16 cannot clash with the fabric, whose hosts are all in 10.0.0.0/8 (see
:func:`dcnlab.topo.spec.host_ip`); the only route added to a host is the connected /16
route of its management interface, so data-plane routing is untouched.  IPv6 is off (the
run namespace and the hosts are born with it off; the interfaces get it off explicitly
too), nothing is shaped or delayed, and the bridge has STP off so ports forward at once.
Everything sits in the run's namespaces and disappears with them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any

from .shell import lines
from .spec import TopologySpec

MGMT_NET = ipaddress.IPv4Network("192.168.0.0/16")
CONTROLLER_IP = str(MGMT_NET.network_address + 1)


class ManagementError(RuntimeError):
    """The management network could not be built."""


def management_address(spec: TopologySpec, host: str) -> str:
    """Management address of spec host ``host`` (stable: derived from spec order)."""
    names = [h.name for h in spec.hosts]
    if host not in names:
        raise KeyError(host)
    index = names.index(host) + 1
    address = MGMT_NET.network_address + 1 + index
    if address >= MGMT_NET.broadcast_address:
        raise ManagementError(f"too many hosts for {MGMT_NET}")
    return str(address)


def bridge_name(prefix: str) -> str:
    return f"{prefix}mg"


def host_interface(prefix: str, host: str) -> str:
    return f"{prefix}{host}-mg"


def add_management(holder: Any, prefix: str, hosts: Sequence[tuple[str, Any]]) -> None:
    """Build the bridge in ``holder``'s namespace and one veth per (spec name, host)."""
    bridge = bridge_name(prefix)
    plen = MGMT_NET.prefixlen
    cmds = [f"ip link add {bridge} type bridge stp_state 0 forward_delay 0",
            f"ip addr add {CONTROLLER_IP}/{plen} dev {bridge}",
            f"ip link set {bridge} up"]
    for index, (name, host) in enumerate(hosts, start=1):
        inner, outer = host_interface(prefix, name), f"{prefix}m{index}"
        # Created here, the host end is moved straight into the host's namespace: it never
        # exists in the root namespace, even for a moment.
        cmds += [f"ip link add {outer} type veth peer name {inner} netns {host.pid}",
                 f"ip link set {outer} master {bridge}",
                 f"ip link set {outer} up"]
    _run(holder, cmds, "run namespace")
    spec_index = {name: i for i, (name, _) in enumerate(hosts, start=1)}
    for name, host in hosts:
        inner = host_interface(prefix, name)
        address = MGMT_NET.network_address + 1 + spec_index[name]
        _run(host, [f"sysctl -qw net.ipv6.conf.{inner}.disable_ipv6=1",
                    f"ip addr add {address}/{plen} dev {inner}",
                    f"ip link set {inner} up"], name)


def _run(node: Any, cmds: list[str], where: str) -> None:
    # As few shell round trips per node as its pty's line length allows (shell.py);
    # "|| echo" marks the first failing command, and nothing after it runs.
    parts = [f"{{ {c} || {{ echo 'FAILED: {c}'; false; }}; }}" for c in cmds]
    for script in lines(parts, " && "):
        out = node.cmd(f"{script} 2>&1")
        if "FAILED:" in out:
            raise ManagementError(f"management network ({where}): {out.strip()}")
