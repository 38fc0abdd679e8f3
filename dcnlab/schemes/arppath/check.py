"""The ``arppath`` part of ``dcnlab check``: paths learned in the data plane.

Host pairs on different edge switches exchange one ping each (their ARP entries are
resolved: ``dcnlab check`` pinged every pair before); once the app has read every switch's
entries in answer to a request sent after the last ping (not "two rounds later": a state
file reports round counts late, and a round may have read its first switches before the
pings), the forwarding entries it reports must give each pair a whole path both ways
(each address is learned from its own frames at every switch they cross, so the request
and the reply leave both), and the controller must not have answered the ARP of any
known host (ARP-Path floods requests in the data plane; hosts answer them)."""

from __future__ import annotations

import random
import time
from typing import Any

from dcnlab.controller.view import NetworkView
from dcnlab.schemes.tcppath.polling import read_after
from dcnlab.topo.network import Network
from dcnlab.topo.spec import TopologySpec

from .view import from_state

PAIRS = 12
PING_TIMEOUT_S = 5
READ_TIMEOUT_S = 30.0
CONTROLLER_ARP = ("arp_replied", "arp_relayed", "arp_probed")


def _pairs(spec: TopologySpec, count: int, seed: int = 1) -> list[tuple[str, str]]:
    edge = {h.name: h.interfaces[0].switch for h in spec.hosts}
    pairs = [(a, b) for a in edge for b in edge if edge[a] != edge[b]]
    random.Random(seed).shuffle(pairs)
    return pairs[:count]


def _read_after(net: Network, moment: float, dpids: list[int],
                timeout: float = READ_TIMEOUT_S) -> tuple[dict[str, Any], bool]:
    """The app's state once every switch of ``dpids`` had its entries read after
    ``moment``, and whether that happened (else the last state within ``timeout``, for
    the failure to show)."""
    deadline = time.time() + timeout
    state: dict[str, Any] = net.state() or {}
    while not (fresh := read_after(state, "arppath", moment, dpids)) and time.time() < deadline:
        time.sleep(0.2)
        state = net.state() or {}
    return state, fresh


def _ping_lost(net: Network, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(a, b) for a, b in pairs if " 0% packet loss" not in net.host(a).cmd(
        f"ping -c1 -W{PING_TIMEOUT_S} {net.host(b).IP()}")]


def paths_learned(net: Network, spec: TopologySpec) -> tuple[dict[str, Any], list[str]]:
    pairs = _pairs(spec, PAIRS)
    lost = _ping_lost(net, pairs)
    state, fresh = _read_after(net, time.time(), [sw.dpid for sw in spec.switches])
    section = state.get("arppath", {})
    learned = from_state(section)
    view = NetworkView.from_topology(spec)
    mac = {h.name: h.mac for h in view.hosts}
    missing = [(a, b) for a, b in pairs
               if learned.path(view, mac[a], mac[b]) is None
               or learned.path(view, mac[b], mac[a]) is None]
    counters = state.get("counters", {})
    answered = sum(int(counters.get(name, 0)) for name in CONTROLLER_ARP)
    fields = {"arppath_pairs": len(pairs), "arppath_pairs_with_paths": len(pairs) - len(missing),
              "arppath_explorations": counters.get("arppath_explorations", 0),
              "arppath_repaired": counters.get("arppath_repaired", 0),
              "arppath_entries_max": section.get("entries_max", 0),
              "arppath_controller_arp": answered}
    failures = []
    if lost:
        failures.append(f"arppath: pings lost between {lost}")
    if not fresh:
        failures.append(f"arppath: the app did not read every switch's entries within "
                        f"{READ_TIMEOUT_S:g} s of the pings (read at: "
                        f"{section.get('polling', {}).get('read_at')})")
    if missing:
        failures.append(f"arppath: no learned path both ways between {missing} (of "
                        f"{len(pairs)} pairs)")
    if answered:
        failures.append(f"arppath: the controller answered {answered} ARP packet(s); ARP-Path "
                        "should carry every ARP of a known host in the data plane")
    return fields, failures
