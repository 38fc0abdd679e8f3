"""UC3-style bandwidth allocation (seed 004), as plain functions over plain data.

The controller app feeds this module what it collected (each flow's path as a list of
links, link capacities, per-flow RTT, MSS and measured throughput) and gets back a rate
and a congestion window (in segments) per flow; the host agents enforce the windows.
No Ryu, no network: everything here is unit-tested with hand-computed numbers.

Steps, as in the paper (Ito, Koga, Iida, IEICE 2018, Sect. 3):

1. **Fair share at the bottleneck.**  For each flow, the bottleneck is the link on its
   path with the smallest ``capacity / number of flows crossing it``; the flow's fair
   share is that quotient.  ``max_min_shares`` (water-filling) is offered as an option:
   it also hands out what flows bottlenecked elsewhere leave on a link.
2. **Smoothing.**  ``E = alpha * R + (1 - alpha) * E`` per flow (:class:`Ema`).
3. **Reallocation.**  A flow is *under-using* when ``E < beta * share``.  It keeps its
   fair share.  The unused part ``share - E`` of all under-using flows is summed per edge
   (ingress) router and divided equally among the flows of that edge that do fill their
   share, on top of their share.

   Choice of reading, documented on purpose: the paper's sentence says "if E multiplied
   by beta is smaller than the allocated rate" (``beta * E < share``), under which a
   *larger* beta makes *fewer* flows under-using and so reallocates *less*.  Its beta
   sweep (Fig. 14) shows the opposite: total throughput rises with beta (more
   reallocation) and fairness falls above 0.8.  ``E < beta * share`` is the reading that
   matches the measured behaviour (beta = 1: any shortfall is reallocated; beta -> 0:
   nothing is), so that is what :func:`reallocate` implements.

   A flow whose congestion window has reached the window it was allocated (its clamp,
   as its agent reports) is *not* under-using, whatever its throughput: it sends all it
   is allowed, and what holds its rate down is the queue the other flows build, not a
   lack of demand.  Our addition, for a measured reason: two backlogged flows on a
   dumbbell (RTT 6 and 34 ms, 100 Mbit/s, 50-packet buffer) measure 50 ms throughputs
   that swing between 20 and 60 Mbit/s, so ``E < beta * share`` alone marked one of
   them under-using again and again, its share went to the other, the other's larger
   window built a queue, the first flow's rate fell further and the reallocation locked
   in (1 run in 4 ended at 34/51 Mbit/s, Jain 0.947).  The paper's under-using flows
   are those that do not need their share; a flow held at its clamp needs all of it.
4. **Window.**  ``BDP = rate * RTT`` in bytes on the wire, divided by the bytes one
   segment occupies there (MSS plus ``header_bytes`` of Ethernet, IP and TCP headers:
   shares are in wire bits, windows count payload segments, and 1448 payload bytes take
   a 1514-byte frame) and rounded up, to the nearest (halves up) or down to whole
   segments (the paper's round-up / round / round-down), then bounded to ``[1, 65535]``
   segments (the agent protocol's bounds).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

FlowId = Hashable
LinkId = Hashable

MIN_WINDOW = 1
MAX_WINDOW = 65535
# Wire bytes per segment besides its payload: Ethernet 14, IPv4 20, TCP 20 and the
# timestamp option 12 that Linux uses by default (1448 + 66 = 1514-byte frames).
WIRE_HEADER_BYTES = 14 + 20 + 20 + 12


class AllocError(ValueError):
    """Inputs the allocator cannot work with (unknown link, bad parameter)."""


class Rounding(StrEnum):
    UP = "up"
    ROUND = "round"
    DOWN = "down"


class ShareMethod(StrEnum):
    BOTTLENECK = "bottleneck"  # the paper: capacity / flows at the tightest link
    MAXMIN = "maxmin"  # water-filling


# ---------------------------------------------------------------------------
# Fair shares


def _flows_per_link(paths: Mapping[FlowId, Sequence[LinkId]],
                    capacity: Mapping[LinkId, float]) -> dict[LinkId, list[FlowId]]:
    on_link: dict[LinkId, list[FlowId]] = {}
    for flow, path in paths.items():
        if not path:
            raise AllocError(f"flow {flow!r} has an empty path")
        for link in dict.fromkeys(path):  # a link listed twice still counts the flow once
            flows = on_link.get(link)
            if flows is None:  # each link is checked once, not once per flow
                if link not in capacity:
                    raise AllocError(f"flow {flow!r} crosses link {link!r} of unknown "
                                     "capacity")
                if capacity[link] < 0:
                    raise AllocError(f"link {link!r} has a negative capacity")
                flows = on_link[link] = []
            flows.append(flow)
    return on_link


def bottlenecks(paths: Mapping[FlowId, Sequence[LinkId]],
                capacity: Mapping[LinkId, float]) -> dict[FlowId, tuple[LinkId, float]]:
    """Per flow: (bottleneck link, fair share there) = argmin/min of capacity / #flows.

    Ties go to the first such link along the path (deterministic for the tests).
    """
    on_link = _flows_per_link(paths, capacity)
    share = {link: capacity[link] / len(flows) for link, flows in on_link.items()}
    result: dict[FlowId, tuple[LinkId, float]] = {}
    for flow, path in paths.items():
        link = min(path, key=share.__getitem__)  # min keeps the first of equal shares
        result[flow] = (link, share[link])
    return result


def fair_shares(paths: Mapping[FlowId, Sequence[LinkId]],
                capacity: Mapping[LinkId, float]) -> dict[FlowId, float]:
    """The paper's fair share: bottleneck capacity divided by the flows competing there."""
    return {flow: share for flow, (_link, share) in bottlenecks(paths, capacity).items()}


