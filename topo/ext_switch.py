"""Switch kind ``ext``: dcnlab's own OpenFlow 1.3 switch (``switch_ext``) under Mininet.

::

    with Network("spineleaf:2,2,2,rate=10M,delay=1ms", app="dcnlab.apps.spray", switch="ext",
                 switch_options={"select_mode": "random", "seed": 7}) as net:
        print(net.switch("s1").stats())          # last line of s1's stats file

Importing this module registers the kind (``topo/switches.py`` imports it the first time
someone asks for ``ext``).  One ``dcnlab-switch`` process runs per Mininet switch, inside
the run's network namespace (``mnexec -a``), connected to the controller Mininet hands to
``start()`` (the lifecycle's ryu-manager on 127.0.0.1 in that namespace).

Link emulation.  The switch applies each spec link's parameters (rate, delay, jitter,
drop-tail buffer, ECN threshold) on its *egress* towards that link:

- switch-switch link: both switches shape their own egress, so each direction is emulated
  exactly once with the link's parameters;
- host link, switch -> host: rate, buffer and ECN as given; delay and jitter *doubled*
  (see ``fold_host_delay``);
- host link, host -> switch: the switch cannot delay or queue frames before it receives
  them, and this kernel has no netem.  The host gets an htb qdisc at the link rate
  (``host_shaping``) so it is paced like a real NIC: its own qdisc fills and TCP Small
  Queues push back, instead of the host bursting at veth speed into the first switch
  buffer (which would turn every access link into a lossy 1 Gbit/s link and load the
  switch with traffic it then drops).  The host's queue is its qdisc's default (txqueuelen
  packets); the spec's buffer and ECN threshold describe switch buffers and apply only to
  the switch side.  The missing access-link delay of this direction is added on the way
  back instead: every host-to-host path crosses exactly two host links, so doubling the
  delay on switch -> host egress keeps every host-to-host RTT exact (one-way delays are
  exact when both access links have the same delay, as in every symmetric family) and
  the RTT's range stays [2(d-j), 2(d+j)], which is how the seeds state RTT +- jitter.

Queue disciplines.  A spec's ``egress[@host|@fabric]=NAME/KEY=VALUE/...`` and
``ingress[@host|@fabric]=...`` (see topo/spec.py) reach each switch port they apply to
verbatim as ``--port N=IF,...,egress=NAME/...`` / ``ingress=NAME/...``.  The spec parser
has already refused an unknown name or option key (``QDISCS`` in dcnlab/model/topology.py,
a copy of the switch's registry held to it by a test); the switch's registry checks the
values too and refuses to start on a bad one (the error names the port and the option),
so a new discipline needs no change here.  ``@host`` means
the switch ports facing hosts, ``@fabric`` those facing other switches, no scope every
switch port.  An explicit ``egress=`` replaces the default drop-tail and with it the
spec's ``buffer=``/``ecn=`` on those ports; like them, it needs a link rate.

Switch options (``Network(switch_options={...})``, all optional):

==================  ======================================================================
``select_mode``     load balancer of select groups, ``NAME[/KEY=VALUE]...``: ``hash``
                    (default), ``rr``, ``random`` (dcnlab/model/balancers.py)
``fail_mode``       ``secure`` (default) or ``standalone`` (MAC learning without controller)
``seed``            int: seeds ``random`` selection and jitter; switch N gets seed + dpid
``stats_interval_ms``  stats file interval (default 100)
``host_shaping``    bool (default True): htb at the link rate on host egress (see above)
``fold_host_delay`` bool (default True): host-link delay/jitter doubled on switch -> host
``verbose``         0, 1 (default: connection and port events) or 2, into the switch log
``batch``           frames per recvmmsg/sendmmsg (switch default 64)
``tables``          number of flow tables (switch default 16)
``max_flows``       entries per flow table at most; beyond, flow mods get TABLE_FULL
``extra_args``      list of further ``dcnlab-switch`` arguments, appended verbatim
==================  ======================================================================

Per switch, in the run directory: ``<name>.stats.jsonl`` (see switch_ext/README.md, "Stats
file") and ``<name>.switch.log``, where ``<name>`` is the spec name (``s1``).  The run
directory is removed after the run unless ``Network(run_dir=...)`` was given.  Read them
during the run through the switch object: ``net.switch("s1").stats_file``,
``.stats()``, ``.stats_history()``, ``.port_stats()`` (also behind ``net.port_stats``),
``.switch_pid``.

The binary: ``$DCNLAB_SWITCH_BINARY`` if set, else ``switch_ext/target/release/
dcnlab-switch`` of this source tree, else ``dcnlab-switch`` on PATH.  Build it with
``cd switch_ext && cargo build --release`` (scripts/setup.sh runs exactly that).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

from mininet.node import Switch

from dcnlab.model.balancers import check_balancer

from .shell import lines
from .spec import LinkParams, TopologySpec
from .switches import SwitchContext, SwitchKindError, bind, register_switch_kind

log = logging.getLogger(__name__)

BINARY_ENV = "DCNLAB_SWITCH_BINARY"
SOURCE_BINARY = (Path(__file__).resolve().parent.parent / "switch_ext" / "target" / "release"
                 / "dcnlab-switch")
INSTALL_HINT = ("dcnlab-switch is built from source: `cd switch_ext && cargo build --release` "
                "(scripts/setup.sh does this; needs the Rust toolchain pinned in "
                "switch_ext/rust-toolchain.toml), or set DCNLAB_SWITCH_BINARY to a built "
                "binary; or use --switch ovs")
# Same offloads as the hosts (topo/network.py): a userspace switch must see whole,
# checksummed frames, and its own transmissions must not be left for offload.
PORT_OFFLOADS = "tx off tso off gso off"
HOST_HTB_HANDLE = "5:"  # the handle Mininet's TCIntf uses, so `tc` output looks familiar
START_TIMEOUT = 10.0  # seconds for a switch to write its first stats line
STOP_TIMEOUT = 5.0
FAIL_MODES = ("secure", "standalone")


def default_binary() -> str:
    """Where dcnlab-switch is expected (see the module doc); not checked for existence."""
    env = os.environ.get(BINARY_ENV)
    if env:
        return env
    if SOURCE_BINARY.parent.parent.parent.is_dir():  # a source checkout with switch_ext/
        return str(SOURCE_BINARY)
    return "dcnlab-switch"


def find_binary(binary: str | None = None) -> str:
    """The absolute path of an executable dcnlab-switch, or SwitchKindError saying how to
    build it."""
    wanted = binary or default_binary()
    found = shutil.which(wanted)  # a path with a directory part is checked as is
    if found is None:
        raise SwitchKindError(f"switch kind 'ext': {wanted} not found or not executable. "
                              f"{INSTALL_HINT}")
    return str(Path(found).absolute())


class ExtSwitchError(RuntimeError):
    """A dcnlab-switch process could not be started or stopped; the message says why."""


# ---------------------------------------------------------------------------
# Options


@dataclass(frozen=True)
class ExtOptions:
    """The ``switch_options`` the ext kind understands (see the module doc)."""

    select_mode: str = "hash"
    fail_mode: str = "secure"
    seed: int | None = None
    stats_interval_ms: int = 100
    host_shaping: bool = True
    fold_host_delay: bool = True
    verbose: int = 1
    batch: int | None = None
    tables: int | None = None
    max_flows: int | None = None
    extra_args: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> ExtOptions:
        """Validate ``switch_options``; unknown keys and bad values raise SwitchKindError."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise SwitchKindError(f"switch kind 'ext': unknown switch option(s) "
                                  f"{', '.join(unknown)}; known: {', '.join(sorted(known))}")
        values = dict(options)
        if "extra_args" in values:
            extra = values["extra_args"]
            if isinstance(extra, str) or not all(isinstance(a, str) for a in extra):
                raise SwitchKindError("switch option extra_args must be a list of strings")
            values["extra_args"] = tuple(extra)
        opts = cls(**values)
        opts._check()
        return opts

    def _check(self) -> None:
        def bad(key: str, value: object, want: str) -> SwitchKindError:
            return SwitchKindError(f"switch option {key}={value!r}: expected {want}")

        try:
            check_balancer(self.select_mode)
        except (ValueError, TypeError) as e:
            raise SwitchKindError(f"switch option select_mode={self.select_mode!r}: {e}") from None
        if self.fail_mode not in FAIL_MODES:
            raise bad("fail_mode", self.fail_mode, " or ".join(FAIL_MODES))
        for key in ("seed", "batch", "tables", "max_flows"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 0):
                raise bad(key, value, "a non-negative integer")
        if (not isinstance(self.stats_interval_ms, int) or isinstance(self.stats_interval_ms,
                                                                      bool)
                or self.stats_interval_ms < 1):
            raise bad("stats_interval_ms", self.stats_interval_ms, "a positive integer")
        if self.verbose not in (0, 1, 2):
            raise bad("verbose", self.verbose, "0, 1 or 2")
        for key in ("host_shaping", "fold_host_delay"):
            if not isinstance(getattr(self, key), bool):
                raise bad(key, getattr(self, key), "True or False")


