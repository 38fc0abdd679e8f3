"""ARP-Path in the data plane: the tables the controller installs once per switch.

ARP-Path (All-Path bridging, Rojas et al., Computer Networks 79, 2015; paper 001's default
forwarding and one of its baselines) learns where each MAC address is the way a bridge
does, but from the fastest copy of a broadcast rather than over a spanning tree:

* a broadcast from S (an ARP request) floods the whole fabric; every switch locks S's
  address to the port its first copy came in on and drops copies that arrive on another
  port while the lock lives (later copies of the same broadcast), so the copies form a
  tree rooted at S's edge: the fastest path from S to every switch;
* a frame to S (D's ARP reply) follows S's lock at every switch and so *confirms* the
  fastest path: every switch on the way learns D at the frame's in-port (and S was
  learned at every switch from the first copy that reached it); from then on frames
  between them are forwarded by learned entries (idle timeout).  The
  table is per address, not per host pair: a switch has one port per MAC address, the
  one the address's last frame through it came in on;
* a frame from a host whose destination has no entry at the host's edge (it aged out)
  explores like a broadcast (the frame itself, tagged, flooded; only its destination's
  edge delivers it) and the destination's next frame back confirms a path again;
  a frame that meets no entry inside the fabric takes the compiled default routes
  (counted: ``COUNT_FABRIC_MISS``).

Addresses are learned from the frames they send, at every switch a frame crosses (an
exploration's copies included, where a switch takes them), and never at a lock: then a
switch forwards towards an address only to a neighbour that the same address's frame
just crossed, and that neighbour's entry outlives its own (every frame the one forwards
by it, the other forwards by its own entry next).  Learning at a
lock as well (the destination at the lock port, at the moment the confirming frame
passes) breaks that: locks live by their own timers, a frame can find one at a switch
and not at its neighbour, and a switch then learns an address behind a neighbour that
never did (a broken chain, seen on both switch kinds; the controller repairs what is
left of it, :meth:`~dcnlab.schemes.arppath.part.ArpPathPart.walk`).

Tables, at ``base`` + offset (standalone ARP-Path: base 1 after MAIN, table 0; as TCP-Path's
default forwarding: after TCP-Path's eight):

========== ==================================================================================
LOCK_SRC   *learned* S -> ``reg2 = lock port``, ``reg6 = the exploration's generation``
           (hard timeout = lock timeout); below them, at S's edge, *learned* S -> ``reg6 =
           generation`` of S's next exploration
LOCK_DST   *learned* eth_dst S -> ``reg1 = lock port`` (hard timeout = lock timeout)
MISS       FWD's misses: a lock towards the destination (``reg1`` set, not the in-port)
           -> output to ``reg1``; none, from a host port -> LOCK_SRC, DECIDE (explore);
           none, from a fabric port -> FALLBACK
FWD        *learned* eth_dst -> output port (idle timeout, flow-removed); a miss ->
           LOCK_DST, MISS
DECIDE     tagged: the lock's exploration (generation) on another port -> drop (late); on
           this port -> *learn* (renew) both locks, FLOOD (another broadcast of the same
           source, same tree); no lock, or a lock of an earlier exploration -> *learn* both
           locks, FLOOD.  Untagged (from a host): a broadcast of a source whose lock is
           its own port -> *learn* (renew) both locks, tag with the lock's generation,
           FLOOD; a lock pending -> FALLBACK; no lock -> *learn* both locks and the
           next generation, tag, FLOOD
FLOOD      a tagged copy: out of every live fabric port (valley-free: from an up port, down
           ports only), in a rotation chosen by ``reg5``'s low bits; then untagged to this
           switch's hosts: every host port for a broadcast, the destination's for a
           unicast frame
FALLBACK   the compiled default routes and the table-miss drop
========== ==================================================================================

MAIN (table 0, shared with TCP-Path) holds the entries :func:`main_entries` returns:
tagged ARP-Path copies from fabric ports (one entry per port and generation, exact VLAN
id: a datapath cache entry then never takes one exploration's copies for another's, the
lesson of TCP-Path's issue #15), ARP from known host ports (explored; the controller
hears it only from a port it does not know yet) and from fabric ports; untagged frames
go to :func:`unicast_actions`.

Every untagged frame's addresses are read into registers first (:data:`READ_ADDRESSES`):
Open vSwitch's datapath caches then hold one entry per address pair, so a frame never
meets a decision cached for another pair before the switch revalidated it after a learn
(the same reason as TCP-Path's PER_CONNECTION).
"""

