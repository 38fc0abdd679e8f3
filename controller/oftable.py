"""An in-memory OpenFlow 1.3 switch and network, for tests that need no network.

Like Faucet's ``fakeoftable``: :class:`FakeSwitch` replays the flow and group mods an
app would send (Ryu message objects, flow mods through a serialize/parse round trip)
and answers "where does this packet go".  :class:`FakeNetwork` wires fake switches
together as a :class:`~dcnlab.controller.view.NetworkView` describes and follows a
packet along *every* alternative a select group offers, reporting deliveries, loops
and black holes.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ryu.ofproto import ofproto_parser, ofproto_protocol
from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.controller.ofmsg import changes
from dcnlab.controller.rules import SwitchRules
from dcnlab.controller.view import NetworkView

Packet = dict[str, Any]
PROTOCOL = ofproto_protocol.ProtocolDesc(ofp.OFP_VERSION)
MAX_HOPS = 64


def _as_int(field_name: str, value: Any) -> int:
    if isinstance(value, int):
        return value
    if field_name.startswith(("ipv4", "arp_spa", "arp_tpa")):
        return int(ipaddress.IPv4Address(value))
    if field_name.startswith(("eth", "arp_sha", "arp_tha")):
        return int(value.replace(":", ""), 16)
    raise ValueError(f"cannot compare field {field_name}={value!r}")


def packet_ints(pkt: Packet) -> dict[str, int]:
    """A packet with every field as an integer (matching compares integers)."""
    return {k: _as_int(k, v) for k, v in pkt.items()}


_ALL_ONES = (1 << 128) - 1


@dataclass
class _Flow:
    priority: int
    match: list[tuple[str, Any]]
    actions: list[Any]  # Ryu action objects (apply-actions); empty = drop
    cookie: int
    table_id: int
    # (field, value & mask, mask) precomputed so a lookup is integer compares only.
    compiled: list[tuple[str, int, int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, want in self.match:
            if isinstance(want, tuple):
                value, mask = (_as_int(name, w) for w in want)
            else:
                value, mask = _as_int(name, want), _ALL_ONES
            self.compiled.append((name, value & mask, mask))

    def matches(self, pkt: dict[str, int]) -> bool:
        for name, value, mask in self.compiled:
            have = pkt.get(name)
            if have is None or have & mask != value:
                return False
        return True


@dataclass
class FakeSwitch:
    dpid: int
    flows: list[_Flow] = field(default_factory=list)
    groups: dict[int, Any] = field(default_factory=dict)  # gid -> OFPGroupMod

    def apply(self, msg: Any) -> None:
        msg.serialize()  # what cannot be encoded must fail here, as it would on the wire
        if isinstance(msg, parser.OFPFlowMod):
            parsed = ofproto_parser.msg(PROTOCOL, msg.version, msg.msg_type, msg.msg_len,
                                        msg.xid, msg.buf)
            self._flow_mod(parsed)
        elif isinstance(msg, parser.OFPGroupMod):
            self._group_mod(msg)
        else:
            raise TypeError(f"FakeSwitch does not model {type(msg).__name__}")

    def _flow_mod(self, fm: Any) -> None:
        items = list(fm.match._fields2)
        if fm.command == ofp.OFPFC_ADD:
            self.flows = [f for f in self.flows
                          if not (f.priority == fm.priority and f.table_id == fm.table_id
                                  and sorted(f.match) == sorted(items))]
            actions: list[Any] = []
            for inst in fm.instructions:
                if inst.type != ofp.OFPIT_APPLY_ACTIONS:
                    raise NotImplementedError(f"instruction type {inst.type}")
                actions += inst.actions
            self.flows.append(_Flow(fm.priority, items, actions, fm.cookie, fm.table_id))
            self.flows.sort(key=lambda f: -f.priority)
        elif fm.command == ofp.OFPFC_DELETE_STRICT:
            self.flows = [f for f in self.flows
                          if not (f.priority == fm.priority and sorted(f.match) == sorted(items))]
        elif fm.command == ofp.OFPFC_DELETE:
            if items:
                raise NotImplementedError("non-strict delete with a match")
            self.flows = [f for f in self.flows
                          if fm.cookie_mask and (f.cookie & fm.cookie_mask)
                          != (fm.cookie & fm.cookie_mask)]
        else:
            raise NotImplementedError(f"flow mod command {fm.command}")

    def _group_mod(self, gm: Any) -> None:
        if gm.command == ofp.OFPGC_DELETE:
            if gm.group_id == ofp.OFPG_ALL:
                self.groups.clear()
            else:
                self.groups.pop(gm.group_id, None)
        elif gm.command == ofp.OFPGC_ADD:
            if gm.group_id in self.groups:
                raise ValueError(f"switch {self.dpid}: group {gm.group_id} exists (GROUP_EXISTS)")
            self.groups[gm.group_id] = gm
        elif gm.command == ofp.OFPGC_MODIFY:
            if gm.group_id not in self.groups:
                raise ValueError(f"switch {self.dpid}: group {gm.group_id} unknown")
            self.groups[gm.group_id] = gm

    def lookup(self, pkt: dict[str, int]) -> _Flow | None:
        for flow in self.flows:
            if flow.table_id == 0 and flow.matches(pkt):
                return flow
        return None

    def alternatives(self, pkt: dict[str, int], live: set[int] | None = None) -> list[list[int]]:
        """Each way this switch may forward ``pkt`` (see :func:`packet_ints`).

        Returns a list of output ports per way.

        A select group yields one alternative per live bucket; ``[[]]`` is a drop.
        """
        flow = self.lookup(pkt)
        if flow is None:
            return [[]]
        ways: list[list[int]] = [[]]
        for action in flow.actions:
            if isinstance(action, parser.OFPActionOutput):
                ways = [w + [action.port] for w in ways]
            elif isinstance(action, parser.OFPActionGroup):
                ways = [w + extra for w in ways for extra in self._group_ways(action.group_id,
                                                                              live)]
            else:
                raise NotImplementedError(type(action).__name__)
        return ways

    def _group_ways(self, gid: int, live: set[int] | None) -> list[list[int]]:
        group = self.groups.get(gid)
        if group is None:
            raise KeyError(f"switch {self.dpid}: flow points to missing group {gid}")
        def alive(b: Any) -> bool:
            return live is None or b.watch_port == ofp.OFPP_ANY or b.watch_port in live
        outs = [[a.port for a in b.actions if isinstance(a, parser.OFPActionOutput)]
                for b in group.buckets]
        if group.type == ofp.OFPGT_SELECT:
            chosen = [o for b, o in zip(group.buckets, outs, strict=True)
                      if alive(b) and b.weight > 0]
            return chosen or [[]]
        if group.type == ofp.OFPGT_ALL:
            return [[p for o in outs for p in o]]
        if group.type == ofp.OFPGT_FF:
            for b, o in zip(group.buckets, outs, strict=True):
                if alive(b):
                    return [o]
            return [[]]
        return [outs[0]]  # indirect


class FakeDatapath:
    """A Ryu datapath stand-in that records what an app sends (for driving apps in memory).

    Every message is serialized on the way out, so what the wire would refuse fails here;
    :meth:`take` hands over (and forgets) what was sent, for replay into a FakeSwitch.
    """

    def __init__(self, dpid: int) -> None:
        self.id = dpid
        self.ofproto = ofp
        self.ofproto_parser = parser
        self.sent: list[Any] = []
        self._xid = 0

    def set_xid(self, msg: Any) -> None:
        self._xid += 1
        msg.set_xid(self._xid)

    def send_msg(self, msg: Any) -> None:
        if msg.xid is None:
            self.set_xid(msg)
        msg.serialize()
        self.sent.append(msg)

    def take(self) -> list[Any]:
        out, self.sent = self.sent, []
        return out


@dataclass
class Trace:
    """Every way a packet may travel from its source.

    ``paths[host_ip]`` counts the distinct paths delivering to that host; loops,
    black holes and punts keep one example path (list of dpids) each.
    """

    paths: dict[str, int] = field(default_factory=dict)
    loops: list[list[int]] = field(default_factory=list)
    black_holes: list[list[int]] = field(default_factory=list)
    punted: list[list[int]] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not (self.loops or self.black_holes or self.punted)


@dataclass
class _Outcome:
    paths: dict[str, int] = field(default_factory=dict)
    loops: list[list[int]] = field(default_factory=list)
    black_holes: list[list[int]] = field(default_factory=list)
    punted: list[list[int]] = field(default_factory=list)

    def absorb(self, other: _Outcome, prefix: list[int]) -> None:
        for ip, n in other.paths.items():
            self.paths[ip] = self.paths.get(ip, 0) + n
        for mine, theirs in ((self.loops, other.loops), (self.black_holes, other.black_holes),
                             (self.punted, other.punted)):
            if theirs and not mine:
                mine.append(prefix + theirs[0])


class FakeNetwork:
    """Fake switches wired as in a :class:`NetworkView`."""

    def __init__(self, view: NetworkView) -> None:
        self.view = view
        self.switches = {dpid: FakeSwitch(dpid) for dpid in view.switches}
        self._installed: dict[int, SwitchRules] = {}
        self._wiring_version = -1
        self._wiring_cache: dict[int, tuple[set[int], dict[int, tuple[str, Any]]]] = {}
        # Walk results shared by every trace until rules or wiring change; keyed by the
        # packet fields some installed entry matches on (others cannot change a fate).
        self._memo: dict[tuple, _Outcome] = {}
        self._match_fields: tuple[str, ...] = ()

    def install(self, compiled: dict[int, SwitchRules]) -> int:
        """Send each switch the changes to reach ``compiled``; returns message count."""
        count = 0
        for dpid, rules in compiled.items():
            for msg in changes(PROTOCOL, self._installed.get(dpid), rules):
                self.switches[dpid].apply(msg)
                count += 1
            self._installed[dpid] = rules
        self._rules_changed()
        return count

    def replay(self, dpid: int, msgs: Iterable[Any]) -> None:
        for msg in msgs:
            self.switches[dpid].apply(msg)
        self._rules_changed()

    def _rules_changed(self) -> None:
        self._memo.clear()
        used = {name for sw in self.switches.values() for f in sw.flows for name, _ in f.match}
        self._match_fields = tuple(sorted(used | {"in_port"}))

    def _wiring(self) -> dict[int, tuple[set[int], dict[int, tuple[str, Any]]]]:
        """Per switch: live ports and where each live port leads (cached per link state)."""
        if self.view.version != self._wiring_version:
            wiring: dict[int, tuple[set[int], dict[int, tuple[str, Any]]]] = {
                dpid: (set(), {}) for dpid in self.view.switches
            }
            for a, a_port, b, b_port, up in self.view.links():
                if up:
                    for dpid, port, peer in ((a, a_port, (b, b_port)), (b, b_port, (a, a_port))):
                        wiring[dpid][0].add(port)
                        wiring[dpid][1][port] = ("switch", peer)
            for h in self.view.hosts:
                wiring[h.dpid][0].add(h.port)
                wiring[h.dpid][1][h.port] = ("host", h)
            self._wiring_cache, self._wiring_version = wiring, self.view.version
            self._memo.clear()
        return self._wiring_cache

    def trace(self, src_ip: str, pkt: Packet) -> Trace:
        """Follow ``pkt`` from the host with ``src_ip`` along every alternative.

        The walk is memoized per (switch, in_port, fields that entries match on): a
        packet's fate there does not depend on how it arrived (no entry rewrites it),
        so shared path suffixes are walked once, across traces too.  A state met again
        while it is being walked is a loop.
        """
        src = self.view.host_by_ip(src_ip)
        if src is None:
            raise KeyError(f"unknown source host {src_ip}")
        ints = packet_ints(pkt)
        wiring = self._wiring()
        memo = self._memo
        fields = self._match_fields
        active: set[tuple] = set()

        def walk(dpid: int, in_port: int, depth: int) -> _Outcome:
            ints["in_port"] = in_port
            state = (dpid,) + tuple(ints.get(f) for f in fields)
            if state in memo:
                return memo[state]
            out = _Outcome()
            if state in active or depth > MAX_HOPS:
                out.loops.append([dpid])
                return out
            active.add(state)
            live, leads_to = wiring[dpid]
            for outs in self.switches[dpid].alternatives(ints, live):
                if not outs:
                    out.black_holes.append([dpid])
                for port in outs:
                    if port == ofp.OFPP_CONTROLLER:
                        out.punted.append([dpid])
                        continue
                    nxt = leads_to.get(port)
                    if nxt is None:
                        out.black_holes.append([dpid])
                    elif nxt[0] == "host":
                        out.paths[nxt[1].ip] = out.paths.get(nxt[1].ip, 0) + 1
                    else:
                        out.absorb(walk(nxt[1][0], nxt[1][1], depth + 1), [dpid])
            active.discard(state)
            memo[state] = out
            return out

        result = walk(src.dpid, src.port, 0)
        return Trace(result.paths, result.loops, result.black_holes, result.punted)


def tcp_packet(src: Any, dst: Any, sport: int = 40000, dport: int = 5001) -> Packet:
    """A TCP packet between two :class:`HostLocation` values, as a match-field dict."""
    return {
        "eth_type": 0x0800,
        "eth_src": src.mac,
        "eth_dst": dst.mac,
        "ipv4_src": src.ip,
        "ipv4_dst": dst.ip,
        "ip_proto": 6,
        "tcp_src": sport,
        "tcp_dst": dport,
    }
