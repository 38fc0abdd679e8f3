"""Seeded, deterministic flow lists: what every scheme of an experiment replays.

A workload type turns (topology, sweep value, seed, duration) into a list of
:class:`Flow`; the list is generated once per seed and sweep value and replayed
identically for every scheme.  The experiment's ``loads`` are the sweep values; what a
value means depends on the type (``SWEEP`` below):

========== ============ ==============================================================
type       sweep        flows
========== ============ ==============================================================
poisson    load         Poisson arrivals, sizes from a CDF, random pairs (inter-rack)
incast     senders      N senders x size to one receiver, synchronized rounds
rps_static long_flows   seed 000 static: N long flows S0..S4 -> S15, one short S0->S15
rps_random long_flows   seed 000 random: N long + M short flows between random pairs
longlived  clients      seed 004: N long-lived TCP clients -> server, UDP cross traffic;
                        optionally clients that stop and start again (schedule)
sizes      size         seed 003: flows of one size, one at a time, src -> dst
incast_size size        incast with the flow size swept (count senders, seed 002)
shortlong  interarrival Pareto short flows (exponential gaps) to a few receivers, plus
                        long flows to them (seed 002's at-scale traffic)
========== ============ ==============================================================

Load calibration (poisson).  Every sender host in the pool starts flows as a Poisson
process of rate ``lambda_host``; with mean flow size ``E[S]`` bytes and host link
capacity ``C`` bit/s, the offered load of a host link is
``rho = lambda_host * 8 * E[S] / C``, hence::

    lambda_host = rho * C / (8 * E[S])         Lambda = N * lambda_host

The generator draws one Poisson process of rate ``Lambda`` and picks each flow's source
uniformly among the N hosts (the superposition of N independent processes of rate
``lambda_host``).  Destinations are uniform among the other hosts (inter-rack: hosts on a
different edge switch), so each host's downlink carries the same load on average.  Load
counts application payload: TCP/IP headers add ~3.5% on the wire at a 1448-byte MSS.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from dcnlab.topo.spec import HostSpec, TopologySpec

from .cdf import EmpiricalCdf, load_cdf
from .schema import field

FLOW_KINDS = ("tcp", "udp")


class WorkloadError(ValueError):
    """A workload that cannot be generated for this topology.

    field: the workload parameter at fault, or "" when the sweep value is.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


@dataclass(frozen=True)
class Flow:
    """One flow of a run.  Times are seconds from the run's start (t0).

    size: payload bytes; 0 for a long-lived TCP flow (sends from start until stop).
    stop: when a long-lived TCP or a UDP flow stops sending.
    rate_mbit: UDP sending rate.
    sport, dscp: source port and DSCP the sender uses (see marking.py).
    tag: the flow's role in its scenario ("short", "long", "incast", "udp", ...).
    """

    id: int
    src: str
    dst: str
    size: int
    start: float
    kind: str = "tcp"
    stop: float | None = None
    rate_mbit: float | None = None
    sport: int = 0
    dscp: int = 0
    tag: str = ""

    @property
    def long_lived(self) -> bool:
        return self.kind == "tcp" and self.size == 0

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def arrival_rate(load: float, link_mbit: float, mean_bytes: float, hosts: int) -> float:
    """Total flow arrival rate (flows/s) giving every host link ``load`` (see module doc)."""
    if not 0 < load:
        raise WorkloadError("", f"load must be positive, got {load}")
    per_host = load * link_mbit * 1e6 / (8.0 * mean_bytes)
    return per_host * hosts


def offered_load(flows: list[Flow], duration: float, link_mbit: float, hosts: int) -> float:
    """The inverse: offered load of a flow list over ``duration`` seconds (payload only)."""
    total = sum(f.size for f in flows)
    return total * 8.0 / (duration * link_mbit * 1e6 * hosts)


# ---------------------------------------------------------------------------
# Topology helpers


def rack_of(host: HostSpec) -> str:
    """Hosts on the same edge switch form a rack."""
    return host.interfaces[0].switch