from __future__ import annotations

from collections.abc import Iterable

from dcnlab.controller.fabric_ports import SwitchPorts, is_dead_end
from dcnlab.controller.rules import (
    ETH_TYPE_ARP,
    PRIO_PUNT,
    Action,
    FlowEntry,
    SwitchRules,
    match,
)

BROADCAST = 0xFFFFFFFFFFFF
MULTICAST = (0x010000000000, 0x010000000000)  # the group bit of eth_dst

# table offsets from ``base``
LOCK_SRC, LOCK_DST, MISS, FWD, DECIDE, FLOOD, FALLBACK = range(7)
TABLES = 7

ARP_VID = 0xA4  # VLAN ids of ARP-Path copies: 0xA4..0xA7, one per generation
GENERATIONS = 4
OFPVID_PRESENT = 0x1000
ETH_TYPE_VLAN = 0x8100
TAGGED = (OFPVID_PRESENT | ARP_VID, 0x1FFF & ~(GENERATIONS - 1))  # any generation
GEN_IDLE = 60  # s: a source's generation entry (at its edge) is forgotten after this
FLOOD_ORDERS = 16
OFPFF_SEND_FLOW_REM = 1

PRIO_FWD = 800  # learned forwarding entries
PRIO_LOCK = 100  # learned locks
PRIO_GEN = 50  # learned generation entries (LOCK_SRC, below the locks)
PRIO_MAIN_COPY = 950  # MAIN: tagged ARP-Path copies (TCP-Path's copies: 900-920)
PRIO_MAIN_ARP = 600  # MAIN: ARP from a host port (TCP-Path's untagged TCP: 500)
PRIO_ARP_PUNT = 550  # MAIN: the base's ARP punt, for ARP from ports not yet known

COOKIE_ARPPATH = 0xDD << 40 | 1 << 37  # in dcnlab's cookie space, apart from TCP-Path's
COOKIE_FWD = COOKIE_ARPPATH | 1
COOKIE_LOCK = COOKIE_ARPPATH | 2
COOKIE_GEN = COOKIE_ARPPATH | 3
COOKIE_COUNT = COOKIE_ARPPATH | 1 << 36  # static entries whose packet counts are counters
COOKIE_COUNT_MASK = (0xFFFFFF << 40) | 1 << 37 | 1 << 36
COUNT_COPY_IN = 1  # tagged copies received
COUNT_LATE = 2  # copies dropped: their source is locked to another port
COUNT_FIRST = 3  # first copies (locked and flooded on)
COUNT_EXPLORE = 4  # explorations started at a source's edge
COUNT_PENDING = 5  # frames sent on the default routes while their exploration is pending
COUNT_ALONG_LOCK = 6  # frames forwarded along their destination's lock (no entry yet)
COUNT_FABRIC_MISS = 7  # frames with no entry inside the fabric: default routes
COUNT_DEAD_END = 8  # unicast copies dropped on entry at an edge they are not for

# Registers (zero when a packet enters table 0; TCP-Path's use reg1, reg2, reg5, reg6
# for the same purposes and never at the same time as these)
REG_LOCK_DST = "reg1"  # lock port towards eth_dst (LOCK_DST)
REG_LOCK_SRC = "reg2"  # lock port of eth_src (LOCK_SRC): 0 = no lock
REG_ORDER = "reg5"  # low bits: the flood rotation
REG_GEN = "reg6"  # the source's exploration generation
REG_SRC_LOW, REG_SRC_HIGH, REG_DST_LOW, REG_DST_HIGH = "reg3", "reg4", "reg7", "reg0"
IN_PORT = "in_port_nxm"

