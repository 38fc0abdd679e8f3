"""A lab as the engine's place to run (benchmarks/engine/fabric.py): :class:`LabPlace`
makes a :class:`LabFabric` per scheme, on the lab's switches and servers.

A fabric's life: every host is reached over SSH first (a host that cannot be reached, or
where the login is not root, fails before anything starts, naming the host and the fix);
ryu-manager starts here with the scheme's app, listening on the lab file's controller
address, and the fabric waits until every switch of the topology has connected and
confirmed its entries (a switch that never does is named with its address to check); each
host gets a run directory of its own (``/var/tmp/<prefix>``) for the traffic agents'
plans and records.  ``stop`` ends every process started on every host (by process group,
recorded per host), removes the run directories and stops the controller.

The experiment's topology is the lab's: the same host names and addresses, the same
datapath ids (:meth:`LabPlace.refuse` says where they differ).  The switches are
hardware: nothing here emulates a link, so a topology that asks for link rates, delays
or queue options is refused unless the lab file says its switches are switch_ext.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import subprocess
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

from dcnlab.benchmarks.engine.fabric import FabricRequest
from dcnlab.benchmarks.engine.spec import NO_AGENTS, ExperimentSpec, scheme_topology
from dcnlab.model.runtime import (
    ENV_STATE_FILE,
    ENV_TOPOLOGY,
    ControllerState,
    read_state,
)
from dcnlab.model.topology import TopologySpec
from dcnlab.schemes import registry
from dcnlab.topo.controller_process import ControllerProcess
from dcnlab.topo.errors import NetworkError

from .spec import LabSpec, interface_mismatch
from .ssh import HostError, SshHost, SshLoop, Target

READY_TIMEOUT = 60.0  # seconds for every switch to connect and confirm its entries
HOLDER_TIMEOUT = 60.0  # seconds for a host's DCTCP holder to answer, and to end
_counter = itertools.count(1)


def _topology(text: str) -> TopologySpec:
    from dcnlab.topo.spec import parse

    return parse(text)


def _first_line(proc: Any, timeout: float) -> dict[str, Any]:
    """The JSON object a remote process prints first ({} when it prints none, or no
    JSON, within ``timeout`` seconds)."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    try:
        said = json.loads(got[0]) if got and got[0].strip() else {}
    except ValueError:
        return {}
    return said if isinstance(said, dict) else {}


def link_options(topology: str) -> list[str]:
    """The ``key=value`` options of a topology spec string (``rate=10M``, ``ecn=40``,
    ``egress@host=...``): what it asks of the links beyond its family's defaults."""
    _family, _, rest = topology.partition(":")
    return [item.strip() for item in rest.split(",") if "=" in item]


def mismatch(lab: LabSpec, topo: TopologySpec) -> str | None:
    """Where an experiment's topology is not the lab's (None: it is)."""
    dpids = {sw.dpid for sw in topo.switches}
    have = {sw.datapath_id for sw in lab.switches}
    if dpids - have:
        return (f"the topology's switches {', '.join(f'{d:#x}' for d in sorted(dpids - have))}"
                " are not in the lab file")
    hosts = {h.name: h for h in lab.hosts}
    for h in topo.hosts:
        mine = hosts.get(h.name)
        if mine is None:
            return f"the topology's host {h.name} ({h.ip}) is not in the lab file"
        wrong = interface_mismatch(mine, [x.ip for x in h.interfaces])
        if wrong is not None:
            return wrong
    return None


