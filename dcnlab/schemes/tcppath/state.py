"""TCP-Path's switch state, kept by the controller for every switch (seed 001), as pure logic.

The paper's switches each hold SD tuples ``{S, pS, D, pD}`` locked to the port where the
first copy of a flooded Path Request arrived.  Here the controller plays every switch:
:class:`TcpPathState` records, per exploration, which port each switch locked to, says
what to do with every copy a switch punts (flood it on, deliver it, or drop it as late),
and turns a SYN-ACK at the destination edge into a confirmed path by walking the locks
back to the source.  No OpenFlow and no clock here: the app passes ``now`` and a
``peer`` function (the far end of a live fabric port), so every race is testable.

Explorations carry an id (the copies carry it too), so a SYN retransmitted after its
exploration was lost starts a fresh exploration whose copies never mix with the old
one's.  Locks of an exploration live ``lock_timeout`` seconds after it started: long
enough for late copies stuck behind a congested queue to be recognised as late.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum

Peer = Callable[[int, int], "tuple[int, int] | None"]
DEFAULT_LOCK_TIMEOUT = 3.0  # s: above the 1 s initial SYN RTO, so a retransmission sees it
MAX_EXPLORATION_ID = 0xFFFFFFFF


@dataclass(frozen=True, order=True)
class FlowKey:
    """One direction of a TCP connection: the paper's SD tuple (plus IPs, for frames)."""

    src_mac: str
    src_ip: str
    src_port: int
    dst_mac: str
    dst_ip: str
    dst_port: int

    def reverse(self) -> FlowKey:
        return FlowKey(self.dst_mac, self.dst_ip, self.dst_port, self.src_mac, self.src_ip,
                       self.src_port)

    @property
    def connection(self) -> FlowKey:
        """The same key for both directions (simultaneous opens meet here)."""
        return min(self, self.reverse())

    def __str__(self) -> str:
        return f"{self.src_ip}:{self.src_port}->{self.dst_ip}:{self.dst_port}"


@dataclass(frozen=True)
class Attachment:
    """Where a host hangs off the fabric: its edge switch and port."""

    dpid: int
    port: int


@dataclass(frozen=True)
class Hop:
    """One switch of a confirmed path: the port towards the source and towards the
    destination (the SD entry matches in_port=to_src and outputs to_dst)."""

    dpid: int
    to_src: int
    to_dst: int


class Verdict(Enum):
    FLOOD = "flood"  # first copy at a transit switch: locked, send on
    DELIVER = "deliver"  # first copy at the destination edge: locked, hand to the host
    LATE = "late"  # this switch is locked to another port: drop
    DUPLICATE = "duplicate"  # a second copy on the locked port: drop
    UNKNOWN = "unknown"  # no such exploration (expired, superseded, invalid): drop


class StartKind(Enum):
    NEW = "new"  # flood a new exploration from the source edge
    LOCAL = "local"  # source and destination share the edge switch: deliver at once
    REDELIVER = "redeliver"  # SYN retransmission, exploration already delivered
    CONFIRMED = "confirmed"  # the connection has a path already


@dataclass
class Exploration:
    xid: int
    key: FlowKey
    src: Attachment
    dst: Attachment
    started: float
    recovery: bool = False
    locks: dict[int, int] = field(default_factory=dict)  # dpid -> port of first arrival
    delivered_at: float | None = None
    confirmed: bool = False
    late: int = 0


@dataclass
class Flow:
    """A confirmed connection: the path of its explored direction ``key``."""

    serial: int
    key: FlowKey
    path: tuple[Hop, ...]
    confirmed_at: float
    xid: int

    @property
    def dpids(self) -> list[int]:
        return [h.dpid for h in self.path]


@dataclass(frozen=True)
class Started:
    kind: StartKind
    exploration: Exploration | None = None
    flow: Flow | None = None
    superseded: Exploration | None = None


