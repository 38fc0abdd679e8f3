"""What UC3 costs: host agent CPU per report and per allocation (native loop next to the
Python one), and the controller's allocation round time.

Two measurements, printed as tables (speed lives here, never in tests):

1. **Agent**: each engine (``--engine python``, the reference loop, and ``native``,
   ``dcnlab-uc3-agentd``) runs as ``python -m dcnlab.hosts.uc3_agent`` does in a run: its
   own cgroup and BPF program (root), with ``--flows`` loopback TCP connections of this
   process in that cgroup (both ends: 2 x flows per report).  A controller client
   connects; the agent process and its children are measured from outside
   (/proc/PID/schedstat, in ns) for ``--seconds`` with reports only (CPU per report: map
   read, samples, signed report, a wake-up; the state file at most once a second), then
   for ``--seconds`` with an allocation for its flows every ``--alloc-every`` s as well
   (CPU per alloc message: parse, checks, map updates with leases, ack).  Both engines in
   one run, with their ratio, and the share of one core that ``--clients`` agents take at
   ``--interval`` (the goal: below 10 % at 64 clients and 0.2 s reports), without and
   with allocations at the notification interval.
2. **Controller, per allocation round**: fair shares at each flow's bottleneck, EMA,
   reallocation and BDP windows (:class:`~dcnlab.schemes.uc3.alloc.Allocator`) for
   10 .. 10,000 synthetic flows between random hosts of a fat-tree view, each on one of
   its shortest paths (the goal: a round over 10,000 flows below the notification
   interval, 0.05 s by default).

    python -m dcnlab.benchmarks.uc3_cost [--flows 2] [--clients 64] [--interval 0.2]
                                          [--seconds 10] [--alloc-every 0.05]
                                          [--k 8] [--rounds 5]

Measured here (2026-11-24, under the measurement lock, defaults; a shared 2-core VM with
other helpers' builds and tests running, load average ~5 at the start), CPU per report /
per alloc: Python 0.74 ms / 0.51 ms, native 0.11 ms / 0.10 ms (ratio 0.15 / 0.19).  64
agents every 0.2 s: Python 23.6 % of one core, native 3.5 % (goal met); with an
allocation to every agent every 0.05 s on top: Python 89 %, native 16 % (an upper bound:
in a run the app sends an agent an allocation only when its windows change, or as the
0.5 s keepalive).  End to end, ``dcnlab check --topo dumbbell:64,2,16 --app uc3 --switch
ext`` (64 agents, 0.1 s reports) measured ``agent_cpu`` 0.069 cores with the native loop
(Jain 0.993), where the Python loop had measured 0.57.  What is left
of a native wake-up is mostly the VM's (an empty epoll_wait timeout alone costs ~17 us
here, a socket wake-up more) and the kernel's walk of the flows map's buckets (one batched
read; the map is sized to a report's 4096 flows).  History: forking ``ss -tin`` per report
cost about 5 ms, an in-process sock_diag dump about 0.48 ms, before the program kept its
flows in a map.  An allocation round over 10,000 flows on fattree:8 takes about 54 ms,
close to the 50 ms default interval.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import networkx as nx

from dcnlab.controller.view import NetworkView
from dcnlab.hosts.uc3_agent import native
from dcnlab.hosts.uc3_agent import protocol as proto
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.client import AgentClient
from dcnlab.schemes.uc3.agents import child_pids
from dcnlab.schemes.uc3.alloc import Allocator, AllocConfig, FlowInput
from dcnlab.topo.spec import parse

FLOW_COUNTS = (10, 100, 1_000, 10_000)
NOTIFICATION_INTERVAL_S = 0.05
ENGINES = ("python", "native")
AGENT_GOAL = 0.10  # of one core, all agents together


@contextmanager
def loopback_flows(n: int) -> Iterator[list[socket.socket]]:
    """``n`` established loopback TCP connections (both ends open while in use)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(n)
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            c = socket.create_connection(server.getsockname())
            socks += [c, server.accept()[0]]
            c.sendall(b"x" * 4096)
        yield socks
    finally:
        for s in socks:
            s.close()
        server.close()