def host_link_mbit(topo: TopologySpec, host: str) -> float | None:
    for link in topo.host_links():
        if host in (link.a, link.b):
            return link.params.rate_mbit
    return None


def _hosts(topo: TopologySpec, names: list[str] | None, what: str) -> list[HostSpec]:
    if not names:
        return list(topo.hosts)
    known = {h.name for h in topo.hosts}
    missing = [n for n in names if n not in known]
    if missing:
        raise WorkloadError(what, f"host(s) {', '.join(missing)} not in topology "
                            f"{topo.spec} (hosts: {_name_range(topo)})")
    return [topo.host(n) for n in names]


def _host(topo: TopologySpec, name: str | None, role: str, what: str) -> HostSpec:
    if name:
        return _hosts(topo, [name], what)[0]
    for host in topo.hosts:
        if host.role == role:
            return host
    return topo.hosts[-1]


def _name_range(topo: TopologySpec) -> str:
    names = [h.name for h in topo.hosts]
    return ", ".join(names) if len(names) <= 4 else f"{names[0]} .. {names[-1]}"


def _pairs_ok(src: HostSpec, dst: HostSpec, pairs: str) -> bool:
    if src.name == dst.name:
        return False
    return pairs != "inter_rack" or rack_of(src) != rack_of(dst)


def _number(flows: list[Flow]) -> list[Flow]:
    """Flows ordered by start time (stable), numbered 0..n-1."""
    ordered = sorted(flows, key=lambda f: f.start)
    return [replace(f, id=i) for i, f in enumerate(ordered)]


# ---------------------------------------------------------------------------
# Workload types.  Each is a frozen dataclass of parameters (validated by schema.py)
# with ``generate``.  ``rng`` is a fresh numpy Generator seeded from (seed, sweep value).


class Workload(Protocol):
    SWEEP: ClassVar[str]

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]: ...

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None: ...


@dataclass(frozen=True)
class PoissonWorkload:
    """Poisson flow arrivals with sizes drawn from a CDF, calibrated to a link load."""

    SWEEP: ClassVar[str] = "load"
    cdf: str = field("websearch", doc="built-in name or CDF file (relative to the spec)")
    pairs: str = field("inter_rack", choices=("inter_rack", "any"))
    hosts: list[str] = field([], doc="host pool (default: all hosts)")
    link_rate: float | None = field(None, unit="mbit",
                                    doc="capacity used for calibration (default: host links)")

    def distribution(self, base_dir: Path | None) -> EmpiricalCdf:
        return load_cdf(self.cdf, base_dir)

    def capacity(self, topo: TopologySpec, pool: list[HostSpec]) -> float:
        if self.link_rate is not None:
            return self.link_rate
        rates = {host_link_mbit(topo, h.name) for h in pool}
        if None in rates or not rates:
            raise WorkloadError("link_rate", "host links are not rate-limited in "
                                f"{topo.spec}; give link.rate or workload.link_rate")
        return min(r for r in rates if r is not None)

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None:
        if not 0 < value <= 1:
            raise WorkloadError("", f"load {value} must be a fraction in (0, 1] of the host link "
                                "capacity (write 0.4 for 40%)")
        pool = _hosts(topo, self.hosts, "hosts")
        self.capacity(topo, pool)
        if not any(_pairs_ok(a, b, self.pairs) for a in pool for b in pool):
            raise WorkloadError("pairs", f"no {self.pairs} host pair in the pool")

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]:
        pool = _hosts(topo, self.hosts, "hosts")
        cdf = self.distribution(base_dir)
        rate = arrival_rate(value, self.capacity(topo, pool), cdf.mean(), len(pool))
        # Draw inter-arrival gaps in blocks until the window is covered.
        expected = rate * duration
        gaps = rng.exponential(1.0 / rate, size=int(expected + 6 * math.sqrt(expected) + 16))
        times = np.cumsum(gaps)
        while times[-1] < duration:
            more = np.cumsum(rng.exponential(1.0 / rate, size=len(gaps))) + times[-1]
            times = np.concatenate((times, more))
        times = times[times < duration]
        sizes = cdf.sample(rng, len(times))
        partners = [[d for d in pool if _pairs_ok(s, d, self.pairs)] for s in pool]
        senders = [i for i, p in enumerate(partners) if p]
        src_idx = rng.integers(0, len(senders), size=len(times))
        dst_u = rng.random(len(times))
        flows = []
        for t, size, si, du in zip(times, sizes, src_idx, dst_u, strict=True):
            src_i = senders[int(si)]
            choices = partners[src_i]
            dst = choices[min(int(du * len(choices)), len(choices) - 1)]
            flows.append(Flow(0, pool[src_i].name, dst.name, int(size), float(t)))
        return _number(flows)


