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

Isolation between concurrent runs.  The userspace datapath of Open vSwitch always creates
a tap device called ``ovs-netdev``, so two private OVS instances in one namespace collide.
Each run therefore gets its own network namespace (held by a Mininet node, ``<prefix>ns``)
in which ovs-vswitchd, ryu-manager and every switch shell live: the switch-side veth ends,
the bridges' tap devices and the controller's 127.0.0.1:6653 are all private to the run.
Hosts are Mininet hosts with their own namespaces, as usual.  Node and interface names
still carry the run prefix (``d1x9-h1-eth0``), so ``ps``/logs tell runs apart.  The root
namespace gets no interfaces at all; stop() verifies that.

Things to know:
- The controller listens on 127.0.0.1 *inside the run namespace*.  To reach it (e.g. a
  REST app) run the client there: ``net.ns_cmd("curl http://127.0.0.1:8080/...")``.
- Mininet's machine-wide ``fixLimits()`` (sysctls, rlimits) is skipped on purpose.
- Link delay, jitter, buffers, ECN and queue disciplines (``egress=``/``ingress=``) need
  ``--switch ext`` (no netem here); on ``ovs`` only the rate is applied (htb via TCLink)
  and an :class:`EmulationWarning` is issued.
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
import re
import secrets
import shlex
import shutil
import signal
import string
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Self

from mininet.link import Link
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Node, RemoteController, Switch

from dcnlab.controller.runtime import ENV_STATE_FILE, ENV_TOPOLOGY, read_state

from .management import add_management, management_address
from .mininet_topos import DcnHost, DcnTCLink, SpecTopo
from .ovs import OvsError, OvsInstance, find_binaries
from .spec import TopologySpec, parse
from .switches import SwitchContext, SwitchKind, SwitchKindError, get_switch_kind

log = logging.getLogger(__name__)

RUN_ROOT = Path("/tmp")
CONTROLLER_HOST = "127.0.0.1"
DEFAULT_CONTROLLER_PORT = 6653
LOG_TAIL_LINES = 40
# Host offloads: checksumming and segmentation must be done by the kernel before a frame
# reaches a userspace switch or the controller, else TCP sees bad checksums and stalls.
HOST_OFFLOADS = ("tx", "off", "tso", "off", "gso", "off")
TOOLS = {  # program -> Debian package
    "mnexec": "mininet",
    "ifconfig": "net-tools",
    "ip": "iproute2",
    "tc": "iproute2",
    "ethtool": "ethtool",
}


class NetworkError(RuntimeError):
    """The network could not be started, queried or stopped; the message says why."""


class EmulationWarning(UserWarning):
    """Link parameters that the chosen switch kind cannot emulate are ignored."""


# ---------------------------------------------------------------------------
# Preflight


def find_ryu_manager() -> str:
    """ryu-manager next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / "ryu-manager"
    if beside.exists():
        return str(beside)
    found = shutil.which("ryu-manager")
    if found is None:
        raise NetworkError("ryu-manager not found: pip install ryu==4.34 into this "
                           "environment (scripts/setup.sh does it, into .venv)")
    return found


def preflight(kind: SwitchKind) -> str:
    """Check what a run needs before touching anything; returns ryu-manager's path."""
    if os.geteuid() != 0:
        raise NetworkError("a dcnlab network needs root (network namespaces, veth pairs, tc): "
                           "run it as root or with sudo")
    missing = [f"{tool} (Debian package {pkg})" for tool, pkg in TOOLS.items()
               if shutil.which(tool) is None]
    if missing:
        raise NetworkError(f"missing program(s): {', '.join(missing)}; "
                           "scripts/setup.sh installs them")
    if kind.needs_ovs:
        try:
            find_binaries()
        except OvsError as exc:
            raise NetworkError(str(exc)) from None
    try:
        kind.check_programs()
    except SwitchKindError as exc:
        raise NetworkError(str(exc)) from None
    return find_ryu_manager()


