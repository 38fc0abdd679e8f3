"""OpenFlow rules as plain data.

A compiled policy is, per switch, a set of :class:`FlowEntry` and :class:`GroupEntry`
values.  They are hashable and comparable, so installing a new policy is a set
difference against what the switch already holds, and tests can inspect them (or
replay them through :mod:`dcnlab.controller.oftable`) without a network.

Matches are tuples of ``(field, value)`` pairs using Ryu's OXM field names; a masked
field has a ``(value, mask)`` tuple as value.  Actions are tuples such as
``("output", 3)``, ``("group", 7)`` or ``("set_field", "ip_dscp", 8)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Match = tuple[tuple[str, Any], ...]
Action = tuple[Any, ...]

# Priorities: longer prefixes win; punts sit above forwarding.
PRIO_TABLE_MISS = 0
PRIO_DEFAULT = 100
PRIO_SUFFIX = 110  # single-path spreading of the default route by host suffix
PRIO_SUPERNET = 200
PRIO_PREFIX = 300
PRIO_HOST = 400
PRIO_PUNT = 1000

ETH_TYPE_IP = 0x0800
ETH_TYPE_ARP = 0x0806
ETH_TYPE_LLDP = 0x88CC
IPPROTO_TCP = 6

OFPP_CONTROLLER = 0xFFFFFFFD
OFPCML_NO_BUFFER = 0xFFFF

# Cookie marking entries installed by dcnlab, so a resync deletes only ours.
COOKIE_DCNLAB = 0xDC0000000000
# Every cookie a dcnlab app installs lies in one space: 0xDC in bits 40-47 for the
# compiled policy (COOKIE_DCNLAB), 0xDD for TCP-Path's own entries (its per-flow
# entries and data-plane pipeline), bits 48-63 zero.  A resync deletes the whole space,
# whichever app installed it: a controller restarted with another app (``dcnlab check``
# measures ECMP on the same network so) must not find the previous app's pipeline still
# steering packets ahead of its own entries.
COOKIE_SPACE = 0xDC << 40
COOKIE_SPACE_MASK = 0xFFFFFE << 40


def match(**fields: Any) -> Match:
    """A canonical (sorted) match from Ryu OXM keyword fields."""
    return tuple(sorted(fields.items()))


@dataclass(frozen=True, order=True)
class FlowEntry:
    priority: int
    match: Match
    actions: tuple[Action, ...]  # empty tuple = drop
    table_id: int = 0
    idle_timeout: int = 0
    hard_timeout: int = 0
    cookie: int = COOKIE_DCNLAB

    @property
    def key(self) -> tuple[int, int, Match]:
        """What identifies the entry inside a switch (OpenFlow strict identity)."""
        return (self.table_id, self.priority, self.match)


@dataclass(frozen=True, order=True)
class Bucket:
    actions: tuple[Action, ...]
    weight: int = 1
    watch_port: int | None = None


@dataclass(frozen=True, order=True)
class GroupEntry:
    group_id: int
    type: str  # "select", "all", "indirect", "ff"
    buckets: tuple[Bucket, ...]


@dataclass
class SwitchRules:
    """Everything one switch must hold."""

    dpid: int
    flows: set[FlowEntry] = field(default_factory=set)
    groups: dict[int, GroupEntry] = field(default_factory=dict)

    def add_flow(self, entry: FlowEntry) -> None:
        self.flows.add(entry)


def base_entries() -> list[FlowEntry]:
    """Entries every fabric switch holds whatever the policy.

    ARP goes to the controller, which answers it (no flooding on loopy fabrics);
    LLDP goes to the controller for link discovery; everything unmatched is dropped
    (the table-miss entry has no instructions).
    """
    to_controller = (("output", OFPP_CONTROLLER, OFPCML_NO_BUFFER),)
    return [
        FlowEntry(PRIO_PUNT, match(eth_type=ETH_TYPE_ARP), to_controller),
        FlowEntry(PRIO_PUNT, match(eth_type=ETH_TYPE_LLDP), to_controller),
        FlowEntry(PRIO_TABLE_MISS, match(), ()),
    ]