@dataclass(frozen=True)
class IncastWorkload:
    """N senders each send ``size`` bytes to one receiver, in synchronized rounds."""

    SWEEP: ClassVar[str] = "senders"
    size: int = field(32000, unit="bytes", min=1)
    receiver: str | None = field(None, doc="default: the host with role 'receiver'")
    senders: list[str] = field([], doc="sender pool (default: every other host)")
    rounds: int = field(10, min=1)
    interval: float = field(1.0, unit="seconds", min=0.0, doc="time between rounds")
    jitter: float = field(0.0, unit="seconds", min=0.0, doc="uniform start jitter")

    def _pool(self, topo: TopologySpec) -> tuple[HostSpec, list[HostSpec]]:
        rx = _host(topo, self.receiver, "receiver", "receiver")
        pool = [h for h in _hosts(topo, self.senders, "senders") if h.name != rx.name]
        return rx, pool

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None:
        rx, pool = self._pool(topo)
        if value != int(value) or not 1 <= value <= len(pool):
            raise WorkloadError("", f"senders {value}: needs a whole number between 1 and "
                                f"{len(pool)} (hosts other than the receiver {rx.name})")

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]:
        rx, pool = self._pool(topo)
        chosen = pool[: int(value)]
        flows = []
        for r in range(self.rounds):
            for host in chosen:
                jitter = float(rng.uniform(0, self.jitter)) if self.jitter else 0.0
                flows.append(Flow(0, host.name, rx.name, self.size,
                                  r * self.interval + jitter, tag="incast"))
        return _number(flows)


@dataclass(frozen=True)
class RpsStaticWorkload:
    """Seed 000 static scenario: N long flows from sources[0..N-1] to the receiver,
    plus one short flow short_src -> receiver once the long flows are running."""

    SWEEP: ClassVar[str] = "long_flows"
    receiver: str = field("h16", doc="S15 of the seed's fat-tree")
    sources: list[str] = field(["h1", "h2", "h3", "h4", "h5"], doc="S0..S4")
    short_src: str = field("h1", doc="S0")
    long_size: int = field(10_000_000, unit="bytes", min=1)
    short_size: int = field(200_000, unit="bytes", min=1)
    short_start: float = field(1.0, unit="seconds", min=0.0)
    jitter: float = field(0.01, unit="seconds", min=0.0,
                          doc="uniform start jitter (the seed's only randomness)")

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None:
        _hosts(topo, [self.receiver, self.short_src, *self.sources], "hosts")
        if value != int(value) or not 0 <= value <= len(self.sources):
            raise WorkloadError("", f"long_flows {value}: needs a whole number between 0 and "
                                f"{len(self.sources)} (one per source)")

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]:
        flows = [Flow(0, src, self.receiver, self.long_size,
                      float(rng.uniform(0, self.jitter)), tag="long")
                 for src in self.sources[: int(value)]]
        flows.append(Flow(0, self.short_src, self.receiver, self.short_size,
                          self.short_start + float(rng.uniform(0, self.jitter)), tag="short"))
        return _number(flows)