def cpu_ns(pid: int) -> int:
    """CPU time a process has run, in ns (/proc/PID/schedstat: exact, unlike the clock
    ticks of /proc/PID/stat, which are 10 ms: a native tick is ~100 times less)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def tree_cpu_ns(pid: int) -> int:
    """The agent process and its children (the native loop under ``--engine native``)."""
    return cpu_ns(pid) + sum(tree_cpu_ns(child) for child in child_pids(pid))


@contextmanager
def in_cgroup(cgroup: Path) -> Iterator[None]:
    """This process in ``cgroup`` for the block (the sockets it opens there are the
    cgroup's flows), then back where it came from."""
    home = next(line.split("::", 1)[1] for line in
                Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
    (cgroup / "cgroup.procs").write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        (cgroup.parent / home.lstrip("/") / "cgroup.procs").write_text(f"{os.getpid()}\n")


class _CountingClient(AgentClient):
    """The controller's client, counting the agent's reports and acks."""

    reports = 0
    acks = 0

    def _dispatch(self, msg: proto.AgentMessage) -> None:
        if msg.type == "report":
            self.reports += 1
        elif msg.type == "ack":
            self.acks += 1
        super()._dispatch(msg)


@dataclass(frozen=True)
class AgentCost:
    per_report_s: float  # CPU per report tick, controller connected, no allocations
    per_alloc_s: float  # extra CPU per alloc message (parse, map updates, ack)
    flows: int  # flows per report


@contextmanager
def agent_process(engine: str, interval: float, timeout: float) -> Iterator[
        tuple[subprocess.Popen[bytes], int, bytes, Path]]:
    """``python -m dcnlab.hosts.uc3_agent --engine ENGINE`` on loopback (its own cgroup
    and BPF program), as HostAgents starts it; stopped (and cleaned up) on exit."""
    with tempfile.TemporaryDirectory(prefix="dcnlab-uc3cost-") as tmp:
        secret = secrets.token_hex(32).encode()
        (Path(tmp) / "secret").write_bytes(secret)
        state = Path(tmp) / "state.json"
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [sys.executable, "-m", "dcnlab.hosts.uc3_agent", "--engine", engine,
             "--port", str(port), "--secret-file", str(Path(tmp) / "secret"),
             "--interval", f"{interval:g}", "--timeout", f"{timeout:g}",
             "--tag", f"cost-{engine}-{os.getpid()}", "--state-file", str(state)],
            stdout=subprocess.DEVNULL, stderr=open(Path(tmp) / "log", "wb"))  # noqa: SIM115
        try:
            deadline = time.monotonic() + 30
            while not state.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{engine} agent did not start: "
                                       f"{(Path(tmp) / 'log').read_text()[-2000:]}")
                time.sleep(0.05)
            yield proc, port, secret, Path(json.loads(state.read_text())["cgroup"])
        finally:
            proc.terminate()  # ours
            proc.wait(timeout=30)


def agent_cost(engine: str, flows: int, interval: float, seconds: float,
               alloc_every: float) -> AgentCost:
    """CPU of one agent process (its children included), measured from outside as a
    controller drives it: ``seconds`` of reports only, then ``seconds`` with an
    allocation for its flows every ``alloc_every`` (the app's notification interval)."""
    with agent_process(engine, interval, timeout=2.0) as (proc, port, secret, cgroup), \
            ExitStack() as stack:
        with in_cgroup(cgroup):
            socks = stack.enter_context(loopback_flows(flows))
        client = _CountingClient("127.0.0.1", port, secret, refresh_s=3600).start()
        stack.callback(client.stop)
        if not client.wait_connected(10):
            raise RuntimeError(f"no connection to the {engine} agent: {client.last_error}")
        time.sleep(1.0)  # the first reports, caches warm
        assert client.last_report is not None
        seen = len(client.last_report.flows)
        c0, r0 = tree_cpu_ns(proc.pid), client.reports
        time.sleep(seconds)
        c1, r1, a1 = tree_cpu_ns(proc.pid), client.reports, client.acks
        per_report = (c1 - c0) / 1e9 / max(r1 - r0, 1)
        server = socks[0].getpeername()[1]
        client.set_clamps({Tuple4("127.0.0.1", s.getsockname()[1], "127.0.0.1", server): 1000
                           for s in socks[::2]})  # large: the flows are idle anyway
        client.refresh_s = alloc_every  # an alloc every interval from now on
        time.sleep(seconds)
        c2, r2, a2 = tree_cpu_ns(proc.pid), client.reports, client.acks
        per_alloc = max((c2 - c1) / 1e9 - (r2 - r1) * per_report, 0.0) / max(a2 - a1, 1)
    return AgentCost(per_report, per_alloc, seen)