# Reading a field makes Open vSwitch's datapath cache entry match it exactly (module doc).
READ_ADDRESSES: tuple[Action, ...] = (
    ("move", "eth_src", 0, REG_SRC_LOW, 0, 32),
    ("move", "eth_src", 32, REG_SRC_HIGH, 0, 16),
    ("move", "eth_dst", 0, REG_DST_LOW, 0, 32),
    ("move", "eth_dst", 32, REG_DST_HIGH, 0, 16),
)

# ARP-Path's registers as a frame enters its tables from another scheme's (TCP-Path's
# DEFAULT), which may have used the same ones
CLEAR: tuple[Action, ...] = tuple(("load", r, 0, 32, 0)
                                  for r in (REG_LOCK_DST, REG_LOCK_SRC, REG_GEN))


def _entry(table: int, priority: int, actions: Iterable[Action], cookie: int | None = None,
           **fields: object) -> FlowEntry:
    if cookie is None:
        return FlowEntry(priority, match(**fields), tuple(actions), table_id=table)
    return FlowEntry(priority, match(**fields), tuple(actions), table_id=table,
                     cookie=cookie)


def _learn(table: int, priority: int, cookie: int, specs: tuple[tuple, ...], *,
           idle: int = 0, hard: int = 0, flags: int = 0) -> Action:
    return ("learn", table, priority, idle, hard, cookie, flags, specs)


def _vid(gen: int) -> int:
    return OFPVID_PRESENT | ARP_VID | gen


def unicast_actions(base: int, idle_timeout: int) -> tuple[Action, ...]:
    """What an untagged frame that no other scheme handles does: teach its source
    address, then FWD."""
    return (*CLEAR, *READ_ADDRESSES, learn_source(base, idle_timeout),
            ("resubmit", base + FWD))


def learn_locks(base: int, lock_timeout: int, gen: int) -> tuple[Action, ...]:
    """At a first copy (or an exploration's start): the source's address locked to this
    packet's in-port, for the decisions about its copies (LOCK_SRC, with the exploration's
    generation ``gen``) and for the frames towards it (LOCK_DST)."""
    src = _learn(base + LOCK_SRC, PRIO_LOCK, COOKIE_LOCK, (
        ("match", "eth_src", 0, ("eth_src", 0), 48),
        ("load", REG_LOCK_SRC, 0, (IN_PORT, 0), 16), ("load", REG_GEN, 0, gen, 2)),
        hard=lock_timeout)
    dst = _learn(base + LOCK_DST, PRIO_LOCK, COOKIE_LOCK, (
        ("match", "eth_dst", 0, ("eth_src", 0), 48),
        ("load", REG_LOCK_DST, 0, (IN_PORT, 0), 16)), hard=lock_timeout)
    return (src, dst)


def learn_source(base: int, idle_timeout: int) -> Action:
    """Every untagged frame, at every switch: its source address at its in-port."""
    return _learn(base + FWD, PRIO_FWD, COOKIE_FWD, (
        ("match", "eth_dst", 0, ("eth_src", 0), 48),
        ("output", (IN_PORT, 0), 16)), idle=idle_timeout, flags=OFPFF_SEND_FLOW_REM)