@dataclass(frozen=True)
class RpsRandomWorkload:
    """Seed 000 random scenario: N long and M short flows between random host pairs.

    Long flows start at 0 (+ jitter); short flows start uniformly in
    [short_start, short_start + short_spread], when the long flows are running.
    """

    SWEEP: ClassVar[str] = "long_flows"
    short_flows: int = field(20, min=0)
    long_size: int = field(10_000_000, unit="bytes", min=1)
    short_size: int = field(200_000, unit="bytes", min=1)
    short_start: float = field(1.0, unit="seconds", min=0.0)
    short_spread: float = field(1.0, unit="seconds", min=0.0)
    jitter: float = field(0.01, unit="seconds", min=0.0)
    pairs: str = field("any", choices=("inter_rack", "any"))
    hosts: list[str] = field([])

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None:
        pool = _hosts(topo, self.hosts, "hosts")
        if value != int(value) or value < 0:
            raise WorkloadError("", f"long_flows {value}: needs a whole number >= 0")
        if not any(_pairs_ok(a, b, self.pairs) for a in pool for b in pool):
            raise WorkloadError("pairs", f"no {self.pairs} host pair in the pool")

    def _pair(self, pool: list[HostSpec], rng: np.random.Generator) -> tuple[str, str]:
        while True:  # rejection sampling; check() guarantees a valid pair exists
            a, b = rng.integers(0, len(pool), size=2)
            if _pairs_ok(pool[int(a)], pool[int(b)], self.pairs):
                return pool[int(a)].name, pool[int(b)].name

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]:
        pool = _hosts(topo, self.hosts, "hosts")
        flows = []
        for _ in range(int(value)):
            src, dst = self._pair(pool, rng)
            flows.append(Flow(0, src, dst, self.long_size, float(rng.uniform(0, self.jitter)),
                              tag="long"))
        for _ in range(self.short_flows):
            src, dst = self._pair(pool, rng)
            start = self.short_start + float(rng.uniform(0, self.short_spread))
            flows.append(Flow(0, src, dst, self.short_size, start, tag="short"))
        return _number(flows)


@dataclass(frozen=True)
class ClientEvent:
    """One step of a ``longlived`` schedule: at ``at`` s, ``stop`` running clients of
    every group stop, or ``start`` stopped clients of every group start again (exactly
    one of the two is given)."""

    at: float = field(unit="seconds", min=0.0, doc="s from the run's start")
    stop: int = field(0, min=0, doc="clients of each group that stop")
    start: int = field(0, min=0, doc="clients of each group that start again")


def client_group(host: HostSpec) -> str:
    """A client's group for a schedule: its topology group without primes, so dumbbell's
    A' and A'' clients form group A (the paper's groups A and B); "" for hosts of no
    group, which then form one group."""
    return host.group.rstrip("'")


def leave_order(members: list[HostSpec]) -> list[HostSpec]:
    """The order in which a group's clients stop: round-robin over its subgroups (their
    topology groups, in topology order: A' before A''), within each from its last client
    backwards (dumbbell: the longest access delay first).  Taking turns puts clients of
    every subgroup among those that stop: with A'' last-first alone, 12 of dumbbell:32's
    16 group-A clients stopping would take every A'' client, and the UDP burst on the
    outside link would have no TCP flow left to squeeze."""
    subgroups: dict[str, list[HostSpec]] = {}
    for host in members:
        subgroups.setdefault(host.group, []).append(host)
    stacks = list(subgroups.values())
    order = []
    while any(stacks):
        for stack in stacks:
            if stack:
                order.append(stack.pop())
    return order