# ---------------------------------------------------------------------------
# Link parameters -> per-port switch options (pure; unit-tested without a network)


@dataclass(frozen=True)
class PortPlan:
    """What one switch port needs: its spec link's parameters and what is at the far end."""

    port: int
    peer: str  # spec name of the node at the other end
    peer_port: int  # its port (host ends: interface index)
    peer_is_host: bool
    params: LinkParams


def plan_ports(spec: TopologySpec, switch: str) -> dict[int, PortPlan]:
    """Port number -> :class:`PortPlan` for every spec link of ``switch`` (a spec name)."""
    plans: dict[int, PortPlan] = {}
    for lk in spec.links:
        for here, port, there, there_port in ((lk.a, lk.a_port, lk.b, lk.b_port),
                                              (lk.b, lk.b_port, lk.a, lk.a_port)):
            if here == switch:
                plans[port] = PortPlan(port, there, there_port, not spec.is_switch(there),
                                       lk.params)
    return plans


def egress_options(params: LinkParams, towards_host: bool, fold_host_delay: bool = True,
                   what: str = "") -> list[str]:
    """``--port`` options (``rate=..``, ``delay=..``, ...) for a switch's egress on a link.

    The egress discipline is the spec's ``egress=`` for this kind of port, passed through
    verbatim, else the default drop-tail configured by ``buffer=``/``ecn=``.  Either
    without a rate is dropped with an EmulationWarning: no queue ever forms without a
    rate, and the switch refuses the combination.
    """
    factor = 2 if towards_host and fold_host_delay else 1
    opts: list[str] = []
    if params.rate_mbit is not None:
        opts.append(f"rate={round(params.rate_mbit * 1e6)}")
    if params.delay_us:
        opts.append(f"delay={params.delay_us * factor}us")
    if params.jitter_us:
        opts.append(f"jitter={params.jitter_us * factor}us")
        if params.reorder:
            opts.append("reorder")
    discipline = params.qdisc("egress", towards_host)
    if discipline is not None:
        # An explicit discipline replaces the default one, and with it buffer=/ecn=.
        queued = [f"egress={discipline}"]
    else:
        queued = [f"buffer={params.buffer_pkts}p" if params.buffer_pkts is not None else "",
                  f"buffer={params.buffer_bytes}b" if params.buffer_bytes is not None else "",
                  f"ecn={params.ecn_threshold_pkts}p"
                  if params.ecn_threshold_pkts is not None else ""]
        queued = [q for q in queued if q]
    if queued and params.rate_mbit is None:
        # Imported here: network.py imports the switch registry, which imports us lazily.
        from .network import EmulationWarning

        warnings.warn(f"{what or 'link'}: {', '.join(queued)} ignored: buffer and ECN need "
                      "a link rate (without one no queue forms)", EmulationWarning,
                      stacklevel=2)
    elif queued:
        opts.extend(queued)
    return opts