def main_entries(ports: SwitchPorts, base: int, idle_timeout: int) -> list[FlowEntry]:
    """ARP-Path's entries in MAIN (table 0)."""
    explore = (*READ_ADDRESSES, ("resubmit", base + LOCK_SRC), ("resubmit", base + DECIDE))
    out: list[FlowEntry] = []
    vids = [_vid(gen) for gen in range(GENERATIONS)]
    order_from_src = ("move", "eth_src", 0, REG_ORDER, 0, 4)
    if is_dead_end(ports):
        # copies for its own hosts, and broadcasts (every host hears an ARP request), are
        # decided as anywhere; other unicast copies are dropped on entry, before any
        # table reads their addresses (no lock, no cache entry per copy)
        for port in ports.all_fabric:
            for vid in vids:
                out.append(_entry(0, PRIO_MAIN_COPY + 2, (order_from_src, *explore),
                                  COOKIE_COUNT | COUNT_COPY_IN, in_port=port, vlan_vid=vid,
                                  eth_dst=MULTICAST))
            for mac, _ in ports.hosts:
                for vid in vids:
                    out.append(_entry(0, PRIO_MAIN_COPY + 1, (order_from_src, *explore),
                                      COOKIE_COUNT | COUNT_COPY_IN, in_port=port,
                                      vlan_vid=vid, eth_dst=mac))
            out.append(_entry(0, PRIO_MAIN_COPY, (), COOKIE_COUNT | COUNT_DEAD_END,
                              in_port=port, vlan_vid=TAGGED))
    else:
        for port in ports.all_fabric:
            for vid in vids:
                out.append(_entry(0, PRIO_MAIN_COPY, (order_from_src, *explore),
                                  COOKIE_COUNT | COUNT_COPY_IN, in_port=port, vlan_vid=vid))
    for _, port in ports.hosts:
        # ARP from a known host: a request floods as an exploration, a reply confirms like
        # any frame to a locked address (the controller hears neither)
        out.append(_entry(0, PRIO_MAIN_ARP + 1, (order_from_src, *explore), in_port=port,
                          eth_type=ETH_TYPE_ARP, eth_dst=BROADCAST))
        out.append(_entry(0, PRIO_MAIN_ARP, unicast_actions(base, idle_timeout), in_port=port,
                          eth_type=ETH_TYPE_ARP))
        # other broadcast and multicast from hosts (IPv6 neighbour discovery, say) is not
        # ARP-Path's: dropped, as the compiled routes drop it
        out.append(_entry(0, PRIO_MAIN_ARP - 1, (), in_port=port, eth_dst=MULTICAST))
    for port in ports.all_fabric:
        # untagged ARP in the fabric is a reply on its way: a frame like any other
        out.append(_entry(0, PRIO_MAIN_ARP, unicast_actions(base, idle_timeout), in_port=port,
                          eth_type=ETH_TYPE_ARP))
    return out


