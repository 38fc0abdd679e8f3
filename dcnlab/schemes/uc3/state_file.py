"""The ``uc3`` section of the controller's state file (app ``uc3``)."""

# No ``from __future__ import annotations``: Python 3.11's TypedDict sees NotRequired only
# in evaluated annotations (as strings, every key would count as required).
from typing import NotRequired, TypedDict

from dcnlab.model.runtime import ControllerState


class Uc3ConfigState(TypedDict):
    interval_s: float
    alpha: float
    beta: float
    rounding: str
    reallocation: bool
    method: str
    capacity_bps: float | None  # None: from the topology's link rates
    min_rate_bps: float
    header_bytes: int  # wire bytes per segment besides the payload
    agents_file: str | None


class Uc3AgentState(TypedDict):
    addr: str  # "ip:port" on the management network
    connected: bool
    last_error: str


class Uc3FlowState(TypedDict):
    """The latest allocation of one flow (keyed by its 4-tuple text)."""

    window: int  # segments
    share_bps: int
    rate_bps: int
    under_using: bool
    rtt_ms: float | None  # None: no report from the sender's agent
    throughput_bps: int | None
    ema_bps: int
    agent: str | None
    path: list[str]  # "dpid:port" egresses


class Uc3LinkState(TypedDict):
    """One switch egress ("dpid:port") that carries allocated flows."""

    capacity_bps: float
    flows: int
    load_bps: int


class Uc3State(TypedDict):
    """The ``uc3`` section (app ``uc3``)."""

    config: Uc3ConfigState
    agents: dict[str, Uc3AgentState]  # host fabric IP -> agent
    flows: dict[str, Uc3FlowState]
    links: dict[str, Uc3LinkState]


class Uc3ControllerState(ControllerState):
    """The state file of a ``uc3`` app."""

    uc3: NotRequired[Uc3State]