class LabPlace:
    """The engine's place (``Place``) for a lab file."""

    name = "lab"

    def __init__(self, lab: LabSpec, loop: SshLoop | None = None) -> None:
        self.lab = lab
        self.loop = loop or SshLoop()

    def refuse(self, spec: ExperimentSpec) -> str | None:
        if spec.diagnosis.flow_paths:
            return ("diagnosis.flow_paths taps emulated links (tc on their veths); a lab's "
                    "links are cables")
        if spec.events:
            return ("events: cut and restore emulated links (their veths); a lab's links "
                    "are cables, which dcnlab does not pull")
        for scheme in spec.schemes:
            agents = scheme.agents if scheme.agents not in (None, NO_AGENTS) else None
            why = self._refuse(scheme.name, scheme_topology(spec, scheme), agents)
            if why is not None:
                return why
        return None

    def refuse_network(self, topology: str, app: str, *, host_parts: str | None = None,
                       congestion: frozenset[str] = frozenset()) -> str | None:
        # congestion controls: each host's kernel is asked when the fabric starts
        # (LabFabric.congestion_controls), DCTCP included
        known = registry.lookup(app)
        return self._refuse(known.name if known else app, topology, host_parts)

    def _refuse(self, name: str, topology: str, agents: str | None) -> str | None:
        """Why scheme ``name`` cannot run on ``topology`` here (a scheme's own transport
        runs where ``dcnlab lab prepare`` put its program; a host without it stops the
        run before its first flow, named with the program and the fix)."""
        # what still runs on this machine only (its pieces are not put on lab hosts
        # yet): say so rather than run something else than the scheme
        if agents is not None and not registry.host_parts(agents).lab:
            return f"scheme {name}: host parts ({agents} agents) do not run on lab hosts yet"
        wrong = mismatch(self.lab, _topology(topology))
        if wrong is not None:
            return wrong
        # what the experiment asks of the links (the family's default rate only
        # calibrates the workload): rates too, which Mininet shapes on its veths and a
        # cable does not
        asked = link_options(topology)
        if asked and self.lab.switch_kind != "ext":
            return (f"scheme {name}: the topology asks for link emulation "
                    f"({', '.join(asked)}), which only switch_ext switches provide; this "
                    "lab's switches are hardware (the lab file's switch_kind: openflow)")
        return None

    def make(self, request: FabricRequest) -> LabFabric:
        return LabFabric(self.lab, request, self.loop)


class LabHostHandle:
    """A host as the engine's fabric protocol wants it (``cmd``, ``popen``, ``IP``)."""

    def __init__(self, ssh: SshHost, address: str) -> None:
        self.ssh = ssh
        self.name = ssh.name
        self._address = address

    def cmd(self, command: str) -> str:
        return self.ssh.cmd(command)

    def popen(self, argv: Any, **kwargs: Any) -> Any:
        return self.ssh.popen(argv, stdin=kwargs.get("stdin"), stdout=kwargs.get("stdout"),
                              stderr=kwargs.get("stderr"))

    def IP(self) -> str:  # noqa: N802 - Mininet's name, which host parts call
        return self._address


class LabFiles:
    """A lab host's files for the replay (``HostFiles``): its run directory, its python,
    SFTP both ways."""

    def __init__(self, ssh: SshHost, workdir: str, python: str) -> None:
        self.ssh = ssh
        self.workdir = workdir
        self.python = python

    def put(self, local: Path, remote: str) -> None:
        self.ssh.put(local, remote)

    def get(self, remote: str, local: Path) -> None:
        self.ssh.get(remote, local)


class LabSwitch:
    """A hardware switch: a name and a datapath id, no stats file (the engine's queue
    figures come from switch_ext's; a lab's port counters come through OpenFlow)."""

    def __init__(self, name: str, dpid: int) -> None:
        self.name = name
        self.dpid = dpid