def tables(ports: SwitchPorts, base: int, idle_timeout: int, lock_timeout: int) -> list[FlowEntry]:
    """The static entries of ARP-Path's own tables (``base`` .. ``base`` + FLOOD; FALLBACK
    holds the compiled routes, which the caller moves there)."""
    out: list[FlowEntry] = []
    # FWD: learned entries above; a miss looks for a lock towards its destination
    out.append(_entry(base + FWD, 0, (("resubmit", base + LOCK_DST),
                                      ("resubmit", base + MISS))))
    # MISS: along the lock (an exploration of the destination is under way); with none
    # (or one pointing back where the frame came from), a frame from a host explores and
    # any other takes the default routes
    explore = (("move", "eth_src", 0, REG_ORDER, 0, 4), ("resubmit", base + LOCK_SRC),
               ("resubmit", base + DECIDE))
    for _, port in ports.hosts:
        for lock in (0, port):
            out.append(_entry(base + MISS, 10, explore, in_port=port, **{REG_LOCK_DST: lock}))
    for port in ports.all_fabric:
        out.append(_entry(base + MISS, 10, (("resubmit", base + FALLBACK),),
                          COOKIE_COUNT | COUNT_FABRIC_MISS, in_port=port,
                          **{REG_LOCK_DST: port}))
    out.append(_entry(base + MISS, 5, (("resubmit", base + FALLBACK),),
                      COOKIE_COUNT | COUNT_FABRIC_MISS, **{REG_LOCK_DST: 0}))
    out.append(_entry(base + MISS, 0, (("output_reg", REG_LOCK_DST, 0, 16),),
                      COOKIE_COUNT | COUNT_ALONG_LOCK))
    # an exploration's copy that a switch takes (not a late one) is a frame from its source
    # like any other: the source's address is learned at its in-port, so every switch of
    # the exploration's tree knows the way back to it
    teach = learn_source(base, idle_timeout)
    # DECIDE, tagged copies.  A lock belongs to one exploration (its generation): the
    # first copy of a newer exploration takes the lock over wherever an older one still
    # lives (kept, the older lock would drop the newer copies that race in on other
    # ports as late, and the new exploration would follow what is left of the old tree
    # instead of the fastest path now); every broadcast renews the locks along its tree,
    # the edge's first, so the fabric's locks do not run out before the edge's.
    for port in ports.all_fabric:
        for gen in range(GENERATIONS):
            # another broadcast of the same exploration: the same tree, locks renewed
            out.append(_entry(base + DECIDE, 30, learn_locks(base, lock_timeout, gen) + (
                teach, ("resubmit", base + FLOOD)), in_port=port, vlan_vid=_vid(gen),
                **{REG_LOCK_SRC: port, REG_GEN: gen}))
    for gen in range(GENERATIONS):
        first = learn_locks(base, lock_timeout, gen) + (teach, ("resubmit", base + FLOOD))
        out.append(_entry(base + DECIDE, 22, first, COOKIE_COUNT | COUNT_FIRST,
                          vlan_vid=_vid(gen), **{REG_LOCK_SRC: 0}))
        # the same exploration's copy on another port: late
        out.append(_entry(base + DECIDE, 21, (), COOKIE_COUNT | COUNT_LATE,
                          vlan_vid=_vid(gen), **{REG_GEN: gen}))
        # a lock of an earlier exploration: this is the newer one's first copy here
        out.append(_entry(base + DECIDE, 20, first, COOKIE_COUNT | COUNT_FIRST,
                          vlan_vid=_vid(gen)))
    # DECIDE, untagged frames from a host
    for _, port in ports.hosts:
        for gen in range(GENERATIONS):
            # another broadcast of a source whose exploration is under way: the same
            # tree, the edge's locks renewed first
            out.append(_entry(base + DECIDE, 15, learn_locks(base, lock_timeout, gen) + (
                teach, ("push_vlan", ETH_TYPE_VLAN), ("set_field", "vlan_vid", _vid(gen)),
                ("resubmit", base + FLOOD)), in_port=port, eth_dst=BROADCAST,
                **{REG_LOCK_SRC: port, REG_GEN: gen}))
    for gen in range(GENERATIONS):
        out.append(_entry(base + DECIDE, 5, learn_locks(base, lock_timeout, gen) + (
            teach, learn_generation(base, (gen + 1) % GENERATIONS), ("push_vlan", ETH_TYPE_VLAN),
            ("set_field", "vlan_vid", _vid(gen)), ("resubmit", base + FLOOD)),
            COOKIE_COUNT | COUNT_EXPLORE, **{REG_LOCK_SRC: 0, REG_GEN: gen}))
    # any other untagged frame: its source's exploration is pending (locked)
    out.append(_entry(base + DECIDE, 1, (("resubmit", base + FALLBACK),),
                      COOKIE_COUNT | COUNT_PENDING))
    out.extend(_flood_entries(ports, base))
    return out


def learn_generation(base: int, gen: int) -> Action:
    """At a source's edge: the generation its next exploration will carry."""
    return _learn(base + LOCK_SRC, PRIO_GEN, COOKIE_GEN, (
        ("match", "eth_src", 0, ("eth_src", 0), 48), ("load", REG_GEN, 0, gen, 2)),
        idle=GEN_IDLE)


