"""Topology spec strings and the topology families that build a model from them.

One parser serves the CLI, the tests and the benchmarks.  A spec string is
``FAMILY[:ARG,ARG,...]`` where positional arguments are integers and ``key=value``
arguments set link parameters for every link (family defaults otherwise)::

    fattree:4                      k=4 fat-tree (20 switches, 16 hosts)
    spineleaf:4,4,20               4 spines, 4 leaves, 20 hosts per leaf
    threelayer[:P,R,H,S]           Altoona-like: P pods, R racks/pod, H hosts/rack,
                                   4 planes with S spines each (4 disjoint paths)
    incast:N                       N senders + 1 receiver on one switch
    dumbbell[:N[,U[,X]]]           N TCP clients in two delay groups + U UDP clients;
                                   X > 0: X group-A clients sit behind an outside switch
    twopath                        a client with two disjoint paths to a server
    fattree:4,rate=10M,delay=25us,buffer=100,ecn=20
    incast:8,rate=100M,ingress@host=abq/k=20p/mode=ece
    fattree:4,rate=100M,link@s1-s17=rate=10M/delay=1ms

``link@A-B=KEY=VALUE[/KEY=VALUE]...`` overrides the parameters of the link between nodes
A and B (spec names, either order; rate, delay, jitter, buffer, ecn): static asymmetry,
such as one core link at a tenth of the others' rate.  Overrides apply after every
``key=value`` for all links, whatever their order in the string.

Queue disciplines (``--switch ext`` only) are named, not built in here: the spec checks
their syntax, their names and their option keys against :data:`QDISCS` (a copy of the
switch's registry, switch_ext/src/qdisc/), and the switch checks the values.
``DIR[@SCOPE]=NAME[/KEY=VALUE]...`` where DIR is ``egress`` (the port's output
buffer; default ``droptail``, which ``buffer=``/``ecn=`` configure) or ``ingress``
(frames received on the port, before the flow tables; default none), and SCOPE says
which switch ports get it: ``host`` (ports facing hosts), ``fabric`` (ports facing
other switches) or none (every switch port).  ``/`` separates options so the whole
thing is one spec option and needs no shell quoting.  An explicit ``egress=`` replaces
the default drop-tail together with ``buffer=``/``ecn=`` (also a family's default
buffer) on the ports it applies to: give its own options instead.

The model they produce is plain data and lives in the neutral :mod:`dcnlab.model.topology`
(the controller reads it too, and must not import ``dcnlab.topo``); its names are
re-exported here, so ``from dcnlab.topo.spec import TopologySpec`` keeps working.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from dcnlab.model.named_spec import check_named
from dcnlab.model.topology import (
    DEFAULT_EGRESS_QDISC,
    EXTERNAL_TIER,
    QDISC_DIRECTIONS,
    QDISCS,
    HostSpec,
    Interface,
    LinkParams,
    LinkSpec,
    SpecError,
    SwitchSpec,
    TopologySpec,
    host_ip,
    host_mac,
    neighbours,
)

__all__ = [
    "DEFAULT_EGRESS_QDISC", "EXTERNAL_TIER", "QDISCS", "QDISC_DIRECTIONS", "VALID_FORMS",
    "HostSpec", "Interface", "LinkParams", "LinkSpec",
    "SpecError", "SwitchSpec", "TopologySpec", "families", "host_ip", "host_mac", "parse",
]

VALID_FORMS = (
    "fattree:K (K even, 2..64)",
    "spineleaf:S,L,H (spines, leaves, hosts per leaf)",
    "threelayer[:P,R,H,S] (pods, racks per pod, hosts per rack, spines per plane)",
    "incast:N (N senders and one receiver on one switch)",
    "torcore:T,H (T ToRs of H hosts under one core; uplinks at H x the host rate)",
    "dumbbell[:N[,U[,X]]] (N TCP clients in two delay groups, U UDP clients, X group-A "
    "clients behind an outside switch)",
    "twopath (client with two disjoint paths to a server: seed 003's 500 Mbit/s, RTT 20+-15 "
    "ms and 150 Mbit/s, RTT 200+-150 ms)",
    "link options after the arguments: rate=10M, delay=25us, jitter=1ms, reorder=1 (jitter "
    "may reorder), "
    "buffer=100 (packets) or buffer=64KB, ecn=20 (packets)",
    "one link's own parameters: link@A-B=rate=10M/delay=1ms (A, B: node names)",
    "queue disciplines (switch ext): egress=NAME/KEY=VALUE/... or ingress=NAME/..., "
    "optionally scoped as egress@host=, egress@fabric=, ingress@host=, ingress@fabric=",
    "known queue disciplines (option keys): " + "; ".join(
        f"{direction} {name} ({', '.join(keys)})"
        for direction, names in QDISCS.items() for name, keys in names.items()),
)

# Queue-discipline options: "NAME[/KEY=VALUE]..." (dcnlab/model/named_spec.py), passed
# verbatim to the switch.
QDISC_SCOPES = ("host", "fabric")


def check_qdisc(direction: str, text: str) -> str:
    """``text`` if it is ``NAME[/KEY=VALUE]...`` naming a ``direction`` discipline of
    :data:`QDISCS` with keys it accepts, else ValueError saying what is wrong."""
    name = text.partition("/")[0]
    elsewhere = [d for d, names in QDISCS.items() if name in names and d != direction]
    hint = f"; {name} is an {elsewhere[0]} discipline" if elsewhere else ""
    check_named(text, QDISCS[direction], f"{direction} discipline",
                "droptail/buffer=100p/ecn=20p", hint)
    return text


# ---------------------------------------------------------------------------
# Building blocks


class _Builder:
    """Accumulates switches, hosts and links with per-switch port numbering."""

    def __init__(self, params: LinkParams) -> None:
        self.params = params
        self.switches: list[SwitchSpec] = []
        self.hosts: list[HostSpec] = []
        self.links: list[LinkSpec] = []
        self._next_port: dict[str, int] = {}

    def switch(self, tier: str, pod: int | None = None, index: int = 0) -> str:
        dpid = len(self.switches) + 1
        name = f"s{dpid}"
        self.switches.append(SwitchSpec(name, dpid, tier, pod, index))
        self._next_port[name] = 1
        return name

    def _port(self, switch: str) -> int:
        port = self._next_port[switch]
        self._next_port[switch] = port + 1
        return port

    def link(self, a: str, b: str, params: LinkParams | None = None) -> None:
        self.links.append(LinkSpec(a, self._port(a), b, self._port(b), params or self.params))

    def host(
        self,
        attachments: list[tuple[str, str]],
        role: str = "",
        group: str = "",
        params: LinkParams | None = None,
    ) -> str:
        """Add a host with one interface per (switch, ip) attachment."""
        name = f"h{len(self.hosts) + 1}"
        interfaces = []
        for index, (switch, ip) in enumerate(attachments):
            port = self._port(switch)
            interfaces.append(Interface(ip, host_mac(ip), switch, port))
            self.links.append(LinkSpec(name, index, switch, port, params or self.params))
        self.hosts.append(HostSpec(name, tuple(interfaces), role, group))
        return name


# ---------------------------------------------------------------------------
# Families


def _fattree(args: list[int], params: LinkParams) -> _Builder:
    _expect(args, 1, 1, "fattree:K")
    (k,) = args
    if k < 2 or k % 2 or k > 64:
        raise SpecError(f"fattree:K needs an even K between 2 and 64, got {k}")
    half = k // 2
    b = _Builder(params)
    cores = [b.switch("core", None, i) for i in range(half * half)]
    for pod in range(k):
        aggs = [b.switch("agg", pod, i) for i in range(half)]
        edges = [b.switch("edge", pod, i) for i in range(half)]
        for edge in edges:
            for agg in aggs:
                b.link(edge, agg)
        for i, agg in enumerate(aggs):
            for j in range(half):
                b.link(agg, cores[i * half + j])
        for e, edge in enumerate(edges):
            for h in range(half):
                b.host([(edge, host_ip(pod, e, h + 1))])
    return b


def _spineleaf(args: list[int], params: LinkParams) -> _Builder:
    _expect(args, 3, 3, "spineleaf:S,L,H")
    spines_n, leaves_n, hosts_n = args
    if min(args) < 1:
        raise SpecError(f"spineleaf:S,L,H needs positive numbers, got {args}")
    _within_model(spines_n + leaves_n, leaves_n * hosts_n, "spineleaf:S,L,H")
    b = _Builder(params)
    spines = [b.switch("spine", None, i) for i in range(spines_n)]
    leaves = [b.switch("leaf", 0, i) for i in range(leaves_n)]
    for leaf in leaves:
        for spine in spines:
            b.link(leaf, spine)
    for li, leaf in enumerate(leaves):
        for h in range(hosts_n):
            b.host([(leaf, host_ip(0, li, h + 1))])
    return b


PLANES = 4


def _threelayer(args: list[int], params: LinkParams) -> _Builder:
    _expect(args, 0, 4, "threelayer[:P,R,H,S]")
    pods, racks, hosts_n, spines_per_plane = (args + [2, 2, 2, 1][len(args):])[:4]
    if min(pods, racks, hosts_n, spines_per_plane) < 1:
        raise SpecError(f"threelayer:P,R,H,S needs positive numbers, got {args}")
    _within_model(PLANES * spines_per_plane + pods * (PLANES + racks), pods * racks * hosts_n,
                  "threelayer:P,R,H,S")
    b = _Builder(params)
    spines = [[b.switch("spine", None, p * spines_per_plane + i)
               for i in range(spines_per_plane)] for p in range(PLANES)]
    for pod in range(pods):
        fabric = [b.switch("fabric", pod, p) for p in range(PLANES)]
        rack_sw = [b.switch("rack", pod, r) for r in range(racks)]
        for rack in rack_sw:
            for fsw in fabric:
                b.link(rack, fsw)
        for p, fsw in enumerate(fabric):
            for spine in spines[p]:
                b.link(fsw, spine)
        for r, rack in enumerate(rack_sw):
            for h in range(hosts_n):
                b.host([(rack, host_ip(pod, r, h + 1))])
    return b


def _incast(args: list[int], params: LinkParams) -> _Builder:
    _expect(args, 1, 1, "incast:N")
    (n,) = args
    if not 1 <= n <= 253:
        raise SpecError(f"incast:N needs 1 <= N <= 253 senders, got {n}")
    b = _Builder(params)
    sw = b.switch("edge", 0, 0)
    b.host([(sw, host_ip(0, 0, 1))], role="receiver")
    for i in range(n):
        b.host([(sw, host_ip(0, 0, i + 2))], role="sender")
    return b


def _torcore(args: list[int], params: LinkParams) -> _Builder:
    """Seed 002's at-scale network: T top-of-rack switches of H hosts each under one core
    switch; each ToR's uplink runs at H x the host link rate (the paper: 1 x the number
    of servers under a ToR, in Gbit/s), so only host links and the receivers' ToR ports
    can be bottlenecks."""
    _expect(args, 2, 2, "torcore:T,H")
    tors_n, hosts_n = args
    if not 1 <= tors_n <= 64 or not 1 <= hosts_n <= 64:
        raise SpecError(f"torcore:T,H needs 1..64 ToRs and 1..64 hosts per ToR, got {args}")
    _within_model(tors_n + 1, tors_n * hosts_n, "torcore:T,H")
    b = _Builder(params)
    core = b.switch("core", None, 0)
    uplink = replace(params, rate_mbit=params.rate_mbit * hosts_n
                     if params.rate_mbit is not None else None)
    tors = [b.switch("edge", 0, i) for i in range(tors_n)]
    for tor in tors:
        b.link(tor, core, uplink)
    for t, tor in enumerate(tors):
        for h in range(hosts_n):
            b.host([(tor, host_ip(0, t, h + 1))])
    return b


def _dumbbell(args: list[int], params: LinkParams) -> _Builder:
    """Seed 004: two client groups with different access delays share a bottleneck.

    Group A access delays spread over 2-6 ms, group B over 10-16 ms; the core link
    has 1 ms delay.  With X = 0 (the default) every client and UDP client hangs off the
    left switch and UDP clients (role ``udp``, group A) send to the server.

    X > 0 builds the seed's Fig. 4 more closely: the last X group-A clients (group
    ``A''``) sit behind an *outside* switch (tier ``external``: the paper's R5, beyond
    the data center's edge router R2), linked to the left switch at the link rate with
    1 ms delay.  Half of the U UDP clients sit there too (role ``udp``) and send to the
    other half on the left switch (role ``udp_sink``, group ``A'``), so UDP congests only
    the outside link that the A'' flows cross: the bottleneck outside the data center
    that lets those flows fall short of their fair share, which reallocation hands to
    the others.  Outside hosts are 10.0.1.x (their own /24 behind their switch).
    """
    _expect(args, 0, 3, "dumbbell[:N[,U[,X]]]")
    clients, udp, outside = (args + [4, 2, 0][len(args):])[:3]
    if clients < 2 or clients > 200 or udp < 0 or udp > 50:
        raise SpecError(f"dumbbell:N,U needs 2 <= N <= 200 and 0 <= U <= 50, got {args}")
    group_a = clients // 2
    if not 0 <= outside <= group_a:
        raise SpecError(f"dumbbell:N,U,X needs 0 <= X <= N/2 (group A has {group_a} "
                        f"clients), got X={outside}")
    if outside and udp % 2:
        raise SpecError(f"dumbbell:N,U,X with X > 0 pairs each outside UDP sender with a "
                        f"receiver inside: U must be even, got U={udp}")
    b = _Builder(params)
    left = b.switch("edge", 0, 0)
    right = b.switch("edge", 1, 0)
    core = replace(params, delay_us=params.delay_us or 1000)
    b.link(left, right, core)
    far = None
    if outside:
        far = b.switch(EXTERNAL_TIER, 0, 1)
        b.link(far, left, core)
    inside_a = group_a - outside
    for i in range(clients):
        group, lo, hi, idx, n = (
            ("A", 2000, 6000, i, group_a) if i < group_a else ("B", 10000, 16000, i - group_a,
                                                               clients - group_a)
        )
        delay = lo + (hi - lo) * idx // max(1, n - 1)
        where = (far, host_ip(0, 1, i - inside_a + 1)) if far and inside_a <= i < group_a \
            else (left, host_ip(0, 0, i + 1))
        if far and group == "A":
            group = "A''" if where[0] == far else "A'"
        b.host([where], role="client", group=group, params=replace(params, delay_us=delay))
    for i in range(udp):
        if far and i < udp // 2:
            b.host([(far, host_ip(0, 1, outside + i + 1))], role="udp", group="A''",
                   params=replace(params, delay_us=2000))
        else:
            b.host([(left, host_ip(0, 0, clients + i + 1))],
                   role="udp_sink" if far else "udp", group="A'" if far else "A",
                   params=replace(params, delay_us=2000))
    b.host([(right, host_ip(1, 0, 1))], role="server")
    return b


def _twopath(args: list[int], params: LinkParams) -> _Builder:
    """Seed 003 (Table 1): a fast low-RTT path and a slow high-RTT one.

    Path 1 (WLAN) 500 Mbit/s, RTT 20 ms +-15 ms; path 2 (LTE) 150 Mbit/s, RTT 200 ms
    +-150 ms; the delay sits on the client's access links (one way = RTT / 2).  ``rate=R``
    sets path 1 to R and path 2 to 0.3 R (the seed's ratio); the RTTs stay.  Jitter keeps
    packets in order unless ``reorder=1`` (netem's jitter, which the seed used, reorders).
    """
    _expect(args, 0, 0, "twopath")
    b = _Builder(params)
    p1 = b.switch("path", 0, 0)
    p2 = b.switch("path", 1, 0)
    srv = b.switch("edge", 2, 0)
    b.link(p1, srv)
    b.link(p2, srv)
    rate = params.rate_mbit or 500.0
    fast = replace(params, rate_mbit=rate, delay_us=10000, jitter_us=7500)
    slow = replace(params, rate_mbit=rate * 0.3, delay_us=100000, jitter_us=75000)
    # Per-interface link parameters: add the client's two links by hand.
    name = "h1"
    ifaces = []
    paths = ((p1, host_ip(0, 0, 1), fast), (p2, host_ip(1, 0, 1), slow))
    for index, (sw, ip, lp) in enumerate(paths):
        port = b._port(sw)
        ifaces.append(Interface(ip, host_mac(ip), sw, port))
        b.links.append(LinkSpec(name, index, sw, port, lp))
    b.hosts.append(HostSpec(name, tuple(ifaces), role="client"))
    b.host([(srv, host_ip(2, 0, 1))], role="server")
    return b


_FAMILIES: dict[str, tuple[Callable[[list[int], LinkParams], _Builder], LinkParams]] = {
    # Default rates keep userspace switches far from saturation: OVS userspace carries
    # ~0.5-1.2 Gbit/s on this machine (docs/platform.md).
    "fattree": (_fattree, LinkParams(rate_mbit=100.0)),
    "spineleaf": (_spineleaf, LinkParams(rate_mbit=10.0)),
    "threelayer": (_threelayer, LinkParams(rate_mbit=10.0)),
    "incast": (_incast, LinkParams(rate_mbit=100.0, delay_us=40, buffer_pkts=80)),
    "torcore": (_torcore, LinkParams(rate_mbit=100.0, delay_us=40, buffer_pkts=80)),
    "dumbbell": (_dumbbell, LinkParams(rate_mbit=100.0, buffer_pkts=200)),
    "twopath": (_twopath, LinkParams()),
}

# ---------------------------------------------------------------------------
# Parsing

_UNITS_RATE = {"": 1.0, "k": 1e-3, "m": 1.0, "g": 1e3}
_UNITS_TIME = {"us": 1, "ms": 1000, "s": 1_000_000}


# Bounds on link options: what an emulated link can mean, not this machine's speed.
MAX_RATE_MBIT = 1e6  # 1 Tbit/s
MAX_TIME_US = 10_000_000  # 10 s of delay or jitter
MAX_BUFFER_PKTS = 1_000_000
MAX_BUFFER_BYTES = 1 << 31


def _number(text: str, what: str) -> float:
    """A finite float, or ValueError naming ``what`` (nan and inf are not link values)."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {text!r}")
    return value


def _parse_rate(text: str) -> float:
    t = text.lower().removesuffix("bit").removesuffix("bps").removesuffix("b")
    unit = t[-1] if t and t[-1] in "kmg" else ""
    value = _number(t[: len(t) - len(unit)], "rate") * _UNITS_RATE[unit]
    if not 0 < value <= MAX_RATE_MBIT:
        raise ValueError(f"rate must be positive and at most {MAX_RATE_MBIT:g} Mbit/s")
    return value


def _parse_time_us(text: str) -> int:
    t = text.lower()
    for suffix in ("us", "ms", "s"):
        if t.endswith(suffix):
            value = _number(t[: -len(suffix)], "time")
            break
    else:
        suffix, value = "us", _number(t, "time")
    value *= _UNITS_TIME[suffix]
    if not 0 <= value <= MAX_TIME_US:
        raise ValueError(f"time must be between 0 and {MAX_TIME_US // 1_000_000} s")
    return int(round(value))


def _count(text: str, what: str, high: int) -> int:
    value = _number(text, what)
    if value != int(value) or not 1 <= value <= high:
        raise ValueError(f"{what} must be a whole number from 1 to {high}, got {text!r}")
    return int(value)


def _parse_buffer(text: str) -> tuple[int | None, int | None]:
    t = text.lower()
    for suffix, mult in (("kb", 1024), ("mb", 1024 * 1024), ("b", 1)):
        if t.endswith(suffix):
            return None, _count(str(_number(t[: -len(suffix)], "buffer") * mult),
                                "buffer (bytes)", MAX_BUFFER_BYTES)
    return _count(t.removesuffix("p"), "buffer (packets)", MAX_BUFFER_PKTS), None


def _apply_option(params: LinkParams, key: str, value: str) -> LinkParams:
    if key in ("rate", "bw"):
        return replace(params, rate_mbit=_parse_rate(value))
    if key == "delay":
        return replace(params, delay_us=_parse_time_us(value))
    if key == "jitter":
        return replace(params, jitter_us=_parse_time_us(value))
    if key == "reorder":
        flag = value.lower()
        if flag not in ("1", "0", "yes", "no", "true", "false", "on", "off"):
            raise ValueError("reorder takes 1 or 0")
        return replace(params, reorder=flag in ("1", "yes", "true", "on"))
    if key in ("buffer", "buf"):
        pkts, nbytes = _parse_buffer(value)
        return replace(params, buffer_pkts=pkts, buffer_bytes=nbytes)
    if key == "ecn":
        return replace(params, ecn_threshold_pkts=_count(value.lower().removesuffix("p"),
                                                         "ecn (packets)", MAX_BUFFER_PKTS))
    direction, at, scope = key.partition("@")
    if direction in QDISC_DIRECTIONS:
        if at and scope not in QDISC_SCOPES:
            raise ValueError(f"unknown scope @{scope}: use {direction}=, {direction}@host= "
                             f"or {direction}@fabric=")
        check_qdisc(direction, value)
        scopes = (scope,) if at else QDISC_SCOPES
        return replace(params, **{f"{direction}_{sc}": value for sc in scopes})
    raise KeyError(key)


LINK_OVERRIDE = "link@"
LINK_OVERRIDE_KEYS = ("rate", "bw", "delay", "jitter", "buffer", "buf", "ecn")


def _override_links(links: list[LinkSpec], key: str, value: str) -> list[LinkSpec]:
    """``links`` with ``link@A-B=K=V/K=V`` applied to the link(s) between A and B."""
    ends = key.removeprefix(LINK_OVERRIDE)
    a, dash, b = ends.partition("-")
    if not dash or not a or not b:
        raise ValueError(f"{key}: name the link's two ends, e.g. link@s1-s17")
    touched = [lk for lk in links if {lk.a, lk.b} == {a, b}]
    if not touched:
        near = neighbours(links, a)
        hint = f"; {a} links to {', '.join(near)}" if near else f"; no node {a}"
        raise ValueError(f"no link between {a} and {b}{hint}")
    out = []
    for lk in links:
        if lk in touched:
            params = lk.params
            for option in filter(None, value.split("/")):
                k, eq, v = option.partition("=")
                if not eq or k.strip().lower() not in LINK_OVERRIDE_KEYS:
                    raise ValueError(f"{option!r}: a link takes rate, delay, jitter, "
                                     "buffer or ecn=VALUE, /-separated")
                params = _apply_option(params, k.strip().lower(), v.strip())
            lk = replace(lk, params=params)
        out.append(lk)
    return out


# A spec is also an in-memory model (rule compilation, benchmarks up to fattree:48, 27,648
# hosts); past this it is a typo, and building it would exhaust memory first.
MAX_MODEL_NODES = 100_000


def _within_model(switches: int, hosts: int, form: str) -> None:
    if switches + hosts > MAX_MODEL_NODES:
        raise SpecError(f"{form} would have {switches} switches and {hosts} hosts; a "
                        f"topology spec holds at most {MAX_MODEL_NODES} nodes")


def _expect(args: list[int], lo: int, hi: int, form: str) -> None:
    if not lo <= len(args) <= hi:
        raise SpecError(f"{form} takes {lo}..{hi} numbers, got {len(args)}")


def _error(spec: str, why: str) -> SpecError:
    forms = "\n  ".join(VALID_FORMS)
    return SpecError(f"bad topology spec {spec!r}: {why}\nvalid forms:\n  {forms}")


def parse(spec: str) -> TopologySpec:
    """Parse a topology spec string into a :class:`TopologySpec`.

    Raises :class:`SpecError` listing the valid forms on any typo.
    """
    text = spec.strip()
    family, _, rest = text.partition(":")
    family = family.lower()
    if family not in _FAMILIES:
        raise _error(spec, f"unknown family {family!r}")
    build, params = _FAMILIES[family]
    args: list[int] = []
    options: list[str] = []
    overrides: list[tuple[str, str]] = []
    for item in filter(None, (x.strip() for x in rest.split(","))) if rest else ():
        if "=" in item:
            key, _, value = item.partition("=")
            if key.strip().lower().startswith(LINK_OVERRIDE):
                overrides.append((key.strip(), value.strip()))
                continue
            try:
                params = _apply_option(params, key.strip().lower(), value.strip())
            except KeyError:
                raise _error(spec, f"unknown link option {key!r}") from None
            except ValueError as exc:
                raise _error(spec, f"bad value for {key!r}: {value!r} ({exc})") from None
            options.append(f"{key.strip().lower()}={value.strip()}")
        elif options:
            raise _error(spec, "numbers must come before link options")
        else:
            try:
                args.append(int(item))
            except ValueError:
                raise _error(spec, f"{item!r} is not an integer") from None
    try:
        b = build(args, params)
    except SpecError as exc:
        raise _error(spec, str(exc)) from None
    links = b.links
    for key, value in overrides:
        try:
            links = _override_links(links, key, value)
        except ValueError as exc:
            raise _error(spec, f"bad {key}={value}: {exc}") from None
    options += [f"{LINK_OVERRIDE}{k.removeprefix(LINK_OVERRIDE)}={v}" for k, v in overrides]
    canonical = family + (":" + ",".join([str(a) for a in args] + options) if args or options
                          else "")
    return TopologySpec(canonical, family, b.switches, b.hosts, links, params)


def families() -> list[str]:
    return sorted(_FAMILIES)
