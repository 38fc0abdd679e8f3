"""What the UC3 app knows about flows and links, turned into allocator input.

Plain data, no Ryu, unit-testable:

- :func:`flow_path`: a flow's path as the compiled rules forward it, followed through the
  in-memory OpenFlow tables (:mod:`dcnlab.controller.oftable`).  Under ``single_path``
  every (source, destination) pair has exactly one path, so the path is known from the
  compiled view alone; the app needs no per-flow entries and no flow statistics from the
  switches.  Links are directed switch egresses ``(dpid, port)``, the place where a
  queue builds.
- :func:`link_capacities`: each egress's rate in bit/s from the topology spec (or one
  override for all).
- :class:`FlowTable`: the agents' latest reports per flow, the per-link competing flows
  derived from them, and the :class:`~dcnlab.schemes.uc3.alloc.FlowInput` per active
  flow for one allocation round.
- :class:`LinkLoad`: link load (bit/s) from successive OpenFlow port counters.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from dcnlab.controller.oftable import FakeNetwork, packet_ints, tcp_packet
from dcnlab.controller.rules import SwitchRules
from dcnlab.controller.view import NetworkView
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.protocol import FlowStats
from dcnlab.model.topology import TopologySpec
from dcnlab.schemes.uc3.alloc import FlowInput

Link = tuple[int, int]  # (dpid, egress port)
MAX_HOPS = 64
IDLE_S = 3.0


class PathError(ValueError):
    """A flow the compiled rules do not deliver along exactly one path."""


class PathFinder:
    """Paths through the compiled rules, cached until the view or the rules change."""

    def __init__(self) -> None:
        self._net: FakeNetwork | None = None
        self._key: tuple[int, int] | None = None
        self._cache: dict[tuple[str, str], tuple[Link, ...]] = {}

    def path(self, view: NetworkView, compiled: dict[int, SwitchRules], src_ip: str,
             dst_ip: str) -> tuple[Link, ...]:
        key = (view.version, id(compiled))
        if key != self._key or self._net is None:
            self._net = FakeNetwork(view)
            self._net.install(compiled)
            self._key, self._cache = key, {}
        cached = self._cache.get((src_ip, dst_ip))
        if cached is None:
            cached = flow_path(self._net, src_ip, dst_ip)
            self._cache[(src_ip, dst_ip)] = cached
        return cached


def flow_path(net: FakeNetwork, src_ip: str, dst_ip: str) -> tuple[Link, ...]:
    """The switch egresses a TCP packet from ``src_ip`` to ``dst_ip`` leaves through."""
    view = net.view
    src, dst = view.host_by_ip(src_ip), view.host_by_ip(dst_ip)
    if src is None or dst is None:
        raise PathError(f"unknown host {src_ip if src is None else dst_ip}")
    pkt = packet_ints(tcp_packet(src, dst))
    dpid, in_port = src.dpid, src.port
    links: list[Link] = []
    for _ in range(MAX_HOPS):
        pkt["in_port"] = in_port
        ways = net.switches[dpid].alternatives(pkt)
        if len(ways) != 1 or len(ways[0]) != 1:
            raise PathError(f"switch {dpid:#x} forwards {src_ip}->{dst_ip} {ways} "
                            "(not one path: is the policy single_path?)")
        port = ways[0][0]
        links.append((dpid, port))
        if dpid == dst.dpid and port == dst.port:
            return tuple(links)
        peer = view.peer(dpid, port)
        if peer is None:
            raise PathError(f"{src_ip}->{dst_ip} leaves switch {dpid:#x} port {port} "
                            "towards no switch and not to the destination")
        dpid, in_port = peer
    raise PathError(f"{src_ip}->{dst_ip}: no delivery within {MAX_HOPS} hops")


def link_capacities(spec: TopologySpec | None, override_bps: float | None = None,
                    ) -> dict[Link, float]:
    """Egress rate (bit/s) of every switch port the spec describes.

    ``override_bps`` (the app's DCNLAB_UC3_CAPACITY) wins; links without a rate get
    none here (the caller decides a default).
    """
    if spec is None:
        return {}
    dpid = {s.name: s.dpid for s in spec.switches}
    out: dict[Link, float] = {}
    for lk in spec.links:
        rate = override_bps if override_bps else (
            lk.params.rate_mbit * 1e6 if lk.params.rate_mbit else None)
        if rate is None:
            continue
        for name, port in ((lk.a, lk.a_port), (lk.b, lk.b_port)):
            if name in dpid:
                out[(dpid[name], port)] = rate
    return out


def flow_key(flow: Tuple4) -> str:
    return f"{flow.local}:{flow.lport}->{flow.remote}:{flow.rport}"


@dataclass
class FlowRecord:
    agent: str
    stats: FlowStats
    updated: float  # monotonic time of the report


class FlowTable:
    """The agents' latest flow reports and what the allocator needs from them.

    A flow is *active* (competes for bandwidth) when its last reported throughput is at
    least ``min_rate_bps``: receivers' sockets, idle control connections and finished
    flows stay out of the competing-flow counts.  An agent's report lists every flow of
    its cgroup (a socket leaves the agent's BPF map when it closes), so a flow the agent
    no longer lists has ended and leaves the table at once: kept until ``stale_s``, a
    client that stopped would go on counting against the others' shares for that long.
    Reports older than ``stale_s`` are dropped (the agent went away).
    """

    def __init__(self, min_rate_bps: float = 100e3, stale_s: float = 2.0) -> None:
        self.min_rate_bps = min_rate_bps
        self.stale_s = stale_s
        self.flows: dict[Tuple4, FlowRecord] = {}
        self._by_agent: dict[str, set[Tuple4]] = {}
        self.reports = 0

    def report(self, agent: str, flows: Iterable[FlowStats], now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        self.reports += 1
        listed: set[Tuple4] = set()
        for stats in flows:
            self.flows[stats.flow] = FlowRecord(agent, stats, now)
            listed.add(stats.flow)
        for flow in self._by_agent.get(agent, set()) - listed:
            record = self.flows.get(flow)
            if record is not None and record.agent == agent:
                del self.flows[flow]
        self._by_agent[agent] = listed

    def expire(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for flow in [f for f, r in self.flows.items() if now - r.updated > self.stale_s]:
            self._by_agent.get(self.flows.pop(flow).agent, set()).discard(flow)

    def active(self) -> dict[Tuple4, FlowRecord]:
        return {f: r for f, r in self.flows.items()
                if r.stats.throughput_bps >= self.min_rate_bps and r.stats.rtt_us > 0}

    def inputs(self, paths: Mapping[Tuple4, tuple[Link, ...]],
               outside: Collection[int] = ()) -> dict[Tuple4, FlowInput]:
        """Allocator input for every active flow with a known path.

        The edge (the paper's ingress router, where reallocation pools unused bandwidth)
        is the first switch on the path inside the data center: switches in ``outside``
        (tier ``external``, e.g. the seed's R5 in front of group A'') are passed over, so
        flows from beyond them pool with the flows that enter at the same edge router.
        """
        out = {}
        for flow, rec in self.active().items():
            path = paths.get(flow)
            if not path:
                continue
            edge = next((dpid for dpid, _port in path if dpid not in outside), path[0][0])
            s = rec.stats
            out[flow] = FlowInput(path=path, rtt_s=s.rtt_us / 1e6, mss=s.mss,
                                  throughput_bps=s.throughput_bps, edge=edge,
                                  window_limited=s.clamp > 0 and s.cwnd >= s.clamp)
        return out


def competing(paths: Mapping[Tuple4, tuple[Link, ...]]) -> dict[Link, int]:
    """Number of flows crossing each link."""
    counts: dict[Link, int] = {}
    for path in paths.values():
        for link in set(path):
            counts[link] = counts.get(link, 0) + 1
    return counts


class LinkLoad:
    """Transmit rate per egress from successive port counters (FabricApp's port stats)."""

    def __init__(self) -> None:
        self._last: dict[Link, tuple[int, float]] = {}
        self.load_bps: dict[Link, float] = {}

    def update(self, port_stats: Mapping[int, Mapping[int, Mapping[str, int]]],
               now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for dpid, ports in port_stats.items():
            for port, counters in ports.items():
                link, tx = (dpid, port), counters.get("tx_bytes", 0)
                prev = self._last.get(link)
                if prev is not None and tx != prev[0] and now > prev[1]:
                    self.load_bps[link] = max(0, tx - prev[0]) * 8 / (now - prev[1])
                    self._last[link] = (tx, now)
                elif prev is None:
                    self._last[link] = (tx, now)
                elif now - prev[1] > IDLE_S:
                    # Counters arrive once per poll; unchanged for this long means idle.
                    self.load_bps[link] = 0.0
