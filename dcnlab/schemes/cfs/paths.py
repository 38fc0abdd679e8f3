"""Source routing for multi-homed hosts: a subflow bound to an interface's address leaves
by that interface.

Every interface of a host gets a routing table of its own (100 + index) with the
fabric's prefix through that interface, and a rule ``from <address> lookup <table>``;
reverse-path filtering is off in the host, since replies to the second address arrive on
an interface the main table does not route the peer through.  Applied through the
fabric's host: inside a Mininet host's own network namespace (which the run created and
removes), or on a lab server (tables 100 and up, and their rules, replaced each run).
"""

from __future__ import annotations

from typing import Any

FABRIC_PREFIX = "10.0.0.0/8"


def source_routing(net: Any, host: str) -> list[str]:
    """Sets up the rules in ``host``; returns its interface addresses in spec order."""
    spec_host = net.spec.host(host)
    node = net.host(host)
    addrs = []
    cmds = ["sysctl -qw net.ipv4.conf.all.rp_filter=0"]
    for index, iface in enumerate(spec_host.interfaces):
        dev = net.interface(host, index)
        table = 100 + index
        cmds += [
            f"sysctl -qw net.ipv4.conf.{dev}.rp_filter=0",
            f"ip route replace {FABRIC_PREFIX} dev {dev} src {iface.ip} table {table}",
            f"ip rule del from {iface.ip} lookup {table} 2>/dev/null; "
            f"ip rule add from {iface.ip} lookup {table}",
        ]
        addrs.append(iface.ip)
    out = node.cmd("; ".join(cmds) + "; echo done")
    if not out.strip().endswith("done") or "rror" in out or "Cannot" in out:
        raise RuntimeError(f"source routing in {host} failed: {out.strip()}")
    return addrs


def kernel_mptcp(net: Any, client: str, server: str) -> None:
    """The kernel's MPTCP as a reference: ``client`` opens one extra subflow from each of
    its further interfaces (``ip mptcp endpoint ... subflow``), both ends accept them."""
    limits = "ip mptcp limits set subflow 8 add_addr_accepted 8"
    cmds = ["sysctl -qw net.mptcp.enabled=1", limits, "ip mptcp endpoint flush"]
    for index, iface in enumerate(net.spec.host(client).interfaces[1:], start=1):
        cmds.append(f"ip mptcp endpoint add {iface.ip} dev {net.interface(client, index)} "
                    "subflow")
    for host, lines in ((client, cmds), (server, ["sysctl -qw net.mptcp.enabled=1", limits])):
        out = net.host(host).cmd("; ".join(lines) + "; echo done")
        if not out.strip().endswith("done") or "rror" in out or "Cannot" in out:
            raise RuntimeError(f"MPTCP set-up in {host} failed: {out.strip()}")


def mptcp_endpoints(net: Any, host: str) -> None:
    """The kernel's MPTCP in a multi-homed ``host``: one ``subflow`` endpoint per further
    interface (its first address opens the connection), so an MPTCP connection from it
    uses every path; the peer's defaults (2 subflows accepted) suffice.  Plain TCP and
    dcnlab-mp's subflows are not MPTCP sockets and are not affected."""
    cmds = ["sysctl -qw net.mptcp.enabled=1", "ip mptcp endpoint flush"]
    for index, iface in enumerate(net.spec.host(host).interfaces[1:], start=1):
        cmds.append(f"ip mptcp endpoint add {iface.ip} dev {net.interface(host, index)} "
                    "subflow")
    out = net.host(host).cmd("; ".join(cmds) + "; echo done")
    if not out.strip().endswith("done") or "rror" in out or "Cannot" in out:
        raise RuntimeError(f"MPTCP endpoints in {host} failed: {out.strip()}")
