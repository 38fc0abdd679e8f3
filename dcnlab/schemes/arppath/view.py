"""What the controller knows of ARP-Path's data plane, from flow statistics only: per
switch the learned forwarding entries (address -> port) and the packet counts of the
counting entries, and from them paths, table sizes, counters and Path Fail's work."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

from dcnlab.controller.fabric_ports import live_peer
from dcnlab.controller.view import NetworkView

from . import dataplane as apl

COOKIE_ALL = 0xFFFFFFFFFFFFFFFF
# the counters the app reports, from the counting entries' packet counts
COUNTERS = {
    "arppath_explorations": apl.COUNT_EXPLORE,
    "arppath_copies_received": apl.COUNT_COPY_IN,
    "arppath_copy_first": apl.COUNT_FIRST,
    "arppath_copy_late": apl.COUNT_LATE,
    "arppath_copy_dead_end": apl.COUNT_DEAD_END,
    "arppath_pending_default": apl.COUNT_PENDING,
    "arppath_lock_frames": apl.COUNT_ALONG_LOCK,
    "arppath_fabric_miss": apl.COUNT_FABRIC_MISS,
}


def kind_of(cookie: int) -> int | None:
    """The counter a counting entry's cookie names (None: not one)."""
    if cookie & apl.COOKIE_COUNT_MASK != apl.COOKIE_COUNT:
        return None
    return cookie & 0xFF


def stats_requests(dp: Any, base: int) -> list[Any]:
    """Flow statistics of the learned forwarding entries and of the counting entries."""
    return [
        parser.OFPFlowStatsRequest(dp, 0, base + apl.FWD, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                   apl.COOKIE_FWD, COOKIE_ALL, parser.OFPMatch()),
        parser.OFPFlowStatsRequest(dp, 0, ofp.OFPTT_ALL, ofp.OFPP_ANY, ofp.OFPG_ANY,
                                   apl.COOKIE_COUNT, apl.COOKIE_COUNT_MASK,
                                   parser.OFPMatch()),
    ]


def delete_entry(dp: Any, base: int, mac: str, port: int) -> Any:
    """A switch's learned forwarding entry towards ``mac``, if it still outputs to ``port``
    (an entry learned again at another port since it was read stays)."""
    return parser.OFPFlowMod(dp, cookie=apl.COOKIE_FWD, cookie_mask=COOKIE_ALL,
                             table_id=base + apl.FWD, command=ofp.OFPFC_DELETE,
                             out_port=port, out_group=ofp.OFPG_ANY,
                             match=parser.OFPMatch(eth_dst=mac))


def delete_towards(dp: Any, base: int, mac: str) -> list[Any]:
    """A switch's learned entries about ``mac``: forwarding towards it and its locks."""
    return [parser.OFPFlowMod(dp, cookie=cookie, cookie_mask=COOKIE_ALL, table_id=table,
                              command=ofp.OFPFC_DELETE, out_port=ofp.OFPP_ANY,
                              out_group=ofp.OFPG_ANY, match=parser.OFPMatch(**fields))
            for cookie, table, fields in (
                (apl.COOKIE_FWD, base + apl.FWD, {"eth_dst": mac}),
                (apl.COOKIE_LOCK, base + apl.LOCK_DST, {"eth_dst": mac}),
                (apl.COOKIE_LOCK, base + apl.LOCK_SRC, {"eth_src": mac}))]


def from_state(section: dict[str, Any]) -> ArpPathView:
    """The view as an app's state file reports it (``forwarding``)."""
    return ArpPathView(tables={int(d): {str(m): int(p) for m, p in t.items()}
                               for d, t in (section.get("forwarding") or {}).items()})


