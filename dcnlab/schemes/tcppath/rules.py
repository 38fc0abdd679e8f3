"""TCP-Path's OpenFlow entries, as data (:class:`~dcnlab.controller.rules.FlowEntry`).

Priorities, highest first (the compiled default routes sit at 100..400 below them)::

    1000  exploration punt      eth_type=0x88B5 -> controller            every switch
     800  per-flow entry        in_port, eth_src/dst, tcp_src/dst -> port  path switches
     700  SYN-ACK punt          in_port=host port, tcp_flags SYN&ACK       edge switches
                                (TFE: tcp_dst in the elephant range; a DSCP-only elephant
                                gets a per-flow one for its own SYN-ACK)
     600  SYN punt              in_port=host port, tcp_flags SYN&!ACK      edge switches
                                (TFE: and an elephant source port / DSCP)

SYN-ACK punts are static where possible because Open vSwitch applies a new entry to
packets of an existing datapath (megaflow) cache entry only after revalidation: a
per-flow punt installed just before the SYN is delivered can miss the SYN-ACK.  A
punted SYN-ACK that confirms nothing is relayed to its host by the controller.

Per-flow entries match ``in_port`` on purpose: a packet that left its path (an entry
aged out, a switch reconnected) never re-enters it, it continues on the loop-free
default routes, so a partial path can never form a loop.  They sit above the SYN punt so
that a retransmitted SYN of a confirmed connection simply follows its path.
Static entries carry dcnlab's cookie (the base app diffs and resyncs them); per-flow
entries carry ``COOKIE_TCPPATH | serial`` so flow-removed messages name their flow.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.controller.ofmsg import _instructions
from dcnlab.controller.rules import (
    ETH_TYPE_IP,
    IPPROTO_TCP,
    OFPCML_NO_BUFFER,
    OFPP_CONTROLLER,
    PRIO_PUNT,
    FlowEntry,
    match,
)
from dcnlab.schemes.tcppath.frames import ETH_TYPE_EXPLORATION, TCP_ACK, TCP_SYN
from dcnlab.schemes.tcppath.state import Exploration, Flow, FlowKey

PRIO_EXPLORATION_PUNT = PRIO_PUNT
PRIO_FLOW = 800
PRIO_SYNACK_PUNT = 700
PRIO_SYN_PUNT = 600

COOKIE_TCPPATH = 0xDD << 40  # in dcnlab's cookie space (controller/rules.py COOKIE_SPACE)
COOKIE_TCPPATH_MASK = 0xFFFFFF << 40
SERIAL_MASK = (1 << 40) - 1
TO_CONTROLLER = (("output", OFPP_CONTROLLER, OFPCML_NO_BUFFER),)


@dataclass(frozen=True)
class ElephantFilter:
    """TFE's elephant mark: a source port range and/or DSCP values (None: not used)."""

    ports: tuple[int, int] | None = (30001, 65535)
    dscp: frozenset[int] | None = frozenset(range(1, 64))

    def matches(self, sport: int, dscp: int) -> bool:
        by_port = self.ports is not None and self.ports[0] <= sport <= self.ports[1]
        return by_port or (self.dscp is not None and dscp in self.dscp)


def port_prefixes(lo: int, hi: int, bits: int = 16) -> list[tuple[int, int]]:
    """(value, mask) pairs covering exactly the ports lo..hi (OpenFlow has no ranges)."""
    out: list[tuple[int, int]] = []
    full = (1 << bits) - 1
    while lo <= hi:
        size = lo & -lo if lo else 1 << bits
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, full & ~(size - 1)))
        lo += size
    return out


