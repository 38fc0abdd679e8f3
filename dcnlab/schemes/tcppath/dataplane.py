"""TCP-Path in the data plane: the pipeline the controller installs once per switch.

In data-plane mode (``DCNLAB_TCPPATH_MODE=dataplane``) no TCP packet reaches the
controller.  The switches explore, lock, confirm and forward with Nicira extensions
(``learn``, ``resubmit``, ``load``/``move``, ``output_reg``, register matches) that Ryu
encodes and Open vSwitch and switch_ext execute.  Exploration copies are the packet
itself behind a VLAN tag (VID :data:`EXPLORE_VID` plus the tuple's exploration
generation), so a switch tells them from packets on their ordinary routes.  Eight tables:

====== ========= ==========================================================================
table  name      entries
====== ========= ==========================================================================
0      MAIN      ARP/LLDP punts (the base's); tagged copy from a fabric port (one entry per
                 port and generation, exact VLAN id) -> SEEN, DECIDE; at an edge switch
                 (every fabric port leads up) only a copy for one of its hosts (one entry
                 per host and generation), any other copy -> drop (a dead end);
                 any other tagged frame -> drop; untagged TCP -> ``tcp_src`` to reg5
                 (and the rest of its tuple to reg0, reg3, reg4, reg7: PER_CONNECTION),
                 LOCK, CONFIRM; anything else -> DEFAULT
1      LOCK      *learned* reverse locks: DS tuple -> ``reg1 = lock port`` (the port the
                 first copy came in on), hard timeout = lock timeout
2      CONFIRM   ``reg1 == 0`` (or the lock port is the in-port) -> FLOW; otherwise the
                 packet confirms: *learn* the SD and DS per-flow entries into FLOW (idle
                 timeout, flow-removed), decrement the IP TTL, output to reg1
3      FLOW      *learned* per-flow entries ``in_port, eth_src/dst, tcp_src/dst -> port``;
                 a miss from a host port -> SEEN, DECIDE (explore) if a SYN or from an
                 ephemeral source port (TFE: and an elephant); any other miss -> DEFAULT
4      SEEN      *learned* SD tuple -> ``reg2 = 1`` (hard timeout = lock timeout): an
                 exploration of this tuple passed here; below them, at source edges,
                 *learned* SD tuple -> ``reg6 = generation`` of its next exploration
5      DECIDE    tagged and seen -> drop (a late copy); tagged -> first copy: *learn* SEEN
                 and LOCK, decrement the IP TTL, -> FLOOD; untagged and seen -> DEFAULT (an
                 exploration is pending); untagged -> explore: *learn* SEEN, LOCK and the
                 next generation, tag with this generation's VID, -> FLOOD
6      FLOOD     ``eth_dst`` = a host of this switch -> untag, output to it (deliver);
                 from an up port (a switch farther from the hosts) -> every live down
                 port (valley-free: no detour up through another leaf); otherwise every
                 live fabric port (OpenFlow never sends a packet back out of its in_port);
                 in an order chosen by the low bits of the source port (below)
7      DEFAULT   the compiled default routes (ECMP select groups) and the table-miss drop
====== ========= ==========================================================================

The walk of one connection: the SYN from S misses FLOW at S's edge and is explored
(tagged, flooded on every fabric port, S's edge locks the DS tuple to S's port).  At every
switch the first copy learns SEEN (later copies are dropped) and a LOCK of the DS tuple to
its in-port, and is flooded on; at D's edge it is untagged and delivered; other edges
drop the copies on entry.  D's SYN-ACK hits
the LOCK at every switch on its way back (first-arrival locks form a tree rooted at S, so
it walks exactly the path the winning copy took) and CONFIRM learns both directions'
per-flow entries there, so from S's ACK on the connection is forwarded by FLOW alone.

Re-exploration: a per-flow entry that aged out (or was removed on Path Fail) leaves the
flow's next packet at a host port without a FLOW entry, so it is explored like a SYN and
the first packet of the other direction confirms the new path; packets sent while that
exploration is pending (SEEN, lock timeout) take the default routes.  Only the client
side re-explores (a source port of 32768 and above; SYNs always explore): when both
sides explored at once, each confirmed the other's locks while the datapath caches of
Open vSwitch still held their old decisions, and the two trees mixed.  (Open vSwitch
applies learned entries to packets of an existing datapath flow only once it has
revalidated it, a moment later: the first answering packet may miss fresh locks on
switches that carried the tuple before; the next one confirms.  Open vSwitch keeps an
unused datapath flow up to 10 s (``max-idle``): with an idle timeout below that, a flow's
next packets after ageing can meet the previous exploration's cached decisions, and a
re-exploration may fail to settle; the default 10 s and longer ones start clean.  The same
caching makes a connection's next few packets after its SYN, until Open vSwitch has
revalidated the source edge's datapath flow, travel as copies of the same exploration
along the same tree: more copies than the paper's ``NS*(NL-1)`` at the leaves, never a
second path; switch_ext, which looks every packet up, sends exactly that many.)

Path Fail: when a fabric port goes down the controller deletes, on every switch, the
per-flow entries, locks and seen entries of each connection whose path (as last polled)
crossed it; the connection's next client-side packet explores again.  It deletes in two
phases: locks and seen entries everywhere and per-flow entries on every switch but the
connection's two edges, then, once each switch has answered a barrier, the edges' per-flow
entries.  The client's edge losing its entry starts the exploration, whose copies so find
no delete still on its way (one arriving after a copy would wipe that copy's lock and seen
entry and leave the new path unconfirmed there).  Deletion alone does not last on Open
vSwitch: its revalidators re-add a deleted learned flow for a datapath flow whose actions
learned it and that still had packets to account for, and a flow-stats reply to a request
sent before the deletion still lists the old entries.  So Path Fail is also
level-triggered: every poll, the connections of per-flow entries on a port whose link is
down are deleted again, unless their deletion is under way (counter
``tcppath_path_fail_repeated``), and a path over a link that is down is never reported
(nor counted as recovered).  On Open vSwitch a re-exploration can also start without any
copy leaving the client's edge: a revalidator re-translating the busy datapath flow whose
per-flow entry was deleted executes the explore entry's ``learn`` actions (seen, lock,
generation) for the packets it accounts for, and its next revalidation already finds the
seen entry, so no packet took the flooding actions; the other direction's packets, on the
default routes, then confirm the connection at the client's edge alone.  A failed
connection that has entries again but no complete path 1 s after its deletion is deleted
again, at most twice (counter ``tcppath_path_fail_retried``).  No pipeline avoids this:
Open vSwitch (3.1, ``ofproto-dpif-upcall.c``: ``revalidate_ukey``, ``push_dp_ops``)
rebuilds a revalidated datapath flow's translation cache from the new translation and
then pushes the packets counted since the last push through it, learn actions included,
whether it keeps, modifies or deletes the flow; a slow-path action does not change that
either.  Any learned state that gates exploration can so be written for packets that did
not explore, and a data-plane retry (a seen entry at the client's edge that expires
sooner) could not be faster than the controller's: learned timeouts are whole seconds.

Flood order: a switch sends a packet's copies one after another, in the order of its
output actions, so the first port listed gets its copy first, and on an idle fabric the
same path won every race (measured on spineleaf:4,4,4, 60 connections from idle: switch_ext
chose spines 1-4 25/20/10/5 times, Open vSwitch 0/13/22/25).  The paper floods in random
port order (as the controller mode does).  So the FLOOD entries come in
:data:`FLOOD_ORDERS` variants, one per value of the low bits of the source port (``reg5``,
which MAIN loads for copies too), each a rotation of the port list: every connection's
copies start at a port of their own, spread evenly over the connections (client source
ports are ephemeral), and every copy still goes out of every port.  (A select group of the
rotations would do the same in one entry; Open vSwitch then confirmed 19 of 70
connections: the copies went out, the locks did not all follow.)

Exploring only from host ports keeps the rest loop-free: a packet that misses
FLOW in the fabric continues on the default routes, and per-flow entries match in_port.

The FLOW entries match the same tuple as controller mode's (:mod:`.rules`), so
tools that read them (tests, ``dump-flows``) read both modes alike.  Learned entries
carry cookies :data:`COOKIE_FLOW`, :data:`COOKIE_LOCK`, :data:`COOKIE_SEEN`; the
entries whose packet counts the controller reads as its counters (explorations, copies,
late copies) carry ``COOKIE_COUNT | kind``.  All of them have the ``COOKIE_TCPPATH``
prefix, so a switch's resync deletes them with the controller mode's entries.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.controller.fabric_ports import SwitchPorts, is_dead_end
from dcnlab.controller.rules import (
    ETH_TYPE_IP,
    IPPROTO_TCP,
    PRIO_PUNT,
    Action,
    FlowEntry,
    SwitchRules,
    match,
)
from dcnlab.controller.view import HostLocation, NetworkView
from dcnlab.schemes.tcppath.frames import TCP_ACK, TCP_SYN
from dcnlab.schemes.tcppath.rules import (
    COOKIE_TCPPATH,
    ElephantFilter,
    port_prefixes,
)

T_MAIN, T_LOCK, T_CONFIRM, T_FLOW, T_SEEN, T_DECIDE, T_FLOOD, T_DEFAULT = range(8)
TABLES = 8

EXPLORE_VID = 0xB4  # VLAN ids of exploration copies: 0xB4..0xB7, one per generation
GENERATIONS = 4
OFPVID_PRESENT = 0x1000
TAGGED = (OFPVID_PRESENT | EXPLORE_VID, 0x1FFF & ~(GENERATIONS - 1))  # any generation
GEN_IDLE = 60  # s: a tuple's generation entry (at its source edge) is forgotten after this
ETH_TYPE_VLAN = 0x8100
OFPFF_SEND_FLOW_REM = 1

# FLOOD entries per port set: one per value of the source port's low bits, each floods in
# a rotation of the ports (16: an even spread over up to 16 ports and close to it over
# more; see "Flood order" above)
FLOOD_ORDERS = 16

PRIO_FLOW = 800  # learned per-flow entries (as controller mode's)
PRIO_LEARNED = 100  # learned locks and seen entries
PRIO_GEN = 50  # learned generation entries (SEEN table, below seen entries)

COOKIE_DP = COOKIE_TCPPATH | 1 << 39  # above any controller-mode serial
COOKIE_FLOW = COOKIE_DP | 1
COOKIE_LOCK = COOKIE_DP | 2
COOKIE_SEEN = COOKIE_DP | 3
COOKIE_GEN = COOKIE_DP | 4
COOKIE_COUNT = COOKIE_DP | 1 << 38  # static entries whose packet counts are counters
COOKIE_COUNT_MASK = (0xFFFFFF << 40) | 1 << 39 | 1 << 38
COUNT_COPY_IN = 1  # tagged copies received (per fabric port entry)
COUNT_LATE = 2  # copies dropped as late
COUNT_FIRST = 3  # first copies (locked and flooded on)
COUNT_EXPLORE = 4  # explorations started at this (edge) switch
COUNT_PENDING = 5  # packets sent on the default routes while their exploration is pending
COUNT_CONFIRM = 6  # packets that confirmed (learned per-flow entries) here
COUNT_BOUNCE = 7  # packets whose lock pointed back to their in-port: not confirmed
COUNT_DEAD_END = 8  # copies dropped on entry at an edge none of whose hosts they are for
RECEIVED = (COUNT_COPY_IN, COUNT_DEAD_END)  # every copy a switch received is one of these

# Registers (pipeline metadata, zero when a packet enters table 0).
REG_LOCK = "reg1"  # lock port (16 bits) found in LOCK
REG_SEEN = "reg2"  # bit 0: SEEN hit
REG_GEN = "reg6"  # the tuple's next exploration generation (SEEN miss at the source edge)
REG_SPORT = "reg5"  # tcp_src, matchable with a mask on every switch
# the rest of an untagged TCP packet's tuple, read so that every datapath cache entry is
# one connection's (see PER_CONNECTION); never matched
REG_DPORT = "reg7"  # tcp_dst in bits 0..15, eth_dst's bits 32..47 in bits 16..31
REG_ESRC_LOW, REG_ESRC_HIGH = "reg3", "reg4"  # eth_src bits 0..31 and 32..47
REG_EDST_LOW = "reg0"  # eth_dst bits 0..31
EPHEMERAL = 0x8000  # source ports 32768..65535: the client side of a connection
IN_PORT = "in_port_nxm"  # NXM_OF_IN_PORT: 16 bits, as the registers' port fields

_TUPLE = (("eth_src", 48), ("eth_dst", 48), ("tcp_src", 16), ("tcp_dst", 16))
_SWAP = {"eth_src": "eth_dst", "eth_dst": "eth_src", "tcp_src": "tcp_dst",
         "tcp_dst": "tcp_src"}
_TCP = {"eth_type": ETH_TYPE_IP, "ip_proto": IPPROTO_TCP}


# Reading a field makes Open vSwitch's datapath cache entry (megaflow) match it exactly.
# Untagged TCP reads its whole tuple in MAIN, so that a connection's packets never meet a
# cache entry another connection's packets made.  Otherwise they can: with no LOCK for a
# host pair, nothing reads tcp_dst or eth_src at a spine or at the destination's edge,
# whose default route is one port (nor eth_dst at a spine, whose routes match an IP
# prefix).  Measured on Open vSwitch 3.1 (spineleaf:4,4,4, TFE): after five mice h9 -> h1
# the datapath held, at h1's edge, tcp(src=7000,dst=20003/0), eth(src=.../00:..:00).  An
# elephant's exploration then learns its locks, but until Open vSwitch has revalidated
# such an entry (a moment later; longer on a loaded machine) the elephant's SYN-ACK and
# next packets hit it, skip CONFIRM and take the default route, and a short connection
# may end unconfirmed (test_tfe_explores_elephants_only_in_the_data_plane: 1 of 2
# confirmed, 'no entry at s5', h1's edge, in a full CI run).  With the reads: exact.
PER_CONNECTION: tuple[Action, ...] = (
    ("move", "tcp_dst", 0, REG_DPORT, 0, 16),
    ("move", "eth_src", 0, REG_ESRC_LOW, 0, 32),
    ("move", "eth_src", 32, REG_ESRC_HIGH, 0, 16),
    ("move", "eth_dst", 0, REG_EDST_LOW, 0, 32),
    ("move", "eth_dst", 32, REG_DPORT, 16, 16))


def _tuple_specs(reverse: bool) -> tuple[tuple, ...]:
    """Learn specs matching the packet's own tuple (or, ``reverse``, the other direction's)."""
    head: tuple[tuple, ...] = (("match", "eth_type", 0, ETH_TYPE_IP, 16),
                               ("match", "ip_proto", 0, IPPROTO_TCP, 8))
    return head + tuple(("match", _SWAP[f] if reverse else f, 0, (f, 0), bits)
                        for f, bits in _TUPLE)


def _learn(table: int, priority: int, cookie: int, specs: tuple[tuple, ...], *, idle: int = 0,
           hard: int = 0, flags: int = 0) -> Action:
    return ("learn", table, priority, idle, hard, cookie, flags, specs)


def learn_seen_and_lock(lock_timeout: int) -> tuple[Action, ...]:
    """A first copy (or an exploration's start): SEEN for this tuple, LOCK for the other
    direction to this packet's in-port."""
    seen = _learn(T_SEEN, PRIO_LEARNED, COOKIE_SEEN,
                  _tuple_specs(False) + (("load", REG_SEEN, 0, 1, 1),), hard=lock_timeout)
    lock = _learn(T_LOCK, PRIO_LEARNED, COOKIE_LOCK,
                  _tuple_specs(True) + (("load", REG_LOCK, 0, (IN_PORT, 0), 16),),
                  hard=lock_timeout)
    return (seen, lock)


def learn_generation(gen: int) -> Action:
    """At the source edge: the generation the tuple's next exploration will carry."""
    return _learn(T_SEEN, PRIO_GEN, COOKIE_GEN,
                  _tuple_specs(False) + (("load", REG_GEN, 0, gen, 16),), idle=GEN_IDLE)


def learn_flow(idle_timeout: int) -> tuple[Action, ...]:
    """The confirming packet (the other direction's, at a switch holding a LOCK): per-flow
    entries for both directions, between its in-port and the lock port."""
    forward = _learn(T_FLOW, PRIO_FLOW, COOKIE_FLOW,
                     (("match", IN_PORT, 0, (REG_LOCK, 0), 16),) + _tuple_specs(True)
                     + (("output", (IN_PORT, 0), 16),),
                     idle=idle_timeout, flags=OFPFF_SEND_FLOW_REM)
    backward = _learn(T_FLOW, PRIO_FLOW, COOKIE_FLOW,
                      (("match", IN_PORT, 0, (IN_PORT, 0), 16),) + _tuple_specs(False)
                      + (("output", (REG_LOCK, 0), 16),),
                      idle=idle_timeout, flags=OFPFF_SEND_FLOW_REM)
    return (forward, backward)


def _entry(table: int, priority: int, actions: Iterable[Action], cookie: int | None = None,
           **fields: object) -> FlowEntry:
    if cookie is None:
        return FlowEntry(priority, match(**fields), tuple(actions), table_id=table)
    return FlowEntry(priority, match(**fields), tuple(actions), table_id=table, cookie=cookie)


def _explore_matches(elephants: ElephantFilter | None) -> list[dict[str, object]]:
    """The extra match fields of the explore entries at a host port: SYNs, and packets
    from an ephemeral source port (:data:`EPHEMERAL`, as ``reg5`` = ``tcp_src``: every
    switch masks registers); TFE: of an elephant (source port range or DSCP)."""
    syn = {"tcp_flags": (TCP_SYN, TCP_SYN | TCP_ACK)}
    ephemeral = {REG_SPORT: (EPHEMERAL, EPHEMERAL)}
    if elephants is None:
        return [syn, ephemeral]
    out: list[dict[str, object]] = []
    for value, mask in port_prefixes(*elephants.ports) if elephants.ports else ():
        out.append({**syn, REG_SPORT: (value, mask)})
        if not mask & EPHEMERAL or value & EPHEMERAL:
            out.append({REG_SPORT: (value | EPHEMERAL, mask | EPHEMERAL)})
    for dscp in sorted(elephants.dscp or ()):
        out.append({**syn, "ip_dscp": dscp})
        out.append({**ephemeral, "ip_dscp": dscp})
    return out


def _dead_end_entries(ports: SwitchPorts, explore: tuple[Action, ...],
                      vids: list[int]) -> list[FlowEntry]:
    """MAIN's entries for copies at an edge switch.  A copy for one of its hosts is
    explored as anywhere else; any other copy is dropped on entry, before any table that
    looks at its tuple.  Deciding it later (seen, lock, flood to no port) forwarded the same
    nothing, but made a datapath cache entry (Open vSwitch's megaflow) match the copy's
    tuple, so every copy of every exploration at every other edge cost a trip to the
    switch's slow path, and learned a seen entry and a lock no packet could ever use.  The
    broadcast on the wire is the paper's: the copies still reach every edge (and are
    counted there, :data:`COUNT_DEAD_END`)."""
    out: list[FlowEntry] = []
    for port in sorted(p for _, p in ports.hosts):
        # A tagged frame from a host is no copy: dropped (as by MAIN's masked entry below)
        # before the host entries, which do not look at the in-port.
        out.append(_entry(T_MAIN, 920, (), in_port=port,
                          vlan_vid=(OFPVID_PRESENT, OFPVID_PRESENT)))
    for mac, _ in ports.hosts:
        for vid in vids:
            out.append(_entry(T_MAIN, 910, explore, COOKIE_COUNT | COUNT_COPY_IN,
                              eth_dst=mac, vlan_vid=vid))
    for port in ports.all_fabric:
        out.append(_entry(T_MAIN, 900, (), COOKIE_COUNT | COUNT_DEAD_END, in_port=port,
                          vlan_vid=TAGGED))
    return out


def pipeline(ports: SwitchPorts, elephants: ElephantFilter | None, idle_timeout: int,
             lock_timeout: int) -> list[FlowEntry]:
    """The static entries of one switch (tables 0..6; DEFAULT comes from the policy)."""
    learn = learn_seen_and_lock(lock_timeout)
    explore = (("resubmit", T_SEEN), ("resubmit", T_DECIDE))
    out: list[FlowEntry] = []
    # MAIN
    # One entry per generation, matching its VLAN id exactly: a datapath cache entry (Open
    # vSwitch's megaflow) then matches the generation's VLAN id exactly too, so a
    # re-exploration's copies miss the cached decisions about the previous one's (its late
    # copies: drop) and are looked up again in the tables as they are now.  With one masked
    # entry for all generations, the caches took them for the previous exploration's late
    # copies and dropped them until revalidated (issue #15).
    vids = [OFPVID_PRESENT | EXPLORE_VID | gen for gen in range(GENERATIONS)]
    if is_dead_end(ports):
        out.extend(_dead_end_entries(ports, explore, vids))
    else:
        # the source port, as for untagged TCP below: FLOOD's order depends on it
        copy_in = (("move", "tcp_src", 0, REG_SPORT, 0, 16), *explore)
        for port in ports.all_fabric:
            for vid in vids:
                out.append(_entry(T_MAIN, 900, copy_in, COOKIE_COUNT | COUNT_COPY_IN,
                                  in_port=port, vlan_vid=vid, **_TCP))
    out.append(_entry(T_MAIN, 890, (), vlan_vid=(OFPVID_PRESENT, OFPVID_PRESENT)))
    tcp_actions: tuple[Action, ...] = (("move", "tcp_src", 0, REG_SPORT, 0, 16),
                                       *PER_CONNECTION,
                                       ("resubmit", T_LOCK), ("resubmit", T_CONFIRM))
    out.append(_entry(T_MAIN, 500, tcp_actions, **_TCP))
    out.append(_entry(T_MAIN, 0, (("resubmit", T_DEFAULT),)))
    # CONFIRM
    out.append(_entry(T_CONFIRM, 10, (("resubmit", T_FLOW),), **{REG_LOCK: 0}))
    for port in sorted({*ports.all_fabric, *(p for _, p in ports.hosts)}):
        # A lock pointing back where the packet came from is another exploration's
        # (locks of one exploration form a tree): never learn a path out of its in-port.
        out.append(_entry(T_CONFIRM, 5, (("resubmit", T_FLOW),), COOKIE_COUNT | COUNT_BOUNCE,
                          in_port=port, **{REG_LOCK: port}))
    out.append(_entry(T_CONFIRM, 0, learn_flow(idle_timeout) + (
        ("dec_nw_ttl",), ("output_reg", REG_LOCK, 0, 16)), COOKIE_COUNT | COUNT_CONFIRM,
        **_TCP))
    # FLOW: misses from a host explore, a SYN always, another packet only from the client
    # side (an ephemeral source port), so that one side of a connection re-explores
    for _, port in ports.hosts:
        for extra in _explore_matches(elephants):
            out.append(_entry(T_FLOW, 2, explore, in_port=port, **extra, **_TCP))
    out.append(_entry(T_FLOW, 0, (("resubmit", T_DEFAULT),)))
    # DECIDE
    seen = {REG_SEEN: (1, 1)}
    out.append(_entry(T_DECIDE, 30, (), COOKIE_COUNT | COUNT_LATE, vlan_vid=TAGGED, **seen))
    out.append(_entry(T_DECIDE, 20, learn + (("dec_nw_ttl",), ("resubmit", T_FLOOD)),
                      COOKIE_COUNT | COUNT_FIRST, vlan_vid=TAGGED, **_TCP))
    out.append(_entry(T_DECIDE, 10, (("resubmit", T_DEFAULT),), COOKIE_COUNT | COUNT_PENDING,
                      **seen))
    for gen in range(GENERATIONS):
        # Successive explorations of one tuple carry different VLAN ids, so datapath
        # caches (Open vSwitch keeps a flow up to 10 s) never take one's copies for the
        # previous one's (MAIN matches each generation's VLAN id exactly).
        out.append(_entry(T_DECIDE, 5, learn + (
            learn_generation((gen + 1) % GENERATIONS), ("push_vlan", ETH_TYPE_VLAN),
            ("set_field", "vlan_vid", OFPVID_PRESENT | EXPLORE_VID | gen),
            ("resubmit", T_FLOOD)), COOKIE_COUNT | COUNT_EXPLORE, **{REG_GEN: gen}, **_TCP))
    # FLOOD
    for mac, port in ports.hosts:
        out.append(_entry(T_FLOOD, 10, (("pop_vlan",), ("output", port)), eth_dst=mac,
                          vlan_vid=TAGGED))
    # Valley-free: a copy that came down (from an up port) only goes on down, so it never
    # climbs back up through a leaf that is not its destination (a detour no shortest
    # path takes); anything else goes out of every live fabric port.
    down = tuple(p for p in ports.fabric if p not in ports.up)
    for port in ports.up:
        out.extend(_flood_entries(5, down, in_port=port))
    out.extend(_flood_entries(0, ports.fabric))
    return out


def _flood_entries(priority: int, members: tuple[int, ...], **fields: object
                   ) -> list[FlowEntry]:
    """FLOOD entries sending a copy out of every port of ``members``, in a rotation chosen
    by the low bits of its source port (``reg5``; see the module docstring, "Flood
    order"); one entry where there is no order to choose."""
    if len(members) < 2:
        return [_entry(T_FLOOD, priority, tuple(("output", p) for p in members), **fields)]
    out = []
    for low in range(FLOOD_ORDERS):
        i = low % len(members)
        order = members[i:] + members[:i]
        out.append(_entry(T_FLOOD, priority, tuple(("output", p) for p in order),
                          **{REG_SPORT: (low, FLOOD_ORDERS - 1)}, **fields))
    return out


def rebuild(rules: SwitchRules, ports: SwitchPorts, elephants: ElephantFilter | None,
            idle_timeout: int, lock_timeout: int) -> None:
    """Turn a switch's compiled policy into the data-plane pipeline, in place: punts stay
    in MAIN, the routes move to DEFAULT, the pipeline's entries join them."""
    moved = set()
    for entry in rules.flows:
        if entry.priority >= PRIO_PUNT:
            moved.add(entry)
        else:
            moved.add(FlowEntry(entry.priority, entry.match, entry.actions, T_DEFAULT,
                                entry.idle_timeout, entry.hard_timeout, entry.cookie))
    moved.update(pipeline(ports, elephants, idle_timeout, lock_timeout))
    rules.flows = moved


def kind_of(cookie: int) -> int | None:
    """The counter a static entry's cookie names (None: not a counted entry)."""
    if cookie & COOKIE_COUNT_MASK != COOKIE_COUNT:
        return None
    return cookie & 0xFF


# -- what the controller does with a data-plane switch ------------------------------------


def speaks_nicira(mfr: str, sw: str) -> bool:
    """Whether a switch (by its OFPMP_DESC) executes the Nicira extensions the pipeline
    uses: Open vSwitch does; switch_ext says so in its software description."""
    return mfr.startswith("Nicira") or "nx=" in sw


COOKIE_ALL = 0xFFFFFFFFFFFFFFFF


def stats_requests(dp: Any) -> list[Any]:
    """Flow statistics of the per-flow entries and of the counting entries."""
    return [
        parser.OFPFlowStatsRequest(dp, 0, T_FLOW, ofp.OFPP_ANY, ofp.OFPG_ANY, COOKIE_FLOW,
                                   COOKIE_ALL, parser.OFPMatch()),
        parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                   COOKIE_COUNT, COOKIE_COUNT_MASK, parser.OFPMatch()),
    ]


