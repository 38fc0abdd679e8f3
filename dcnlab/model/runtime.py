"""The contract between a running controller app and whoever launched it.

Faucet-style, apps take their run-time configuration from environment variables so
that plain ``ryu-manager dcnlab.apps.ecmp`` keeps working:

``DCNLAB_TOPOLOGY``
    Path to a JSON topology (:meth:`~dcnlab.model.topology.TopologySpec.to_dict`).  When
    set, the app knows the fabric, the hosts and their addresses up front.  When unset (a
    real lab), the app discovers switches and links with LLDP and learns hosts from their
    ARP packets.
``DCNLAB_STATE_FILE``
    Path where the app keeps a JSON snapshot of its state (written atomically on
    change), shaped as :class:`ControllerState`.  The network lifecycle waits on its
    ``ready``; checks and benchmarks read its counters, port statistics and app sections.
``DCNLAB_STATS_INTERVAL``
    Seconds between the app's port-statistics polls (default 1; 0 turns polling off).
``DCNLAB_SELECT_MODE``
    The load balancer (``NAME[/KEY=VALUE]...``, dcnlab/model/balancers.py) an app asks
    of switches that can choose one (switch_ext); each app accepts its own family
    (spray: ``random`` or ``rr``; letflow: ``letflow/...``) and has its default.

This module is neutral ground: the launcher (:mod:`dcnlab.topo`) and the apps
(:mod:`dcnlab.controller`, :mod:`dcnlab.apps`) both import it, and it imports neither.

The state schema is declared as TypedDicts, which is what the file holds once parsed:
the writer builds the dicts directly and readers index them, with no conversion on either
side.  Keys are strings because JSON's are (datapath ids and port numbers as decimal
text).  An app outside dcnlab may write a subset of the common keys (the lifecycle needs
only ``pid``, ``ready``, ``expected``, ``connected`` and ``warnings``), so readers that
accept any app use ``.get()``.
"""

# No ``from __future__ import annotations``: Python 3.11's TypedDict sees NotRequired only
# in evaluated annotations (as strings, every key would count as required).
import json
import os
import tempfile
from typing import TypedDict

ENV_TOPOLOGY = "DCNLAB_TOPOLOGY"
ENV_STATE_FILE = "DCNLAB_STATE_FILE"
ENV_STATS_INTERVAL = "DCNLAB_STATS_INTERVAL"
ENV_SELECT_MODE = "DCNLAB_SELECT_MODE"


# ---------------------------------------------------------------------------
# The state file's schema


class EntryCounts(TypedDict):
    """What the app installed on one switch."""

    flows: int
    groups: int


class PortCounters(TypedDict):
    """One port's OpenFlow counters, from the app's last port-statistics reply."""

    rx_packets: int
    tx_packets: int
    rx_bytes: int
    tx_bytes: int
    rx_dropped: int
    tx_dropped: int


class HostSeen(TypedDict):
    """Where the controller saw a host's address (ARP, or the topology)."""

    mac: str
    dpid: int
    port: int


class ControllerState(TypedDict):
    """The state file: what every dcnlab app writes.  An app may add a section of its
    own under its scheme's name; the scheme declares it in its own package, as a
    TypedDict that extends this one (``dcnlab/schemes/<name>/state_file.py``)."""

    app: str  # module of the app class
    policy: str  # the app's forwarding (groups, striped, ...)
    pid: int  # ryu-manager's pid: tells a restarted controller's state from the old one's
    mode: str  # "topology" (DCNLAB_TOPOLOGY given) or "discovery"
    expected: list[int]  # dpids from the topology ([] in discovery mode)
    connected: list[int]  # dpids with an OpenFlow session
    synced: list[int]  # dpids that confirmed their entries with a barrier reply
    ready: bool  # every expected (or, discovering, every connected) switch is synced
    counters: dict[str, int]
    warnings: list[str]  # the latest ones, oldest first
    links: int  # fabric links up
    links_down: list[list[int]]  # [dpid, dpid] pairs
    # every fabric link [a, a_port, b, b_port, up] (a < b): what LLDP found, on a lab
    fabric: list[list[int]]
    host_locations: dict[str, HostSeen]  # IPv4 address -> where it was seen
    settled: bool  # discovery mode: LLDP quiet long enough to trust host-facing ports
    hosts: int  # hosts known
    descriptions: dict[str, str]  # dpid -> "manufacturer / hardware / software"
    entries: dict[str, EntryCounts]  # dpid -> installed entries
    port_stats: dict[str, dict[str, PortCounters]]  # dpid -> port -> counters
    updated: float  # wall-clock time of this snapshot


# ---------------------------------------------------------------------------
# Writing and reading it


def write_state(path: str, state: ControllerState) -> None:
    """Atomically replace ``path`` with ``state`` as JSON (readers never see halves)."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=directory)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(state, fh, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def read_state(path: str) -> ControllerState | None:
    """The last state an app wrote, or None when there is none yet."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        return None