def _flood_entries(ports: SwitchPorts, base: int) -> list[FlowEntry]:
    """FLOOD: a tagged copy out of the live fabric ports (valley-free), then untagged to
    this switch's hosts (all for a broadcast, the destination for a unicast frame)."""
    out: list[FlowEntry] = []
    down = tuple(p for p in ports.fabric if p not in ports.up)
    host_ports = tuple(p for _, p in ports.hosts)
    delivery: list[tuple[dict[str, object], tuple[int, ...], int]] = [
        ({"eth_dst": MULTICAST}, host_ports, 20)]
    delivery += [({"eth_dst": mac}, (port,), 30) for mac, port in ports.hosts]
    delivery.append(({}, (), 10))
    for fields, hosts, priority in delivery:
        # FLOOD sees tagged copies only; saying so lets pop_vlan pass Open vSwitch's
        # consistency check (a pop where the match promises no tag is refused)
        fields["vlan_vid"] = TAGGED
        untagged: tuple[Action, ...] = (
            (("pop_vlan",), *(("output", p) for p in hosts)) if hosts else ())
        if fields.get("eth_dst") not in (None, MULTICAST):
            # a unicast copy for a host of this switch goes no further
            out.append(_entry(base + FLOOD, priority, untagged, **fields))
            continue
        for in_ports, members, extra in (
                [((p,), down, 5) for p in ports.up] + [((), ports.fabric, 0)]):
            for low, order in _rotations(members):
                match_fields: dict[str, object] = dict(fields)
                if in_ports:
                    match_fields["in_port"] = in_ports[0]
                if low is not None:
                    match_fields[REG_ORDER] = (low, FLOOD_ORDERS - 1)
                out.append(_entry(base + FLOOD, priority + extra,
                                  tuple(("output", p) for p in order) + untagged,
                                  **match_fields))
    return out


def _rotations(members: tuple[int, ...]) -> list[tuple[int | None, tuple[int, ...]]]:
    """Per value of the order register's low bits, the ports in a rotation of their own
    (ties between idle paths break by source address, not by port number); one entry
    where there is no order to choose."""
    if len(members) < 2:
        return [(None, members)]
    return [(low, members[low % len(members):] + members[:low % len(members)])
            for low in range(FLOOD_ORDERS)]


def attach(rules: SwitchRules, ports: SwitchPorts, base: int, idle_timeout: int,
           lock_timeout: int, routes_table: int = 0) -> None:
    """Make ARP-Path a switch's forwarding, in place, its tables from ``base``: the routes
    in ``routes_table`` (the compiled policy's, in MAIN for standalone ARP-Path; TCP-Path's
    DEFAULT when ARP-Path is its default forwarding) move to FALLBACK, and that table sends
    every frame that reaches it into ARP-Path.  The LLDP punt stays; the ARP punt moves below
    ARP-Path's ARP entries, for ARP from ports that are neither fabric nor known host ports
    (a host the controller has yet to learn, in discovery mode)."""
    kept = set()
    for entry in rules.flows:
        if entry.table_id == 0 and entry.priority >= PRIO_PUNT:
            if dict(entry.match).get("eth_type") == ETH_TYPE_ARP:
                entry = FlowEntry(PRIO_ARP_PUNT, entry.match, entry.actions, 0,
                                  entry.idle_timeout, entry.hard_timeout, entry.cookie)
        elif entry.table_id == routes_table:
            entry = FlowEntry(entry.priority, entry.match, entry.actions, base + FALLBACK,
                              entry.idle_timeout, entry.hard_timeout, entry.cookie)
        kept.add(entry)
    kept.update(main_entries(ports, base, idle_timeout))
    # a tagged frame that is no copy of ours (from a host, or another VLAN): dropped
    kept.add(_entry(0, 890, (), vlan_vid=(OFPVID_PRESENT, OFPVID_PRESENT)))
    kept.add(_entry(routes_table, 0, unicast_actions(base, idle_timeout)))
    kept.update(tables(ports, base, idle_timeout, lock_timeout))
    rules.flows = kept
