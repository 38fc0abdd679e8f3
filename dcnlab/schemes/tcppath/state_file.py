"""The ``tcppath`` section of the controller's state file (apps ``tcppath``, ``tfe``)."""

# No ``from __future__ import annotations``: Python 3.11's TypedDict sees NotRequired only
# in evaluated annotations (as strings, every key would count as required).
from typing import NotRequired, TypedDict

from dcnlab.model.runtime import ControllerState
from dcnlab.schemes.arppath.state_file import ArpPathState


class TcpPathRecentFlow(TypedDict):
    """A flow whose path the ``tcppath``/``tfe`` app confirmed (newest last)."""

    serial: int  # controller mode's flow serial; 0 in data-plane mode
    src: str
    sport: int
    dst: str
    dport: int
    path: list[int]  # datapath ids, source edge first
    time: float  # wall-clock time of the confirmation (data plane: when it was polled)


class TcpPathPolling(TypedDict):
    """How data-plane mode reads flow statistics (dcnlab.schemes.tcppath.polling)."""

    interval: float  # s between the starts of two rounds (grows with their cost)
    round_cost_ms: float  # controller time the last complete round took
    decode_us_per_entry: float  # Ryu's decoding of one entry, measured at start-up
    # rounds whose paths were walked since the app started (the state file reports them
    # up to one write late, so a count says little of when a switch was read: read_at)
    rounds: int
    # dpid -> wall time of the request whose answer is the switch's entries as last read:
    # a reader that wants what the switches did before time T waits for every read_at > T
    read_at: dict[str, float]


class TcpPathState(TypedDict):
    """The ``tcppath`` section (apps ``tcppath`` and ``tfe``)."""

    elephants_only: bool
    mode: str  # "dataplane" (switches explore, lock and confirm) or "controller"
    default: str  # what forwards the rest: "arppath" (data-plane mode) or "ecmp"
    idle_timeout: int  # s, of the per-flow entries
    lock_timeout: float  # s, an unconfirmed path lock lives
    flows: int  # flows with an installed path (data plane: directions with a whole path)
    explorations: int  # explorations under way
    flow_entries: dict[str, int]  # dpid -> per-flow entries
    flow_entries_total: int
    flow_entries_max: int
    series: list[tuple[float, int]]  # (wall time, flow entries over all switches)
    copies_in: dict[str, int]  # dpid -> exploration copies received (controller mode: punted)
    copy_bytes: int  # size of an exploration copy
    recent: list[TcpPathRecentFlow]
    polling: NotRequired[TcpPathPolling]  # data-plane mode only


class TcpPathControllerState(ControllerState):
    """The state file of a ``tcppath``/``tfe`` app."""

    tcppath: NotRequired[TcpPathState]
    arppath: NotRequired[ArpPathState]  # ARP-Path as the default forwarding
