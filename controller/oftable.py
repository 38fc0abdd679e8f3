"""An in-memory OpenFlow 1.3 switch and network, for tests that need no network.

Like Faucet's ``fakeoftable``: :class:`FakeSwitch` replays the flow and group mods an
app would send (Ryu message objects, flow mods through a serialize/parse round trip)
and answers "where does this packet go".  :class:`FakeNetwork` wires fake switches
together as a :class:`~dcnlab.controller.view.NetworkView` describes and follows a
packet along *every* alternative a select group offers, reporting deliveries, loops
and black holes.

Two ways to ask a switch about a packet:

* :meth:`FakeSwitch.alternatives` (and :meth:`FakeNetwork.trace`): stateless, table 0
  only, output and group actions, every bucket of a select group;
* :meth:`FakeSwitch.process` (and :meth:`FakeNetwork.send`, a discrete-event run with
  per-link delays): the whole pipeline as Open vSwitch runs it -- several tables,
  ``goto_table``, ``set_field``, ``push_vlan``/``pop_vlan`` and the Nicira extensions
  ``resubmit``, ``load``, ``move``, ``output_reg``, ``learn`` (which adds or modifies
  flows in the switch), ``exit`` and ``note``; registers ``reg0..7`` (zero when a packet
  enters table 0); idle and hard timeouts against the switch's :attr:`FakeSwitch.clock`
  (:meth:`FakeSwitch.expire`); packet counters for flow statistics.
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
MAX_RESUBMIT = 64  # Open vSwitch's resubmit depth limit
OFPVID_PRESENT = 0x1000
NX_IN_PORT = 0xFFF8
# Field widths in bits (NXM names map onto OXM ones: in_port_nxm is in_port's 16 bits).
WIDTH = {"in_port": 32, "eth_src": 48, "eth_dst": 48, "eth_type": 16, "vlan_vid": 13,
         "ip_proto": 8, "ip_dscp": 6, "ipv4_src": 32, "ipv4_dst": 32, "tcp_src": 16,
         "tcp_dst": 16, "udp_src": 16, "udp_dst": 16, "tcp_flags": 12,
         "in_port_nxm": 16, **{f"reg{i}": 32 for i in range(8)}}


def canonical(name: str) -> str:
    """An NXM field name as the OXM one the packet dict uses (``tcp_src_nxm`` -> ``tcp_src``)."""
    return name[:-4] if name.endswith("_nxm") else name


def _bits(value: int, ofs: int, n_bits: int) -> int:
    return (value >> ofs) & ((1 << n_bits) - 1)


def _ofs_nbits(ofs_nbits: int) -> tuple[int, int]:
    """(start, n_bits) from an NXM ofs_nbits field."""
    return ofs_nbits >> 6, (ofs_nbits & 0x3F) + 1


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
    goto: int | None = None  # goto_table instruction
    idle_timeout: int = 0
    hard_timeout: int = 0
    flags: int = 0
    created: float = 0.0
    used: float = 0.0
    packets: int = 0
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
            if have is None:
                # Registers start at zero; an untagged packet has vlan_vid OFPVID_NONE (0).
                if not (name.startswith("reg") or name == "vlan_vid"):
                    return False
                have = 0
            if have & mask != value:
                return False
        return True

    def expired(self, now: float) -> int | None:
        """The flow-removed reason if this flow has timed out at ``now``."""
        if self.hard_timeout and now - self.created >= self.hard_timeout:
            return ofp.OFPRR_HARD_TIMEOUT
        if self.idle_timeout and now - self.used >= self.idle_timeout:
            return ofp.OFPRR_IDLE_TIMEOUT
        return None

    def outputs_to(self, port: int) -> bool:
        return any(isinstance(a, parser.OFPActionOutput) and a.port == port
                   for a in self.actions)


@dataclass
class Emitted:
    """A packet :meth:`FakeSwitch.process` sends out of a port (or to the controller)."""

    port: int
    packet: dict[str, int]


class InconsistentMatch(ValueError):
    """A flow mod Open vSwitch refuses (OFPET_BAD_ACTION, OFPBAC_MATCH_INCONSISTENT): an
    action needs what the match does not promise."""


def _check_consistent(match: list[tuple[str, Any]], actions: list[Any]) -> None:
    """Open vSwitch's check that pops a VLAN tag only where the match says there is one
    (``ofpact_check__``: strip_vlan on a flow whose vlan_tci lacks the present bit)."""
    fields = dict(match)
    vid = fields.get("vlan_vid")
    value = vid[0] if isinstance(vid, tuple) else vid
    tagged = vid is not None and bool(value & OFPVID_PRESENT)
    for a in actions:
        if isinstance(a, parser.OFPActionPopVlan) and not tagged:
            raise InconsistentMatch(f"pop_vlan on a flow whose match {sorted(fields)} does "
                                    "not require a VLAN tag (OFPBAC_MATCH_INCONSISTENT)")


@dataclass
class FakeSwitch:
    dpid: int
    flows: list[_Flow] = field(default_factory=list)
    groups: dict[int, Any] = field(default_factory=dict)  # gid -> OFPGroupMod
    clock: float = 0.0  # s: the time learn, timeouts and packet counters see
    dropped_depth: int = 0  # packets dropped for exceeding the resubmit depth

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
            actions: list[Any] = []
            goto = None
            for inst in fm.instructions:
                if inst.type == ofp.OFPIT_APPLY_ACTIONS:
                    actions += inst.actions
                elif inst.type == ofp.OFPIT_GOTO_TABLE:
                    goto = inst.table_id
                else:
                    raise NotImplementedError(f"instruction type {inst.type}")
            _check_consistent(items, actions)
            self.add(_Flow(fm.priority, items, actions, fm.cookie, fm.table_id, goto,
                           fm.idle_timeout, fm.hard_timeout, fm.flags))
        elif fm.command == ofp.OFPFC_DELETE_STRICT:
            self.flows = [f for f in self.flows
                          if not (f.priority == fm.priority and sorted(f.match) == sorted(items)
                                  and fm.table_id in (f.table_id, ofp.OFPTT_ALL))]
        elif fm.command == ofp.OFPFC_DELETE:
            # Non-strict: a flow goes if it matches at least the delete's fields (here:
            # carries each of them with the same value), its cookie agrees under the mask,
            # it is in the table (or OFPTT_ALL), and it outputs to out_port (unless ANY).
            want = set(_Flow(0, items, [], 0, 0).compiled)
            def doomed(f: _Flow) -> bool:
                return (fm.table_id in (f.table_id, ofp.OFPTT_ALL)
                        and (f.cookie & fm.cookie_mask) == (fm.cookie & fm.cookie_mask)
                        and want <= set(f.compiled)
                        and (fm.out_port == ofp.OFPP_ANY or f.outputs_to(fm.out_port)))
            self.flows = [f for f in self.flows if not doomed(f)]
        else:
            raise NotImplementedError(f"flow mod command {fm.command}")

    def add(self, flow: _Flow, modify: bool = False) -> None:
        """Add ``flow``, replacing one with the same table, priority and match; ``modify``
        (as ``learn`` does) keeps the replaced flow's packet count."""
        flow.created = flow.used = self.clock
        same = [f for f in self.flows
                if f.priority == flow.priority and f.table_id == flow.table_id
                and sorted(f.compiled) == sorted(flow.compiled)]
        if modify and same:
            flow.packets = same[0].packets
        self.flows = [f for f in self.flows if all(f is not g for g in same)]
        self.flows.append(flow)
        self.flows.sort(key=lambda f: -f.priority)

    def expire(self, now: float | None = None) -> list[tuple[_Flow, int]]:
        """Remove the flows timed out at ``now`` (default: the clock); returns them with
        their flow-removed reasons."""
        if now is not None:
            self.clock = now
        gone = [(f, r) for f in self.flows if (r := f.expired(self.clock)) is not None]
        if gone:
            dead = {id(f) for f, _ in gone}
            self.flows = [f for f in self.flows if id(f) not in dead]
        return gone

    def table(self, table_id: int) -> list[_Flow]:
        return [f for f in self.flows if f.table_id == table_id]

    def flow_stats(self, table_id: int = ofp.OFPTT_ALL, cookie: int = 0,
                   cookie_mask: int = 0) -> list[Any]:
        """OFPFlowStats for the flows a flow-stats request with these filters selects."""
        out = []
        for f in self.flows:
            if table_id not in (f.table_id, ofp.OFPTT_ALL):
                continue
            if (f.cookie & cookie_mask) != (cookie & cookie_mask):
                continue
            insts = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, f.actions)]
            out.append(parser.OFPFlowStats(
                table_id=f.table_id, duration_sec=int(self.clock - f.created), duration_nsec=0,
                priority=f.priority, idle_timeout=f.idle_timeout, hard_timeout=f.hard_timeout,
                flags=f.flags, cookie=f.cookie, packet_count=f.packets,
                byte_count=f.packets * 64, match=parser.OFPMatch(**dict(f.match)),
                instructions=insts))
        return out

    # -- the pipeline ----------------------------------------------------------

    def lookup_in(self, table_id: int, pkt: dict[str, int]) -> _Flow | None:
        for flow in self.flows:
            if flow.table_id == table_id and flow.matches(pkt):
                return flow
        return None

    def process(self, pkt: dict[str, int], in_port: int,
                live: set[int] | None = None) -> list[Emitted]:
        """Run ``pkt`` (see :func:`packet_ints`) arriving on ``in_port`` through the
        pipeline from table 0; returns what leaves the switch, in order.

        A select group picks one live bucket by a hash of the packet's 5-tuple (as
        switches do: every packet of a flow takes the same bucket).
        """
        state = {k: v for k, v in pkt.items() if not k.startswith("reg")}
        state["in_port"] = in_port
        out: list[Emitted] = []
        self._run_table(0, state, out, live, 0)
        return out

    def _run_table(self, table_id: int, pkt: dict[str, int], out: list[Emitted],
                   live: set[int] | None, depth: int) -> bool:
        """Look ``pkt`` up in a table and run the flow; False if processing must stop."""
        while True:
            if depth > MAX_RESUBMIT:
                self.dropped_depth += 1
                return False
            flow = self.lookup_in(table_id, pkt)
            if flow is None:
                return True
            flow.packets += 1
            flow.used = self.clock
            if not self._apply(flow.actions, pkt, out, live, depth):
                return False
            if flow.goto is None:
                return True
            table_id, depth = flow.goto, depth + 1

    def _apply(self, actions: list[Any], pkt: dict[str, int], out: list[Emitted],
               live: set[int] | None, depth: int) -> bool:
        for a in actions:
            if isinstance(a, parser.OFPActionOutput):
                port = pkt["in_port"] if a.port == ofp.OFPP_IN_PORT else a.port
                if a.port != pkt["in_port"]:  # never back out of the in-port, unless asked
                    out.append(Emitted(port, dict(pkt)))
            elif isinstance(a, parser.OFPActionGroup):
                for port in self._group_pick(a.group_id, pkt, live):
                    if port != pkt["in_port"]:
                        out.append(Emitted(port, dict(pkt)))
            elif isinstance(a, parser.OFPActionSetField):
                pkt[a.key] = _as_int(a.key, a.value)
            elif isinstance(a, parser.OFPActionPushVlan):
                pkt["vlan_vid"] = OFPVID_PRESENT  # VID 0 until a set_field
            elif isinstance(a, parser.OFPActionPopVlan):
                pkt.pop("vlan_vid", None)
            elif isinstance(a, parser.OFPActionDecNwTtl):
                continue
            elif isinstance(a, parser.NXAction):
                if not self._apply_nx(a, pkt, out, live, depth):
                    return False
            else:
                raise NotImplementedError(type(a).__name__)
        return True

    def _apply_nx(self, a: Any, pkt: dict[str, int], out: list[Emitted],
                  live: set[int] | None, depth: int) -> bool:
        if isinstance(a, (parser.NXActionResubmitTable, parser.NXActionResubmit)):
            table = getattr(a, "table_id", 0xFF)
            saved = pkt["in_port"]
            if a.in_port != NX_IN_PORT:
                pkt["in_port"] = a.in_port
            if table == 0xFF:
                raise NotImplementedError("resubmit to the current table")
            alive = self._run_table(table, pkt, out, live, depth + 1)
            pkt["in_port"] = saved
            return alive
        if isinstance(a, parser.NXActionRegLoad):
            start, n_bits = _ofs_nbits(a.ofs_nbits)
            self._write(pkt, canonical(a.dst), start, n_bits, a.value)
        elif isinstance(a, parser.NXActionRegMove):
            value = _bits(pkt.get(canonical(a.src_field), 0), a.src_ofs, a.n_bits)
            self._write(pkt, canonical(a.dst_field), a.dst_ofs, a.n_bits, value)
        elif isinstance(a, parser.NXActionOutputReg):
            start, n_bits = _ofs_nbits(a.ofs_nbits)
            port = _bits(pkt.get(canonical(a.src), 0), start, n_bits)
            if port != pkt["in_port"]:
                out.append(Emitted(port, dict(pkt)))
        elif isinstance(a, parser.NXActionLearn):
            self._learn(a, pkt)
        elif isinstance(a, parser.NXActionExit):
            return False
        elif not isinstance(a, parser.NXActionNote):
            raise NotImplementedError(type(a).__name__)
        return True

    @staticmethod
    def _write(pkt: dict[str, int], name: str, start: int, n_bits: int, value: int) -> None:
        mask = ((1 << n_bits) - 1) << start
        pkt[name] = (pkt.get(name, 0) & ~mask) | ((value << start) & mask)

    def _learn(self, a: Any, pkt: dict[str, int]) -> None:
        """NXAST_LEARN: add (or modify) the flow the specs describe, from ``pkt``."""
        fields: dict[str, tuple[int, int]] = {}
        widths: dict[str, int] = {}
        actions: list[Any] = []
        for spec in a.specs:
            if isinstance(spec.src, tuple):
                name, ofs = spec.src
                value = _bits(pkt.get(canonical(name), 0), ofs, spec.n_bits)
            else:
                value = spec.src
            if isinstance(spec, parser.NXFlowSpecMatch):
                dst, ofs = canonical(spec.dst[0]), spec.dst[1]
                widths[dst] = WIDTH.get(spec.dst[0], WIDTH.get(dst, 64))
                have_value, have_mask = fields.get(dst, (0, 0))
                mask = ((1 << spec.n_bits) - 1) << ofs
                fields[dst] = ((have_value & ~mask) | (value << ofs), have_mask | mask)
            elif isinstance(spec, parser.NXFlowSpecLoad):
                actions.append(parser.NXActionRegLoad(
                    ofs_nbits=((spec.dst[1] << 6) | (spec.n_bits - 1)), dst=spec.dst[0],
                    value=value))
            else:
                actions.append(parser.OFPActionOutput(value))
        match = []
        for name, (value, mask) in sorted(fields.items()):
            full = (1 << widths[name]) - 1
            match.append((name, value if mask & full == full else (value, mask)))
        self.add(_Flow(a.priority, match, actions, a.cookie, a.table_id, None,
                       a.idle_timeout, a.hard_timeout, a.flags), modify=True)

    def _group_pick(self, gid: int, pkt: dict[str, int], live: set[int] | None) -> list[int]:
        ways = self._group_ways(gid, live)
        key = tuple(pkt.get(f, 0) for f in ("ipv4_src", "ipv4_dst", "ip_proto", "tcp_src",
                                            "tcp_dst"))
        return ways[hash(key) % len(ways)]

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