def max_min_shares(paths: Mapping[FlowId, Sequence[LinkId]],
                   capacity: Mapping[LinkId, float]) -> dict[FlowId, float]:
    """Max-min fair rates by progressive filling (water-filling).

    Repeatedly find the link whose remaining capacity divided by its unfrozen flows is the
    smallest, give that level to those flows, freeze them and subtract their rates from
    every link they cross.  Unlike :func:`fair_shares`, capacity left over by a flow that
    is bottlenecked elsewhere goes to the other flows of the link.
    """
    on_link = _flows_per_link(paths, capacity)
    remaining = {link: float(capacity[link]) for link in on_link}
    active = {link: set(flows) for link, flows in on_link.items()}
    rates: dict[FlowId, float] = {}
    while len(rates) < len(paths):
        link, level = min(((lk, remaining[lk] / len(fl)) for lk, fl in active.items() if fl),
                          key=lambda item: item[1])
        level = max(level, 0.0)
        for flow in sorted(active[link], key=repr):
            rates[flow] = level
            for other in dict.fromkeys(paths[flow]):
                remaining[other] -= level
                active[other].discard(flow)
        del active[link]
    return rates


# ---------------------------------------------------------------------------
# Smoothing and reallocation


class Ema:
    """Per-flow exponential moving average ``E = alpha * R + (1 - alpha) * E``.

    The first sample of a flow initialises E (the paper gives no initial value, and
    starting from 0 would mark every new flow as under-using for several intervals).
    """

    def __init__(self, alpha: float) -> None:
        if not 0.0 < alpha <= 1.0:
            raise AllocError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = alpha
        self.values: dict[FlowId, float] = {}

    def update(self, flow: FlowId, sample: float) -> float:
        previous = self.values.get(flow)
        value = sample if previous is None else self.alpha * sample + (1 - self.alpha) * previous
        self.values[flow] = value
        return value

    def forget(self, live: Iterable[FlowId]) -> None:
        """Drop flows that no longer exist (keeps memory bounded across many flows)."""
        keep = set(live)
        for flow in [f for f in self.values if f not in keep]:
            del self.values[flow]


def under_using(share: float, e_th: float | None, beta: float, window_limited: bool) -> bool:
    """``E < beta * share`` for a flow that is not held at its allocated window (see the
    module docstring); a flow without a throughput sample fills its share."""
    return e_th is not None and e_th < beta * share and not window_limited


def reallocate(shares: Mapping[FlowId, float], smoothed: Mapping[FlowId, float],
               edge: Mapping[FlowId, Hashable], beta: float,
               window_limited: Collection[FlowId] = ()) -> dict[FlowId, float]:
    """Add the bandwidth under-using flows leave unused to the flows that fill their share.

    Under-using: :func:`under_using` (``smoothed < beta * share``, unless the flow is in
    ``window_limited``).  Per edge, the unused bandwidth ``sum(share - smoothed)`` is
    divided equally among that edge's filling flows; an edge whose flows all under-use
    keeps its unused bandwidth unallocated.
    """
    if not 0.0 <= beta <= 1.0:
        raise AllocError(f"beta must be in [0, 1], got {beta}")
    unused: dict[Hashable, float] = {}
    filling: dict[Hashable, list[FlowId]] = {}
    for flow, share in shares.items():
        e_th = smoothed.get(flow)
        where = edge[flow]
        if e_th is not None and under_using(share, e_th, beta, flow in window_limited):
            unused[where] = unused.get(where, 0.0) + (share - e_th)
        else:
            filling.setdefault(where, []).append(flow)
    result = dict(shares)
    for where, spare in unused.items():
        takers = filling.get(where, [])
        for flow in takers:
            result[flow] += spare / len(takers)
    return result