# ---------------------------------------------------------------------------
# Small helpers


def _root_links() -> list[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                         check=False).stdout
    return [m.group(1).split("@")[0] for m in re.finditer(r"^\d+:\s+(\S+?):", out, re.MULTILINE)]


def _reserve_prefix() -> tuple[str, Path]:
    """A fresh run prefix ("d" + 3 characters + "-") and the directory that reserves it.

    mkdir is atomic, so two processes never get the same prefix; prefixes still present
    in the root namespace's links (a crashed run) are skipped.  The randomness does not
    touch the ``random`` module, whose seed belongs to experiments.
    """
    alphabet = string.ascii_lowercase + string.digits
    existing = _root_links()
    for _ in range(200):
        tag = "d" + "".join(secrets.choice(alphabet) for _ in range(3))
        if any(name.startswith(tag + "-") for name in existing):
            continue
        directory = RUN_ROOT / f"dcnlab-{tag}"
        try:
            directory.mkdir(mode=0o755)
        except FileExistsError:
            continue
        return tag + "-", directory
    raise NetworkError(f"could not reserve a run prefix under {RUN_ROOT}")


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _tcp_sockets(pid: int) -> list[tuple[str, int, str, int, str]]:
    """(local ip, local port, remote ip, remote port, state) in pid's network namespace."""
    rows = []
    try:
        with open(f"/proc/{pid}/net/tcp") as fh:
            next(fh)
            for line in fh:
                fields = line.split()
                local, remote, state = fields[1], fields[2], fields[3]
                lip, lport = local.split(":")
                rip, rport = remote.split(":")
                rows.append((_hex_ip(lip), int(lport, 16), _hex_ip(rip), int(rport, 16), state))
    except (OSError, StopIteration, IndexError, ValueError):
        pass
    return rows


def _hex_ip(text: str) -> str:
    raw = int(text, 16).to_bytes(4, "little")
    return ".".join(str(b) for b in raw)


TCP_ESTABLISHED, TCP_LISTEN = "01", "0A"


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _pids_in_netns(inodes: set[int]) -> list[int]:
    # Never the namespace this process lives in (the machine's own): a mistake there would
    # make a clean-up kill other people's processes.
    inodes = inodes - {_netns_inode(os.getpid()), _netns_inode(1)}
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and _netns_inode(int(entry)) in inodes:
            pids.append(int(entry))
    return pids


def _kill_pids(pids: Sequence[int], timeout: float = 3.0) -> None:
    """SIGTERM, wait, SIGKILL: only for PIDs we identified as ours."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                alive.append(pid)
        deadline = time.monotonic() + timeout
        while alive and time.monotonic() < deadline:
            alive = [p for p in alive if process_running(p)]
            time.sleep(0.05)
        if not alive:
            return
        pids = alive


def process_running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


_PORT_RE = re.compile(r"^\s*port\s+(\S+?):\s*rx\s+(.*?)\n\s*tx\s+(.*?)$", re.MULTILINE)
_FIELD_RE = re.compile(r"(\w+)=(\d+|\?)")


def parse_port_stats(text: str) -> dict[int | str, dict[str, int | None]]:
    """Parse ``ovs-ofctl -O OpenFlow13 dump-ports`` output.

    Returns {port: {"rx_pkts": .., "rx_bytes": .., "rx_drop": .., "rx_errs": ..,
    "tx_pkts": .., "tx_bytes": .., "tx_drop": .., "tx_errs": .., ...}}; the bridge's own
    port is "LOCAL"; counters OVS reports as "?" are None.
    """
    stats: dict[int | str, dict[str, int | None]] = {}
    for match in _PORT_RE.finditer(text):
        name, rx, tx = match.groups()
        port: int | str = int(name) if name.isdigit() else name
        row: dict[str, int | None] = {}
        for direction, fields in (("rx", rx), ("tx", tx)):
            for key, value in _FIELD_RE.findall(fields):
                row[f"{direction}_{key}"] = None if value == "?" else int(value)
        stats[port] = row
    return stats


class _RemoteController(RemoteController):
    """RemoteController without Mininet's telnet probe: the probe would run in the root
    namespace (the controller listens in the run namespace) and open a bogus OpenFlow
    connection.  The lifecycle checks the listener itself."""

    def checkListening(self) -> None:
        return


@contextlib.contextmanager
def _deferred_sigint() -> Iterator[None]:
    """Hold a Ctrl-C that arrives during clean-up until clean-up is done."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _raise_system_exit(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