@dataclass(frozen=True)
class LongLivedWorkload:
    """Seed 004: N long-lived TCP clients send to the server, UDP clients add cross
    traffic at ``udp_rate`` each between ``udp_start`` and ``udp_stop``: to the hosts with
    role ``udp_sink`` when the topology has them (``dumbbell:N,U,X``: outside senders to
    inside receivers, paired in order), else to the server.

    ``schedule`` (the paper's variable scenario): events ``{at, stop: k}`` and ``{at,
    start: k}``, k clients per group (:func:`client_group`: dumbbell's groups A and B),
    in time order (events at the same time in the order written).  A stop takes the
    group's running clients in :func:`leave_order`; a start takes the group's clients
    that stopped before it, the earliest stopped first (so with the paper's schedule the
    clients that stopped at 7 s start again at 14 s).  A client that starts again opens
    a new TCP connection: another flow, its own id and row, from ``at`` until its next
    stop or the clients' stop (``tcp_stop``, else the duration).  More clients stopping
    than are running, a start before enough clients stopped, or an event not inside the
    clients' sending time is a WorkloadError naming the event."""

    SWEEP: ClassVar[str] = "clients"
    server: str | None = field(None, doc="default: the host with role 'server'")
    clients: list[str] = field([], doc="TCP client pool (default: hosts with role 'client')")
    udp_clients: list[str] = field([], doc="default: hosts with role 'udp'")
    udp_sinks: list[str] = field([], doc="UDP receivers, one per UDP client in order "
                                 "(default: hosts with role 'udp_sink', else the server)")
    tcp_start: float = field(0.0, unit="seconds", min=0.0)
    stagger: float = field(0.0, unit="seconds", min=0.0, doc="gap between client starts")
    tcp_stop: float | None = field(None, unit="seconds", doc="default: the duration")
    udp_rate: float = field(85.0, unit="mbit", min=0.0)
    udp_start: float = field(10.0, unit="seconds", min=0.0)
    udp_stop: float = field(15.0, unit="seconds", min=0.0)
    schedule: list[ClientEvent] = field([], doc="clients stopping and starting again")

    def _roles(self, topo: TopologySpec) -> tuple[HostSpec, list[HostSpec], list[HostSpec]]:
        server = _host(topo, self.server, "server", "server")
        clients = (_hosts(topo, self.clients, "clients") if self.clients
                   else [h for h in topo.hosts if h.role == "client"])
        udp = (_hosts(topo, self.udp_clients, "udp_clients") if self.udp_clients
               else [h for h in topo.hosts if h.role == "udp"])
        return server, clients, udp

    def _udp_sinks(self, topo: TopologySpec, server: HostSpec, udp: list[HostSpec],
                   ) -> list[HostSpec]:
        """The receiver of each UDP client's flow."""
        sinks = (_hosts(topo, self.udp_sinks, "udp_sinks") if self.udp_sinks
                 else [h for h in topo.hosts if h.role == "udp_sink"])
        if not sinks:
            return [server] * len(udp)
        if len(sinks) != len(udp):
            raise WorkloadError("udp_sinks", f"{len(sinks)} UDP receivers for {len(udp)} "
                                "UDP clients: give one per client")
        if any(s.name == u.name for s, u in zip(sinks, udp, strict=True)):
            raise WorkloadError("udp_sinks", "a UDP client cannot send to itself")
        return sinks

    def connections(self, clients: list[HostSpec], end: float | None,
                    ) -> list[tuple[HostSpec, float, float | None]]:
        """(client, start, stop) of every TCP connection the clients open, by start and
        then client; ``end``: when the clients stop (None: unknown, checks only)."""
        index = {c.name: i for i, c in enumerate(clients)}
        running = {c.name: self.tcp_start + i * self.stagger for i, c in enumerate(clients)}
        groups: dict[str, list[HostSpec]] = {}
        for client in clients:
            groups.setdefault(client_group(client), []).append(client)
        order = {g: leave_order(members) for g, members in groups.items()}
        stopped: dict[str, list[tuple[str, float]]] = {g: [] for g in groups}  # stop order
        done: list[tuple[HostSpec, float, float | None]] = []
        for i, event in sorted(enumerate(self.schedule), key=lambda e: e[1].at):
            where = f"schedule[{i}]"
            if (event.stop > 0) == (event.start > 0):
                raise WorkloadError(where, "give one of stop or start: how many clients of "
                                    "each group stop, or start again, at `at`")
            if end is not None and event.at >= end:
                raise WorkloadError(f"{where}.at", f"{event.at:g} s is not before the "
                                    f"clients stop ({end:g} s: tcp_stop, else the duration)")
            for g, members in order.items():
                name = f"group {g}" if g else "the clients"
                if event.stop:
                    up = [c for c in members if c.name in running]
                    if event.stop > len(up):
                        raise WorkloadError(f"{where}.stop", (
                            f"{event.stop} clients of {name} stop at {event.at:g} s, but "
                            f"only {len(up)} of its {len(members)} are running then"))
                    for client in up[: event.stop]:
                        began = running.pop(client.name)
                        if began >= event.at:
                            raise WorkloadError(f"{where}.at", (
                                f"client {client.name} of {name} would stop at "
                                f"{event.at:g} s, not after it starts ({began:g} s)"))
                        done.append((client, began, float(event.at)))
                        stopped[g].append((client.name, float(event.at)))
                else:
                    ready = [n for n, t in stopped[g] if t < event.at]
                    if event.start > len(ready):
                        raise WorkloadError(f"{where}.start", (
                            f"{event.start} clients of {name} start again at "
                            f"{event.at:g} s, but only {len(ready)} stopped before then"))
                    for n in ready[: event.start]:
                        stopped[g] = [s for s in stopped[g] if s[0] != n]
                        running[n] = float(event.at)
        by_name = {c.name: c for c in clients}
        done += [(by_name[n], began, end) for n, began in running.items()]
        return sorted(done, key=lambda c: (c[1], index[c[0].name]))

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None:
        server, clients, udp = self._roles(topo)
        if value != int(value) or not 1 <= value <= len(clients):
            raise WorkloadError("", f"clients {value}: needs a whole number between 1 and "
                                f"{len(clients)} (TCP clients in {topo.spec})")
        if self.udp_stop < self.udp_start:
            raise WorkloadError("udp_stop", "must not be before udp_start")
        if self.udp_rate > 0:
            self._udp_sinks(topo, server, udp)
        self.connections(clients[: int(value)],
                         self.tcp_stop if self.tcp_stop is not None else duration)

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]:
        server, clients, udp = self._roles(topo)
        stop = self.tcp_stop if self.tcp_stop is not None else duration
        flows = [Flow(0, c.name, server.name, 0, began, stop=until, tag="long")
                 for c, began, until in self.connections(clients[: int(value)], stop)]
        if self.udp_rate > 0:
            sinks = self._udp_sinks(topo, server, udp)
            flows += [Flow(0, u.name, dst.name, 0, self.udp_start, kind="udp",
                           stop=self.udp_stop, rate_mbit=self.udp_rate, tag="udp")
                      for u, dst in zip(udp, sinks, strict=True)]
        return _number(flows)