class LabFabric:
    """The lab's switches and hosts under one controller app (the engine's ``Fabric``)."""

    def __init__(self, lab: LabSpec, request: FabricRequest, loop: SshLoop) -> None:
        self.lab = lab
        self.request = request
        self.spec = _topology(request.topology)
        self.app = request.app
        self.prefix = f"dcnlab-lab{os.getpid()}-{next(_counter)}"
        self.warnings: list[str] = []
        self.startup_seconds: float | None = None
        self.run_dir = request.run_dir
        self._loop = loop
        # what each host runs is also kept on disk: a session that loses a host leaves
        # the list, and the next session on the same run directory stops what is left
        self.hosts = {h.name: SshHost(self._target(h.name), loop,
                                      self.run_dir / f"lab_started_{h.name}.json")
                      for h in self.spec.hosts}
        self.workdir = str(PurePosixPath("/var/tmp") / self.prefix)
        self._controller: ControllerProcess | None = None
        self._switches = {sw.name: LabSwitch(sw.name, sw.dpid) for sw in self.spec.switches}
        self._started = False
        self._holders: list[Any] = []  # congestion-control holders, one per host
        self._congestion: dict[str, str] = {}  # host -> what its sockets ask for (dctcp)

    def _target(self, name: str) -> Target:
        host = self.lab.host(name)
        address, port, user, key = self.lab.ssh_target(host)
        return Target(name, address, port, user, key, self.lab.ssh.connect_timeout,
                      os.path.expanduser(self.lab.ssh.known_hosts)
                      if self.lab.ssh.known_hosts else None)

    # -- life ----------------------------------------------------------------------

    def start(self) -> LabFabric:
        """Hosts, controller, switches; a start that fails stops what it started (the
        engine calls stop() only on a fabric that started)."""
        began = time.monotonic()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._started = True
        try:
            self._start()
        except BaseException:
            with contextlib.suppress(NetworkError):
                self.stop()
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _start(self) -> None:
        asked = link_options(self.request.topology)
        if asked:  # accepted on switch_ext labs only (LabPlace.refuse); set by their owner
            self.warnings.append(
                f"the topology asks for link emulation ({', '.join(asked)}): dcnlab does not "
                "configure a lab's switches; the lab's switch_ext switches must run with "
                "these port options (--port N=IF,rate=...) for the results to mean them")
        try:
            for ssh in self.hosts.values():
                ssh.connect()
                left = ssh.stop_leftovers()
                if left:
                    self.warnings.append(f"host {ssh.name}: stopped what an earlier session "
                                         f"left running: {'; '.join(left)}")
                if ssh.run("id -u", timeout=15.0).stdout.strip() != "0":
                    raise HostError(f"host {ssh.name}: the login {ssh.target.user} is not "
                                    "root (dcnlab needs root on lab hosts: log in as root)")
                ssh.run(["mkdir", "-p", self.workdir], check=True, timeout=15.0)
            self._start_controller()
            self.wait_ready(READY_TIMEOUT)
        except HostError as exc:
            raise NetworkError(str(exc)) from None

    def stop(self) -> None:
        errors = []
        self._stop_holders()
        for ssh in self.hosts.values():
            try:
                left = ssh.stop_all()
                if left:
                    self.warnings.append(f"host {ssh.name}: stopped what still ran: "
                                         f"{'; '.join(left)}")
                if self._started:
                    ssh.run(["rm", "-rf", "--", self.workdir], timeout=30.0)
            except HostError as exc:
                errors.append(str(exc))
            finally:
                ssh.close()
        if self._controller is not None:
            self._controller.stop()
        if errors:
            raise NetworkError("clean-up on lab hosts failed: " + "; ".join(errors))

    def _environment(self) -> dict[str, str]:
        topology_file = self.run_dir / "topology.json"
        topology_file.write_text(json.dumps(self.spec.to_dict()))
        return {ENV_TOPOLOGY: str(topology_file), ENV_STATE_FILE: str(self.state_file),
                "PYTHONUNBUFFERED": "1", **self.request.app_env}

    @property
    def state_file(self) -> Path:
        return self.run_dir / "state.json"

    def _start_controller(self) -> None:
        from dcnlab.topo.preflight import find_ryu_manager

        if self._controller is None:
            self._controller = ControllerProcess(
                find_ryu_manager(), self.app, self.request.app_args,
                self.lab.controller.port, env=self._environment(), cwd=self.run_dir,
                log_file=self.run_dir / "controller.log",
                listen_host=self.lab.controller.address)
        self.state_file.unlink(missing_ok=True)  # wait for this controller's own state
        self._controller.start(None)
        self._controller.wait_listening(15.0)

    def wait_ready(self, timeout: float) -> float:
        """Until every switch of the topology has connected and confirmed its entries."""
        began = time.monotonic()
        deadline = began + timeout
        state: ControllerState | None = None
        while time.monotonic() < deadline:
            assert self._controller is not None
            self._controller.check_alive()
            state = self.state()
            if state is not None and state.get("ready"):
                return time.monotonic() - began
            time.sleep(0.2)
        connected = set((state or {}).get("connected") or [])
        names = self.lab.switch_names()
        missing = [f"{names.get(sw.dpid, sw.name)} ({sw.dpid:#x})" for sw in self.spec.switches
                   if sw.dpid not in connected]
        where = f"{self.lab.controller.address}:{self.lab.controller.port}"
        if missing:
            raise NetworkError(f"switch(es) {', '.join(missing)} did not connect to the "
                               f"controller at {where} within {timeout:g} s: is each set to "
                               "connect there (OpenFlow 1.3), and can it reach that address?")
        raise NetworkError(f"the switches connected to {where} but did not confirm the "
                           f"app's entries within {timeout:g} s (see "
                           f"{self.run_dir / 'controller.log'})")

    def restart_controller(self, timeout: float | None = None,
                           app: str | None = None) -> float:
        began = time.monotonic()
        if self._controller is not None:
            self._controller.stop()
            if app is not None and app != self.app:
                self.app = app
                self._controller = None
        self._start_controller()
        self.wait_ready(timeout or READY_TIMEOUT)
        return time.monotonic() - began

    # -- the engine's view ---------------------------------------------------------

    def host(self, name: str) -> LabHostHandle:
        return LabHostHandle(self.hosts[name], self.lab.host(name).address)

    def interface(self, host: str, index: int) -> str:
        """The lab file's name of ``host``'s data-plane interface ``index`` (its
        ``interface``, then its ``extra_interfaces``)."""
        return self.lab.host(host).data_interfaces()[index][0]

    def host_files(self, name: str) -> LabFiles:
        return LabFiles(self.hosts[name], self.workdir, self.lab.python)

    def switch(self, name: str) -> LabSwitch:
        return self._switches[name]

    def state(self) -> ControllerState | None:
        return read_state(str(self.state_file))

    def congestion_controls(self, names: set[str]) -> contextlib.AbstractContextManager[None]:
        """Each host's kernel is its own: for DCTCP, a holder on every host
        (``python -m dcnlab.hosts.dctcp hold`` at the lab file's python) makes it usable
        there and says what its sockets must ask for; the holders end with the fabric
        (:meth:`stop`), before the hosts' other processes.  A host that cannot is named,
        with its reason, before any run."""
        if "dctcp" in names:
            for name, ssh in self.hosts.items():
                if name in self._congestion:
                    continue
                holder = ssh.popen([self.lab.python, "-m", "dcnlab.hosts.dctcp", "hold"],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE)
                self._holders.append(holder)
                said = _first_line(holder, HOLDER_TIMEOUT)
                if "congestion" not in said:
                    why = said.get("error") or "it ended without saying why"
                    raise NetworkError(f"host {name}: DCTCP cannot be used there: {why} "
                                       "(dcnlab lab prepare reports what the host lacks)")
                self._congestion[name] = str(said["congestion"])
        return contextlib.nullcontext()

    def congestion_name(self, host: str, name: str | None) -> str | None:
        if name == "dctcp":
            if host not in self._congestion:
                raise NetworkError(f"host {host}: DCTCP was not made usable there "
                                   "(congestion_controls)")
            return self._congestion[host]
        return name

    def _stop_holders(self) -> None:
        # one at a time, the last started first: hosts that share a kernel (an emulated
        # lab) share one registration, which its first holder made and the last user to
        # leave must see unused
        for holder in reversed(self._holders):
            with contextlib.suppress(OSError, ValueError):
                if holder.stdin is not None:
                    holder.stdin.close()  # the holder drops its use and exits
            try:
                holder.wait(HOLDER_TIMEOUT)
            except subprocess.TimeoutExpired:
                holder.terminate()
        self._holders.clear()
        self._congestion.clear()

    def management_ip(self, host: str) -> str:
        spec = self.lab.host(host)
        return spec.management or self.lab.ssh_target(spec)[0]

    def port_stats(self, switch: str) -> dict[int | str, dict[str, int | None]]:
        """Port counters as the app last polled them over OpenFlow (the shape of
        ``ovs-ofctl dump-ports``' parse)."""
        dpid = str(self._switches[switch].dpid)
        ports = ((self.state() or {}).get("port_stats") or {}).get(dpid) or {}
        return {int(p): {"rx_pkts": c.get("rx_packets"), "rx_bytes": c.get("rx_bytes"),
                         "rx_drop": c.get("rx_dropped"), "tx_pkts": c.get("tx_packets"),
                         "tx_bytes": c.get("tx_bytes"), "tx_drop": c.get("tx_dropped")}
                for p, c in ports.items()}