def port_options(params: LinkParams, towards_host: bool, fold_host_delay: bool = True,
                 what: str = "") -> list[str]:
    """All ``--port`` options of one switch port: its egress (:func:`egress_options`) and,
    if the spec gives one for this kind of port, its ingress discipline, verbatim."""
    opts = egress_options(params, towards_host, fold_host_delay, what)
    discipline = params.qdisc("ingress", towards_host)
    if discipline is not None:
        opts.append(f"ingress={discipline}")
    return opts


# Switch-to-switch veths carry the hosts' 1500-byte packets plus an overlay label (CONGA's
# MPLS label: 4 bytes); a packet socket refuses to send a frame longer than the MTU plus
# the Ethernet header unless it is VLAN-tagged (docs/platform.md), so they get room.
FABRIC_MTU = 1600


def host_htb_commands(intf: str, rate_mbit: float) -> str:
    """Shell commands that pace a host interface at the link rate (htb, one class).

    Same shape as Mininet's TCIntf (burst 15k) with an explicit quantum, since the only
    class has nothing to share with and htb would otherwise warn about its quantum.
    """
    rate = f"{round(rate_mbit * 1e6)}bit"
    return (f"tc qdisc replace dev {intf} root handle {HOST_HTB_HANDLE} htb default 1 && "
            f"tc class replace dev {intf} parent {HOST_HTB_HANDLE} classid "
            f"{HOST_HTB_HANDLE}1 htb rate {rate} ceil {rate} burst 15k quantum 1514")


