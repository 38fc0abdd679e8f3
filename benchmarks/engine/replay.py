"""Replay one flow list: start an agent per host, start them together, collect records.

The runner side of agent.py.  It knows nothing about Mininet: an :class:`Endpoint` says
how to start a process "in" a host (``Mininet host.popen`` in a real run, plain
``subprocess.Popen`` on loopback in tests and benchmarks).

One replay:
1. write a plan per host and start its agent; wait until every agent listens ("ready");
2. send ``start T0`` (T0 a moment ahead, so all agents start from the same instant);
3. wait until every agent has ended its flows ("idle") or the deadline passes, watching
   for agents that die -- their death is reported, the others carry on, so every flow
   still gets a record;
4. send ``halt`` to every agent and wait until each has aborted its senders, then
   ``stop`` (so no receiver closes under a sender that is still sending: the sender would
   see a reset and record a failure, where the flow was only cut by the deadline);
   collect and merge the records (sender and receiver side per flow).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

from dcnlab.schemes.base import Transport

from .workloads import Flow

AGENT_MODULE = "dcnlab.benchmarks.engine.agent"
DEFAULT_PORT = 5001
READY_TIMEOUT = 30.0
START_DELAY = 0.5  # seconds between "start" and T0: every agent must have read it by then
STOP_TIMEOUT = 10.0
HALT_TIMEOUT = 10.0  # for every agent to abort its senders before any receiver stops
STDERR_TAIL = 15
# The sender's reordering diagnosis (agent.reorder_fields), carried into flows.csv as is.
REORDER_KEYS = ("reord_seen", "dsack_dups", "reordering")
RX_PREFIX = "rx_"  # rx_<host>.jsonl: receiver byte counts per flow (rx_interval > 0)


class ReplayError(RuntimeError):
    """Agents could not be started; nothing was replayed."""


class HostFiles(Protocol):
    """A host that does not share this machine's file system (a lab server): where the
    agent's plan and records live there, the interpreter that has dcnlab, and how files
    travel.  Mininet hosts share the file system and have none."""

    workdir: str  # a directory on the host, the run's own
    python: str

    def put(self, local: Path, remote: str) -> None: ...

    def get(self, remote: str, local: Path) -> None: ...


def program_on(files: HostFiles | None, name: str, local: Callable[[], str]) -> str:
    """A host part's program ``name`` on a host: beside the interpreter that has dcnlab
    on a lab server (its virtual environment's ``bin``, where ``dcnlab lab prepare``
    puts it), ``local()`` (this machine's build) on a host that shares these files."""
    if files is None:
        return local()
    return str(PurePosixPath(files.python).parent / name)


@dataclass
class Endpoint:
    """A host that runs an agent.

    ip: the address senders bind and peers connect to.
    popen: starts a process in the host: ``popen(argv, stdin=, stdout=, stderr=)``.
    port_range: per flow kind, the source-port range the agent may move within when the
        flow's port is still in use (from marking.py).
    cgroup_procs: a ``cgroup.procs`` file the agent joins before opening sockets (the
        cgroup of the scheme's host agent, whose BPF program governs the flows it sends).
    addresses: all the host's addresses, for a scheme transport that uses several.
    """

    name: str
    ip: str
    popen: Callable[..., subprocess.Popen[bytes]] = subprocess.Popen
    port: int = DEFAULT_PORT
    congestion: str | None = None
    cgroup_procs: str | None = None
    # every address of the host (multi-homed hosts: one per interface); () = (ip,)
    addresses: tuple[str, ...] = ()
    # None: the host sees run_dir (Mininet); else its plan goes there and its records
    # come back from there
    files: HostFiles | None = None


@dataclass
class ReplayResult:
    records: dict[int, dict[str, Any]]  # flow id -> merged record (see merge_records)
    errors: list[str]  # agents that died or misbehaved; empty on a clean replay
    agents: dict[str, dict[str, Any]]  # host -> pid, exit code, lateness stats
    wall_start: float  # time.time() at T0
    elapsed: float  # seconds from T0 to stop


@dataclass
class _Agent:
    endpoint: Endpoint
    proc: subprocess.Popen[bytes]
    log: Path
    records: Path
    # (the host's copy, here) of the files its agent writes, for a host with HostFiles
    fetch: list[tuple[str, Path]] = field(default_factory=list)
    buffer: bytes = b""
    ready: bool = False
    idle: bool = False
    halted: bool = False
    dead: bool = False
    closed: bool = False
    stopped: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.endpoint.name


def plan_for(endpoint: Endpoint, flows: Iterable[Flow], hosts: dict[str, Endpoint],
             records: os.PathLike[str] | str, samples: os.PathLike[str] | str | None,
             sample_interval: float, port_ranges: dict[bool, tuple[int, int]] | None = None,
             elephant: Callable[[Flow], bool] | None = None,
             rx: os.PathLike[str] | str | None = None,
             rx_interval: float = 0.0, transport: Transport | None = None,
             transport_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON plan of one agent: the flows it sends and where its records go.

    With a scheme ``transport``, the agent runs its receiver (plan ``serve``) and sends
    each TCP flow as the transport's sender process (flow ``argv``)."""
    plan_flows = []
    options = dict(transport_options or {})
    program = (program_on(endpoint.files, transport.program, transport.local_program)
               if transport is not None else "")
    for f in flows:
        if f.src != endpoint.name:
            continue
        dst = hosts[f.dst]
        row: dict[str, Any] = {
            "id": f.id, "dst_ip": dst.ip, "dst_port": dst.port, "src_ip": endpoint.ip,
            "size": f.size, "start": f.start, "kind": f.kind, "stop": f.stop,
            "rate_mbit": f.rate_mbit, "sport": f.sport, "dscp": f.dscp}
        if port_ranges is not None:
            row["port_range"] = list(port_ranges[bool(elephant and elephant(f))])
        if transport is not None and f.kind != "udp":
            if not f.size:
                raise ReplayError(f"flow {f.id}: long-lived flows cannot use transport "
                                  f"{transport.name} (it sends a known size)")
            row["argv"] = transport.send(program, f"{dst.ip}:{transport.port}", f.size,
                                         endpoint.addresses or (endpoint.ip,), options)
        plan_flows.append(row)
    return {"host": endpoint.name, "listen_ip": endpoint.ip, "port": endpoint.port,
            "records": str(records), "samples": str(samples) if samples else None,
            "sample_interval": sample_interval, "congestion": endpoint.congestion,
            "rx": str(rx) if rx else None, "rx_interval": rx_interval if rx else 0.0,
            "cgroup_procs": endpoint.cgroup_procs, "flows": plan_flows,
            "serve": (transport.serve(program, f"{endpoint.ip}:{transport.port}", options)
                      if transport is not None else None)}


def replay(flows: list[Flow], hosts: dict[str, Endpoint], run_dir: Path, *,
           drain: float, horizon: float | None = None, sample_interval: float = 0.0,
           port_ranges: dict[bool, tuple[int, int]] | None = None,
           elephant: Callable[[Flow], bool] | None = None,
           on_done: Callable[[int, str], None] | None = None,
           python: str = sys.executable, rx_interval: float = 0.0,
           transport: Transport | None = None,
           transport_options: Mapping[str, Any] | None = None,
           on_start: Callable[[float], None] | None = None) -> ReplayResult:
    """Run ``flows`` on agents in ``hosts``; every flow gets a merged record.

    horizon: seconds after T0 when the last flow has been scheduled to start (or stop);
    after horizon + drain, flows still running are stopped and recorded as unfinished.
    rx_interval > 0: every agent writes its receiver-side byte counts per flow to
    ``rx_<host>.jsonl`` in run_dir on that period (see agent.py; read by fairness.py).
    transport: the scheme's transport (see :func:`plan_for`) with its options.
    on_start: called with T0 (time.monotonic()) once it is fixed, before the agents hear
    it (the runner's fabric events count from it).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    used = sorted({f.src for f in flows} | {f.dst for f in flows})
    unknown = [h for h in used if h not in hosts]
    if unknown:
        raise ReplayError(f"flows use host(s) without an endpoint: {', '.join(unknown)}")
    if horizon is None:
        horizon = max([max(f.start, f.stop or 0.0) for f in flows], default=0.0)
    agents: dict[str, _Agent] = {}
    sel = selectors.DefaultSelector()
    try:
        for name in used:
            agents[name] = _start_agent(hosts[name], flows, hosts, run_dir, sample_interval,
                                        port_ranges, elephant, python, rx_interval,
                                        transport, transport_options)
            sel.register(agents[name].proc.stdout, selectors.EVENT_READ, agents[name])
        _wait_ready(agents, sel)
        t0 = time.monotonic() + START_DELAY
        wall_start = time.time() + START_DELAY
        if on_start is not None:
            on_start(t0)
        for agent in agents.values():
            _send(agent, f"start {t0!r}\n")
        deadline = t0 + horizon + drain
        while not all(a.idle or a.dead for a in agents.values()):
            now = time.monotonic()
            if now >= deadline:
                break
            _pump(agents, sel, min(0.5, deadline - now), on_done)
        stopped_at = time.monotonic()
        _halt(agents, sel, on_done)
        for agent in agents.values():
            _send(agent, "stop\n")
            _close_stdin(agent)
        _wait_stopped(agents, sel, on_done)
    finally:
        for agent in agents.values():
            _reap(agent)
        sel.close()
        for agent in agents.values():
            _fetch(agent)
    errors = [e for a in agents.values() for e in a.errors]
    records = merge_records(_read_records(a.records for a in agents.values()), flows,
                            dead={a.name for a in agents.values() if a.dead})
    info = {a.name: {"pid": a.proc.pid, "exit": a.proc.returncode, **a.stopped}
            for a in agents.values()}
    return ReplayResult(records, errors, info, wall_start, stopped_at - t0)


def _start_agent(endpoint: Endpoint, flows: list[Flow], hosts: dict[str, Endpoint],
                 run_dir: Path, sample_interval: float,
                 port_ranges: dict[bool, tuple[int, int]] | None,
                 elephant: Callable[[Flow], bool] | None, python: str,
                 rx_interval: float = 0.0, transport: Transport | None = None,
                 transport_options: Mapping[str, Any] | None = None) -> _Agent:
    records = run_dir / f"records_{endpoint.name}.jsonl"
    samples = run_dir / f"samples_{endpoint.name}.jsonl" if sample_interval > 0 else None
    rx = run_dir / f"{RX_PREFIX}{endpoint.name}.jsonl" if rx_interval > 0 else None
    for path in (records, samples, rx):
        if path is not None:
            path.unlink(missing_ok=True)  # a rerun into the same directory starts afresh
    plan_path = run_dir / f"plan_{endpoint.name}.json"
    remote = endpoint.files
    fetch: list[tuple[str, Path]] = []

    def there(local: Path | None) -> str | None:
        """Where the agent writes ``local``'s file: itself, or the host's copy of it."""
        if local is None:
            return None
        if remote is None:
            return str(local)
        fetch.append((str(PurePosixPath(remote.workdir) / local.name), local))
        return fetch[-1][0]

    plan = plan_for(endpoint, flows, hosts, there(records) or "", there(samples),
                    sample_interval, port_ranges, elephant, there(rx), rx_interval,
                    transport, transport_options)
    plan_path.write_text(json.dumps(plan))
    agent_plan = str(plan_path)
    log = run_dir / f"agent_{endpoint.name}.log"
    try:  # a lab host can be lost here too: no agent, and the replay says which
        if remote is not None:
            agent_plan = str(PurePosixPath(remote.workdir) / plan_path.name)
            remote.put(plan_path, agent_plan)
            python = remote.python
        with open(log, "wb") as stderr:
            proc = endpoint.popen([python, "-m", AGENT_MODULE, agent_plan],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=stderr)
    except Exception as exc:  # noqa: BLE001 - any host's failure is this replay's error
        raise ReplayError(f"agent on {endpoint.name} could not start: {exc}") from None
    assert proc.stdout is not None
    os.set_blocking(proc.stdout.fileno(), False)
    return _Agent(endpoint, proc, log, records, fetch)


def _fetch(agent: _Agent) -> None:
    """A remote host's records, samples and receiver counts, copied here; one the agent
    never wrote (it died first) is an error of that agent, not of the replay."""
    files = agent.endpoint.files
    for remote_path, local in agent.fetch if files is not None else []:
        try:
            files.get(remote_path, local)
        except Exception as exc:  # noqa: BLE001 - the host's fault is reported, not raised
            agent.errors.append(f"agent on {agent.name}: could not fetch {remote_path}: "
                                f"{exc}")


def _send(agent: _Agent, text: str) -> None:
    if agent.dead or agent.closed or agent.proc.stdin is None:
        return
    try:
        agent.proc.stdin.write(text.encode())
        agent.proc.stdin.flush()
    except (BrokenPipeError, OSError):
        pass  # it died; _pump notices and reports it


def _close_stdin(agent: _Agent) -> None:
    agent.closed = True
    if agent.proc.stdin is not None:
        with contextlib.suppress(OSError):
            agent.proc.stdin.close()


def _wait_ready(agents: dict[str, _Agent], sel: selectors.BaseSelector) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not all(a.ready for a in agents.values()):
        dead = [a for a in agents.values() if a.dead or a.errors]
        if dead:
            raise ReplayError("agent(s) failed to start: " + "; ".join(
                e for a in dead for e in (a.errors or [f"{a.name}: exited"])))
        if time.monotonic() > deadline:
            late = [a.name for a in agents.values() if not a.ready]
            raise ReplayError(f"agents not ready after {READY_TIMEOUT:g} s: "
                              f"{', '.join(late)}")
        _pump(agents, sel, 0.2, None)


def _pump(agents: dict[str, _Agent], sel: selectors.BaseSelector, timeout: float,
          on_done: Callable[[int, str], None] | None) -> None:
    """Read agents' events for up to ``timeout`` seconds; notice deaths."""
    for key, _mask in sel.select(timeout):
        agent: _Agent = key.data
        stream: IO[bytes] = key.fileobj  # type: ignore[assignment]
        try:
            chunk = os.read(stream.fileno(), 65536)
        except BlockingIOError:
            continue
        if not chunk:
            sel.unregister(stream)
            _on_exit(agent)
            continue
        agent.buffer += chunk
        while b"\n" in agent.buffer:
            line, agent.buffer = agent.buffer.split(b"\n", 1)
            _on_event(agent, line, on_done)


def _on_event(agent: _Agent, line: bytes, on_done: Callable[[int, str], None] | None) -> None:
    try:
        event = json.loads(line)
    except ValueError:
        return  # not ours (a stray print); the agent's stderr log has the details
    kind = event.get("event")
    if kind == "ready":
        agent.ready = True
    elif kind == "done" and on_done is not None:
        on_done(int(event["id"]), str(event.get("status", "")))
    elif kind == "idle":
        agent.idle = True
    elif kind == "halted":
        agent.halted = True
    elif kind == "stopped":
        agent.stopped = {k: v for k, v in event.items() if k != "event"}
    elif kind == "error":
        agent.errors.append(f"agent on {agent.name}: {event.get('message', '')}".strip())


def _on_exit(agent: _Agent) -> None:
    """stdout closed: the agent exited.  Before ``stop`` that is a death."""
    try:
        code = agent.proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        code = None
    if agent.closed and code == 0:
        return
    if not agent.dead:
        agent.dead = True
        how = f"was killed by signal {-code}" if code is not None and code < 0 else (
            f"exited with code {code}")
        agent.errors.append(
            f"agent on {agent.name} (pid {agent.proc.pid}) {how} during the run; its "
            f"unrecorded flows are marked agent_died. Log tail ({agent.log}):\n"
            f"{_tail(agent.log)}")


def _halt(agents: dict[str, _Agent], sel: selectors.BaseSelector,
          on_done: Callable[[int, str], None] | None) -> None:
    """Every live agent aborts its senders; returns when all say so (or after a timeout:
    ``stop`` halts too, the worst case is the reset this phase exists to avoid)."""
    for agent in agents.values():
        _send(agent, "halt\n")
    deadline = time.monotonic() + HALT_TIMEOUT
    while time.monotonic() < deadline and not all(
            a.halted or a.dead for a in agents.values()):
        _pump(agents, sel, 0.2, on_done)


def _wait_stopped(agents: dict[str, _Agent], sel: selectors.BaseSelector,
                  on_done: Callable[[int, str], None] | None) -> None:
    deadline = time.monotonic() + STOP_TIMEOUT
    while sel.get_map() and time.monotonic() < deadline:
        _pump(agents, sel, 0.2, on_done)
    for agent in agents.values():
        if agent.proc.poll() is None:
            agent.errors.append(f"agent on {agent.name} (pid {agent.proc.pid}) did not stop "
                                f"within {STOP_TIMEOUT:g} s; killed")


def _reap(agent: _Agent) -> None:
    """Make sure the agent process we started is gone (by its own handle)."""
    proc = agent.proc
    if proc.poll() is None:
        _close_stdin(agent)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=2.0)
    if proc.poll() is None:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)
    if proc.stdout is not None:
        with contextlib.suppress(OSError):
            proc.stdout.close()


