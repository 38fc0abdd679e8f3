"""Where an experiment runs.

A *place* makes, for each scheme (or run), a *fabric*: switches under a controller that
runs the scheme's app, and hosts that run commands.  The engine talks to these two
protocols only; ``dcnlab.topo.network.Network`` is the fabric Mininet builds on this
machine (:class:`Mininet`, the default place) and ``dcnlab.lab`` the one a lab of real
switches and servers gives (``--lab lab.yaml``).  A place refuses, before anything runs,
an experiment it cannot carry (:meth:`Place.refuse`): a lab cannot emulate link rates
on hardware switches, say.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dcnlab.model.runtime import ControllerState
from dcnlab.model.topology import TopologySpec

from .replay import HostFiles, program_on
from .spec import ExperimentSpec


class FabricHost(Protocol):
    """A host: commands to their end, and processes the engine talks to."""

    def cmd(self, command: str) -> str: ...

    def popen(self, argv: Sequence[str], **kwargs: Any) -> Any: ...


class Fabric(Protocol):
    """A started network (after :meth:`start`), as the engine uses it."""

    spec: TopologySpec
    app: str  # the app the controller runs now
    prefix: str  # what names this fabric's own interfaces, processes and files
    warnings: list[str]
    startup_seconds: float | None

    def start(self) -> Any: ...

    def stop(self) -> None: ...

    def host(self, name: str) -> FabricHost: ...

    def switch(self, name: str) -> Any: ...

    def port_stats(self, switch: str) -> dict[int | str, dict[str, int | None]]: ...

    def state(self) -> ControllerState | None: ...

    def management_ip(self, host: str) -> str: ...

    def restart_controller(self, timeout: float | None = None,
                           app: str | None = None) -> float: ...

    def congestion_controls(self, names: set[str]) -> AbstractContextManager[None]:
        """Inside the block, every congestion control in ``names`` is usable by the
        hosts' sockets (DCTCP where a kernel has none of its own: on this machine for
        Mininet's hosts, on each lab host for a lab's); entered after :meth:`start`."""
        ...

    def congestion_name(self, host: str, name: str | None) -> str | None:
        """What a socket on ``host`` asks for to get congestion control ``name`` (the
        BPF DCTCP's kernel name where it stands in for dctcp)."""
        ...

    def interface(self, host: str, index: int) -> str:
        """The name, inside ``host``, of its data-plane interface ``index`` (the
        topology host's interfaces in order): what source routing binds a subflow to."""
        ...

    def host_files(self, name: str) -> HostFiles | None:
        """None when the host sees this machine's files (Mininet), else how its files
        travel (a lab server)."""
        ...


def host_python(fabric: Fabric, host: str) -> str:
    """The interpreter that has dcnlab on ``host``: the lab file's on a lab server, this
    one on a Mininet host (which shares this machine's files)."""
    files = fabric.host_files(host)
    return files.python if files is not None else sys.executable


def host_program(fabric: Fabric, host: str, name: str, local: Callable[[], str]) -> str:
    """Where a host part's program ``name`` (``dcnlab-mp``) is on ``host``:
    :func:`~.replay.program_on` its files."""
    return program_on(fabric.host_files(host), name, local)


@dataclass(frozen=True)
class FabricRequest:
    """What one scheme's network needs."""

    topology: str  # the experiment's topology spec, with the scheme's options
    app: str
    switch: str  # the switch kind the experiment names
    run_dir: Path
    app_env: Mapping[str, str] = field(default_factory=dict)
    app_args: Sequence[str] = ()
    switch_options: Mapping[str, Any] | None = None
    management: bool = False  # a management network for host agents


class Place(Protocol):
    """Makes fabrics."""

    name: str

    def refuse(self, spec: ExperimentSpec) -> str | None:
        """Why this place cannot run ``spec`` (None: it can)."""
        ...

    def refuse_network(self, topology: str, app: str, *, host_parts: str | None = None,
                       congestion: frozenset[str] = frozenset()) -> str | None:
        """Why this place cannot build ``topology`` for ``app`` (a scheme name or app
        module) with these host parts and congestion controls (None: it can); what
        ``dcnlab check`` asks before it builds a network."""
        ...

    def make(self, request: FabricRequest) -> Fabric: ...


class Mininet:
    """The default place: a Mininet network per request, on this machine."""

    name = "mininet"

    def refuse(self, spec: ExperimentSpec) -> str | None:
        return None

    def refuse_network(self, topology: str, app: str, *, host_parts: str | None = None,
                       congestion: frozenset[str] = frozenset()) -> str | None:
        return None

    def make(self, request: FabricRequest) -> Fabric:
        from dcnlab.topo.network import Network

        return Network(request.topology, app=request.app, switch=request.switch,
                       run_dir=request.run_dir, app_env=dict(request.app_env),
                       app_args=list(request.app_args),
                       switch_options=(dict(request.switch_options)
                                       if request.switch_options else None),
                       management=request.management)