def static_entries(host_ports: Iterable[int], elephants: ElephantFilter | None,
                   port_masks: bool = True) -> list[FlowEntry]:
    """What every switch holds for TCP-Path: the exploration punt, and on edge switches
    SYN and SYN-ACK punts per host port (TFE: per elephant mark).

    OpenFlow 1.3 does not let ``tcp_src``/``tcp_dst`` be masked; Open vSwitch accepts it
    anyway, other switches (switch_ext) refuse it.  Without ``port_masks`` TFE punts every
    SYN and SYN-ACK from hosts, as TCP-Path does, and the controller tells elephants from
    the rest (relaying the rest straight to their host: no exploration, no entries)."""
    if elephants is not None and not port_masks:
        elephants = None
    entries = [FlowEntry(PRIO_EXPLORATION_PUNT, match(eth_type=ETH_TYPE_EXPLORATION),
                         TO_CONTROLLER)]
    syn = {"eth_type": ETH_TYPE_IP, "ip_proto": IPPROTO_TCP,
           "tcp_flags": (TCP_SYN, TCP_SYN | TCP_ACK)}
    synack = {**syn, "tcp_flags": (TCP_SYN | TCP_ACK, TCP_SYN | TCP_ACK)}
    for port in sorted(host_ports):
        if elephants is None:
            entries.append(FlowEntry(PRIO_SYN_PUNT, match(in_port=port, **syn), TO_CONTROLLER))
            entries.append(FlowEntry(PRIO_SYNACK_PUNT, match(in_port=port, **synack),
                                     TO_CONTROLLER))
            continue
        if elephants.ports is not None:
            for value, mask in port_prefixes(*elephants.ports):
                entries.append(FlowEntry(PRIO_SYN_PUNT, match(
                    in_port=port, tcp_src=(value, mask), **syn), TO_CONTROLLER))
                entries.append(FlowEntry(PRIO_SYNACK_PUNT, match(
                    in_port=port, tcp_dst=(value, mask), **synack), TO_CONTROLLER))
        for dscp in sorted(elephants.dscp or ()):
            # IP_DSCP is not maskable in OpenFlow 1.3: one entry per value.
            entries.append(FlowEntry(PRIO_SYN_PUNT, match(in_port=port, ip_dscp=dscp, **syn),
                                     TO_CONTROLLER))
    return entries


def _tuple_match(key: FlowKey, in_port: int, **extra: Any) -> tuple:
    return match(eth_type=ETH_TYPE_IP, ip_proto=IPPROTO_TCP, in_port=in_port,
                 eth_src=key.src_mac, eth_dst=key.dst_mac, tcp_src=key.src_port,
                 tcp_dst=key.dst_port, **extra)


def flow_entries(flow: Flow, idle_timeout: int) -> dict[int, list[FlowEntry]]:
    """Per switch of the path: the SD and DS entries of a confirmed flow."""
    cookie = COOKIE_TCPPATH | (flow.serial & SERIAL_MASK)
    out: dict[int, list[FlowEntry]] = {}
    for hop in flow.path:
        out[hop.dpid] = [
            FlowEntry(PRIO_FLOW, _tuple_match(flow.key, hop.to_src), (("output", hop.to_dst),),
                      idle_timeout=idle_timeout, cookie=cookie),
            FlowEntry(PRIO_FLOW, _tuple_match(flow.key.reverse(), hop.to_dst),
                      (("output", hop.to_src),), idle_timeout=idle_timeout, cookie=cookie),
        ]
    return out


def synack_punted_statically(key: FlowKey, elephants: ElephantFilter | None,
                             port_masks: bool = True) -> bool:
    """Whether the static SYN-ACK punts catch the SYN-ACK answering ``key``'s SYN."""
    return elephants is None or not port_masks or (elephants.ports is not None
                                 and elephants.ports[0] <= key.src_port <= elephants.ports[1])


def synack_punt(expl: Exploration, lock_timeout: float) -> FlowEntry:
    """At the destination edge: punt the SYN-ACK answering this exploration's SYN (for
    elephants marked by DSCP only, whose SYN-ACK no static entry can recognise)."""
    return FlowEntry(PRIO_SYNACK_PUNT,
                     _tuple_match(expl.key.reverse(), expl.dst.port,
                                  tcp_flags=(TCP_SYN | TCP_ACK, TCP_SYN | TCP_ACK)),
                     TO_CONTROLLER, hard_timeout=max(1, math.ceil(lock_timeout)),
                     cookie=COOKIE_TCPPATH)


def serial_of(cookie: int) -> int | None:
    """The flow serial a per-flow entry's cookie names (None: not a per-flow entry)."""
    if cookie & COOKIE_TCPPATH_MASK != COOKIE_TCPPATH or not cookie & SERIAL_MASK:
        return None
    return cookie & SERIAL_MASK


def flow_mod(dp: Any, entry: FlowEntry, notify: bool = False) -> Any:
    """An add for ``entry``; ``notify`` asks for a flow-removed when it ages out."""
    return parser.OFPFlowMod(
        dp, cookie=entry.cookie, table_id=entry.table_id, command=ofp.OFPFC_ADD,
        idle_timeout=entry.idle_timeout, hard_timeout=entry.hard_timeout,
        priority=entry.priority, flags=ofp.OFPFF_SEND_FLOW_REM if notify else 0,
        match=parser.OFPMatch(**dict(entry.match)), instructions=_instructions(entry.actions))


def delete_all_flows(dp: Any) -> Any:
    """Remove every per-flow entry and SYN-ACK punt of ours from a switch."""
    return parser.OFPFlowMod(dp, cookie=COOKIE_TCPPATH, cookie_mask=COOKIE_TCPPATH_MASK,
                             table_id=ofp.OFPTT_ALL, command=ofp.OFPFC_DELETE,
                             out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY,
                             match=parser.OFPMatch())