# ---------------------------------------------------------------------------


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

    def __init__(self, spec: TopologySpec | str, app: str = "dcnlab.apps.ecmp",
                 switch: str = "ovs", run_dir: str | os.PathLike[str] | None = None,
                 app_env: Mapping[str, str] | None = None, *,
                 controller_port: int = DEFAULT_CONTROLLER_PORT, ready_timeout: float = 60.0,
                 wait_app_ready: bool | None = None, app_args: Sequence[str] = (),
                 switch_options: Mapping[str, Any] | None = None,
                 management: bool = False) -> None:
        self.spec = parse(spec) if isinstance(spec, str) else spec
        self.kind = get_switch_kind(switch)
        self.app = self._resolve_app(app)
        self.app_env = dict(app_env or {})
        self.app_args = list(app_args)
        self.port = controller_port
        self.ready_timeout = ready_timeout
        self.switch_options = dict(switch_options or {})
        self.management = management
        self._requested_run_dir = Path(run_dir).absolute() if run_dir is not None else None
        self._wait_app = wait_app_ready if wait_app_ready is not None else (
            self._is_dcnlab_app(self.app))
        self.warnings: list[str] = []
        self.prefix = ""
        self.mn: Mininet | None = None
        self.ovs: OvsInstance | None = None
        self.startup_seconds: float | None = None
        self.timings: dict[str, float] = {}  # start-up stage -> seconds
        self._run_dir: Path | None = None
        self._reserved: Path | None = None
        self._holder: Node | None = None
        self._ryu: subprocess.Popen[bytes] | None = None
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
        with _deferred_sigint():
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
        return self._ryu.pid if self._ryu is not None else None

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

    def management_ip(self, host: str) -> str:
        """The host's address on the management network (needs ``management=True``)."""
        if not self.management:
            raise NetworkError("this network has no management network (management=True)")
        return management_address(self.spec, host)

    def state(self) -> dict[str, Any] | None:
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

    def restart_controller(self, timeout: float | None = None) -> float:
        """Kill ryu-manager and start it again on the same port; wait until ready again.

        Returns the seconds until switches and app were ready.
        """
        began = time.monotonic()
        self._stop_controller()  # its sockets close with it: sessions drop to 0 at once
        with contextlib.suppress(FileNotFoundError):
            self.state_file.unlink()  # wait for the new instance's state, not the old one
        self._start_controller()
        self.wait_ready(timeout)
        return time.monotonic() - began

    def wait_ready(self, timeout: float | None = None) -> float:
        """Wait until every switch is connected and the app is ready; returns seconds."""
        timeout = self.ready_timeout if timeout is None else timeout
        began = time.monotonic()
        streak = 0
        while True:
            self._check_controller_alive()
            pending = self._unconnected_switches()
            app_ready, app_status = self._app_ready()
            # Twice in a row: a TCP session is up a moment before the OpenFlow handshake
            # and the app's first flow mods are through.
            streak = streak + 1 if not pending and app_ready else 0
            if streak >= 2:
                return time.monotonic() - began
            if time.monotonic() - began > timeout:
                waiting = []
                if pending:
                    shown = ", ".join(self.spec_name(n) for n in pending[:10])
                    more = f" (+{len(pending) - 10} more)" if len(pending) > 10 else ""
                    waiting.append(f"{len(pending)} switch(es) not connected: {shown}{more}")
                if not app_ready:
                    waiting.append(f"app not ready: {app_status}")
                raise NetworkError(
                    f"network not ready after {timeout:g} s: {'; '.join(waiting)}\n"
                    f"--- ryu-manager log tail ({self.controller_log}) ---\n"
                    f"{_tail(self.controller_log)}")
            time.sleep(0.2)

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
        procs |= {f"pid {pid} in a run namespace" for pid in _pids_in_netns(self._netns)
                  if process_running(pid)}
        links = [n for n in _root_links() if self.prefix and n.startswith(self.prefix)]
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
        self._warn_emulation()
        self.prefix, self._reserved = _reserve_prefix()
        self._run_dir = self._requested_run_dir or self._reserved
        self._run_dir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        self._install_sigterm()
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
        """A Mininet node whose namespace becomes the run namespace (see module doc)."""
        self._holder = Node(self.prefix + "ns", inNamespace=True)
        # IPv6 off before any interface exists there: no ND/MLD noise into the switches.
        self._holder.cmd("ip link set lo up; sysctl -qw net.ipv6.conf.all.disable_ipv6=1 "
                         "net.ipv6.conf.default.disable_ipv6=1")
        self._started_pids[self._holder.name] = self._holder.pid
        inode = _netns_inode(self._holder.pid)
        if inode is not None:
            self._netns.add(inode)

    def _app_environment(self) -> dict[str, str]:
        env = {ENV_TOPOLOGY: str(self.topology_file),
               ENV_STATE_FILE: str(self.run_dir / "state.json"),
               "PYTHONUNBUFFERED": "1"}
        env.update(self.app_env)
        return env

    def _start_controller(self) -> None:
        holder = self._require_holder()
        cmd = [shutil.which("mnexec") or "mnexec", "-a", str(holder.pid), self._ryu_manager,
               "--ofp-tcp-listen-port", str(self.port), "--ofp-listen-host", CONTROLLER_HOST,
               *self.app_args, self.app]
        with open(self.controller_log, "ab") as logfile:
            logfile.write(f"=== {time.strftime('%H:%M:%S')} {' '.join(cmd[3:])}\n".encode())
            logfile.flush()
            # Own session: a terminal Ctrl-C reaches us, and we stop ryu in order.
            self._ryu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=logfile,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         env={**os.environ, **self._app_environment()},
                                         cwd=str(self.run_dir))
        self._started_pids[f"ryu-manager[{self._ryu.pid}]"] = self._ryu.pid
        self._wait_listening(30.0)

    def _wait_listening(self, timeout: float) -> None:
        holder = self._require_holder()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_controller_alive()
            for lip, lport, _rip, _rport, state in _tcp_sockets(holder.pid):
                if state == TCP_LISTEN and lport == self.port and lip in (CONTROLLER_HOST,
                                                                           "0.0.0.0"):
                    return
            time.sleep(0.1)
        raise NetworkError(f"ryu-manager did not listen on {CONTROLLER_HOST}:{self.port} "
                           f"within {timeout:g} s\n--- ryu-manager log tail ---\n"
                           f"{_tail(self.controller_log)}")

    def _check_controller_alive(self) -> None:
        if self._ryu is None:
            raise NetworkError("ryu-manager is not running")
        code = self._ryu.poll()
        if code is not None:
            raise NetworkError(
                f"ryu-manager exited with code {code} (app {self.app!r})\n"
                f"--- ryu-manager log tail ({self.controller_log}) ---\n"
                f"{_tail(self.controller_log)}")

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
                          controller=partial(_RemoteController, ip=CONTROLLER_HOST,
                                             port=self.port),
                          link=DcnTCLink if shape and rated else Link,
                          autoSetMacs=False, build=False)
        # build() separately: if it fails half-way, self.mn exists and stop() undoes it.
        self.mn.build()
        for node in [*self.mn.hosts, *self.mn.switches, *self.mn.controllers]:
            self._started_pids[node.name] = node.pid
        for host in self.mn.hosts:
            inode = _netns_inode(host.pid)
            if inode is not None:
                self._netns.add(inode)

    def _configure_hosts(self) -> None:
        """Addresses on every interface (also second ones) and offloads off."""
        for spec_host in self.spec.hosts:
            host = self.host(spec_host.name)
            commands = []
            for index, iface in enumerate(spec_host.interfaces):
                intf = host.intf(f"{host.name}-eth{index}")
                if intf.IP() != iface.ip:
                    intf.setIP(iface.ip, iface.prefixlen)
                if (intf.MAC() or "").lower() != iface.mac:
                    intf.setMAC(iface.mac)
                commands.append(f"ethtool -K {intf.name} {' '.join(HOST_OFFLOADS)}")
            out = host.cmd("; ".join(commands) + " 2>&1")
            if "Cannot" in out or "not found" in out:
                raise NetworkError(f"ethtool on {spec_host.name} failed: {out.strip()}")

    # -- readiness --------------------------------------------------------

    def _controller_sessions(self) -> int:
        """OpenFlow sessions the controller has accepted (ESTABLISHED at its port).

        The controller and every switch share the run namespace, so this is exact and
        instant for any switch kind.  (OVS refreshes Controller.is_connected in its
        database only every ~5 s, which would add seconds to every start and restart.)
        """
        return sum(1 for lip, lport, _rip, _rport, state in
                   _tcp_sockets(self._require_holder().pid)
                   if lport == self.port and lip == CONTROLLER_HOST and state == TCP_ESTABLISHED)

    def _unconnected_switches(self) -> list[str]:
        """[] when every switch is connected; otherwise the names we can tell apart."""
        switches = self._mn().switches
        missing = len(switches) - self._controller_sessions()
        if missing <= 0:
            return []
        if self.ovs is not None:  # the database may lag, but names help an error message
            named = self._ovs_unconnected([sw.name for sw in switches])
        else:
            named = [sw.name for sw in switches
                     if type(sw).connected is not Switch.connected and not sw.connected()]
        return named[:missing] or [f"({missing} unidentified)"]

    def _ovs_unconnected(self, names: list[str]) -> list[str]:
        assert self.ovs is not None
        try:
            out = self.ovs.vsctl("--format=json", "--", "--columns=name,controller", "list",
                                 "Bridge", "--", "--columns=_uuid,is_connected", "list",
                                 "Controller")
        except OvsError as exc:
            raise NetworkError(f"cannot query the private OVS: {exc}") from None
        bridges, controllers = _json_documents(out)
        connected = {row[0][1]: row[1] for row in controllers["data"]}
        ok = set()
        for name, ctl in bridges["data"]:
            uuids = [ctl[1]] if ctl[0] == "uuid" else [u[1] for u in ctl[1]]
            if any(connected.get(u) is True for u in uuids):
                ok.add(name)
        return [n for n in names if n not in ok]

    def _app_ready(self) -> tuple[bool, str]:
        state = self.state()
        if state is None:
            if self._wait_app:
                return False, f"no state written to {self.state_file} yet"
            return True, "app writes no state"
        if self._ryu is not None and state.get("pid") not in (None, self._ryu.pid):
            return False, f"state file is from an earlier controller (pid {state.get('pid')})"
        if state.get("ready"):
            return True, "ready"
        expected = state.get("expected", [])
        connected = state.get("connected", [])
        return False, (f"ready=false, {len(connected)}/{len(expected)} datapaths connected, "
                       f"warnings: {state.get('warnings', [])[-3:]}")

    # -- shut-down --------------------------------------------------------

    def _stop_mininet(self) -> None:
        nodes = self._our_nodes()
        for node in nodes:  # remember them all, even if building stopped half-way
            self._started_pids.setdefault(node.name, node.pid)
            inode = _netns_inode(node.pid) if node.pid and node.inNamespace else None
            if inode is not None:
                self._netns.add(inode)
        try:
            if any(node.waiting for node in nodes):
                # Interrupted inside node.cmd(): Mininet's stop() would assert on that shell.
                raise NetworkError("a node shell was interrupted in the middle of a command")
            if self.mn is not None:
                self.mn.stop()
        except Exception as exc:  # noqa: BLE001 - fall back to killing the shells
            log.warning("Mininet stop failed (%s); terminating node shells directly",
                        exc or type(exc).__name__)
        # RemoteController.stop() is a no-op, so Mininet leaves its shell running; after a
        # failed stop() nothing else is terminated either.  Namespaces (and with them the
        # veths) disappear with their last process.
        for node in nodes:
            with contextlib.suppress(Exception):
                node.terminate()
        self._forget_nodes(nodes)

    def _our_nodes(self) -> list[Node]:
        """Mininet nodes of this run, including ones whose construction was interrupted.

        Node.outToNode maps every live node shell of this process, so a node that never
        reached Mininet's lists is still found by its prefixed name.
        """
        nodes: dict[str, Node] = {}
        if self.mn is not None:
            nodes.update((n.name, n) for n in [*self.mn.hosts, *self.mn.switches,
                                                *self.mn.controllers])
        for node in list(Node.outToNode.values()):
            if (self.prefix and node.name.startswith(self.prefix) and node.shell is not None
                    and node is not self._holder):
                nodes.setdefault(node.name, node)
        return list(nodes.values())

    @staticmethod
    def _forget_nodes(nodes: Sequence[Node]) -> None:
        """Drop stopped nodes from Mininet's class-wide fd maps (they are never pruned)."""
        for table in (Node.outToNode, Node.inToNode):
            for fd in [fd for fd, node in table.items() if node in nodes]:
                del table[fd]

    def _stop_controller(self) -> None:
        proc, self._ryu = self._ryu, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(5.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5.0)

    def _stop_ovs(self) -> None:
        ovs, self.ovs = self.ovs, None
        if ovs is not None:
            ovs.stop()

    def _stop_namespaces(self) -> None:
        """Stop the namespace holder, then anything still running in our namespaces."""
        if self._holder is not None:
            self._holder.terminate()
            self._forget_nodes([self._holder])
            self._holder = None
        leftovers = [p for p in _pids_in_netns(self._netns) if p != os.getpid()]
        if leftovers:
            log.warning("stopping %d process(es) left in the run's namespaces: %s",
                        len(leftovers), leftovers)
            _kill_pids(leftovers)
        still = [p for p in _pids_in_netns(self._netns) if process_running(p)]
        if still:
            raise NetworkError(f"processes still in the run's namespaces: {still}")

    def _sweep_root_links(self) -> None:
        """Nothing of ours belongs in the root namespace; remove strays, then verify."""
        if not self.prefix:
            return
        for name in [n for n in _root_links() if n.startswith(self.prefix)]:
            subprocess.run(["ip", "link", "del", name], capture_output=True, check=False)
        left = [n for n in _root_links() if n.startswith(self.prefix)]
        if left:
            raise NetworkError(f"interfaces with prefix {self.prefix!r} remain: {left}")

    def _remove_dirs(self) -> None:
        if self._reserved is not None and self._reserved != self._requested_run_dir:
            shutil.rmtree(self._reserved, ignore_errors=True)

    def _install_sigterm(self) -> None:
        """Turn SIGTERM into SystemExit while we run, so clean-up happens (main thread)."""
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
            signal.signal(signal.SIGTERM, _raise_system_exit)
            self._sigterm_installed = True

    def _restore_sigterm(self) -> None:
        if self._sigterm_installed and signal.getsignal(signal.SIGTERM) is _raise_system_exit:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
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


def _json_documents(text: str) -> list[Any]:
    """Split concatenated JSON documents (one per ovs-vsctl command)."""
    decoder = json.JSONDecoder()
    docs, index = [], 0
    while index < len(text):
        while index < len(text) and text[index].isspace():
            index += 1
        if index >= len(text):
            break
        doc, index = decoder.raw_decode(text, index)
        docs.append(doc)
    return docs

