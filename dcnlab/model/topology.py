"""The topology model: switches, hosts, interfaces, links and their parameters.

Plain data, shared by both sides of a run: :mod:`dcnlab.topo` builds the network from it
and hands it to the controller app as JSON (:meth:`TopologySpec.to_dict`, read back with
:meth:`TopologySpec.from_dict` through ``DCNLAB_TOPOLOGY``); :mod:`dcnlab.controller`
compiles its rules from it.  Spec strings and the topology families that produce a model
are :mod:`dcnlab.topo.spec`'s business.

Addresses are hierarchical, ``10.<pod>.<edge>.<host>`` (:func:`host_ip`), so the rule
compiler can aggregate destinations by edge switch (/24) and pod (/16).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

# Tier of switches beyond the data center's edge (dumbbell:N,U,X's outside switch): a
# scheme acting at the edge finds it as the first switch of a path not of this tier.
EXTERNAL_TIER = "external"


class SpecError(ValueError):
    """A topology spec string that cannot be parsed; the message lists valid forms.

    Also raised by :func:`host_ip` when a family's addressing overflows.
    """


# Directions a switch port can have a queue discipline in (switch_ext: src/qdisc/).
QDISC_DIRECTIONS = ("egress", "ingress")

# Queue disciplines switch_ext knows, with the option keys each accepts, one a line
# (direction, name, keys): a copy of its registry (switch_ext/src/qdisc/mod.rs, EGRESS and
# INGRESS, and each discipline's constructor), so that a misspelt name or key in a spec is
# refused when the spec is parsed rather than when a switch starts; the values are the
# switch's to check.  The first egress discipline is the default.  tests/unit/test_spec.py
# compares this with the Rust sources, so the two cannot drift apart.  A table of text
# rather than a dict of string literals: a discipline may share its name with the scheme
# that uses it (abq), and generic code must not name schemes (tests/unit/test_schemes.py
# looks for such literals).
_QDISC_TABLE = """
egress   droptail  buffer ecn
ingress  abq       k mode qmax cap hold mtu mss flows enable
"""


def _qdiscs(table: str) -> dict[str, dict[str, tuple[str, ...]]]:
    known: dict[str, dict[str, tuple[str, ...]]] = {d: {} for d in QDISC_DIRECTIONS}
    for line in table.strip().splitlines():
        direction, name, *keys = line.split()
        known[direction][name] = tuple(keys)
    return known


QDISCS = _qdiscs(_QDISC_TABLE)  # direction -> name -> option keys
DEFAULT_EGRESS_QDISC = next(iter(QDISCS["egress"]))


@dataclass(frozen=True)
class LinkParams:
    """Emulated link properties.  ``None`` means "not emulated" (unshaped, unbounded)."""

    rate_mbit: float | None = None
    delay_us: int = 0
    jitter_us: int = 0
    # jitter may reorder packets (netem's behaviour); False: a packet never leaves before
    # its predecessor, jitter only delays (switch_ext's default)
    reorder: bool = False
    buffer_pkts: int | None = None
    buffer_bytes: int | None = None
    ecn_threshold_pkts: int | None = None
    # Queue disciplines as "NAME[/KEY=VALUE]..." (see topo/spec.py), per direction and
    # per kind of switch port: ``*_host`` on switch ports facing a host, ``*_fabric`` on
    # switch ports facing another switch.  None: the switch's default.
    egress_host: str | None = None
    egress_fabric: str | None = None
    ingress_host: str | None = None
    ingress_fabric: str | None = None

    def qdisc(self, direction: str, towards_host: bool) -> str | None:
        """The ``direction`` ("egress"/"ingress") discipline of a switch port on this link
        that faces a host (``towards_host``) or another switch; None for the default."""
        return getattr(self, f"{direction}_{'host' if towards_host else 'fabric'}")

    def has_qdisc(self) -> bool:
        return any(self.qdisc(d, h) for d in QDISC_DIRECTIONS for h in (True, False))

    def needs_emulation(self) -> bool:
        """True when a parameter needs switch-side emulation (netem is not available)."""
        return bool(
            self.delay_us
            or self.jitter_us
            or self.buffer_pkts is not None
            or self.buffer_bytes is not None
            or self.ecn_threshold_pkts is not None
            or self.has_qdisc()
        )


@dataclass(frozen=True)
class SwitchSpec:
    name: str
    dpid: int
    tier: str  # edge / agg / core, leaf / spine, rack / fabric, ...
    pod: int | None = None
    index: int = 0  # position within its tier (and pod), used for addressing


@dataclass(frozen=True)
class Interface:
    """One host interface: its address and where it attaches to the fabric."""

    ip: str
    mac: str
    switch: str
    port: int  # switch port number
    prefixlen: int = 8  # every host is on-link; the controller answers ARP

    @property
    def ip_int(self) -> int:
        return int(ipaddress.IPv4Address(self.ip))


@dataclass(frozen=True)
class HostSpec:
    name: str
    interfaces: tuple[Interface, ...]
    role: str = ""  # free text used by families: "sender", "receiver", "udp", ...
    group: str = ""  # delay group (dumbbell) or path class

    @property
    def ip(self) -> str:
        return self.interfaces[0].ip

    @property
    def mac(self) -> str:
        return self.interfaces[0].mac


@dataclass(frozen=True)
class LinkSpec:
    """A link between two nodes.  Host ends use the interface index as port."""

    a: str
    a_port: int
    b: str
    b_port: int
    params: LinkParams = field(default_factory=LinkParams)


@dataclass
class TopologySpec:
    spec: str  # canonical spec string
    family: str
    switches: list[SwitchSpec]
    hosts: list[HostSpec]
    links: list[LinkSpec]
    default_params: LinkParams

    def switch(self, name: str) -> SwitchSpec:
        return self._switch_index()[name]

    def host(self, name: str) -> HostSpec:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def _switch_index(self) -> dict[str, SwitchSpec]:
        return {s.name: s for s in self.switches}

    def is_switch(self, name: str) -> bool:
        return name in self._switch_index()

    def fabric_links(self) -> Iterator[LinkSpec]:
        """Switch-to-switch links."""
        names = self._switch_index()
        return (lk for lk in self.links if lk.a in names and lk.b in names)

    def host_links(self) -> Iterator[LinkSpec]:
        names = self._switch_index()
        return (lk for lk in self.links if (lk.a in names) != (lk.b in names))

    def needs_emulation(self) -> bool:
        return any(lk.params.needs_emulation() for lk in self.links)

    def to_dict(self) -> dict:
        """JSON-ready form handed to the controller app (DCNLAB_TOPOLOGY)."""
        return {
            "spec": self.spec,
            "family": self.family,
            "switches": [vars(s) for s in self.switches],
            "hosts": [
                {
                    "name": h.name,
                    "role": h.role,
                    "group": h.group,
                    "interfaces": [vars(i) for i in h.interfaces],
                }
                for h in self.hosts
            ],
            "links": [
                {"a": lk.a, "a_port": lk.a_port, "b": lk.b, "b_port": lk.b_port,
                 "params": vars(lk.params)}
                for lk in self.links
            ],
            "default_params": vars(self.default_params),
        }

    @classmethod
    def from_dict(cls, data: dict) -> TopologySpec:
        return cls(
            spec=data["spec"],
            family=data["family"],
            switches=[SwitchSpec(**s) for s in data["switches"]],
            hosts=[
                HostSpec(
                    name=h["name"],
                    role=h.get("role", ""),
                    group=h.get("group", ""),
                    interfaces=tuple(Interface(**i) for i in h["interfaces"]),
                )
                for h in data["hosts"]
            ],
            links=[
                LinkSpec(lk["a"], lk["a_port"], lk["b"], lk["b_port"], LinkParams(**lk["params"]))
                for lk in data["links"]
            ],
            default_params=LinkParams(**data["default_params"]),
        )


# ---------------------------------------------------------------------------
# Addressing


def neighbours(links: Iterable[LinkSpec], node: str) -> list[str]:
    """The nodes ``node`` has a link to, sorted (for errors that name a wrong link)."""
    return sorted({lk.b if lk.a == node else lk.a for lk in links if node in (lk.a, lk.b)})


def host_mac(ip: str) -> str:
    """Locally administered MAC derived from the IPv4 address: 02:00:a.b.c.d."""
    octets = ipaddress.IPv4Address(ip).packed
    return "02:00:" + ":".join(f"{o:02x}" for o in octets)


def host_ip(pod: int, edge: int, host: int) -> str:
    for value, what, hi in ((pod, "pod", 255), (edge, "edge", 255), (host, "host", 254)):
        if not 0 <= value <= hi:
            raise SpecError(f"addressing overflow: {what} index {value} > {hi}")
    return f"10.{pod}.{edge}.{host}"