@dataclass(frozen=True)
class SizesWorkload:
    """Seed 003: flows of one size (the sweep value, bytes) from ``src`` to ``dst``, one
    at a time: ``repetitions`` flows whose starts are ``gap`` s apart (make it longer
    than a flow takes, so they do not overlap)."""

    SWEEP: ClassVar[str] = "size"
    src: str = field("h1", doc="sender (twopath: the two-homed client)")
    dst: str = field("h2", doc="receiver")
    repetitions: int = field(30, min=1)
    gap: float = field(2.0, unit="seconds", min=0.0)

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None:
        _hosts(topo, [self.src, self.dst], "hosts")
        if self.src == self.dst:
            raise WorkloadError("dst", "src and dst must differ")
        if value != int(value) or value < 1:
            raise WorkloadError("", f"size {value}: a whole number of bytes (65536 for 64 KB)")

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]:
        return _number([Flow(0, self.src, self.dst, int(value), i * self.gap, tag="sized")
                        for i in range(self.repetitions)])


@dataclass(frozen=True)
class IncastSizeWorkload:
    """The incast with the flow size as the sweep value (bytes): ``count`` senders each
    send that many bytes to one receiver, in synchronized rounds (seed 002's Fig. 5b:
    30 senders, 16 KB .. 1 MB).  Make ``interval`` longer than the largest round takes."""

    SWEEP: ClassVar[str] = "size"
    count: int = field(30, min=1, doc="senders")
    receiver: str | None = field(None, doc="default: the host with role 'receiver'")
    senders: list[str] = field([], doc="sender pool (default: every other host)")
    rounds: int = field(10, min=1)
    interval: float = field(1.0, unit="seconds", min=0.0, doc="time between rounds")
    jitter: float = field(0.0, unit="seconds", min=0.0, doc="uniform start jitter")

    def incast(self, value: float) -> IncastWorkload:
        return IncastWorkload(size=int(value), receiver=self.receiver, senders=self.senders,
                              rounds=self.rounds, interval=self.interval, jitter=self.jitter)

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None:
        if value != int(value) or value < 1:
            raise WorkloadError("", f"size {value}: a whole number of bytes (32000 for 32 KB)")
        try:
            self.incast(value).check(topo, self.count, base_dir, duration)
        except WorkloadError as exc:
            raise WorkloadError("count", str(exc)) from None

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]:
        return self.incast(value).generate(topo, self.count, rng, duration, base_dir)


