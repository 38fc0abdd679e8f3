"""Rule compilation, replayed through the in-memory OpenFlow table model.

For every host pair the compiled entries must deliver along every equal-cost path
(ECMP) or along exactly one (single path), never loop and never black-hole; and still
so after any single fabric link fails and the controller recompiles.
"""

from __future__ import annotations

import random
from functools import cache
from ipaddress import IPv4Network

import networkx as nx
import pytest

from dcnlab.controller.compiler import compile_policy, destinations
from dcnlab.controller.oftable import FakeNetwork, tcp_packet
from dcnlab.controller.rules import PRIO_HOST
from dcnlab.controller.view import HostLocation, NetworkView
from dcnlab.topo.spec import parse

SPECS = ["fattree:4", "fattree:6", "fattree:8", "spineleaf:4,4,20", "threelayer",
         "dumbbell:16,2,4"]
POLICIES = ["groups", "striped"]


@cache
def _shortest_path_counts(spec: str) -> dict[tuple[int, int], int]:
    view = NetworkView.from_topology(parse(spec))
    edges = sorted({h.dpid for h in view.hosts})
    counts = {}
    for a in edges:
        for b in edges:
            counts[a, b] = 1 if a == b else sum(1 for _ in nx.all_shortest_paths(view.graph, a, b))
    return counts


def _check_all_pairs(view: NetworkView, net: FakeNetwork, policy: str,
                     expected_paths: dict[tuple[int, int], int] | None) -> None:
    for src in view.hosts:
        for dst in view.hosts:
            if src is dst:
                continue
            trace = net.trace(src.ip, tcp_packet(src, dst))
            where = f"{src.ip} -> {dst.ip}"
            assert trace.clean, f"{where}: {trace}"
            assert set(trace.paths) == {dst.ip}, f"{where}: delivered to {trace.paths}"
            if policy == "striped":
                assert trace.paths[dst.ip] == 1, where
            elif expected_paths is not None:
                assert trace.paths[dst.ip] == expected_paths[src.dpid, dst.dpid], where


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("spec", SPECS)
def test_every_pair_every_equal_cost_path(spec: str, policy: str) -> None:
    view = NetworkView.from_topology(parse(spec))
    net = FakeNetwork(view)
    net.install(compile_policy(view, policy))
    _check_all_pairs(view, net, policy, _shortest_path_counts(spec))


def _links_to_fail(spec: str) -> list[tuple[int, int]]:
    view = NetworkView.from_topology(parse(spec))
    links = [(a, b) for a, _, b, _, _ in view.links()]
    if len(links) <= 40:
        return links  # every single link
    # Larger fabrics are link-symmetric within a tier pair (any edge-agg link is like any
    # other): one link of each tier pair, plus a seeded sample for what symmetry misses.
    tier = {d: view.graph.nodes[d]["tier"] for d in view.switches}
    per_pair: dict[frozenset[str], tuple[int, int]] = {}
    for a, b in links:
        per_pair.setdefault(frozenset((tier[a], tier[b])), (a, b))
    return sorted(set(per_pair.values()) | set(random.Random(7).sample(links, 2)))


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("spec", ["fattree:4", "spineleaf:4,4,4", "threelayer",
                                  "fattree:6", "fattree:8", "spineleaf:4,4,20"])
def test_single_link_failure_recompiles_to_full_reachability(spec: str, policy: str) -> None:
    view = NetworkView.from_topology(parse(spec))
    net = FakeNetwork(view)
    net.install(compile_policy(view, policy))
    for a, b in _links_to_fail(spec):
        port = view.graph.edges[a, b]["ports"][a]
        assert view.set_port_up(a, port, False) == (a, b)
        net.install(compile_policy(view, policy))  # sends only the differences
        _check_all_pairs(view, net, policy, None)
        # no surviving path crosses the failed link: removing it changed nothing
        view.set_port_up(a, port, True)
        net.install(compile_policy(view, policy))


def test_failure_changes_only_affected_switches() -> None:
    view = NetworkView.from_topology(parse("fattree:4"))
    before = compile_policy(view, "groups")
    edge = next(d for d in view.switches if view.graph.nodes[d]["tier"] == "edge")
    agg = next(iter(view.graph.adj[edge]))
    view.set_port_up(edge, view.graph.edges[edge, agg]["ports"][edge], False)
    after = compile_policy(view, "groups")
    changed = {d for d in view.switches if before[d] != after[d]}
    assert edge in changed and agg in changed
    assert len(changed) < len(view.switches)  # the other pods' edges keep their entries


@pytest.mark.parametrize("k", [4, 8, 16])
def test_aggregation_keeps_tables_small(k: int) -> None:
    view = NetworkView.from_topology(parse(f"fattree:{k}"))
    for policy in POLICIES:
        rules = compile_policy(view, policy)
        most = max(len(r.flows) for r in rules.values())
        # base entries (3) + own hosts/racks/pods (<= k) + default or suffix entries (<= k/2)
        assert most <= 3 + k + k // 2 + 2, (policy, most)
        groups = max(len(r.groups) for r in rules.values())
        assert groups <= (1 if policy == "groups" else 0)


def test_arbitrary_addresses_fall_back_to_host_routes() -> None:
    # A real lab: hosts learned with addresses that do not follow the rack layout.
    view = NetworkView.from_topology(parse("spineleaf:2,3,2"))
    rng = random.Random(3)
    for h in list(view.hosts):
        view.remove_hosts_on(h.dpid, h.port)
        ip = f"192.168.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        view.add_host(HostLocation(ip, h.mac, h.dpid, h.port))
    assert all(d.prefix.prefixlen == 32 for d in destinations(view))
    for policy in POLICIES:
        net = FakeNetwork(view)
        net.install(compile_policy(view, policy))
        _check_all_pairs(view, net, policy, None)


def test_unknown_destinations_are_dropped_not_looped() -> None:
    view = NetworkView.from_topology(parse("fattree:4"))
    net = FakeNetwork(view)
    net.install(compile_policy(view, "groups"))
    src = view.hosts[0]
    for ghost in ("10.0.0.9", "10.0.7.1", "10.3.1.77", "10.9.0.1", "192.0.2.1"):
        dst = HostLocation(ghost, "02:00:00:00:00:99", 0, 0)
        trace = net.trace(src.ip, tcp_packet(src, dst))
        assert not trace.paths and not trace.loops and trace.black_holes, (ghost, trace)


def test_host_entries_only_on_their_switch() -> None:
    view = NetworkView.from_topology(parse("fattree:4"))
    rules = compile_policy(view, "groups")
    for dpid, r in rules.items():
        hosts = [f for f in r.flows if f.priority == PRIO_HOST]
        assert len(hosts) == len(view.hosts_on(dpid))


def test_ecmp_groups_rotate_bucket_order_per_switch() -> None:
    # Same hash at every hop must not pick the same bucket position (hash polarization).
    view = NetworkView.from_topology(parse("fattree:4"))
    rules = compile_policy(view, "groups")
    orders = {tuple(b.watch_port for b in g.buckets) for r in rules.values()
              for g in r.groups.values()}
    assert len(orders) > 1


def test_unknown_policy_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown policy"):
        compile_policy(NetworkView(), "wcmp")


def test_destination_prefixes_follow_racks() -> None:
    view = NetworkView.from_topology(parse("fattree:4"))
    prefixes = {d.prefix for d in destinations(view)}
    assert IPv4Network("10.0.0.0/24") in prefixes and len(prefixes) == 8