def _delete(dp: Any, out_port: int = ofp.OFPP_ANY, table: int = T_FLOW,
            cookie: int = COOKIE_FLOW, **fields: Any) -> Any:
    return parser.OFPFlowMod(dp, cookie=cookie, cookie_mask=COOKIE_ALL, table_id=table,
                             command=ofp.OFPFC_DELETE, out_port=out_port,
                             out_group=ofp.OFPG_ANY, match=parser.OFPMatch(**fields))


def delete_port_flows(dp: Any, port: int) -> list[Any]:
    """Per-flow entries into or out of ``port`` (also those learned since the last poll)."""
    if dp is None:
        return []
    return [_delete(dp, in_port=port), _delete(dp, out_port=port)]


Tuple = tuple[str, str, int, int]  # eth_src, eth_dst, tcp_src, tcp_dst: one direction


def _link_up(view: NetworkView, a: int, b: int) -> bool:
    return bool(view.graph.edges[a, b].get("up", True))


def reverse(t: Tuple) -> Tuple:
    return (t[1], t[0], t[3], t[2])


def connection(t: Tuple) -> Tuple:
    """Both directions' common name."""
    return min(t, reverse(t))


LEARNED = ((T_FLOW, COOKIE_FLOW), (T_LOCK, COOKIE_LOCK), (T_SEEN, COOKIE_SEEN))


