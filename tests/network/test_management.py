"""Management network: the controller's namespace reaches every host out of band.

The data plane must be exactly what it is without it (routes, addresses, pings through
the switches), and nothing of it may outlive the run.
"""

from __future__ import annotations

import os
import re

import pytest

from dcnlab.topo.management import CONTROLLER_IP, host_interface
from dcnlab.topo.network import Network, NetworkError

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)"),
]


def test_management_network_reaches_hosts_and_leaves_data_plane_alone() -> None:
    with Network("spineleaf:1,2,2", app="dcnlab.apps.single_path", switch="ext",
                 management=True) as net:
        addresses = {h.name: net.management_ip(h.name) for h in net.spec.hosts}
        assert len(set(addresses.values())) == len(addresses)
        for name, address in addresses.items():
            assert address.startswith("192.168."), address
            # From the run namespace, where ryu-manager runs.
            out = net.ns_cmd(f"ping -c1 -W2 {address}")
            assert " 0% packet loss" in out, (name, out)
            host = net.host(name)
            iface = host_interface(net.prefix, name)
            assert host.cmd(f"cat /proc/sys/net/ipv6/conf/{iface}/disable_ipv6").strip() == "1"
            routes = host.cmd("ip -4 route show").strip().splitlines()
            # Exactly the fabric's connected route plus the management /16, no default.
            assert sorted(r.split()[0] for r in routes) == ["10.0.0.0/8", "192.168.0.0/16"], \
                routes
            assert not any(r.startswith("default") for r in routes)
            assert f"dev {iface}" in next(r for r in routes if r.startswith("192.168."))
            # The host reaches the controller's side too (agents answer on this path).
            assert " 0% packet loss" in host.cmd(f"ping -c1 -W2 {CONTROLLER_IP}")
        # Data-plane traffic still leaves through the fabric interface.
        h1, h4 = net.host("h1"), net.host("h4")
        route = h1.cmd(f"ip route get {h4.IP()}")
        assert re.search(rf"dev {re.escape(net.prefix)}h1-eth0\b", route), route
        assert net.mn.pingAll(timeout=2) == 0
        # No management interface in the root namespace, bridge only in the run namespace.
        assert not [n for n in os.listdir("/sys/class/net") if n.startswith(net.prefix)]
        assert f"{net.prefix}mg" in net.ns_cmd("ip -o link show type bridge")
    assert net.leftovers() == {"processes": [], "links": [], "dirs": []}


def test_management_ip_needs_the_option() -> None:
    with Network("spineleaf:1,1,2", app="dcnlab.apps.single_path", switch="ext") as net:
        with pytest.raises(NetworkError):
            net.management_ip("h1")
        assert not [r for r in net.host("h1").cmd("ip -4 route show").splitlines()
                    if r.startswith("192.168.")]
