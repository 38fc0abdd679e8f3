"""A switch's ports as the data-plane pipelines (TCP-Path's, ARP-Path's) see them: live
fabric ports, every fabric port, host ports, and the ports leading up (towards switches
farther from the hosts, for valley-free flooding)."""

from __future__ import annotations

from dataclasses import dataclass

from dcnlab.controller.view import NetworkView


@dataclass(frozen=True)
class SwitchPorts:
    """What the pipeline of one switch depends on."""

    fabric: tuple[int, ...]  # live fabric ports
    all_fabric: tuple[int, ...]  # every fabric port (copies may arrive on any)
    hosts: tuple[tuple[str, int], ...]  # (mac, port) of the hosts on this switch
    up: tuple[int, ...] = ()  # fabric ports to switches farther from the hosts than this one


def live_peer(view: NetworkView, dpid: int, port: int) -> tuple[int, int] | None:
    """The (switch, port) at the other end of a fabric port whose link is up."""
    far = view.peer(dpid, port)
    if far is None or not view.graph.edges[dpid, far[0]]["up"]:
        return None
    return far


def levels(view: NetworkView) -> dict[int, int]:
    """Each switch's distance (in links, whatever their state) from a switch with hosts:
    edges 0, spines and aggregation switches 1, cores 2."""
    level = {d: 0 for d in view.switches if view.hosts_on(d)}
    frontier = list(level)
    while frontier:
        nxt = []
        for d in frontier:
            for n in view.graph.adj[d]:
                if n not in level:
                    level[n] = level[d] + 1
                    nxt.append(n)
        frontier = nxt
    return level


def switch_ports(view: NetworkView, dpid: int) -> SwitchPorts:
    all_fabric = tuple(sorted(view.fabric_ports(dpid)))
    level = levels(view)
    up = []
    for port in all_fabric:
        far = view.peer(dpid, port)
        if far is not None and level.get(far[0], 0) > level.get(dpid, 0):
            up.append(port)
    return SwitchPorts(tuple(p for p in all_fabric if live_peer(view, dpid, p) is not None),
                       all_fabric,
                       tuple(sorted((h.mac, h.port) for h in view.hosts_on(dpid))),
                       tuple(up))


def is_dead_end(ports: SwitchPorts) -> bool:
    """An edge switch: every fabric port leads up, so a copy that came down to it goes on
    only to one of its own hosts (valley-free flooding never sends it back up)."""
    return bool(ports.up) and set(ports.all_fabric) <= set(ports.up)
