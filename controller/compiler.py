"""Compile a forwarding policy into per-switch flow and group entries (as data).

Forwarding is by destination IPv4 address.  The compiler

1. picks destination prefixes: a switch whose hosts all lie in one /24 that holds no
   other switch's host is reached through that /24 (one entry per edge switch instead
   of one per host); otherwise each host is its own /32 destination;
2. computes the equal-cost next-hop set of every switch towards every destination
   switch (:mod:`dcnlab.controller.paths`);
3. aggregates per switch: the next-hop set used by more than half of the remote
   destinations becomes a default route for the fabric's supernet; /16 supernets
   whose children share one set become one entry; the rest get their own entry.
   A supernet whose known children all have explicit entries gets a drop entry, so a
   packet to an unknown address is dropped instead of bouncing up and down;
4. materializes next-hop sets with the app's :class:`Forwarding`: :data:`SELECT_GROUPS`
   uses one select group per distinct set (the switch chooses a bucket per flow or per
   packet; buckets watch their port, so a dead port leaves the group at once); a
   pinning forwarding (:data:`STRIPED`, or an app's own :class:`Pinned` subclass)
   chooses one port per destination (the default route is split by host address
   suffix, as in Al-Fares et al.'s two-level tables, so that destinations can take
   different uplinks).

Every choice strictly decreases the distance to the destination, so forwarding is
loop-free for every known destination, whatever bucket a switch picks.
"""

from __future__ import annotations

import ipaddress
from collections import Counter, defaultdict
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import ClassVar

import networkx as nx

from dcnlab.controller.paths import NextHops, compute_next_hops
from dcnlab.controller.rules import (
    ETH_TYPE_IP,
    PRIO_DEFAULT,
    PRIO_HOST,
    PRIO_PREFIX,
    PRIO_SUFFIX,
    PRIO_SUPERNET,
    Action,
    Bucket,
    FlowEntry,
    GroupEntry,
    SwitchRules,
    base_entries,
    match,
)
from dcnlab.controller.view import NetworkView

SUPERNET_PREFIXLEN = 16


