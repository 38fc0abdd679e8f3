"""The controller's view of the network: switches, fabric links and host locations.

Switches are networkx nodes keyed by datapath id; a fabric link is an edge whose
``ports`` attribute maps each end's dpid to its port number and whose ``up`` flag
follows port status.  Hosts are kept apart from the graph (they are leaves and never
transit), each interface as a :class:`HostLocation`.

The view is built either from a topology spec (``from_topology``) or piece by piece
from LLDP discovery and ARP learning in a real lab.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property

import networkx as nx

from dcnlab.model.topology import TopologySpec


@dataclass(frozen=True)
class HostLocation:
    ip: str
    mac: str
    dpid: int
    port: int
    name: str = ""

    @cached_property
    def ip_int(self) -> int:
        return int(ipaddress.IPv4Address(self.ip))


class NetworkView:
    def __init__(self) -> None:
        self.graph = nx.Graph()
        self._hosts_by_ip: dict[str, HostLocation] = {}
        # Bumped on every change, so caches derived from the view know when to refresh.
        self.version = 0
        self._sorted_hosts: tuple[int, list[HostLocation], dict[int, list[HostLocation]]] = (
            -1, [], {})

    # -- switches and links -------------------------------------------------

    def add_switch(self, dpid: int, **attrs: object) -> None:
        self.graph.add_node(dpid, **attrs)
        self.version += 1

    def remove_switch(self, dpid: int) -> None:
        if dpid in self.graph:
            self.graph.remove_node(dpid)
            self.version += 1

    @property
    def switches(self) -> list[int]:
        return sorted(self.graph.nodes)

    def add_link(self, a: int, a_port: int, b: int, b_port: int) -> None:
        if a == b:
            raise ValueError(f"self-loop on switch {a} is not a fabric link")
        self.graph.add_edge(a, b, ports={a: a_port, b: b_port}, up=True)
        self.version += 1

    def remove_link(self, a: int, b: int) -> None:
        if self.graph.has_edge(a, b):
            self.graph.remove_edge(a, b)
            self.version += 1

    def set_port_up(self, dpid: int, port: int, up: bool) -> tuple[int, int] | None:
        """Mark the fabric link on (dpid, port) up or down.

        Returns the link's ends when the state changed, None otherwise (a host port,
        an unknown port, or no change).
        """
        peer = self.peer(dpid, port)
        if peer is None:
            return None
        edge = self.graph.edges[dpid, peer[0]]
        if edge["up"] == up:
            return None
        edge["up"] = up
        self.version += 1
        return (dpid, peer[0])

    def peer(self, dpid: int, port: int) -> tuple[int, int] | None:
        """The (dpid, port) at the far end of a fabric port, or None."""
        if dpid not in self.graph:
            return None
        for nbr, data in self.graph.adj[dpid].items():
            if data["ports"][dpid] == port:
                return nbr, data["ports"][nbr]
        return None

    def fabric_ports(self, dpid: int) -> set[int]:
        if dpid not in self.graph:
            return set()
        return {data["ports"][dpid] for data in self.graph.adj[dpid].values()}

    def live_graph(self) -> nx.Graph:
        """The subgraph of links that are up (a view, not a copy)."""
        return nx.subgraph_view(self.graph, filter_edge=lambda a, b: self.graph.edges[a, b]["up"])

    def links(self) -> Iterator[tuple[int, int, int, int, bool]]:
        """(a, a_port, b, b_port, up) for every fabric link, a < b."""
        for a, b, data in self.graph.edges(data=True):
            a, b = min(a, b), max(a, b)
            yield a, data["ports"][a], b, data["ports"][b], data["up"]

    # -- hosts ---------------------------------------------------------------

    def add_host(self, host: HostLocation) -> bool:
        """Record a host interface; returns True when the view changed."""
        if host.port in self.fabric_ports(host.dpid):
            return False  # a packet from a fabric port never locates a host
        if self._hosts_by_ip.get(host.ip) == host:
            return False
        self._hosts_by_ip[host.ip] = host
        self.version += 1
        return True

    def remove_hosts_on(self, dpid: int, port: int) -> list[HostLocation]:
        gone = [h for h in self._hosts_by_ip.values() if (h.dpid, h.port) == (dpid, port)]
        for h in gone:
            del self._hosts_by_ip[h.ip]
        self.version += len(gone)
        return gone

    def host_by_ip(self, ip: str) -> HostLocation | None:
        return self._hosts_by_ip.get(ip)

    def _host_index(self) -> tuple[list[HostLocation], dict[int, list[HostLocation]]]:
        version, ordered, by_dpid = self._sorted_hosts
        if version != self.version:
            ordered = sorted(self._hosts_by_ip.values(), key=lambda h: h.ip_int)
            by_dpid = {}
            for h in ordered:
                by_dpid.setdefault(h.dpid, []).append(h)
            self._sorted_hosts = (self.version, ordered, by_dpid)
        return ordered, by_dpid

    @property
    def hosts(self) -> list[HostLocation]:
        """Every host interface, ordered by address."""
        return list(self._host_index()[0])

    def hosts_on(self, dpid: int) -> list[HostLocation]:
        return list(self._host_index()[1].get(dpid, ()))

    def host_ports(self, dpid: int) -> set[int]:
        return {h.port for h in self._hosts_by_ip.values() if h.dpid == dpid}

    # -- construction ----------------------------------------------------------

    @classmethod
    def from_topology(cls, topo: TopologySpec) -> NetworkView:
        view = cls()
        dpid_of = {s.name: s.dpid for s in topo.switches}
        for s in topo.switches:
            view.add_switch(s.dpid, name=s.name, tier=s.tier, pod=s.pod)
        for lk in topo.fabric_links():
            view.add_link(dpid_of[lk.a], lk.a_port, dpid_of[lk.b], lk.b_port)
        for h in topo.hosts:
            for iface in h.interfaces:
                view.add_host(
                    HostLocation(iface.ip, iface.mac, dpid_of[iface.switch], iface.port, h.name)
                )
        return view

    def copy(self) -> NetworkView:
        other = NetworkView()
        other.graph = self.graph.copy()
        for (a, b) in other.graph.edges:
            # networkx copies edge dicts shallowly: give each copy its own ports dict.
            other.graph.edges[a, b]["ports"] = dict(self.graph.edges[a, b]["ports"])
        other._hosts_by_ip = dict(self._hosts_by_ip)
        return other


def dpids_of(hosts: Iterable[HostLocation]) -> set[int]:
    return {h.dpid for h in hosts}
