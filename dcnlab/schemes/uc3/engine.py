"""UC3's host parts (``agents: uc3``) as a :class:`~dcnlab.schemes.base.HostSession`.

The UC3 app allocates windows only for flows its host agents report, and an agent's BPF
program clamps only sockets created in the agent's cgroup.  So, for a network of such a
scheme, the engine (and ``dcnlab check``) goes through this session:

1. :meth:`Uc3Session.open` creates the agents' files (secret, agents file) before the
   network; the network gets a management network and the app the files' environment
   (:meth:`app_env`);
2. :meth:`start` runs ``dcnlab-agent`` in every given host (the engine gives the hosts
   that send TCP in any of the network's runs) and waits until the app has connected to
   all of them;
3. each of those hosts' traffic senders joins :meth:`cgroup_procs` before opening sockets;
4. around every run the engine takes :meth:`counters` (BPF clamps applied/lifted/failed,
   allocation updates pushed, reports received) -- the evidence that "proposed" runs
   were really clamped;
5. :meth:`stop` stops the agents, keeps their logs in the network's run directory
   (``uc3_agents/``) and removes the secret.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import HostPartsError
from .agents import AgentFiles, AgentStartError, HostAgents

LOG_DIR = "uc3_agents"

# agent status "bpf" counter -> column; app counter -> column
BPF_COUNTERS = {"applied": "clamps_applied", "lifted": "clamps_lifted",
                "errors": "clamp_errors"}
APP_COUNTERS = {"uc3_clamp_updates": "clamp_updates", "uc3_reports": "agent_reports"}
COLUMNS = (*BPF_COUNTERS.values(), *APP_COUNTERS.values())


class Uc3Session:
    """UC3 host agents for one network (see the module doc)."""

    management = True

    def __init__(self, files: AgentFiles, interval: float) -> None:
        self.files = files
        self.interval = interval
        self.agents: HostAgents | None = None

    @classmethod
    def open(cls, interval: float) -> Uc3Session:
        return cls(AgentFiles.create(), interval)

    def app_env(self) -> dict[str, str]:
        return self.files.env()

    def start(self, net: Any, hosts: Any) -> None:
        agents = HostAgents(net, self.files, list(hosts), interval_s=self.interval)
        try:
            agents.start()
            agents.wait_connected()
        except AgentStartError as exc:
            agents.stop()
            raise HostPartsError(str(exc)) from None
        except BaseException:
            agents.stop()
            raise
        self.agents = agents

    @property
    def hosts(self) -> list[str]:
        return list(self.agents.hosts) if self.agents is not None else []

    def cgroup_procs(self, host: str) -> str | None:
        if self.agents is None or host not in self.agents.cgroups:
            return None
        return str(self.agents.cgroup_procs(host))

    def counters(self, net: Any) -> dict[str, int]:
        """Cumulative now: BPF counters summed over the agents, the app's uc3_*."""
        totals = dict.fromkeys(COLUMNS, 0)
        for host in self.hosts:
            assert self.agents is not None
            bpf = self.agents.status(host).get("bpf") or {}
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

    def dead(self) -> list[str]:
        """One message per agent that exited, with its log tail."""
        if self.agents is None:
            return []
        return [f"UC3 agent on {h} exited; log tail:\n{self.agents.log_tail(h, 1000)}"
                for h in self.agents.dead()]

    def stop(self, run_dir: Path | None) -> None:
        """Stop the agents (if they started), keep their logs and last status in
        run_dir/uc3_agents/ and remove the files (secret, agents file)."""
        try:
            if self.agents is not None:
                self.agents.stop()
        finally:
            if run_dir is not None:
                self.files.keep_logs(run_dir / LOG_DIR)
            self.files.remove()
