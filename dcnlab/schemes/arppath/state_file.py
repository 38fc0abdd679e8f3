"""The ``arppath`` section of a controller state file (apps ``arppath``, and ``tcppath``
and ``tfe`` when ARP-Path is their default forwarding)."""

# No ``from __future__ import annotations``: Python 3.11's TypedDict sees NotRequired only
# in evaluated annotations.
from typing import NotRequired, TypedDict

from dcnlab.model.runtime import ControllerState


class ArpPathPolling(TypedDict):
    interval: float  # s between the starts of two polling rounds
    rounds: int  # complete rounds since the app started
    read_at: dict[str, float]  # dpid -> when the entries last read were asked for


class ArpPathState(TypedDict):
    mode: str  # "dataplane", or "unsupported" (a switch lacks the Nicira extensions)
    base_table: int  # ARP-Path's first table
    idle_timeout: int  # s, of the learned forwarding entries
    lock_timeout: int  # s, of the locks
    entries: dict[str, int]  # dpid -> learned forwarding entries, as last polled
    entries_total: int
    entries_max: int
    series: list[tuple[float, int]]  # (wall time, entries over all switches), per round
    forwarding: dict[str, dict[str, int]]  # dpid -> address -> output port
    # the controller's latest deletions, oldest first: [wall time, "repair" (a dangling
    # chain) or "path_fail" (a dead link), dpid or None (every switch), address]
    deleted: list[tuple[float, str, int | None, str]]
    polling: NotRequired[ArpPathPolling]  # the arppath app's own rounds


class ArpPathControllerState(ControllerState):
    """The state file of the ``arppath`` app."""

    arppath: NotRequired[ArpPathState]