def switch_command(binary: str, name: str, dpid: int, controller: str | None,
                   ports: Sequence[tuple[int, str, Sequence[str]]], options: ExtOptions,
                   stats_file: Path | None) -> list[str]:
    """The dcnlab-switch command line; ports are (number, interface, port options)."""
    cmd = [binary, "--name", name, "--dpid", f"{dpid:#x}"]
    if controller:
        cmd += ["--controller", controller]
    for number, intf, opts in ports:
        cmd += ["--port", ",".join([f"{number}={intf}", *opts])]
    cmd += ["--select-mode", options.select_mode, "--fail-mode", options.fail_mode]
    if options.seed is not None:
        # Reproducible per run, but switches must not draw identical random sequences.
        cmd += ["--seed", str(options.seed + dpid)]
    if options.batch is not None:
        cmd += ["--batch", str(options.batch)]
    if options.tables is not None:
        cmd += ["--tables", str(options.tables)]
    if options.max_flows is not None:
        cmd += ["--max-flows", str(options.max_flows)]
    if stats_file is not None:
        cmd += ["--stats-file", str(stats_file),
                "--stats-interval-ms", str(options.stats_interval_ms)]
    cmd += ["-v"] * options.verbose
    cmd += list(options.extra_args)
    return cmd


def read_stats(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All complete lines of a stats file (a line still being written is skipped)."""
    rows = []
    try:
        with open(path) as fh:
            for line in fh:
                if line.endswith("\n"):
                    with contextlib.suppress(json.JSONDecodeError):
                        rows.append(json.loads(line))
    except FileNotFoundError:
        pass
    return rows


def _last_stats(path: Path) -> dict[str, Any] | None:
    """The last complete line, read from the end (the file grows 10 lines a second)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            chunk = 4096
            while True:
                start = max(0, size - chunk)
                fh.seek(start)
                data = fh.read(size - start)
                lines = data.split(b"\n")
                complete = lines[:-1]  # after the last "\n" is a partial line (or nothing)
                if start > 0:
                    complete = complete[1:]  # the first piece may be cut
                for raw in reversed(complete):
                    with contextlib.suppress(json.JSONDecodeError, UnicodeDecodeError):
                        return json.loads(raw)
                if start == 0:
                    return None
                chunk *= 4
    except FileNotFoundError:
        return None


# ---------------------------------------------------------------------------
# The Mininet switch


class ExtSwitch(Switch):
    """One ``dcnlab-switch`` process per Mininet switch.  Use through :func:`bind`: the
    class attributes below are set per run by the factory."""

    ext_ctx: ClassVar[SwitchContext | None] = None
    ext_binary: ClassVar[str] = ""
    ext_options: ClassVar[ExtOptions] = ExtOptions()
    ext_mnexec: ClassVar[str] = "mnexec"

    def __init__(self, name: str, dpid: str | None = None, **params: Any) -> None:
        super().__init__(name, dpid=dpid, **params)
        self.process: subprocess.Popen[bytes] | None = None
        ctx = self._ctx()
        self.spec_name = ctx.logical(name)
        self.stats_file = ctx.run_dir / f"{self.spec_name}.stats.jsonl"
        self.log_file = ctx.run_dir / f"{self.spec_name}.switch.log"
        self.argv: list[str] = []

    def _ctx(self) -> SwitchContext:
        if self.ext_ctx is None:
            raise ExtSwitchError("ExtSwitch is used through the 'ext' switch kind factory")
        return self.ext_ctx

    @property
    def switch_pid(self) -> int | None:
        """PID of the running dcnlab-switch process (None when not running)."""
        if self.process is None or self.process.poll() is not None:
            return None
        return self.process.pid

    # -- Mininet interface ------------------------------------------------

    def start(self, controllers: Sequence[Any]) -> None:
        if self.process is not None and self.process.poll() is None:
            return
        ctx, opts = self._ctx(), self.ext_options
        plans = plan_ports(ctx.spec, self.spec_name)
        ports: list[tuple[int, str, list[str]]] = []
        switch_cmds: list[str] = []
        host_cmds: dict[Any, list[str]] = {}
        for intf in self.intfList():
            number = self.ports.get(intf, 0)
            if number == 0 or intf.name == "lo":  # Mininet's control "interface"
                continue
            plan = plans.get(number)
            params = plan.params if plan else LinkParams()  # a link outside the spec
            towards_host = bool(plan and plan.peer_is_host)
            what = f"{self.spec_name} port {number}" + (f" -> {plan.peer}" if plan else "")
            ports.append((number, intf.name,
                          port_options(params, towards_host, opts.fold_host_delay, what)))
            switch_cmds.append(f"ip link set {intf.name} up && "
                               f"ethtool -K {intf.name} {PORT_OFFLOADS}")
            if plan is not None and not towards_host:
                switch_cmds.append(f"ip link set {intf.name} mtu {FABRIC_MTU}")
            peer = _peer_intf(intf)
            if towards_host and peer is not None:
                cmds = host_cmds.setdefault(peer.node, [])
                cmds.append(f"ip link set {peer.name} up")
                if opts.host_shaping and params.rate_mbit is not None:
                    cmds.append(host_htb_commands(peer.name, params.rate_mbit))
        self._run(self, switch_cmds, "switch ports")
        for host, cmds in host_cmds.items():
            self._run(host, cmds, f"host {host.name}")
        if len(controllers) > 1:
            log.warning("%s: dcnlab-switch supports one controller; using %s:%s",
                        self.name, controllers[0].IP(), controllers[0].port)
        controller = (f"tcp:{controllers[0].IP()}:{controllers[0].port}" if controllers
                      else None)
        self.argv = switch_command(self.ext_binary, self.name, int(self.dpid, 16),
                                      controller, ports, opts, self.stats_file)
        self._launch(ctx)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        self.stop_process()
        super().stop(deleteIntfs)

    def connected(self) -> bool:
        """Connected to the controller, as of the last stats line."""
        last = self.stats()
        return bool(last and last.get("connected"))

    # -- process ----------------------------------------------------------

    def _launch(self, ctx: SwitchContext) -> None:
        full = self.argv
        if ctx.netns_pid is not None:
            full = [self.ext_mnexec, "-a", str(ctx.netns_pid), *self.argv]
        with contextlib.suppress(FileNotFoundError):
            self.stats_file.unlink()  # wait for this process's first line, not an old one
        with open(self.log_file, "ab") as logfile:
            logfile.write(f"=== {time.strftime('%H:%M:%S')} {' '.join(self.argv)}\n"
                          .encode())
            logfile.flush()
            # Own session: a terminal Ctrl-C must not kill the switches before the
            # lifecycle stops things in order.
            self.process = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=logfile,
                                            stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise ExtSwitchError(f"dcnlab-switch {self.name} exited with code {code}\n"
                                     f"--- {self.log_file} ---\n{_tail(self.log_file)}")
            if self.stats_file.exists() and self.stats_file.stat().st_size > 0:
                return
            time.sleep(0.01)
        raise ExtSwitchError(f"dcnlab-switch {self.name} wrote no stats within "
                             f"{START_TIMEOUT:g} s\n--- {self.log_file} ---\n"
                             f"{_tail(self.log_file)}")

    def stop_process(self, timeout: float = STOP_TIMEOUT) -> int | None:
        """SIGTERM our process (by PID), wait, SIGKILL if it does not exit; returns its code.

        SIGTERM makes the switch write a final stats line."""
        proc = self.process
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s: dcnlab-switch (pid %d) ignored SIGTERM; killing it",
                            self.name, proc.pid)
                proc.kill()
                proc.wait(timeout)
        return proc.returncode

    @staticmethod
    def _run(node: Any, cmds: Sequence[str], what: str) -> None:
        if not cmds:
            return
        # As few shell round trips per node as its pty's line length allows (shell.py);
        # "; " keeps going, the output names failures.
        parts = [f"{{ {c}; }} 2>&1 || echo 'FAILED: {c}'" for c in cmds]
        out = "".join(node.cmd(line) for line in lines(parts, "; "))
        if "FAILED:" in out:
            raise ExtSwitchError(f"configuring {what} failed:\n{out.strip()}")

    # -- stats ------------------------------------------------------------

    def stats(self) -> dict[str, Any] | None:
        """The switch's last stats line (see switch_ext/README.md), or None before the first.

        At most ``stats_interval_ms`` old while the switch runs; after stop() it is the
        final line the switch wrote on SIGTERM."""
        return _last_stats(self.stats_file)

    def stats_history(self) -> list[dict[str, Any]]:
        """Every stats line so far (queue samples over time)."""
        return read_stats(self.stats_file)

    def port_stats(self) -> dict[int | str, dict[str, int | None]]:
        """Port counters in the shape of ``network.parse_port_stats`` (``rx_pkts``,
        ``rx_bytes``, ``rx_errs``, ``tx_pkts``, ``tx_bytes``, ``tx_drop``; ``rx_drop`` and
        ``tx_errs`` are None), plus every numeric field of the stats file (``drops``,
        ``ce_marks``, ``qlen``, ``qlen_max``, ...).  As of the last stats line."""
        last = self.stats() or {}
        result: dict[int | str, dict[str, int | None]] = {}
        for row in last.get("ports", []):
            counters: dict[str, int | None] = {
                key: value for key, value in row.items()
                if isinstance(value, int) and not isinstance(value, bool) and key != "port"}
            counters.update(rx_pkts=row.get("rx_packets"), rx_bytes=row.get("rx_bytes"),
                            rx_drop=None, rx_errs=row.get("rx_errors"),
                            tx_pkts=row.get("tx_packets"), tx_bytes=row.get("tx_bytes"),
                            tx_drop=row.get("tx_dropped"), tx_errs=None)
            result[int(row["port"])] = counters
        return result