class ConfirmError(Exception):
    """A SYN-ACK (or recovery arrival) that must not confirm anything; says why."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True)
class Confirmed:
    flow: Flow
    replaced: Flow | None  # the connection's previous path, whose entries must go


class TcpPathState:
    def __init__(self, peer: Peer, lock_timeout: float = DEFAULT_LOCK_TIMEOUT) -> None:
        self.peer = peer
        self.lock_timeout = lock_timeout
        self.explorations: dict[int, Exploration] = {}
        self.current: dict[FlowKey, int] = {}  # direction key -> its live exploration id
        self.flows: dict[FlowKey, Flow] = {}  # connection key -> confirmed flow
        self.by_serial: dict[int, Flow] = {}
        self._next_xid = 1
        self._next_serial = 1

    # -- exploration -----------------------------------------------------------

    def _new_xid(self) -> int:
        xid = self._next_xid
        self._next_xid = xid % MAX_EXPLORATION_ID + 1
        return xid

    def _live(self, xid: int | None, now: float) -> Exploration | None:
        expl = self.explorations.get(xid) if xid is not None else None
        if expl is None or now - expl.started > self.lock_timeout:
            return None
        return expl

    def start(self, key: FlowKey, src: Attachment, dst: Attachment, now: float,
              recovery: bool = False) -> Started:
        """A SYN from a host at ``src`` (or a recovery): what the source edge must do."""
        if not recovery:
            flow = self.flows.get(key.connection)
            if flow is not None:
                return Started(StartKind.CONFIRMED, flow=flow)
            expl = self._live(self.current.get(key), now)
            if (expl is not None and expl.delivered_at is not None and not expl.recovery
                    and not expl.confirmed):  # confirmed, yet no flow: it aged out
                return Started(StartKind.REDELIVER, exploration=expl)
        old = self._drop(self.current.get(key))
        expl = Exploration(self._new_xid(), key, src, dst, now, recovery)
        expl.locks[src.dpid] = src.port
        self.explorations[expl.xid] = expl
        self.current[key] = expl.xid
        if src.dpid == dst.dpid:
            expl.delivered_at = now
            return Started(StartKind.LOCAL, exploration=expl, superseded=old)
        return Started(StartKind.NEW, exploration=expl, superseded=old)

    def copy(self, xid: int, dpid: int, in_port: int, now: float) -> Verdict:
        """A copy of exploration ``xid`` punted by switch ``dpid`` from ``in_port``."""
        expl = self._live(xid, now)
        if expl is None:
            return Verdict.UNKNOWN
        locked = expl.locks.get(dpid)
        if locked is not None:
            if locked == in_port:
                return Verdict.DUPLICATE
            expl.late += 1
            return Verdict.LATE
        # Like the paper's switches, a switch first reached after the destination was
        # found still locks and floods: the broadcast cost stays the paper's.
        expl.locks[dpid] = in_port
        if dpid == expl.dst.dpid:
            expl.delivered_at = now
            return Verdict.DELIVER
        return Verdict.FLOOD

    # -- confirmation ----------------------------------------------------------

    def confirm(self, synack: FlowKey, dpid: int, in_port: int, now: float) -> Confirmed:
        """A SYN-ACK (direction D->S) seen at switch ``dpid`` coming in on ``in_port``.

        It confirms the exploration of S->D only at that exploration's destination edge,
        from the destination host's port, after the SYN was delivered there.
        """
        key = synack.reverse()
        expl = self._live(self.current.get(key), now)
        if expl is None:
            raise ConfirmError("unknown", str(key))
        if expl.delivered_at is None:
            raise ConfirmError("not_delivered", str(key))
        if (dpid, in_port) != (expl.dst.dpid, expl.dst.port):
            raise ConfirmError("unexpected_port",
                               f"{key} at {dpid:#x} port {in_port}, expected "
                               f"{expl.dst.dpid:#x} port {expl.dst.port}")
        return self._confirm(expl, now)

    def confirm_recovery(self, xid: int, now: float) -> Confirmed:
        """A recovery exploration reached its destination edge (the Path Recovery Reply)."""
        expl = self._live(xid, now)
        if expl is None or not expl.recovery or expl.delivered_at is None:
            raise ConfirmError("unknown", f"recovery exploration {xid}")
        return self._confirm(expl, now)

    def _confirm(self, expl: Exploration, now: float) -> Confirmed:
        path = self._walk(expl)
        expl.confirmed = True
        flow = Flow(self._next_serial, expl.key, path, now, expl.xid)
        self._next_serial += 1
        replaced = self.flows.get(expl.key.connection)
        if replaced is not None:
            self.by_serial.pop(replaced.serial, None)
        self.flows[expl.key.connection] = flow
        self.by_serial[flow.serial] = flow
        return Confirmed(flow, replaced)

    def _walk(self, expl: Exploration) -> tuple[Hop, ...]:
        """Follow the locks from the destination edge back to the source edge."""
        hops: list[Hop] = []
        cur, to_dst = expl.dst.dpid, expl.dst.port
        seen: set[int] = set()
        while True:
            if cur in seen:
                raise ConfirmError("loop", f"{expl.key} revisits {cur:#x}")
            seen.add(cur)
            in_port = expl.locks.get(cur)
            if in_port is None:
                raise ConfirmError("broken", f"{expl.key}: no lock at {cur:#x}")
            hops.append(Hop(cur, in_port, to_dst))
            if cur == expl.src.dpid:
                if in_port != expl.src.port:
                    raise ConfirmError("broken", f"{expl.key}: source edge locked elsewhere")
                break
            prev = self.peer(cur, in_port)
            if prev is None:
                raise ConfirmError("broken", f"{expl.key}: {cur:#x} port {in_port} is down")
            cur, to_dst = prev
        return tuple(reversed(hops))

    # -- ageing, failures ----------------------------------------------------

    def _drop(self, xid: int | None) -> Exploration | None:
        expl = self.explorations.pop(xid, None) if xid is not None else None
        if expl is not None and self.current.get(expl.key) == expl.xid:
            del self.current[expl.key]
        return expl

    def expire(self, now: float) -> list[Exploration]:
        """Forget explorations past the lock timeout; returns the unconfirmed ones."""
        old = [e for e in self.explorations.values() if now - e.started > self.lock_timeout]
        for expl in old:
            self._drop(expl.xid)
        return [e for e in old if not e.confirmed]

    def remove_flow(self, serial: int) -> Flow | None:
        flow = self.by_serial.pop(serial, None)
        if flow is not None and self.flows.get(flow.key.connection) is flow:
            del self.flows[flow.key.connection]
        return flow

    def link_down(self, dpid: int, port: int) -> list[Flow]:
        """The paper's Path Fail: every flow and exploration using (dpid, port) is void.

        Returns the flows removed (their entries must go; recovery re-explores them).
        """
        hit = [f for f in self.flows.values()
               if any(h.dpid == dpid and port in (h.to_src, h.to_dst) for h in f.path)]
        for flow in hit:
            self.remove_flow(flow.serial)
        for expl in list(self.explorations.values()):
            if expl.locks.get(dpid) == port and not expl.confirmed:
                self._drop(expl.xid)
        return hit

    def flows_through(self, dpid: int) -> list[Flow]:
        return [f for f in self.flows.values() if dpid in f.dpids]
