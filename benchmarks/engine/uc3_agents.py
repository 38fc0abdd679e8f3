"""UC3 host agents for the networks of schemes with ``agents: uc3`` (seed 004).

The UC3 app allocates windows only for flows its host agents report, and an agent's BPF
program clamps only sockets created in the agent's cgroup.  So, for such a scheme, the
runner (runner.py):

1. creates the agents' files (secret, agents file) before the network, builds the
   network with a management network and hands the app the files' environment
   (:func:`app_env`);
2. starts ``dcnlab-agent`` in every host that sends TCP in any of the network's runs and
   waits until the app has connected to all of them (:func:`start`);
3. gives each of those hosts' traffic agents the agent's ``cgroup.procs`` to join before
   they open sockets (:func:`cgroup_procs`);
4. around every run, snapshots what the agents and the app did (:func:`snapshot`,
   :func:`run_stats`: BPF clamps applied/lifted/failed, allocation updates pushed,
   reports received) -- the evidence that "proposed" runs were really clamped;
5. after the last run (or a failed start) stops the agents, keeps their logs in the
   network's run directory (``uc3_agents/``) and removes the secret.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from dcnlab.topo.agents import AgentFiles, HostAgents

from .workloads import Flow

LOG_DIR = "uc3_agents"

# agent status "bpf" counter -> column; app counter -> column
BPF_COUNTERS = {"applied": "clamps_applied", "lifted": "clamps_lifted",
                "errors": "clamp_errors"}
APP_COUNTERS = {"uc3_clamp_updates": "clamp_updates", "uc3_reports": "agent_reports"}


def app_env(scheme_env: Mapping[str, str], files: AgentFiles) -> dict[str, str]:
    """The app's environment: the scheme's, plus where the agents file and secret are."""
    return {**scheme_env, **files.env()}


def tcp_senders(host_order: Iterable[str], runs: Iterable[Iterable[Flow]]) -> list[str]:
    """Hosts that send TCP in any run, in topology order: they need an agent."""
    senders = {f.src for flows in runs for f in flows if f.kind == "tcp"}
    return [h for h in host_order if h in senders]


def start(net: Any, files: AgentFiles, hosts: list[str], interval: float) -> HostAgents:
    """Agents in ``hosts`` reporting every ``interval`` s, connected to the app; raises
    AgentStartError otherwise."""
    agents = HostAgents(net, files, hosts, interval_s=interval)
    agents.start()
    try:
        agents.wait_connected()
    except BaseException:
        agents.stop()
        raise
    return agents


def stop(agents: HostAgents | None, files: AgentFiles, run_dir: Path) -> None:
    """Stop the agents (if they started), keep their logs and last status in
    run_dir/uc3_agents/ and remove the files (secret, agents file)."""
    try:
        if agents is not None:
            agents.stop()
    finally:
        files.keep_logs(run_dir / LOG_DIR)
        files.remove()


def cgroup_procs(agents: HostAgents | None, host: str) -> str | None:
    if agents is None or host not in agents.cgroups:
        return None
    return str(agents.cgroup_procs(host))


def snapshot(agents: HostAgents, net: Any) -> dict[str, int]:
    """Cumulative counters now: BPF counters summed over the agents, the app's uc3_*."""
    totals = dict.fromkeys([*BPF_COUNTERS.values(), *APP_COUNTERS.values()], 0)
    for host in agents.hosts:
        bpf = agents.status(host).get("bpf") or {}
        for name, column in BPF_COUNTERS.items():
            value = bpf.get(name)
            if isinstance(value, int):
                totals[column] += value
    try:
        counters = (net.state() or {}).get("counters") or {}
    except Exception:  # noqa: BLE001 - informative only: the flows were measured anyway
        counters = {}
    for name, column in APP_COUNTERS.items():
        value = counters.get(name)
        if isinstance(value, int):
            totals[column] = value
    return totals


def run_stats(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """A run's share of the cumulative counters."""
    return {k: after[k] - before.get(k, 0) for k in after}


def dead_agents(agents: HostAgents) -> list[str]:
    """One message per agent that exited, with its log tail."""
    return [f"UC3 agent on {h} exited; log tail:\n{agents.log_tail(h, 1000)}"
            for h in agents.dead()]
