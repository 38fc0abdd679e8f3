"""What UC3 costs: host agent CPU per report, and the controller's allocation round time.

Two measurements, printed as a table (speed lives here, never in tests):

1. **Agent, per report**: what one report costs an agent in CPU time: reading the flows
   of its cgroup from its BPF program's map, turning them into samples and encoding the
   signed report.  Measured with the agent's real program loaded (root: a cgroup and a
   sock_ops attachment) and this process in its cgroup with ``--flows`` loopback TCP
   connections.  From it: the share of one core that ``--clients`` agents take at
   ``--interval`` (the goal: below 10 % at 64 clients and 0.2 s reports).
2. **Controller, per allocation round**: fair shares at each flow's bottleneck, EMA,
   reallocation and BDP windows (:class:`~dcnlab.schemes.uc3.alloc.Allocator`) for
   10 .. 10,000 synthetic flows between random hosts of a fat-tree view, each on one of
   its shortest paths (the goal: a round over 10,000 flows below the notification
   interval, 0.05 s by default).

    python -m dcnlab.benchmarks.uc3_cost [--flows 2] [--clients 64] [--interval 0.2]
                                          [--k 8] [--rounds 5]

How agents read flows, measured here (2026-11-23, 2 cores shared with other work), CPU
per report: forking ``ss -tin`` about 5 ms; an in-process sock_diag dump about 0.48 ms
(almost all of it the kernel walking the whole TCP hash table, sized by the machine's
memory, whatever the number of flows); walking the program's map, which is what the
agent does now, about 0.09 ms with 4 flows when timed back to back.  The agent's whole
tick at its real pace (0.2 s apart: caches cold after each sleep, the state file once a
second) costs about 0.5 ms on the loaded machine: 64 agents every 0.2 s about 17 % of
one core, above the 10 % goal (end to end, with the controller's allocations,
``dcnlab check --topo dumbbell:64,2,16 --app uc3`` measured 0.57 cores at 0.1 s reports).
An allocation round over 10,000 flows on fattree:8 takes about 55 ms, close to the 50 ms
default interval.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import socket
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import networkx as nx

from dcnlab.controller.view import NetworkView
from dcnlab.hosts.uc3_agent.agent import Agent, AgentConfig, _Conn
from dcnlab.hosts.uc3_agent.bpf import ClampProgram
from dcnlab.schemes.uc3.alloc import Allocator, AllocConfig, FlowInput
from dcnlab.topo.spec import parse

FLOW_COUNTS = (10, 100, 1_000, 10_000)
NOTIFICATION_INTERVAL_S = 0.05
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


@contextmanager
def in_agent_cgroup() -> Iterator[ClampProgram]:
    """The agent's BPF program loaded on a cgroup of its own, with this process in it
    (so the sockets it opens next are the cgroup's flows); all undone on exit."""
    work = Path(tempfile.mkdtemp(prefix="dcnlab-uc3cost-"))
    program = ClampProgram(f"cost-{os.getpid()}", work)
    try:
        with program.member():
            yield program
    finally:
        program.close()
        shutil.rmtree(work, ignore_errors=True)


class _CountingWriter:
    """Stands in for the controller connection's stream: keeps the byte count only."""

    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def get_extra_info(self, name: str) -> tuple[str, int]:
        return ("127.0.0.1", 6690)


def agent_report_cpu(flows: int, interval: float, reports: int = 50) -> tuple[float, int]:
    """CPU seconds one agent tick costs (mean over ``reports`` ticks ``interval`` apart,
    so the state file is rewritten as often as in a run): the agent's own tick (read the
    map, sample, encode and sign the report, the periodic state file) with an
    authenticated controller connection, and how many flows a report held.  Not in it:
    handling the controller's allocations (``dcnlab check --app uc3`` reports the agents'
    CPU end to end as ``agent_cpu``)."""
    with tempfile.TemporaryDirectory(prefix="dcnlab-uc3cost-state-") as tmp, \
            in_agent_cgroup() as program, loopback_flows(flows):
        agent = Agent(AgentConfig(secret=b"k" * 32, state_file=Path(tmp) / "state.json"),
                      program=program)
        conn = _Conn(cast(asyncio.StreamWriter, _CountingWriter()), b"k" * 32)
        conn.authenticated = True
        agent.conns.add(conn)
        costs = []
        for _ in range(reports):
            t0 = time.process_time()
            agent._tick()
            costs.append(time.process_time() - t0)
            time.sleep(interval)
        seen = len(program.flow_samples())
    return statistics.fmean(costs), seen


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
    args = ap.parse_args()

    per_report, seen = agent_report_cpu(args.flows, args.interval)
    share = args.clients * per_report / args.interval
    print(f"agent: {per_report * 1e3:.3f} ms CPU per report of {seen} flow(s); "
          f"{args.clients} agents every {args.interval:g} s take {share:.1%} of one core "
          f"(goal < {AGENT_GOAL:.0%}: {'met' if share < AGENT_GOAL else 'NOT met'})")

    view = NetworkView.from_topology(parse(f"fattree:{args.k}"))
    print(f"\ncontroller: allocation round on fattree:{args.k} ({len(view.hosts)} hosts)")
    interval = f"of a {NOTIFICATION_INTERVAL_S:g} s interval"
    print(f"{'flows':>7} {'round ms':>9} {interval:>22}")
    for n in FLOW_COUNTS:
        t = allocation_round_s(view, n, args.rounds)
        print(f"{n:>7} {t * 1e3:>9.2f} {t / NOTIFICATION_INTERVAL_S:>21.2f}x", flush=True)


if __name__ == "__main__":
    main()
