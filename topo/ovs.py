"""A private Open vSwitch instance: its own ovsdb-server and ovs-vswitchd in one directory.

This machine has no openvswitch kernel module, and other people's runs share it, so every
run starts its own pair of daemons (userspace datapath only) instead of using a system
service::

    with OvsInstance() as ovs:          # or ovs = OvsInstance(d).start() ... ovs.stop()
        ovs.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")

All state (database, sockets, pidfiles, logs) lives in the instance directory, and the
daemons run with ``OVS_RUNDIR``/``OVS_DBDIR``/``OVS_LOGDIR`` pointing there, so that
``ovs-vsctl`` and ``ovs-ofctl`` find them through the same variables.  While an instance
runs, ``os.environ`` carries those variables too (Mininet calls ``ovs-vsctl`` as plain
subprocesses); ``stop()`` restores what was there before.  ``stop()`` asks ovs-vswitchd to
exit and delete its datapath, then kills exactly the PIDs its daemons wrote (nothing found
by name) and removes the directory.

One netdev datapath per network namespace: the userspace datapath always creates a tap
device named ``ovs-netdev``, so a second instance in the same namespace cannot create
bridges ("creating tap device failed: Device or resource busy").  Give each instance its
own namespace with ``netns_pid`` (the daemons are started there with ``mnexec -a PID``);
the lifecycle (topo/network.py) does that for every run.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

SCHEMA_CANDIDATES = (
    "/usr/share/openvswitch/vswitch.ovsschema",
    "/usr/local/share/openvswitch/vswitch.ovsschema",
)
DAEMONS = ("ovs-vswitchd", "ovsdb-server")  # stop order: the switch first, then its database
BINARIES = ("ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-vswitchd", "ovs-ofctl", "ovs-appctl")
APT_PACKAGE = "openvswitch-switch"
ENV_KEYS = ("OVS_RUNDIR", "OVS_DBDIR", "OVS_LOGDIR")
# sun_path holds 108 bytes; bridges get "<dir>/<bridge up to 15 chars>.mgmt" sockets.
MAX_DIR_LEN = 80


class OvsError(RuntimeError):
    """The private Open vSwitch could not be started, queried or stopped."""


def find_binaries() -> dict[str, str]:
    """Paths of the Open vSwitch programs; raise a clear OvsError naming what is missing."""
    found = {name: shutil.which(name, path=_search_path()) for name in BINARIES}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        raise OvsError(
            f"Open vSwitch program(s) not found: {', '.join(missing)}. Install the Debian "
            f"package {APT_PACKAGE} (scripts/setup.sh installs it)."
        )
    return {name: path for name, path in found.items() if path is not None}


def _search_path() -> str:
    # ovs-vswitchd and ovsdb-server live in /usr/sbin, which a non-login PATH may lack.
    extra = ("/usr/sbin", "/sbin", "/usr/local/sbin")
    parts = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(parts + [p for p in extra if p not in parts])


def find_schema() -> str:
    for candidate in SCHEMA_CANDIDATES:
        if os.path.exists(candidate):
            return candidate
    raise OvsError(
        f"vswitch.ovsschema not found in {', '.join(SCHEMA_CANDIDATES)}: install the Debian "
        f"package {APT_PACKAGE} (scripts/setup.sh installs it)."
    )


# ---------------------------------------------------------------------------
# os.environ bookkeeping shared by all instances of this process

_active: list[OvsInstance] = []
_saved_env: dict[str, str | None] = {}


def _publish_env() -> None:
    """Point os.environ at the most recently started live instance (or restore the original)."""
    if _active:
        for key, value in _active[-1].env.items():
            os.environ[key] = value
        return
    for key, value in _saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    _saved_env.clear()


def _activate(instance: OvsInstance) -> None:
    if not _active:
        _saved_env.update({key: os.environ.get(key) for key in ENV_KEYS})
    _active.append(instance)
    _publish_env()


def _deactivate(instance: OvsInstance) -> None:
    if instance in _active:
        _active.remove(instance)
        _publish_env()


# ---------------------------------------------------------------------------


class OvsInstance:
    """ovsdb-server + ovs-vswitchd private to one directory (userspace datapath only)."""

    def __init__(self, directory: str | os.PathLike[str] | None = None,
                 netns_pid: int | None = None, stop_timeout: float = 5.0) -> None:
        self._requested = Path(directory) if directory is not None else None
        self.netns_pid = netns_pid
        self.stop_timeout = stop_timeout
        self._dir: Path | None = None
        self._created_dir = False
        self._pids: dict[str, int] = {}
        self._bins: dict[str, str] = {}
        self.version = ""

    # -- properties ---------------------------------------------------------

    @property
    def directory(self) -> Path:
        if self._dir is None:
            raise OvsError("OVS instance not started")
        return self._dir

    @property
    def db(self) -> str:
        """The OVSDB remote ovs-vsctl must use: unix:<dir>/db.sock."""
        return f"unix:{self.directory}/db.sock"

    @property
    def env(self) -> dict[str, str]:
        """Variables that point ovs-vsctl/ovs-ofctl/ovs-appctl at this instance."""
        d = str(self.directory)
        return {key: d for key in ENV_KEYS}

    @property
    def pids(self) -> dict[str, int]:
        """PIDs of this instance's daemons, by program name."""
        return dict(self._pids)

    @property
    def running(self) -> bool:
        return bool(self._pids) and all(_alive(pid) for pid in self._pids.values())

    def log_path(self, daemon: str) -> Path:
        return self.directory / f"{daemon}.log"

    # -- lifecycle ----------------------------------------------------------

    def start(self) -> OvsInstance:
        """Create the database and start both daemons; on failure clean up and raise."""
        if self._pids:
            raise OvsError(f"OVS instance in {self._dir} already started")
        self._bins = find_binaries()
        if self.netns_pid is not None and shutil.which("mnexec") is None:
            raise OvsError("mnexec not found (needed to start OVS in a namespace): install the "
                           "Debian package mininet (scripts/setup.sh installs it).")
        schema = find_schema()
        self._make_dir()
        try:
            self._run("ovsdb-tool", "create", str(self.directory / "conf.db"), schema)
            self._start_daemon("ovsdb-server", str(self.directory / "conf.db"),
                               f"--remote=punix:{self.directory}/db.sock")
            self._run("ovs-vsctl", f"--db={self.db}", "--no-wait", "init")
            # No --mlockall: it pins ~280 MB instead of ~50 MB for 20 bridges.
            self._start_daemon("ovs-vswitchd", self.db)
            self.version = self._version()
        except BaseException:
            self.stop()
            raise
        _activate(self)
        return self

    def stop(self) -> None:
        """Stop our daemons (exit --cleanup, SIGTERM, SIGKILL) and remove our directory."""
        _deactivate(self)
        self._exit_cleanup()
        errors = []
        for name in DAEMONS:
            pid = self._pids.pop(name, None)
            if pid is not None and not _terminate(pid, self.stop_timeout, str(self._dir)):
                errors.append(f"{name} (pid {pid}) did not exit")
        self._pids.clear()
        self._remove_dir()
        if errors:
            raise OvsError("; ".join(errors))

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- commands -----------------------------------------------------------

    def vsctl(self, *args: str, timeout: float = 10.0) -> str:
        """Run ovs-vsctl against this instance and return its stdout."""
        return self._run("ovs-vsctl", f"--db={self.db}", f"--timeout={max(1, int(timeout))}",
                         *args, timeout=timeout + 5)

    def ofctl(self, *args: str, timeout: float = 10.0) -> str:
        """Run ovs-ofctl with this instance's run directory (bridge names resolve here)."""
        return self._run("ovs-ofctl", *args, timeout=timeout)

    def bridges(self) -> list[str]:
        return self.vsctl("list-br").split()

    def appctl(self, *args: str, timeout: float = 10.0) -> str:
        """Run an ovs-appctl command against this instance's ovs-vswitchd."""
        if self._dir is None:
            raise OvsError("this Open vSwitch instance is not running")
        return self._run("ovs-appctl", f"--target={self._dir / 'ovs-vswitchd.ctl'}",
                         f"--timeout={max(1, int(timeout))}", *args, timeout=timeout + 5)

    def coverage(self, name: str) -> int:
        """ovs-vswitchd's coverage counter ``name`` (0 if never hit), e.g. ``xlate_actions``:
        flow translations, the slow path every new datapath flow takes."""
        return int(self.appctl("coverage/read-counter", name).strip() or 0)

    def datapath_stats(self) -> dict[str, int]:
        """The userspace datapath's packet counters summed over its threads, and its
        flows: ``upcalls`` (packets that missed every cache and were translated: the slow
        path, run inline by the thread that received them; without PMD ports that is the
        main thread, which also serves OpenFlow), ``megaflow_hits``, ``packets`` and
        ``flows`` (datapath flows alive now)."""
        return parse_datapath_stats(self.appctl("dpif-netdev/pmd-stats-show"),
                                    self.appctl("upcall/show"))

    # -- internals ----------------------------------------------------------

    def _exit_cleanup(self) -> None:
        """Ask ovs-vswitchd to delete its datapath and bridges before it exits.

        A plain SIGTERM keeps them for a restart, which leaves persistent tap devices
        (one per bridge, plus ``ovs-netdev``) behind in the namespace.
        """
        if "ovs-vswitchd" not in self._pids or self._dir is None:
            return
        try:
            self.appctl("exit", "--cleanup", timeout=5)
        except OvsError:
            pass  # fall through to signals

    def _make_dir(self) -> None:
        if self._requested is None:
            self._dir = Path(tempfile.mkdtemp(prefix="dcnlab-ovs-", dir="/tmp"))
            self._created_dir = True
        else:
            d = self._requested.absolute()
            if d.exists() and any(d.iterdir()):
                raise OvsError(f"OVS directory {d} is not empty; give a new or empty one")
            self._created_dir = not d.exists()
            d.mkdir(parents=True, exist_ok=True)
            self._dir = d
        if len(str(self._dir)) > MAX_DIR_LEN or re.search(r"\s", str(self._dir)):
            bad = self._dir
            self._remove_dir()
            raise OvsError(f"OVS directory {bad} must be at most {MAX_DIR_LEN} characters "
                           "without whitespace (unix socket paths are limited to 108 bytes)")

    def _remove_dir(self) -> None:
        if self._dir is None:
            return
        if self._created_dir:
            shutil.rmtree(self._dir, ignore_errors=True)
        else:
            for child in self._dir.iterdir():
                if child.is_dir():
                    shutil.rmtree(child, ignore_errors=True)
                else:
                    child.unlink(missing_ok=True)
        self._dir = None

    def _daemon_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def _run(self, program: str, *args: str, timeout: float = 30.0,
             in_netns: bool = False) -> str:
        cmd = [self._bins.get(program) or program, *args]
        if in_netns and self.netns_pid is not None:
            cmd = [shutil.which("mnexec") or "mnexec", "-a", str(self.netns_pid), *cmd]
        try:
            proc = subprocess.run(cmd, env=self._daemon_env(), capture_output=True, text=True,
                                  timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise OvsError(f"{' '.join(cmd)} timed out after {timeout:.0f} s") from None
        if proc.returncode != 0:
            raise OvsError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                           f"{proc.stderr.strip() or proc.stdout.strip()}")
        return proc.stdout

    def _start_daemon(self, name: str, *args: str) -> None:
        d = self.directory
        pidfile = d / f"{name}.pid"
        try:
            self._run(name, *args, f"--pidfile={pidfile}", "--detach",
                      f"--log-file={d / (name + '.log')}", f"--unixctl={d / (name + '.ctl')}",
                      in_netns=True)
        except OvsError as exc:
            raise OvsError(f"{exc}\n--- {name}.log (tail) ---\n{self._log_tail(name)}") from None
        # --detach returns once the daemon is ready and its pidfile is written.
        self._pids[name] = int(pidfile.read_text().strip())

    def _log_tail(self, name: str, lines: int = 20) -> str:
        try:
            return "\n".join((self.directory / f"{name}.log").read_text().splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def _version(self) -> str:
        out = self._run("ovs-vsctl", "--version")
        match = re.search(r"\d+\.\d+(\.\d+)?", out)
        return match.group(0) if match else ""


# ---------------------------------------------------------------------------
# Reading ovs-ofctl output

_PMD_STAT_RE = re.compile(r"^\s*([a-z. ]+?):\s*(\d+)\s*$", re.MULTILINE)
_PMD_STATS = {"packets received": "packets", "megaflow hits": "megaflow_hits",
              "miss with success upcall": "upcalls"}
_DP_FLOWS_RE = re.compile(r"flows\s*:\s*\(current (\d+)\)")


def parse_datapath_stats(pmd_stats: str, upcall_show: str) -> dict[str, int]:
    """:meth:`OvsInstance.datapath_stats` from ``dpif-netdev/pmd-stats-show`` and
    ``upcall/show`` output."""
    stats = {"packets": 0, "megaflow_hits": 0, "upcalls": 0}
    for key, value in _PMD_STAT_RE.findall(pmd_stats):
        name = _PMD_STATS.get(key)
        if name is not None:
            stats[name] += int(value)
    flows = _DP_FLOWS_RE.search(upcall_show)
    stats["flows"] = int(flows.group(1)) if flows else 0
    return stats


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


# ---------------------------------------------------------------------------
# Process helpers: act only on a PID we recorded, and tolerate PID reuse.


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """True when pid exists and is not a zombie (detached daemons are reaped by init)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _terminate(pid: int, timeout: float, marker: str) -> bool:
    """SIGTERM, wait up to timeout, then SIGKILL.  Returns True once the process is gone.

    Only a process whose command line contains ``marker`` (our directory) is signalled, so
    a PID reused by someone else after our daemon died is left alone.
    """
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 2.0)):
        if not _alive(pid) or marker not in _cmdline(pid):
            return True
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        for _ in _poll(wait):
            if not _alive(pid):
                return True
    return not _alive(pid)


def _poll(timeout: float, interval: float = 0.05) -> Iterator[None]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(interval)
        yield None
