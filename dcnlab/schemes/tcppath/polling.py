"""When data-plane TCP-Path reads the switches' flow statistics, and what that costs.

In data-plane mode the controller learns paths and counters only from flow statistics
(:mod:`.dataplane`).  Reading them is not free: Ryu decodes every learned per-flow entry
of a reply in Python (84-114 us each on the shared 2-core lab VM at load average 3.6,
2026-11-28; ``benchmarks/tcppath_polling.py`` measures it on any machine), and while it
decodes, the controller's single event loop answers nothing else: ARP requests (which
resolve through the controller) waited 50-220 ms behind rounds of about 1000 entries
polled from every switch at once, every 0.5 s (issue #15).  So:

* the switches of a round are asked one after another, spread over the round, so the
  decoding comes in one switch's share at a time instead of all at once;
* paths are walked once per round, when the last switch asked has answered, not once
  per reply;
* a round's interval grows with its cost, so that reading flow statistics takes at most
  :data:`BUDGET` of a core: from :data:`MIN_INTERVAL` for small tables up to
  :data:`MAX_INTERVAL` however large they grow.  The cost of a round is the time the app
  spent on its replies (measured) plus the decoding Ryu did before the app saw them,
  which the app cannot time: the entries counted times :func:`decode_cost_per_entry`,
  measured once on this machine when the app starts.
"""

from __future__ import annotations

import struct
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ryu.ofproto import ofproto_v1_3 as ofp
from ryu.ofproto import ofproto_v1_3_parser as parser

MIN_INTERVAL = 0.5  # s between two rounds while the tables are small
MAX_INTERVAL = 2.0  # s: paths and Path Fail's re-deletions are at most this late
BUDGET = 0.05  # share of one core that reading flow statistics may take

_STATS_HEAD = struct.Struct("!HBxIIHHHH4xQQQ")  # struct ofp_flow_stats up to its match


def _sample_entry(i: int) -> bytes:
    """One learned per-flow entry as a switch reports it (match and output as the FLOW
    table's entries)."""
    match = parser.OFPMatch(in_port=1, eth_type=0x0800, ip_proto=6,
                            eth_src="02:00:00:00:00:01", eth_dst="02:00:00:00:00:02",
                            tcp_src=32768 + i, tcp_dst=80)
    body = bytearray()
    match.serialize(body, 0)
    insts = bytearray()
    parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS,
                                 [parser.OFPActionOutput(2)]).serialize(insts, 0)
    rest = bytes(body) + bytes(insts)
    return _STATS_HEAD.pack(_STATS_HEAD.size + len(rest), 3, 1, 0, 800, 10, 0, 1, 0, 1,
                            64) + rest


def decode_cost_per_entry(samples: int = 64) -> float:
    """Seconds Ryu takes to decode one such entry on this machine (the best of three
    passes over ``samples`` entries)."""
    raw = b"".join(_sample_entry(i) for i in range(samples))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        offset = 0
        while offset < len(raw):
            offset += parser.OFPFlowStats.parser(raw, offset).length
        best = min(best, time.perf_counter() - start)
    return best / samples


def interval_for(cost: float) -> float:
    """The interval between rounds that keeps a round of ``cost`` seconds within
    :data:`BUDGET`."""
    return min(MAX_INTERVAL, max(MIN_INTERVAL, cost / BUDGET))


@dataclass
class FlowPolling:
    """Rounds of flow-statistics requests: who is still to answer, what a round cost."""

    decode_cost: float  # s per entry, see decode_cost_per_entry
    interval: float = MIN_INTERVAL
    last_cost: float = 0.0  # s, the last complete round
    rounds: int = 0  # rounds whose paths were walked (complete, or cut short by a silence)
    awaiting: set[int] = field(default_factory=set)
    # per switch, the wall time its entries were asked for in the request whose answer was
    # read last: what the controller knows of a switch is no older than that (a test asks
    # "read after T?" of this, not of round counts, which a state file reports late)
    read_at: dict[int, float] = field(default_factory=dict)
    _asked_at: dict[int, deque[float]] = field(default_factory=dict)
    _cost: float = 0.0

    def asked(self, dpid: int) -> None:
        """``dpid``'s per-flow entries were just asked for (a switch answers its requests
        in order, so the oldest unanswered one is the next answer's)."""
        self._asked_at.setdefault(dpid, deque()).append(time.time())

    def start_round(self, dpids: Iterable[int]) -> bool:
        """A new round asks ``dpids``, one every ``interval / len(dpids)`` seconds (the
        interval as it stands now: answers during the round change the next one's).
        True if the previous round never completed (a switch did not answer): its paths
        are still to be walked."""
        incomplete = bool(self.awaiting)
        if incomplete:
            self._finish()
        self.awaiting = set(dpids)
        return incomplete

    def decoded(self, entries: int) -> None:
        """A reply message of ``entries`` entries was decoded before the app saw it."""
        self._cost += entries * self.decode_cost

    def spent(self, seconds: float) -> None:
        """The app spent ``seconds`` on a reply (walking the paths counts in
        :meth:`walked`)."""
        self._cost += seconds

    def answered(self, dpid: int) -> bool:
        """``dpid``'s per-flow entries arrived; True when the paths should be walked now:
        the round is complete, or the request was not one of a round (sent by hand)."""
        if self._asked_at.get(dpid):
            self.read_at[dpid] = self._asked_at[dpid].popleft()
        if dpid not in self.awaiting:
            return not self.awaiting
        self.awaiting.discard(dpid)
        if self.awaiting:
            return False
        self._finish()
        return True

    def walked(self, seconds: float) -> None:
        """Walking the paths of the round just completed took ``seconds``."""
        self.rounds += 1
        self.last_cost += seconds
        self.interval = interval_for(self.last_cost)

    def _finish(self) -> None:
        self.last_cost, self._cost = self._cost, 0.0
        self.awaiting = set()
        self.interval = interval_for(self.last_cost)


def read_after(state: Mapping[str, Any], section: str, moment: float,
               dpids: Iterable[int]) -> bool:
    """Whether the app's state (its ``section``'s ``polling.read_at``) has every switch of
    ``dpids`` read in answer to a request sent after ``moment`` (time.time()): what the
    switches did before then is in the state.  Round counts cannot say so: a state file
    reports them late, and a round counted after ``moment`` may have read its first
    switches before it."""
    read_at = state.get(section, {}).get("polling", {}).get("read_at", {})
    return all(read_at.get(str(dpid), 0.0) > moment for dpid in dpids)