def delete_connection(dp: Any, conn: Tuple,
                      tables: Iterable[tuple[int, int]] = LEARNED) -> list[Any]:
    """Both directions' per-flow entries, locks and seen entries of a connection (a lock
    left behind would confirm the old path again); ``tables``: only those (table, cookie)
    kinds."""
    kinds = tuple(tables)
    return [_delete(dp, table=table, cookie=cookie, eth_type=ETH_TYPE_IP,
                    ip_proto=IPPROTO_TCP, eth_src=t[0], eth_dst=t[1], tcp_src=t[2],
                    tcp_dst=t[3])
            for t in (conn, reverse(conn))
            for table, cookie in kinds]


@dataclass
class PathFound:
    """A complete per-flow path, as the switches' FLOW tables spell it (one direction)."""

    key: Tuple
    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    path: list[int]
    recovered: bool = False
    new_connection: bool = False  # neither direction had a path at the last poll


@dataclass
class DataplaneView:
    """What the controller knows of the data plane, from flow statistics only."""

    # dpid -> (in_port, eth_src, eth_dst, tcp_src, tcp_dst) -> out port
    tables: dict[int, dict[tuple[int, str, str, int, int], int]] = field(default_factory=dict)
    # dpid -> counting kind -> (packets, bytes), summed over that kind's entries
    counts: dict[int, dict[int, tuple[int, int]]] = field(default_factory=dict)
    paths: dict[Tuple, list[int]] = field(default_factory=dict)  # complete, one direction
    failed: set[Tuple] = field(default_factory=set)  # connections removed by Path Fail
    _parts: dict[tuple[int, int], list[Any]] = field(default_factory=dict)

    def forget(self, dpid: int) -> None:
        self.tables.pop(dpid, None)
        self.counts.pop(dpid, None)

    def reply(self, dpid: int, xid: int, body: list[Any], more: bool) -> str | None:
        """Take one part of a flow-stats reply; once a reply is complete, apply it and say
        what it held: ``"flows"`` (per-flow entries) or ``"counts"``."""
        parts = self._parts.setdefault((dpid, xid), [])
        parts.extend(body)
        if more:
            return None
        del self._parts[(dpid, xid)]
        flows = [s for s in parts if s.cookie == COOKIE_FLOW]
        counted = [s for s in parts if kind_of(s.cookie) is not None]
        if flows or not counted:  # the per-flow request (an empty reply: no entries)
            table: dict[tuple[int, str, str, int, int], int] = {}
            for s in flows:
                m = s.match
                out = [a.port for inst in s.instructions for a in getattr(inst, "actions", [])
                       if isinstance(a, parser.OFPActionOutput)]
                try:
                    key = (int(m["in_port"]), str(m["eth_src"]), str(m["eth_dst"]),
                           int(m["tcp_src"]), int(m["tcp_dst"]))
                except KeyError:
                    continue
                if out:
                    table[key] = out[0]
            self.tables[dpid] = table
        if counted:
            sums: dict[int, tuple[int, int]] = {}
            for s in counted:
                kind = kind_of(s.cookie)
                assert kind is not None
                p, b = sums.get(kind, (0, 0))
                sums[kind] = (p + s.packet_count, b + s.byte_count)
            self.counts[dpid] = sums
            return "counts"
        return "flows"

    def update_paths(self, view: NetworkView) -> list[PathFound]:
        """Walk every flow from its source host's port; returns the paths that are new
        (or changed) since the last call."""
        found: dict[Tuple, PathFound] = {}
        by_mac = {h.mac: h for h in view.hosts}
        at = {(h.dpid, h.port): h for h in by_mac.values()}
        for dpid, table in self.tables.items():
            for (in_port, src, dst, sport, dport) in table:
                host, target = by_mac.get(src), by_mac.get(dst)
                if host is None or target is None or (host.dpid, host.port) != (dpid, in_port):
                    continue
                walked = self._walk(view, at, (src, dst, sport, dport), dpid, in_port)
                if walked is not None:
                    found[(src, dst, sport, dport)] = PathFound(
                        (src, dst, sport, dport), host.ip, target.ip, sport, dport, walked)
        new = []
        for key, flow in sorted(found.items()):
            if self.paths.get(key) != flow.path:
                conn = connection(key)
                if conn in self.failed:
                    flow.recovered = True
                    self.failed.discard(conn)
                flow.new_connection = not any(k in self.paths for k in (conn, reverse(conn))) \
                    and not any(f.key == reverse(key) for f in new)
                new.append(flow)
        self.paths = {k: f.path for k, f in found.items()}
        return new

    def _walk(self, view: NetworkView, at: dict[tuple[int, int], HostLocation], key: Tuple,
              dpid: int, in_port: int) -> list[int] | None:
        path: list[int] = []
        while dpid not in path:
            path.append(dpid)
            out = self.tables.get(dpid, {}).get((in_port, *key))
            if out is None:
                return None
            host = at.get((dpid, out))
            if host is not None:
                return path if host.mac == key[1] else None
            peer = view.peer(dpid, out)
            if peer is None or not _link_up(view, dpid, peer[0]):
                return None  # not a fabric port, or its link is down: no path (yet)
            dpid, in_port = peer
        return None  # a loop: never reported as a path

    def dead_ports(self, view: NetworkView, dpid: int) -> set[int]:
        """Ports of ``dpid`` whose link is down and that a per-flow entry (as last polled)
        still comes in from or goes out to.  After Path Fail deleted them, such entries come
        back: Open vSwitch's revalidators re-add a learned flow that was deleted while a
        datapath flow whose actions learned it still had packets to account for
        (``ofproto_flow_mod_learn_refresh``), and a reply to a request sent before the
        deletion still lists them."""
        used = {p for (in_port, *_), out in self.tables.get(dpid, {}).items()
                for p in (in_port, out)}
        dead = set()
        for port in used:
            peer = view.peer(dpid, port)
            if peer is not None and not _link_up(view, dpid, peer[0]):
                dead.add(port)
        return dead

    def connections_over(self, dpid: int, port: int) -> set[Tuple]:
        table = self.tables.get(dpid, {})
        return {connection(k[1:]) for k, out in table.items() if port in (k[0], out)}

    def fail(self, conn: Tuple) -> bool:
        """Mark a connection as removed by Path Fail; False if it already was."""
        if conn in self.failed:
            return False
        self.failed.add(conn)
        for key in (conn, reverse(conn)):
            self.paths.pop(key, None)
        return True

    def entries_per_switch(self) -> dict[int, int]:
        return {d: len(t) for d, t in self.tables.items() if t}

    def copies_in(self) -> dict[int, int]:
        """Exploration copies received per switch, explored or dropped on entry."""
        return {d: sum(c.get(k, (0, 0))[0] for k in RECEIVED) for d, c in self.counts.items()
                if any(k in c for k in RECEIVED)}

    def totals(self) -> dict[str, int]:
        """Counters summed over the switches (their packet counts, as last polled)."""
        def total(kind: int) -> tuple[int, int]:
            p = sum(c.get(kind, (0, 0))[0] for c in self.counts.values())
            b = sum(c.get(kind, (0, 0))[1] for c in self.counts.values())
            return p, b
        copies = sum(total(k)[0] for k in RECEIVED)
        copy_bytes = sum(total(k)[1] for k in RECEIVED)
        return {"tcppath_explorations": total(COUNT_EXPLORE)[0],
                "tcppath_copies_received": copies,
                "tcppath_copy_first": total(COUNT_FIRST)[0],
                "tcppath_copy_late": total(COUNT_LATE)[0],
                "tcppath_copy_dead_end": total(COUNT_DEAD_END)[0],
                "tcppath_pending_default": total(COUNT_PENDING)[0],
                "tcppath_confirm_packets": total(COUNT_CONFIRM)[0],
                "tcppath_confirm_bounced": total(COUNT_BOUNCE)[0],
                "tcppath_copy_bytes": copy_bytes // copies if copies else 0}
