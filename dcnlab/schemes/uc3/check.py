"""Fairness among long TCP flows with different RTTs, with and without UC3 (seed 004).

Used by ``dcnlab check --app uc3`` (:func:`uc3_fairness`) and the network tests.  A run
(:func:`fairness_run`) starts a receiver-side sink on the server and one long flow per
client, then takes each flow's mean rate over the run minus a warm-up and Jain's index
over them.  Plain TCP and UC3 run in the same network one after the other: plain first,
before any agent exists (the app then has nobody to allocate for), then with agents in
the clients and the senders in the agents' cgroups.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from dcnlab.benchmarks.longflows import jain, load, rates
from dcnlab.schemes.uc3.agents import AgentFiles, HostAgents
from dcnlab.topo.spec import TopologySpec

RUN_S = 14.0
WARMUP_S = 4.0  # slow start, first allocations, EMA start-up
MIN_JAIN = 0.95
CONGESTION = "reno"  # the paper's TCP NewReno
SINK_PORT = 5400


def fairness_run(net: Any, clients: list[str], server: str, out: Path, *,
                 seconds: float = RUN_S, warmup: float = WARMUP_S,
                 agents: HostAgents | None = None, port: int = SINK_PORT) -> dict[str, Any]:
    """One long flow per client to ``server``; per-flow rates and Jain's index."""
    py = sys.executable
    procs = []
    try:
        sink = net.host(server).popen(
            [py, "-m", "dcnlab.benchmarks.longflows", "sink", "--port", str(port),
             "--out", str(out), "--period", "0.1"], text=True)
        procs.append(sink)
        if sink.stdout.readline().strip() != "listening":
            raise RuntimeError(f"sink on {server} did not start")
        keys = {}
        for client in clients:
            cmd = [py, "-m", "dcnlab.benchmarks.longflows", "send", "--host",
                   net.host(server).IP(), "--port", str(port), "--seconds", f"{seconds:g}",
                   "--cc", CONGESTION, "--wait-go"]
            if agents is not None:
                cmd += ["--cgroup-procs", str(agents.cgroup_procs(client))]
            proc = net.host(client).popen(cmd, text=True, stdin=subprocess.PIPE)
            procs.append(proc)
            keys[client] = f"{net.host(client).IP()}:{int(proc.stdout.readline())}"
        # Every flow is connected; start them together, so that with many clients on a
        # loaded machine the last one does not begin after the measurement window.
        started = time.time()
        for proc in procs[1:]:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for proc in procs[1:]:
            proc.wait(timeout=seconds + 30)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
    rows = load(out)
    per_flow = rates(rows, started + warmup, started + seconds - 0.2, list(keys.values()))
    by_host = {c: per_flow.get(k, 0.0) for c, k in keys.items()}
    return {"jain": round(jain(list(by_host.values())), 4),
            "rates_mbit": {c: round(r / 1e6, 2) for c, r in by_host.items()},
            "total_mbit": round(sum(by_host.values()) / 1e6, 2)}


def rtt_pair(spec: TopologySpec) -> tuple[list[str], str]:
    """The shortest-RTT group-A client, the longest-RTT group-B client and the server.

    Group A is split into A' and A'' when the dumbbell has an outside switch."""
    clients = [h for h in spec.hosts if h.role == "client"]
    a = [h.name for h in clients if h.group.startswith("A")]
    b = [h.name for h in clients if h.group == "B"]
    server = next(h.name for h in spec.hosts if h.role == "server")
    return [a[0], b[-1]], server


def all_clients(spec: TopologySpec) -> tuple[list[str], str]:
    """Every TCP client of the dumbbell (both delay groups) and the server."""
    clients = [h.name for h in spec.hosts if h.role == "client"]
    server = next(h.name for h in spec.hosts if h.role == "server")
    return clients, server


def uc3_fairness(net: Any, spec: TopologySpec, files: AgentFiles,
                 ) -> tuple[dict[str, Any], list[str]]:
    """Plain TCP, then UC3, one long flow from every client; fails below Jain MIN_JAIN
    with UC3.  ``agent_cpu`` is what all agents together used during the UC3 run, in
    cores (CPU seconds over wall seconds), so the scheme's host-side cost is on record
    at every client count."""
    if spec.family != "dumbbell":
        return {}, ["the uc3 check needs a dumbbell topology (two delay groups)"]
    clients, server = all_clients(spec)
    plain = fairness_run(net, clients, server, files.directory / "rx-plain.jsonl")
    with HostAgents(net, files, clients) as agents:
        agents.wait_connected()
        cpu0, wall0 = agents.cpu_seconds(), time.monotonic()
        uc3 = fairness_run(net, clients, server, files.directory / "rx-uc3.jsonl",
                           agents=agents, port=SINK_PORT + 1)
        agent_cpu = (agents.cpu_seconds() - cpu0) / (time.monotonic() - wall0)
        state = net.state() or {}
    fields = {"jain": uc3["jain"], "jain_plain": plain["jain"], "clients": len(clients),
              "agent_cpu": round(agent_cpu, 4),
              "uc3_rates_mbit": uc3["rates_mbit"], "plain_rates_mbit": plain["rates_mbit"],
              "uc3_total_mbit": uc3["total_mbit"], "plain_total_mbit": plain["total_mbit"],
              "uc3_counters": {k: v for k, v in state.get("counters", {}).items()
                               if k.startswith("uc3_")}}
    failures = []
    if uc3["jain"] < MIN_JAIN:
        failures.append(f"Jain's index with uc3 {uc3['jain']} < {MIN_JAIN} "
                        f"(rates {uc3['rates_mbit']} Mbit/s)")
    return fields, failures