def _tail(path: Path, lines: int = STDERR_TAIL) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def _read_records(paths: Iterable[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in paths:
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by a killed agent
    return rows


def merge_records(rows: list[dict[str, Any]], flows: list[Flow],
                  dead: set[str] | None = None) -> dict[int, dict[str, Any]]:
    """One record per flow from the sender ("tx") and receiver ("rx") records.

    Timing, status and retransmissions come from the sender; bytes received and
    out-of-order counts from the receiver when it wrote a record (it is the authority on
    what arrived), else from the sender's copy of the receiver's answer.  A flow without
    a sender record is "agent_died" when its sender's agent died, else "missing".
    """
    dead = dead or set()
    tx: dict[int, dict[str, Any]] = {}
    rx: dict[int, dict[str, Any]] = {}
    for row in rows:
        fid = row.get("id")
        if not isinstance(fid, int):
            continue
        (tx if row.get("role") == "tx" else rx)[fid] = row
    merged: dict[int, dict[str, Any]] = {}
    for flow in flows:
        t = tx.get(flow.id)
        r = rx.get(flow.id, {})
        if t is None:
            status = "agent_died" if flow.src in dead else "missing"
            t = {"status": status, "error": f"no sender record (agent on {flow.src})"}
        rec: dict[str, Any] = {
            "status": t.get("status", "missing"), "error": t.get("error", ""),
            "sport": t.get("sport", flow.sport), "start": t.get("start"),
            "end": t.get("end"), "fct": t.get("fct"), "late": t.get("late"),
            "retrans": t.get("retrans"), "rtt_us": t.get("rtt_us"),
            "min_rtt_us": t.get("min_rtt_us"),
            "result": t.get("result"),  # a scheme transport's own result line
            **{k: t.get(k) for k in REORDER_KEYS},
        }
        if flow.kind == "udp":
            rec.update(bytes=r.get("bytes", 0), ooo=r.get("ooo", 0), segs_in=r.get("pkts", 0),
                       pkts_sent=t.get("pkts_sent"), bytes_sent=t.get("bytes_sent"))
        else:
            rec["bytes"] = r["bytes"] if "bytes" in r else t.get("bytes")
            rec["ooo"] = t["ooo"] if t.get("ooo") is not None else r.get("ooo")
            rec["segs_in"] = (t["segs_in"] if t.get("segs_in") is not None
                              else r.get("segs_in"))
        if rec["status"] != "ok" and r.get("error") and not rec["error"]:
            rec["error"] = f"receiver: {r['error']}"
        merged[flow.id] = rec
    return merged