@dataclass
class SendResult:
    """What :meth:`FakeNetwork.send` saw: deliveries to hosts and punts, in time order."""

    delivered: list[tuple[str, dict[str, int], float]] = field(default_factory=list)
    punted: list[tuple[int, int, dict[str, int]]] = field(default_factory=list)  # dpid, port
    hops: int = 0  # packets that crossed a fabric link

    def to(self, ip: str) -> list[dict[str, int]]:
        return [p for host, p, _ in self.delivered if host == ip]


class FakeNetwork:
    """Fake switches wired as in a :class:`NetworkView`."""

    def __init__(self, view: NetworkView) -> None:
        self.view = view
        self.clock = 0.0  # s: the time switches see when a send starts
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

    def send(self, src_ip: str, pkt: Packet,
             delays: dict[tuple[int, int], float] | None = None,
             default_delay: float = 0.001) -> SendResult:
        """The host with ``src_ip`` sends ``pkt``: a discrete-event run through the
        switches' pipelines (:meth:`FakeSwitch.process`) until no copy is in flight.

        ``delays[(dpid, peer_dpid)]`` is the one-way delay of that link direction (s), so a
        test decides in which order flooded copies reach a switch.  Switches' clocks
        follow the run (``clock`` + the event time); ``clock`` itself does not move.
        """
        src = self.view.host_by_ip(src_ip)
        if src is None:
            raise KeyError(f"unknown source host {src_ip}")
        wiring = self._wiring()
        delays = delays or {}
        result = SendResult()
        queue: list[tuple[float, int, int, int, dict[str, int]]] = [
            (0.0, 0, src.dpid, src.port, packet_ints(pkt))]
        seq = 1
        while queue:
            queue.sort(key=lambda e: (e[0], e[1]))
            t, _, dpid, in_port, ints = queue.pop(0)
            switch = self.switches[dpid]
            switch.clock = self.clock + t
            live, leads_to = wiring[dpid]
            for em in switch.process(ints, in_port, live):
                if em.port == ofp.OFPP_CONTROLLER:
                    result.punted.append((dpid, in_port, em.packet))
                    continue
                if em.port not in live:
                    continue
                nxt = leads_to.get(em.port)
                if nxt is None:
                    continue
                if nxt[0] == "host":
                    result.delivered.append((nxt[1].ip, em.packet, t))
                    continue
                peer_dpid, peer_port = nxt[1]
                result.hops += 1
                queue.append((t + delays.get((dpid, peer_dpid), default_delay), seq,
                              peer_dpid, peer_port, em.packet))
                seq += 1
        return result

    def expire(self, now: float) -> dict[int, list[tuple[_Flow, int]]]:
        """Set the clock to ``now`` and time flows out everywhere; returns what went."""
        self.clock = now
        return {dpid: gone for dpid, sw in self.switches.items() if (gone := sw.expire(now))}

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