class Forwarding:
    """How switches use an equal-cost next-hop set: a select group (the switch chooses),
    or one port the controller picks (:meth:`pick`)."""

    name: ClassVar[str] = ""
    groups: ClassVar[bool] = False

    def pick(self, dpid: int, hops: tuple[int, ...], key: int) -> int:
        """The one port of ``hops`` switch ``dpid`` uses for destination ``key`` (an
        address-derived number: a prefix's network part, or a host address suffix)."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name


class SelectGroups(Forwarding):
    name = "groups"
    groups = True


class Pinned(Forwarding):
    """Base of the forwardings that pin every destination to one port."""


class Striped(Pinned):
    """Deterministic: destinations striped over the ports by address, offset per switch
    so that not every switch of a tier picks the same index."""

    name = "striped"

    def pick(self, dpid: int, hops: tuple[int, ...], key: int) -> int:
        return hops[(key + dpid) % len(hops)]


SELECT_GROUPS = SelectGroups()
STRIPED = Striped()
POLICIES: dict[str, Forwarding] = {f.name: f for f in (SELECT_GROUPS, STRIPED)}


@dataclass(frozen=True)
class Destination:
    prefix: IPv4Network
    dpid: int
    supernet: IPv4Network  # the /16 it aggregates into (itself if no longer than /16)

    @classmethod
    def of(cls, prefix: IPv4Network, dpid: int) -> Destination:
        sup = prefix if prefix.prefixlen <= SUPERNET_PREFIXLEN else prefix.supernet(
            new_prefix=SUPERNET_PREFIXLEN)
        return cls(prefix, dpid, sup)


def _ip_match(net: IPv4Network) -> tuple:
    if net.prefixlen == 32:
        return match(eth_type=ETH_TYPE_IP, ipv4_dst=str(net.network_address))
    return match(eth_type=ETH_TYPE_IP, ipv4_dst=(str(net.network_address), str(net.netmask)))


def destinations(view: NetworkView) -> list[Destination]:
    """Destination prefixes: one /24 per edge switch where addressing allows, else /32s."""
    by_switch: dict[int, list[int]] = defaultdict(list)
    for h in view.hosts:
        by_switch[h.dpid].append(h.ip_int)
    owner_of_24: dict[int, set[int]] = defaultdict(set)
    for dpid, ips in by_switch.items():
        for ip in ips:
            owner_of_24[ip >> 8].add(dpid)
    dests: list[Destination] = []
    for dpid in sorted(by_switch):
        blocks = {ip >> 8 for ip in by_switch[dpid]}
        if len(blocks) == 1 and owner_of_24[next(iter(blocks))] == {dpid}:
            block = next(iter(blocks))
            dests.append(Destination.of(IPv4Network((block << 8, 24)), dpid))
        else:
            dests.extend(Destination.of(IPv4Network((ip, 32)), dpid) for ip in by_switch[dpid])
    return dests


def fabric_supernet(view: NetworkView) -> IPv4Network | None:
    """The smallest prefix covering every host address (the default route's match)."""
    ips = [h.ip_int for h in view.hosts]
    if not ips:
        return None
    lo, hi = min(ips), max(ips)
    prefixlen = 32 - (lo ^ hi).bit_length()
    return IPv4Network((lo, prefixlen), strict=False)


@dataclass
class _Plan:
    """Per switch: which next-hop set serves which prefix, before materialization."""

    default: tuple[int, ...] | None
    entries: list[tuple[IPv4Network, int, tuple[int, ...]]]  # prefix, priority, set
    drops: list[tuple[IPv4Network, int]]


def _plan_switch(
    dpid: int,
    dests: list[Destination],
    hops: NextHops,
    allow_default: bool,
) -> _Plan:
    remote = [(d, hops.of(dpid, d.dpid)) for d in dests if d.dpid != dpid]
    remote = [(d, s) for d, s in remote if s]  # unreachable destinations get nothing
    default: tuple[int, ...] | None = None
    if allow_default and remote:
        (best, count), = Counter(s for _, s in remote).most_common(1)
        if 2 * count > len(remote):
            default = best
    children: dict[IPv4Network, list[tuple[Destination, tuple[int, ...]]]] = defaultdict(list)
    for d, s in remote:
        children[d.supernet].append((d, s))
    entries: list[tuple[IPv4Network, int, tuple[int, ...]]] = []
    drops: list[tuple[IPv4Network, int]] = []
    for sup, kids in sorted(children.items()):
        sets = {s for _, s in kids}
        if len(sets) == 1 and all(d.prefix is not d.supernet for d, _ in kids):
            only = next(iter(sets))
            if only != default:
                entries.append((sup, PRIO_SUPERNET, only))
            continue
        explicit = [(d, s) for d, s in kids if s != default]
        entries.extend((d.prefix, PRIO_PREFIX, s) for d, s in explicit)
        if default is not None and len(explicit) == len(kids) and sup.prefixlen < 24:
            drops.append((sup, PRIO_SUPERNET))
    # The switch's own rack: unknown addresses there are dropped, not sent back up.
    drops.extend((d.prefix, PRIO_PREFIX) for d in dests
                 if d.dpid == dpid and d.prefix.prefixlen < 32)
    return _Plan(default, entries, drops)


def _default_cycles(view: NetworkView, plans: dict[int, _Plan]) -> set[int]:
    """Switches whose default routes form a forwarding cycle (must not happen)."""
    g = nx.DiGraph()
    for dpid, plan in plans.items():
        for port in plan.default or ():
            peer = view.peer(dpid, port)
            if peer is not None:
                g.add_edge(dpid, peer[0])
    bad: set[int] = set()
    for cycle in nx.simple_cycles(g):
        bad.update(cycle)
    return bad


def plan(view: NetworkView) -> tuple[dict[int, _Plan], IPv4Network | None]:
    dests = destinations(view)
    hops = compute_next_hops(view, sorted({d.dpid for d in dests}))
    plans = {s: _plan_switch(s, dests, hops, allow_default=True) for s in view.switches}
    bad = _default_cycles(view, plans)
    for s in bad:
        plans[s] = _plan_switch(s, dests, hops, allow_default=False)
    return plans, fabric_supernet(view)


class _Materializer:
    """Turns next-hop sets into actions for one switch, per policy."""

    def __init__(self, dpid: int, policy: Forwarding, suffixes: list[int]) -> None:
        self.dpid = dpid
        self.policy = policy
        self.suffixes = suffixes
        self.rules = SwitchRules(dpid)
        self._group_of: dict[tuple[int, ...], int] = {}

    def actions_for(self, hops: tuple[int, ...], key: int) -> tuple[Action, ...]:
        if len(hops) == 1:
            return (("output", hops[0]),)
        if not self.policy.groups:
            return (("output", self.policy.pick(self.dpid, hops, key)),)
        gid = self._group_of.get(hops)
        if gid is None:
            gid = len(self._group_of) + 1
            self._group_of[hops] = gid
            # Switches hash a flow with the same function at every hop (OVS: the same
            # hash, same bucket ids).  With one bucket order everywhere, a flow takes the
            # same bucket index at every tier and half the cores of a fat-tree idle (hash
            # polarization).  Rotating the order per switch acts as a per-switch seed.
            rot = self.dpid % len(hops)
            buckets = tuple(Bucket((("output", p),), 1, p) for p in hops[rot:] + hops[:rot])
            self.rules.groups[gid] = GroupEntry(gid, "select", buckets)
        return (("group", gid),)

    def default(self, supernet: IPv4Network, hops: tuple[int, ...]) -> None:
        if not self.policy.groups and len(hops) > 1:
            # One entry per host address suffix: spreads destinations over uplinks
            # while each destination keeps one path.
            net, mask = int(supernet.network_address), int(supernet.netmask)
            for suffix in self.suffixes:
                value = ipaddress.IPv4Address(net | suffix)
                full = ipaddress.IPv4Address(mask | 0xFF)
                self.rules.add_flow(
                    FlowEntry(
                        PRIO_SUFFIX,
                        match(eth_type=ETH_TYPE_IP, ipv4_dst=(str(value), str(full))),
                        self.actions_for(hops, suffix),
                    )
                )
            return
        self.rules.add_flow(FlowEntry(PRIO_DEFAULT, _ip_match(supernet), self.actions_for(hops, 0)))


def compile_policy(view: NetworkView, policy: Forwarding | str) -> dict[int, SwitchRules]:
    """Per-switch entries and groups implementing ``policy`` (a :class:`Forwarding`, or
    the name of a built-in one) on the current view."""
    if isinstance(policy, str):
        if policy not in POLICIES:
            raise ValueError(f"unknown policy {policy!r}; valid: {', '.join(POLICIES)}")
        policy = POLICIES[policy]
    plans, supernet = plan(view)
    suffixes = sorted({h.ip_int & 0xFF for h in view.hosts})
    out: dict[int, SwitchRules] = {}
    for dpid, p in plans.items():
        m = _Materializer(dpid, policy, suffixes)
        for entry in base_entries():
            m.rules.add_flow(entry)
        for h in view.hosts_on(dpid):
            m.rules.add_flow(
                FlowEntry(PRIO_HOST, _ip_match(IPv4Network(h.ip)), (("output", h.port),))
            )
        for prefix, prio in p.drops:
            m.rules.add_flow(FlowEntry(prio, _ip_match(prefix), ()))
        for prefix, prio, hops in p.entries:
            key = int(prefix.network_address) >> (32 - prefix.prefixlen)
            m.rules.add_flow(FlowEntry(prio, _ip_match(prefix), m.actions_for(hops, key)))
        if p.default is not None and supernet is not None:
            m.default(supernet, p.default)
        out[dpid] = m.rules
    return out