@dataclass(frozen=True)
class ShortLongWorkload:
    """Seed 002's at-scale traffic: short flows of Pareto-distributed sizes arrive with
    exponential inter-arrival times (the sweep value: their mean, s, over the whole
    network) during ``duration``, each from a random host to one of ``receivers`` hosts
    drawn at random; ``long_flows`` flows of ``long_size`` start at 0 from random
    senders, one to each receiver in turn (so they share the receivers' switch ports
    with the short flows).  Senders are never receivers."""

    SWEEP: ClassVar[str] = "interarrival"
    receivers: int = field(5, min=1, doc="how many hosts receive (drawn per run)")
    short_mean: int = field(50_000, unit="bytes", min=1, doc="mean short-flow size")
    short_shape: float = field(1.2, min=1.01, doc="Pareto shape (> 1: finite mean)")
    long_flows: int = field(5, min=0)
    long_size: int = field(30_000_000, unit="bytes", min=1)

    def check(self, topo: TopologySpec, value: float, base_dir: Path | None,
              duration: float | None = None) -> None:
        if not 0 < value <= 10:
            raise WorkloadError("", f"inter-arrival {value}: a mean time in seconds in "
                                "(0, 10] (0.005 for 5 ms)")
        if self.receivers >= len(topo.hosts):
            raise WorkloadError("receivers", f"{self.receivers} receivers leave no sender "
                                f"among the {len(topo.hosts)} hosts of {topo.spec}")

    def generate(self, topo: TopologySpec, value: float, rng: np.random.Generator,
                 duration: float, base_dir: Path | None) -> list[Flow]:
        hosts = [h.name for h in topo.hosts]
        picked = sorted(int(i) for i in rng.choice(len(hosts), self.receivers,
                                                   replace=False))
        receivers = [hosts[i] for i in picked]
        senders = [h for h in hosts if h not in receivers]
        flows = [Flow(0, senders[int(rng.integers(len(senders)))], receivers[i % len(
            receivers)], self.long_size, 0.0, tag="long") for i in range(self.long_flows)]
        scale = self.short_mean * (self.short_shape - 1) / self.short_shape  # x_m
        t = float(rng.exponential(value))
        while t < duration:
            size = max(1, int(round(scale * (1.0 + rng.pareto(self.short_shape)))))
            flows.append(Flow(0, senders[int(rng.integers(len(senders)))],
                              receivers[int(rng.integers(len(receivers)))], size, t,
                              tag="short"))
            t += float(rng.exponential(value))
        return _number(flows)


WORKLOAD_TYPES: dict[str, type] = {
    "poisson": PoissonWorkload,
    "incast": IncastWorkload,
    "rps_static": RpsStaticWorkload,
    "rps_random": RpsRandomWorkload,
    "longlived": LongLivedWorkload,
    "sizes": SizesWorkload,
    "incast_size": IncastSizeWorkload,
    "shortlong": ShortLongWorkload,
}


def sweep_name(workload: Workload) -> str:
    return workload.SWEEP


def rng_for(seed: int, value: float) -> np.random.Generator:
    """The generator for one (seed, sweep value): independent streams per value, and the
    same stream whatever else the experiment contains."""
    return np.random.default_rng([int(seed), int(round(value * 1_000_000))])


def generate(workload: Workload, topo: TopologySpec, value: float, seed: int,
             duration: float, base_dir: Path | None = None) -> list[Flow]:
    """The flow list for one seed and sweep value (without marking; see marking.py)."""
    workload.check(topo, value, base_dir, duration)
    return workload.generate(topo, value, rng_for(seed, value), duration, base_dir)