def synthetic_flows(view: NetworkView, n: int, seed: int = 1) -> dict[int, FlowInput]:
    """``n`` flows between random host pairs, each on a random shortest path."""
    rng = random.Random(seed)
    hosts = view.hosts
    paths: dict[tuple[int, int], list[list[int]]] = {}
    flows = {}
    for i in range(n):
        a, b = rng.sample(hosts, 2)
        key = (a.dpid, b.dpid)
        if key not in paths:
            paths[key] = list(nx.all_shortest_paths(view.graph, a.dpid, b.dpid))
        switches = rng.choice(paths[key])
        links = [("host", a.ip), *zip(switches, switches[1:], strict=False), ("host", b.ip)]
        flows[i] = FlowInput(path=tuple(links), rtt_s=rng.uniform(0.001, 0.02), mss=1448,
                             throughput_bps=rng.uniform(1e6, 1e9), edge=a.dpid)
    return flows


def allocation_round_s(view: NetworkView, n: int, rounds: int) -> float:
    flows = synthetic_flows(view, n)
    capacity = {link: 10e9 for f in flows.values() for link in f.path}
    allocator = Allocator(AllocConfig())
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        allocator.allocate(flows, capacity)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, default=2, help="flows per agent (default 2)")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--interval", type=float, default=0.2, help="report period, s")
    ap.add_argument("--k", type=int, default=8, help="fat-tree K of the controller's view")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=10.0,
                    help="length of each agent measurement phase, s")
    ap.add_argument("--alloc-every", type=float, default=NOTIFICATION_INTERVAL_S,
                    help="controller allocation period in the second phase, s")
    args = ap.parse_args()

    engines = [e for e in ENGINES if e != "native" or native.binary() is not None]
    if len(engines) < len(ENGINES):
        print(f"(native agent not built: {native.BINARY}; scripts/setup.sh builds it)")
    costs = {e: agent_cost(e, args.flows, args.interval, args.seconds, args.alloc_every)
             for e in engines}
    print(f"agent CPU, whole process, {args.seconds:g} s per phase, "
          f"{costs[engines[0]].flows} flow(s) per report:")
    print(f"{'engine':>8} {'per report':>11} {'per alloc':>10} "
          f"{f'{args.clients} x reports':>15} {f'+ allocs/{args.alloc_every:g}s':>15}")
    for engine, c in costs.items():
        reports = args.clients * c.per_report_s / args.interval
        allocs = reports + args.clients * c.per_alloc_s / args.alloc_every
        print(f"{engine:>8} {c.per_report_s * 1e3:>9.3f}ms {c.per_alloc_s * 1e3:>8.3f}ms "
              f"{reports:>14.1%} {allocs:>14.1%}")
    if len(costs) == 2:
        py, nat = costs["python"], costs["native"]
        print(f"native / python: {nat.per_report_s / py.per_report_s:.3f} per report, "
              f"{nat.per_alloc_s / max(py.per_alloc_s, 1e-12):.3f} per alloc")
    share = args.clients * costs[engines[-1]].per_report_s / args.interval
    print(f"{args.clients} agents ({engines[-1]}) every {args.interval:g} s: {share:.1%} of "
          f"one core (goal < {AGENT_GOAL:.0%}: {'met' if share < AGENT_GOAL else 'NOT met'})")

    view = NetworkView.from_topology(parse(f"fattree:{args.k}"))
    print(f"\ncontroller: allocation round on fattree:{args.k} ({len(view.hosts)} hosts)")
    interval = f"of a {NOTIFICATION_INTERVAL_S:g} s interval"
    print(f"{'flows':>7} {'round ms':>9} {interval:>22}")
    for n in FLOW_COUNTS:
        t = allocation_round_s(view, n, args.rounds)
        print(f"{n:>7} {t * 1e3:>9.2f} {t / NOTIFICATION_INTERVAL_S:>21.2f}x", flush=True)


if __name__ == "__main__":
    main()