@dataclass
class ArpPathView:
    """Learned forwarding entries and counters per switch, as last polled."""

    tables: dict[int, dict[str, int]] = field(default_factory=dict)  # dpid -> mac -> port
    counts: dict[int, dict[int, int]] = field(default_factory=dict)  # dpid -> kind -> packets
    _parts: dict[tuple[int, int], list[Any]] = field(default_factory=dict)

    def forget(self, dpid: int) -> None:
        self.tables.pop(dpid, None)
        self.counts.pop(dpid, None)

    def reply(self, dpid: int, xid: int, body: list[Any], more: bool) -> str | None:
        """One part of a reply to :func:`stats_requests`; once complete, applied, and what
        it held said: ``"flows"`` or ``"counts"``."""
        parts = self._parts.setdefault((dpid, xid), [])
        parts.extend(body)
        if more:
            return None
        del self._parts[(dpid, xid)]
        counted = [s for s in parts if kind_of(s.cookie) is not None]
        if counted:
            sums: dict[int, int] = {}
            for s in counted:
                kind = kind_of(s.cookie)
                assert kind is not None
                sums[kind] = sums.get(kind, 0) + s.packet_count
            self.counts[dpid] = sums
            return "counts"
        table = {}
        for s in parts:
            if s.cookie != apl.COOKIE_FWD or "eth_dst" not in s.match:
                continue
            out = [a.port for inst in s.instructions for a in getattr(inst, "actions", [])
                   if isinstance(a, parser.OFPActionOutput)]
            if out:
                table[str(s.match["eth_dst"])] = out[0]
        self.tables[dpid] = table
        return "flows"

    def path(self, view: NetworkView, src_mac: str, dst_mac: str) -> list[int] | None:
        """The switches a frame from ``src_mac`` to ``dst_mac`` crosses by the learned
        entries alone (None: an entry missing, a dead link, or a loop on the way)."""
        hosts = {h.mac: h for h in view.hosts}
        src, dst = hosts.get(src_mac), hosts.get(dst_mac)
        if src is None or dst is None:
            return None
        dpid, path = src.dpid, []
        while dpid not in path:
            path.append(dpid)
            out = self.tables.get(dpid, {}).get(dst_mac)
            if out is None:
                return None
            if (dpid, out) == (dst.dpid, dst.port):
                return path
            peer = live_peer(view, dpid, out)
            if peer is None:
                return None
            dpid = peer[0]
        return None

    def macs_over_dead_links(self, view: NetworkView, dpid: int) -> set[str]:
        """Addresses whose entry at ``dpid`` (as last polled) leads into a link that is down:
        Path Fail deletes what every switch knows of them, so their next frames explore."""
        return {mac for mac, port in self.tables.get(dpid, {}).items()
                if view.peer(dpid, port) is not None and live_peer(view, dpid, port) is None}

    def dangling(self, view: NetworkView) -> set[tuple[int, str]]:
        """The entries (switch, address), as last polled, whose chain towards the address
        ends at a switch with no entry for it, behind a live link, short of the address's
        own edge (or runs in a loop): a frame they forward finds no entry there and takes
        the fallback routes, for as long as they live.  (The tables learn an address only
        from its own frames, so a chain breaks only for the moments between two switches'
        timers, or when a deletion reached one switch and not the next; :mod:`.dataplane`.)
        Chains that end at switches not polled yet, at a dead link (Path Fail's) or at the
        address's own edge (which delivers by the compiled host route too) are not."""
        hosts = {h.mac: h for h in view.hosts}
        return {(dpid, mac) for dpid, table in self.tables.items() for mac in table
                if self._dangles(view, hosts.get(mac), dpid, mac)}

    def breaks(self, view: NetworkView) -> dict[tuple[int, str], tuple[int, int | None]]:
        """The dangling entries (switch, address) where the chain breaks right behind
        them, each with the port it forwards on and the neighbour that has no entry for
        the address (None: the chain runs in a loop, every entry of it listed).  An
        entry whose chain breaks further on is not one: it becomes one once the entry
        in front of the break is gone."""
        hosts = {h.mac: h for h in view.hosts}
        out: dict[tuple[int, str], tuple[int, int | None]] = {}
        for dpid, table in self.tables.items():
            for mac, port in table.items():
                peer = live_peer(view, dpid, port)
                host = hosts.get(mac)
                if peer is None or peer[0] not in self.tables or (
                        host is not None and host.dpid == peer[0]):
                    continue  # a host port, a dead link, not polled yet, or its own edge
                if mac not in self.tables[peer[0]]:
                    out[(dpid, mac)] = (port, peer[0])
                elif self._dangles(view, host, dpid, mac) and self._loops(view, dpid, mac):
                    out[(dpid, mac)] = (port, None)
        return out

    def _loops(self, view: NetworkView, dpid: int, mac: str) -> bool:
        """Whether the chain from ``dpid`` towards ``mac`` comes back to ``dpid``."""
        start, seen = dpid, set()
        while dpid not in seen:
            seen.add(dpid)
            port = self.tables.get(dpid, {}).get(mac)
            peer = None if port is None else live_peer(view, dpid, port)
            if peer is None:
                return False
            dpid = peer[0]
        return dpid == start

    def _dangles(self, view: NetworkView, host: Any, dpid: int, mac: str) -> bool:
        seen = set()
        while dpid not in seen:
            seen.add(dpid)
            port = self.tables[dpid][mac]
            peer = live_peer(view, dpid, port)
            if peer is None or peer[0] not in self.tables:
                return False  # a host port, a dead link, or not polled yet
            if host is not None and host.dpid == peer[0]:
                return False  # its own edge
            if mac not in self.tables[peer[0]]:
                return True
            dpid = peer[0]
        return True  # a loop

    def entries_per_switch(self) -> dict[int, int]:
        return {d: len(t) for d, t in self.tables.items() if t}

    def totals(self) -> dict[str, int]:
        """The counters, summed over the switches."""
        return {name: sum(c.get(kind, 0) for c in self.counts.values())
                for name, kind in COUNTERS.items()}
