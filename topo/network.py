"""The network lifecycle: one object that starts and stops everything a run needs.

::

    with Network(parse("fattree:4"), app="dcnlab.apps.ecmp", switch="ovs") as net:
        h1, h2 = net.host("h1"), net.host("h2")
        print(h1.cmd("ping -c1", h2.IP()))

On enter, in this order: a run prefix and directory, a network namespace for the run, the
private Open vSwitch (kinds that need it), the topology JSON, ``ryu-manager`` with the app,
the Mininet hosts, switches and links, host addressing and offloads, then a wait until
every switch is connected and the app reports ``ready``.  On exit (also after any error,
KeyboardInterrupt or SIGTERM) everything is stopped and removed, and nothing outside what
the run created is touched: no machine-wide Mininet clean-up, no kill by name.

:class:`Network` is the one lifecycle object; each concern it composes has its module:

- :mod:`.preflight`: root, programs and ``ryu-manager``, checked before anything starts;
- :mod:`.run_namespace`: the run prefix, its directory and the run's network namespace;
- :mod:`.ovs`: the private Open vSwitch (kinds that need it);
- :mod:`.controller_process`: ``ryu-manager`` in the run namespace;
- :mod:`.readiness`: waiting for the switches and the app;
- :mod:`.teardown`: stopping and removing exactly what the run created;
- :mod:`.errors`: :class:`NetworkError` and :class:`EmulationWarning`.

What is left here is the order of things, building the Mininet network from the spec,
host addressing and offloads, and the queries a running network answers.

Isolation between concurrent runs.  Each run gets its own network namespace (held by a
Mininet node, ``<prefix>ns``) in which ovs-vswitchd, ryu-manager and every switch shell
live (see :mod:`.run_namespace` for why).  Hosts are Mininet hosts with their own
namespaces, as usual.  Node and interface names still carry the run prefix
(``d1x9-h1-eth0``), so ``ps``/logs tell runs apart.  The root namespace gets no
interfaces at all; stop() verifies that.

Things to know:
- The controller listens on 127.0.0.1 *inside the run namespace*.  To reach it (e.g. a
  REST app) run the client there: ``net.ns_cmd("curl http://127.0.0.1:8080/...")``.
- Mininet's machine-wide ``fixLimits()`` (sysctls, rlimits) is skipped on purpose.
- Link delay, jitter, buffers, ECN and queue disciplines (``egress=``/``ingress=``) need
  ``--switch ext`` (no netem here, see docs/platform.md); on ``ovs`` only the rate is
  applied (htb via TCLink) and an :class:`EmulationWarning` is issued.
- ``management=True`` adds an out-of-band management network (:mod:`.management`): a
  bridge ``<prefix>mg`` in the run namespace (address 192.168.0.1/16) and one unshaped
  veth per host (``<prefix>hN-mg``, ``net.management_ip("h1")``), so the controller can
  reach host agents without touching the data plane.  It lives in the run's namespaces
  and goes away with them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import shlex
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Self

from mininet.link import Link
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Node, Switch

from dcnlab.model.runtime import ENV_STATE_FILE, ENV_TOPOLOGY, ControllerState, read_state

from . import readiness, teardown
from .controller_process import (
    CONTROLLER_HOST,
    DEFAULT_CONTROLLER_PORT,
    ControllerProcess,
    RemoteControllerInNamespace,
)
from .errors import EmulationWarning, NetworkError
from .management import add_management, management_address
from .mininet_topos import DcnHost, DcnTCLink, SpecTopo
from .ovs import OvsInstance, parse_port_stats
from .preflight import TOOLS, check_size, find_ryu_manager, preflight
from .run_namespace import (
    RUN_ROOT,
    netns_inode,
    pids_in_netns,
    reserve_prefix,
    root_links,
    start_namespace_holder,
)
from .spec import TopologySpec, parse
from .switches import SwitchContext, get_switch_kind, renumbered
from .teardown import process_running

# Names importers use from here (the lifecycle's public face), wherever they live now.
__all__ = [
    "CONTROLLER_HOST", "DEFAULT_CONTROLLER_PORT", "HOST_OFFLOADS", "RUN_ROOT", "TOOLS",
    "EmulationWarning", "Network", "NetworkError", "find_ryu_manager", "parse_port_stats",
    "preflight", "process_running",
]

log = logging.getLogger(__name__)

# Host offloads: checksumming and segmentation must be done by the kernel before a frame
# reaches a userspace switch or the controller, else TCP sees bad checksums and stalls.
HOST_OFFLOADS = ("tx", "off", "tso", "off", "gso", "off")
CONTROLLER_LISTEN_TIMEOUT = 30.0


class Network:
    """A running network: run namespace, private OVS, controller app and Mininet.

    spec: a TopologySpec or a spec string (a bad string raises SpecError unchanged).
    app: what ``ryu-manager`` runs (module name or file path).
    switch: a registered switch kind ("ovs", "ofss", "ext").
    run_dir: where logs, the topology JSON and the app state go; kept after the run.
        Default: a fresh /tmp/dcnlab-<tag>/, removed after the run.
    app_env: extra environment for ryu-manager (e.g. {"DCNLAB_SELECT_MODE": "rr"}).
    controller_port: TCP port of the controller inside the run namespace (always free).
    ready_timeout: seconds to wait for switches and app on start and restart.
    wait_app_ready: wait for state["ready"] in DCNLAB_STATE_FILE.  None (default): yes for
        dcnlab apps; for other apps only if they write the file.
    app_args: extra ryu-manager arguments, placed before the app.
    switch_options: passed to the switch factory as SwitchContext.extra.
    management: also connect every host to the run namespace over a separate management
        network (see :mod:`dcnlab.topo.management`); ``management_ip(host)`` tells where.
    """

    def __init__(self, spec: TopologySpec | str, app: str,
                 switch: str = "ovs", run_dir: str | os.PathLike[str] | None = None,
                 app_env: Mapping[str, str] | None = None, *,
                 controller_port: int = DEFAULT_CONTROLLER_PORT, ready_timeout: float = 60.0,
                 wait_app_ready: bool | None = None, app_args: Sequence[str] = (),
                 switch_options: Mapping[str, Any] | None = None,
                 management: bool = False) -> None:
        self.spec = parse(spec) if isinstance(spec, str) else spec
        check_size(self.spec)  # before anything exists
        self.kind = get_switch_kind(switch)
        # a kind that reads roles from dpids numbers them its way; everything after this
        # (Mininet, the controller's topology file, the engine) reads self.spec
        self.spec = renumbered(self.spec, self.kind.dpids)
        self._app = self._resolve_app(app)
        self.app_env = dict(app_env or {})
        self.app_args = list(app_args)
        self.port = controller_port
        self.ready_timeout = ready_timeout
        self.switch_options = dict(switch_options or {})
        self.management = management
        self._requested_run_dir = Path(run_dir).absolute() if run_dir is not None else None
        self._wait_app_requested = wait_app_ready
        self.warnings: list[str] = []
        self.prefix = ""
        self.mn: Mininet | None = None
        self.ovs: OvsInstance | None = None
        self.startup_seconds: float | None = None
        self.timings: dict[str, float] = {}  # start-up stage -> seconds
        self._run_dir: Path | None = None
        self._reserved: Path | None = None
        self._holder: Node | None = None
        self._controller: ControllerProcess | None = None
        self._ryu_manager = ""
        self._netns: set[int] = set()
        self._started_pids: dict[str, int] = {}  # what we started, kept for leftovers()
        self._started = self._stopped = False
        self._sigterm_installed = False

    # -- public API -------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is None:
            self.stop()
            return
        try:
            self.stop()
        except Exception as cleanup_error:  # noqa: BLE001 - keep the original one visible
            log.error("clean-up after an error failed too: %s", cleanup_error)

    def start(self) -> Self:
        """Start everything and wait until ready; on any failure undo it all and raise."""
        if self._started:
            raise NetworkError("a Network can be started once")
        self._started = True
        began = time.monotonic()
        try:
            self._start()
        except BaseException:
            try:
                self.stop()
            except Exception as cleanup_error:  # noqa: BLE001 - keep the original one
                log.error("clean-up after a failed start failed too: %s", cleanup_error)
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def stop(self) -> None:
        """Stop and remove everything this run created.  Safe to call more than once."""
        if self._stopped or not self._started:
            return
        self._stopped = True
        errors: list[str] = []
        with teardown.deferred_interrupts():
            for step in (self._stop_mininet, self._stop_controller, self._stop_ovs,
                         self._stop_namespaces, self._sweep_root_links, self._remove_dirs):
                try:
                    step()
                except Exception as exc:  # noqa: BLE001 - every step must get its turn
                    errors.append(f"{step.__name__.strip('_')}: {exc!r}")
            self._restore_sigterm()
            atexit.unregister(self.stop)
        if errors:
            raise NetworkError("clean-up incomplete: " + "; ".join(errors))

    @property
    def run_dir(self) -> Path:
        if self._run_dir is None:
            raise NetworkError("network not started")
        return self._run_dir

    @property
    def controller_log(self) -> Path:
        return self.run_dir / "ryu-manager.log"

    @property
    def state_file(self) -> Path:
        return Path(self._app_environment()[ENV_STATE_FILE])

    @property
    def topology_file(self) -> Path:
        return self.run_dir / "topology.json"

    @property
    def controller_pid(self) -> int | None:
        return self._controller.pid if self._controller is not None else None

    @property
    def netns_pid(self) -> int | None:
        """PID of the process holding the run namespace (``mnexec -a PID cmd`` enters it)."""
        return self._holder.pid if self._holder is not None else None

    @property
    def hosts(self) -> list[Any]:
        """Mininet hosts, in spec order."""
        return [self.host(h.name) for h in self.spec.hosts]

    @property
    def switches(self) -> list[Switch]:
        return [self.switch(s.name) for s in self.spec.switches]

    def host(self, name: str) -> Any:
        """The Mininet host for a spec name ("h1")."""
        self.spec.host(name)  # KeyError for names the spec does not have
        return self._mn()[self.prefix + name]

    def switch(self, name: str) -> Switch:
        self.spec.switch(name)
        return self._mn()[self.prefix + name]

    def interface(self, host: str, index: int) -> str:
        """The name, inside ``host``, of its data-plane interface ``index`` (the spec
        host's interfaces in order; the engine's fabric protocol)."""
        node = self.host(host)
        return str(node.intf(f"{node.name}-eth{index}").name)

    def host_files(self, name: str) -> None:
        """Mininet hosts see this machine's files: nothing travels (the engine's fabric
        protocol; a lab host returns how its files do)."""
        return None

    def congestion_controls(self, names: set[str]) -> contextlib.AbstractContextManager[None]:
        """Make every congestion control in ``names`` usable by the hosts' sockets inside
        the block: Mininet's hosts share this machine's kernel, so the BPF DCTCP where
        the kernel has no dctcp (the engine's fabric protocol; a lab does it per host)."""
        from dcnlab.hosts import dctcp

        return dctcp.provided(names)

    def congestion_name(self, host: str, name: str | None) -> str | None:
        """The name a socket on ``host`` must ask for to get congestion control ``name``."""
        from dcnlab.hosts import dctcp

        return dctcp.resolve(name)

    def management_ip(self, host: str) -> str:
        """The host's address on the management network (needs ``management=True``)."""
        if not self.management:
            raise NetworkError("this network has no management network (management=True)")
        return management_address(self.spec, host)

    def state(self) -> ControllerState | None:
        """The app's last state (DCNLAB_STATE_FILE), or None if it wrote none."""
        return read_state(str(self.state_file))

    def ns_cmd(self, command: str, timeout: float | None = 30.0) -> str:
        """Run a shell command in the run namespace (where the controller listens)."""
        holder = self._require_holder()
        if timeout is None:
            return holder.cmd(command)
        return holder.cmd(f"timeout {timeout:g} sh -c {shlex.quote(command)}")

    def set_link(self, a: str, b: str, up: bool) -> None:
        """Bring the link(s) between spec nodes a and b down or up (both ends)."""
        mn = self._mn()
        na, nb = mn[self.prefix + a], mn[self.prefix + b]
        if not mn.linksBetween(na, nb):
            raise NetworkError(f"no link between {a} and {b}")
        mn.configLinkStatus(na.name, nb.name, "up" if up else "down")

    def port_stats(self, switch: str) -> dict[int | str, dict[str, int | None]]:
        """Port counters of one switch (see :func:`parse_port_stats`)."""
        sw = self.switch(switch)
        own = getattr(sw, "port_stats", None)
        if callable(own):
            return own()
        if self.ovs is None:
            raise NetworkError(f"port_stats needs switch kind ovs, or a {self.kind.name} "
                               "switch class with a port_stats() method")
        return parse_port_stats(self.ovs.ofctl("-O", "OpenFlow13", "dump-ports", sw.name))

    @property
    def app(self) -> str:
        """The Ryu app the controller runs (change it with :meth:`restart_controller`)."""
        return self._app

    @property
    def _wait_app(self) -> bool:
        """Whether readiness waits for the app's own state: as asked, or for dcnlab apps."""
        if self._wait_app_requested is not None:
            return self._wait_app_requested
        return self._is_dcnlab_app(self._app)

    def restart_controller(self, timeout: float | None = None, app: str | None = None
                           ) -> float:
        """Kill ryu-manager and start it again on the same port, with ``app`` instead of
        the current app if given; wait until ready again.

        Returns the seconds until switches and app were ready.
        """
        began = time.monotonic()
        self._stop_controller()  # its sockets close with it: sessions drop to 0 at once
        if app is not None:
            self._app = self._resolve_app(app)
            self._controller = None  # the next start builds the new app's command line
        with contextlib.suppress(FileNotFoundError):
            self.state_file.unlink()  # wait for the new instance's state, not the old one
        self._start_controller()
        self.wait_ready(timeout)
        return time.monotonic() - began

    def wait_ready(self, timeout: float | None = None) -> float:
        """Wait until every switch is connected and the app is ready; returns seconds."""
        return readiness.wait_until_ready(
            self.ready_timeout if timeout is None else timeout,
            check_alive=self._check_controller_alive,
            pending_switches=self._unconnected_switches, app_ready=self._app_ready,
            spec_name=self.spec_name, log_file=self.controller_log)

    def spec_name(self, node_name: str) -> str:
        return node_name.removeprefix(self.prefix)

    def leftovers(self) -> dict[str, list[str]]:
        """What of this run still exists (all lists are empty after a clean stop()).

        processes: PIDs this run started (controller, OVS daemons, node shells) that still
        run, and any process inside one of the run's namespaces; links: root-namespace
        interfaces with the run prefix; dirs: the run's reserved directory.
        """
        procs = {f"{name} (pid {pid})" for name, pid in self._started_pids.items()
                 if process_running(pid)}
        procs |= {f"pid {pid} in a run namespace" for pid in pids_in_netns(self._netns)
                  if process_running(pid)}
        links = [n for n in root_links() if self.prefix and n.startswith(self.prefix)]
        dirs = [str(d) for d in (self._reserved,) if d is not None and d.exists()
                and d != self._requested_run_dir]
        return {"processes": sorted(procs), "links": links, "dirs": dirs}

    def __repr__(self) -> str:
        state = "running" if self._started and not self._stopped else "stopped"
        return (f"<Network {self.spec.spec} app={self.app} switch={self.kind.name} "
                f"prefix={self.prefix!r} {state}>")

    # -- start-up ---------------------------------------------------------

    def _start(self) -> None:
        self._ryu_manager = preflight(self.kind)
        if self.kind.validate is not None:
            self.kind.validate(self.spec, self.switch_options)
        self._warn_emulation()
        self.prefix, self._reserved = reserve_prefix()
        self._run_dir = self._requested_run_dir or self._reserved
        self._run_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        self._sigterm_installed = teardown.install_sigterm()
        with self._timed("namespace"):
            self._start_namespace()
        if self.kind.needs_ovs:
            with self._timed("ovs"):
                self.ovs = OvsInstance(self._reserved / "ovs", netns_pid=self.netns_pid).start()
            self._started_pids.update(self.ovs.pids)
        self.topology_file.write_text(json.dumps(self.spec.to_dict(), indent=1))
        with self._timed("controller"):
            self._start_controller()
        with self._timed("build"):
            self._build_mininet()
            self._configure_hosts()
        if self.management:
            with self._timed("management"):
                add_management(self._require_holder(), self.prefix,
                               [(h.name, self.host(h.name)) for h in self.spec.hosts])
        with self._timed("switches"):
            self._mn().start()
        with self._timed("ready"):
            self.wait_ready()

    @contextlib.contextmanager
    def _timed(self, stage: str) -> Iterator[None]:
        began = time.monotonic()
        try:
            yield
        finally:
            self.timings[stage] = time.monotonic() - began

    def _warn_emulation(self) -> None:
        if self.spec.needs_emulation() and not self.kind.emulates_links:
            message = (f"topology {self.spec.spec}: link delay/jitter/buffer/ECN or a queue "
                       f"discipline (egress=/ingress=) needs --switch ext; ignored on "
                       f"{self.kind.name} (only the rate is applied)")
            self.warnings.append(message)
            warnings.warn(message, EmulationWarning, stacklevel=4)

    def _start_namespace(self) -> None:
        self._holder = start_namespace_holder(self.prefix)
        self._started_pids[self._holder.name] = self._holder.pid
        inode = netns_inode(self._holder.pid)
        if inode is not None:
            self._netns.add(inode)

    def _app_environment(self) -> dict[str, str]:
        """The run-time contract's variables for the app (dcnlab.model.runtime)."""
        env = {ENV_TOPOLOGY: str(self.topology_file),
               ENV_STATE_FILE: str(self.run_dir / "state.json"),
               "PYTHONUNBUFFERED": "1"}
        env.update(self.app_env)
        return env

    def _start_controller(self) -> None:
        holder = self._require_holder()
        if self._controller is None:
            self._controller = ControllerProcess(
                self._ryu_manager, self.app, self.app_args, self.port,
                env=self._app_environment(), cwd=self.run_dir, log_file=self.controller_log)
        pid = self._controller.start(holder.pid)
        self._started_pids[f"ryu-manager[{pid}]"] = pid
        self._controller.wait_listening(CONTROLLER_LISTEN_TIMEOUT)

    def _check_controller_alive(self) -> None:
        if self._controller is None:
            raise NetworkError("ryu-manager is not running")
        self._controller.check_alive()

    def _build_mininet(self) -> None:
        setLogLevel("warning")
        # Mininet.init() would run fixLimits(): machine-wide sysctls on a shared machine.
        # We checked for root ourselves; nothing else in init() is needed.
        Mininet.inited = True
        ctx = SwitchContext(self.run_dir, self.prefix, self.spec, self.netns_pid, self.ovs,
                            dict(self.switch_options))
        shape = not self.kind.emulates_links
        topo = SpecTopo(self.spec, prefix=self.prefix, shape=shape)
        rated = any(lk.params.rate_mbit for lk in self.spec.links)
        self.mn = Mininet(topo=topo, switch=self.kind.factory(ctx), host=DcnHost,
                          controller=partial(RemoteControllerInNamespace, ip=CONTROLLER_HOST,
                                             port=self.port),
                          link=DcnTCLink if shape and rated else Link,
                          autoSetMacs=False, build=False)
        # build() separately: if it fails half-way, self.mn exists and stop() undoes it.
        self.mn.build()
        for node in [*self.mn.hosts, *self.mn.switches, *self.mn.controllers]:
            self._started_pids[node.name] = node.pid
        for host in self.mn.hosts:
            inode = netns_inode(host.pid)
            if inode is not None:
                self._netns.add(inode)

    def _configure_hosts(self) -> None:
        """Addresses on every interface (also second ones) and offloads off."""
        for spec_host in self.spec.hosts:
            host = self.host(spec_host.name)
            commands = []
            for index, iface in enumerate(spec_host.interfaces):
                intf = host.intf(self.interface(spec_host.name, index))
                if intf.IP() != iface.ip:
                    intf.setIP(iface.ip, iface.prefixlen)
                if (intf.MAC() or "").lower() != iface.mac:
                    intf.setMAC(iface.mac)
                commands.append(f"ethtool -K {intf.name} {' '.join(HOST_OFFLOADS)}")
            out = host.cmd("; ".join(commands) + " 2>&1")
            if "Cannot" in out or "not found" in out:
                raise NetworkError(f"ethtool on {spec_host.name} failed: {out.strip()}")

    # -- readiness (see .readiness) -------------------------------------------

    def _unconnected_switches(self) -> list[str]:
        sessions = self._controller.sessions() if self._controller is not None else 0
        return readiness.unconnected_switches(self._mn().switches, sessions, self.ovs)

    def _app_ready(self) -> tuple[bool, str]:
        return readiness.app_status(self.state(), wait_app=self._wait_app,
                                    controller_pid=self.controller_pid,
                                    state_file=self.state_file)

    # -- shut-down (see .teardown); each step is named in stop()'s error --------

    def _stop_mininet(self) -> None:
        teardown.stop_mininet(self.mn, self.prefix, self._holder, self._started_pids,
                              self._netns)

    def _stop_controller(self) -> None:
        if self._controller is not None:
            self._controller.stop()

    def _stop_ovs(self) -> None:
        ovs, self.ovs = self.ovs, None
        if ovs is not None:
            ovs.stop()

    def _stop_namespaces(self) -> None:
        holder, self._holder = self._holder, None
        teardown.stop_namespaces(holder, self._netns)

    def _sweep_root_links(self) -> None:
        teardown.sweep_root_links(self.prefix)

    def _remove_dirs(self) -> None:
        teardown.remove_reserved_dir(self._reserved, self._requested_run_dir)

    def _restore_sigterm(self) -> None:
        if self._sigterm_installed:
            teardown.restore_sigterm()
        self._sigterm_installed = False

    # -- misc -------------------------------------------------------------

    def _mn(self) -> Mininet:
        if self.mn is None:
            raise NetworkError("network not started")
        return self.mn

    def _require_holder(self) -> Node:
        if self._holder is None:
            raise NetworkError("run namespace not started")
        return self._holder

    @staticmethod
    def _resolve_app(app: str) -> str:
        # ryu-manager starts in the run namespace's mount namespace, whose cwd is "/".
        if app.endswith(".py") or os.sep in app:
            return str(Path(app).absolute())
        return app

    @staticmethod
    def _is_dcnlab_app(app: str) -> bool:
        if app.startswith("dcnlab."):
            return True
        apps_dir = Path(__file__).absolute().parent.parent / "apps"
        return Path(app).is_absolute() and Path(app).parent == apps_dir