def _peer_intf(intf: Any) -> Any:
    link = getattr(intf, "link", None)
    if link is None:
        return None
    return link.intf2 if link.intf1 is intf else link.intf1


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


# ---------------------------------------------------------------------------
# Registration


def validate_spec(spec: TopologySpec, extra: Mapping[str, Any]) -> None:
    """Runs ``dcnlab-switch --check`` on every switch's command line (placeholder
    interface names), so options the switch refuses (a bad queue discipline, say) fail
    with the switch's own message before any namespace or interface exists."""
    options = ExtOptions.from_mapping(extra)
    binary = find_binary()
    for sw in spec.switches:
        ports = []
        for number, plan in sorted(plan_ports(spec, sw.name).items()):
            what = f"{sw.name} port {number} -> {plan.peer}"
            with warnings.catch_warnings():  # the network warns once, when it builds
                warnings.simplefilter("ignore")
                opts = port_options(plan.params, plan.peer_is_host, options.fold_host_delay,
                                    what)
            ports.append((number, f"check{number}", opts))
        if not ports:
            continue
        cmd = switch_command(binary, sw.name, sw.dpid, None, ports, options, None)
        r = subprocess.run([*cmd, "--check"], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            err = r.stderr.strip()
            message = err.splitlines()[0] if err else f"exit status {r.returncode}"
            raise ExtSwitchError(f"switch {sw.name}: "
                                 f"{message.removeprefix('dcnlab-switch: error: ')}")



def _ext_factory(ctx: SwitchContext) -> type[Switch]:
    options = ExtOptions.from_mapping(ctx.extra)
    binary = find_binary()
    mnexec = shutil.which("mnexec") or "mnexec"
    return bind(ExtSwitch, ctx, ext_ctx=ctx, ext_binary=binary, ext_options=options,
                ext_mnexec=mnexec)


EXT_KIND = register_switch_kind(
    "ext", _ext_factory, emulates_links=True, veth_tap=True,
    # A path with a directory part is checked as is by the preflight (shutil.which).
    requires=(default_binary(), "ethtool", "tc"),
    install_hint=INSTALL_HINT,
    description="dcnlab-switch (switch_ext): per-packet select groups, link emulation",
    validate=validate_spec,
    replace=True,  # importing under a second name must not fail
)