# ---------------------------------------------------------------------------
# Windows


def window_segments(rate_bps: float, rtt_s: float, mss: int,
                    rounding: Rounding | str = Rounding.UP,
                    header_bytes: int = WIRE_HEADER_BYTES) -> int:
    """BDP in whole segments: ``rate_bps / 8 * rtt_s / (mss + header_bytes)`` rounded,
    within [1, 65535].

    ``round`` rounds halves up (not Python's round-half-even) so the three modes order
    as up >= round >= down for every input.
    """
    if mss <= 0:
        raise AllocError(f"MSS must be positive, got {mss}")
    if header_bytes < 0:
        raise AllocError(f"header bytes must not be negative, got {header_bytes}")
    if rate_bps < 0 or rtt_s < 0:
        raise AllocError(f"rate and RTT must be non-negative, got {rate_bps}, {rtt_s}")
    segments = rate_bps / 8.0 * rtt_s / (mss + header_bytes)
    # Guard against float noise (e.g. 2.0000000000000004 would round *up* to 3).
    nearest = round(segments)
    if math.isclose(segments, nearest, rel_tol=1e-9, abs_tol=1e-9):
        segments = float(nearest)
    mode = Rounding(rounding)
    if mode is Rounding.UP:
        count = math.ceil(segments)
    elif mode is Rounding.DOWN:
        count = math.floor(segments)
    else:
        count = math.floor(segments + 0.5)
    return max(MIN_WINDOW, min(MAX_WINDOW, count))


# ---------------------------------------------------------------------------
# One allocation round


@dataclass(frozen=True)
class FlowInput:
    """What the controller knows about a flow in one round."""

    path: tuple[LinkId, ...]
    rtt_s: float
    mss: int
    throughput_bps: float | None = None  # measured this interval (None: no sample yet)
    edge: Hashable | None = None  # ingress edge router; default: the path's first link
    # its congestion window has reached the window it was allocated (the agent's clamp):
    # never under-using (module docstring, step 3)
    window_limited: bool = False


@dataclass(frozen=True)
class AllocConfig:
    alpha: float = 0.4
    beta: float = 0.8
    rounding: Rounding = Rounding.UP
    method: ShareMethod = ShareMethod.BOTTLENECK
    reallocation: bool = True
    header_bytes: int = WIRE_HEADER_BYTES  # wire bytes per segment besides the payload


@dataclass(frozen=True)
class Allocation:
    share_bps: float  # fair share before reallocation
    rate_bps: float  # allocated rate (share plus any reallocated bandwidth)
    window: int  # segments
    under_using: bool


class Allocator:
    """Stateful wrapper: keeps the EMA across rounds, returns an Allocation per flow."""

    def __init__(self, config: AllocConfig | None = None) -> None:
        self.config = config or AllocConfig()
        self.ema = Ema(self.config.alpha)

    def allocate(self, flows: Mapping[FlowId, FlowInput],
                 capacity: Mapping[LinkId, float]) -> dict[FlowId, Allocation]:
        cfg = self.config
        paths = {flow: info.path for flow, info in flows.items()}
        if ShareMethod(cfg.method) is ShareMethod.MAXMIN:
            shares = max_min_shares(paths, capacity)
        else:
            shares = fair_shares(paths, capacity)
        self.ema.forget(flows)
        smoothed = {flow: self.ema.update(flow, info.throughput_bps)
                    for flow, info in flows.items() if info.throughput_bps is not None}
        edges = {flow: info.edge if info.edge is not None else info.path[0]
                 for flow, info in flows.items()}
        held = {flow for flow, info in flows.items() if info.window_limited}
        rates = (reallocate(shares, smoothed, edges, cfg.beta, held) if cfg.reallocation
                 else shares)
        result = {}
        rounding = Rounding(cfg.rounding)  # once per round, not per flow
        for flow, info in flows.items():
            e_th = smoothed.get(flow)
            result[flow] = Allocation(
                share_bps=shares[flow], rate_bps=rates[flow],
                window=window_segments(rates[flow], info.rtt_s, info.mss, rounding,
                                       cfg.header_bytes),
                under_using=under_using(shares[flow], e_th, cfg.beta, flow in held))
        return result
