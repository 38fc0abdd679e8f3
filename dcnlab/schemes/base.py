"""What a scheme declares, as data: the seams the engine, ``dcnlab check`` and the CLI use.

A scheme is a controller app plus whatever else it needs: switch options, a switch kind
it requires, parts on the end hosts (agents, a transport), an invariant that ``dcnlab
check`` tests, and extra columns for the results.  The generic code (engine, check,
experiment schema, CLI) only reads these declarations; it never names a scheme.

Declarations live in :mod:`dcnlab.schemes` (one module or package per scheme family,
found by :mod:`dcnlab.schemes.registry`).  Importing a declaration must stay cheap: no
Ryu, no Mininet, no network; heavy parts are imported inside the callables.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

# ---------------------------------------------------------------------------- check


@dataclass
class CheckContext:
    """What a scheme's check invariant gets: the running network and the run's choices.

    ``net`` is a started :class:`dcnlab.topo.network.Network`; ``spec`` its topology;
    ``carried`` bytes each top-tier switch (cores/spines) sent during the 16 concurrent
    transfers of the generic part of the check; ``pairs`` those transfers' (src, dst);
    ``hosts`` the scheme's host parts session, if it has one.
    """

    net: Any
    spec: Any
    switch: str
    select_mode: str
    carried: dict[str, int]
    pairs: list[tuple[str, str]]
    hosts: HostSession | None = None


# fields for the JSON line, failure messages
CheckOutcome = tuple[dict[str, Any], list[str]]
CheckFn = Callable[[CheckContext], CheckOutcome]


# ---------------------------------------------------------------------------- hosts


class HostSession(Protocol):
    """A scheme's host-side parts in one network: created before the network (files the
    app must be told about), started in the hosts after it, stopped before it."""

    @property
    def management(self) -> bool:
        """Whether the controller must reach the hosts over a management network."""

    def app_env(self) -> dict[str, str]:
        """Environment the controller app needs to find the host parts."""

    def start(self, net: Any, hosts: Sequence[str]) -> None:
        """Start in ``hosts`` and wait until the app can use them; raises
        :class:`HostPartsError` with the reason otherwise."""

    @property
    def hosts(self) -> list[str]:
        """Hosts the parts run in (empty before start)."""

    def cgroup_procs(self, host: str) -> str | None:
        """A cgroup.procs file traffic senders in ``host`` join before opening sockets,
        so the host parts govern their flows; None when there is none."""

    def counters(self, net: Any) -> dict[str, int]:
        """Cumulative counters now (their columns: :attr:`HostParts.columns`)."""

    def dead(self) -> list[str]:
        """One message per part that exited unexpectedly."""

    def stop(self, run_dir: Path | None) -> None:
        """Stop everything started; keep logs under ``run_dir`` (if given); remove files."""


class HostPartsError(RuntimeError):
    """Host parts did not come up; the message says why (with a log tail)."""


@dataclass(frozen=True)
class HostParts:
    """A kind of host-side parts, chosen in experiment files as ``agents: <name>``."""

    name: str
    summary: str
    # (report interval in s) -> a session; creates its files, starts nothing yet
    open: Callable[[float], HostSession]
    default_interval: float = 0.1
    # per-run counter columns (deltas of HostSession.counters), in fairness.csv
    columns: tuple[str, ...] = ()
    # (column, header, footnote) shown in the fairness summary table
    summary_column: tuple[str, str, str] | None = None
    # its session also runs on a lab's servers (it reaches them through the fabric's
    # host_files and management_ip, not this machine's files)
    lab: bool = False


# ---------------------------------------------------------------------------- transport


@dataclass(frozen=True)
class Transport:
    """A transport a scheme's senders use instead of one kernel TCP connection per flow.

    Its hosts' side is one program, ``program`` (a name: ``local_program()`` finds this
    machine's build, which Mininet hosts run; a lab server runs the copy ``dcnlab lab
    prepare`` put beside its dcnlab).  The traffic agents run ``serve(that program's path
    on the host, listen, options)`` (``listen`` = "ip:port", port ``port``) in every host
    for the whole run, and each TCP flow as the process ``send(path, destination
    "ip:port", size in bytes, the sending host's addresses, options)``; that process's
    last JSON line on stdout is the flow's result, with at least ``fct_ms`` and
    ``intact`` (and ``delivered``, bytes).  ``prepare(net, host)`` runs once
    per host with several interfaces after the network started (source routing, say).
    ``options`` come from the scheme (:attr:`Scheme.transport_options`) and the
    experiment file (``transport_options``); ``option_names`` are the valid keys and
    ``check_options(options)`` rejects bad values (``ValueError`` saying why) when the
    experiment file is read.  ``columns`` are flows.csv columns the transport adds;
    ``row(result)`` fills them from a flow's result (a cell it leaves out stays empty).
    A numeric column is averaged per run in the summary; a column of numbers joined by
    ``;`` (one per subflow, say) is averaged element by element (``<column>_1``, ...).
    """

    name: str
    summary: str
    port: int
    program: str
    local_program: Callable[[], str]
    serve: Callable[[str, str, Mapping[str, Any]], list[str]]
    send: Callable[[str, str, int, Sequence[str], Mapping[str, Any]], list[str]]
    prepare: Callable[[Any, str], None] | None = None
    option_names: tuple[str, ...] = ()
    check_options: Callable[[Mapping[str, Any]], None] | None = None
    columns: tuple[str, ...] = ()
    row: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None


# ---------------------------------------------------------------------------- results


@dataclass(frozen=True)
class ControllerColumns:
    """Counters an app keeps (state file ``counters``) that become controller.csv columns,
    per-flow table sizes and exploration copies read from sections of the state file."""

    counters: Mapping[str, str] = field(default_factory=dict)  # app counter -> column
    labels: Mapping[str, str] = field(default_factory=dict)  # column -> summary row label
    # state-file section holding {"series": [[wall time, entries], ...]}; None: the
    # scheme installs no per-flow entries (it reports 0)
    entries_section: str | None = None
    # state-file section holding the exploration copies each switch received
    # ({"copies_in": {dpid: cumulative count}, "copy_bytes": size of one}): controller.csv's
    # broadcast overhead at the leaf switches; None: the scheme broadcasts no explorations
    copies_section: str | None = None


@dataclass(frozen=True)
class SwitchColumns:
    """Counters a queue discipline of ``switch_ext`` keeps per port (the stats file's
    ``ingress`` or ``egress`` section, switch_ext/README.md) that become switch.csv
    columns.

    Per run, over every switch port whose ``section`` discipline is ``kind``: the
    difference of each of ``counters`` (cumulative) between the stats lines read before
    and after the run, summed over those ports; ``gauges`` (values now, frames held say)
    the same way, after - before; ``peaks``: the largest length a port histogram
    (``qin`` or ``qout``) reached during the run, the maximum over those ports.  Ports
    of other kinds, and other switch kinds, leave the columns empty.
    """

    section: str  # "ingress", "egress", "balancer" or "overlay"
    kind: str  # the discipline's or the balancer's name ("abq", "letflow")
    counters: Mapping[str, str] = field(default_factory=dict)  # counter -> column
    gauges: Mapping[str, str] = field(default_factory=dict)  # value now -> column
    peaks: Mapping[str, str] = field(default_factory=dict)  # "qin"/"qout" -> column
    labels: Mapping[str, str] = field(default_factory=dict)  # column -> summary label

    def columns(self) -> list[str]:
        return [*self.counters.values(), *self.gauges.values(), *self.peaks.values()]


# ---------------------------------------------------------------------------- scheme


@dataclass(frozen=True)
class Scheme:
    """One scheme: a Ryu app and what it needs around it.

    ``switch_options`` are per switch kind (``{"ext": {"select_mode": "random"}}``) and
    are defaults: an experiment's own ``switch_options`` win.  ``env`` is the app's default
    environment, likewise overridable.  ``requires_switch`` names the only switch kinds the
    scheme can run on (an experiment or check on another kind is refused);
    ``topology_options`` are topology-spec options its networks get on top of the
    experiment's (a queue discipline on the switch ports, say: ``dcnlab topo`` documents
    them).  ``host_parts`` names a :class:`HostParts` kind started in the sending hosts;
    ``congestion`` the TCP congestion control its senders use (None: the experiment's).
    ``check`` is the scheme's own invariant for ``dcnlab check``; ``check_topology`` a
    topology spec on which that invariant means something (the CLI's hint);
    ``check_select_mode`` the switch_ext load balancer the check runs with when ``dcnlab
    check`` is given none (else the ``ext`` switch option ``select_mode``, else
    ``random``): a flowlet timeout the invariant's gaps are measured against, say.
    ``transport`` replaces the traffic agents' plain TCP connections (:class:`Transport`).
    """

    name: str
    app: str
    summary: str
    seed: str = ""  # the paper it reproduces ("000".."004"), if any
    env: Mapping[str, str] = field(default_factory=dict)
    switch_options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    requires_switch: tuple[str, ...] = ()
    topology_options: tuple[str, ...] = ()
    host_parts: str | None = None
    congestion: str | None = None
    check: CheckFn | None = None
    check_topology: str | None = None
    check_select_mode: str | None = None
    controller: ControllerColumns = field(default_factory=ControllerColumns)
    # counters of its switch-side queue disciplines that become switch.csv columns
    switch_columns: tuple[SwitchColumns, ...] = ()
    # the reference other schemes are compared with when an experiment names none
    baseline: bool = False
    # the transport its senders use (None: one kernel TCP connection per flow) and its
    # default options (an experiment's ``transport_options`` win)
    transport: Transport | None = None
    transport_options: Mapping[str, Any] = field(default_factory=dict)
    # the app installs no forwarding: only a switch kind that forwards by itself (its
    # ``forwards``) carries traffic under it
    requires_forwarding_switch: bool = False

    def options_for(self, switch: str) -> dict[str, Any]:
        return dict(self.switch_options.get(switch, {}))

    def refuses(self, switch: str) -> str | None:
        """Why the scheme cannot run on switch kind ``switch``; None when it can."""
        if self.requires_switch and switch not in self.requires_switch:
            return (f"scheme {self.name} runs only on switch kind "
                    f"{' or '.join(self.requires_switch)}, not {switch}")
        if self.requires_forwarding_switch:
            # imported here: declarations stay free of Mininet (the module doc)
            from dcnlab.topo.switches import SwitchKindError, get_switch_kind

            try:
                kind = get_switch_kind(switch)
            except SwitchKindError as exc:
                return str(exc)
            if not kind.forwards:
                return (f"scheme {self.name} installs no forwarding entries: it runs on a "
                        f"switch kind that forwards by itself (an ofsoftswitch13 build "
                        f"whose kind.json says \"forwards\": true), not {switch}")
        return None


def with_topology_options(topology: str, options: Sequence[str]) -> str:
    """``topology`` (a spec string) with ``options`` appended (``fattree:4`` + ``ecn=20``
    -> ``fattree:4,ecn=20``)."""
    if not options:
        return topology
    return topology + ("," if ":" in topology else ":") + ",".join(options)
