"""UC3 host agents inside a Network's hosts, reachable over its management network.

::

    files = AgentFiles.create()                       # before the network: the app's env
    with Network(spec, app="dcnlab.apps.uc3", switch="ext", management=True,
                 app_env=files.env()) as net, HostAgents(net, files, ["h1", "h2"]) as agents:
        agents.wait_connected()                       # the app reached every agent
        procs = agents.cgroup_procs("h1")             # senders join this cgroup first
    files.remove()

:class:`AgentFiles` is a private directory holding the shared secret (mode 0600) and the
agents file the app reads (``DCNLAB_UC3_AGENTS``: host fabric IP -> management address).
:class:`HostAgents` starts ``dcnlab-agent`` in each host listening on its management
address only (its default engine: the native loop when built, see
``dcnlab/hosts/uc3_agent/native.py``), waits until each has its cgroup and BPF program,
then writes the agents file (atomically: the app re-reads it when it changes).
:meth:`HostAgents.wait_connected` waits until the app has read that file and connected
to every agent; :meth:`status` reads an agent's status file (clamp counters of its BPF
program) and :meth:`dead` names agents that exited.  ``stop()`` sends SIGTERM and waits,
so every agent removes its cgroup and pins.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from dcnlab.schemes.uc3.config import ENV_AGENTS, ENV_SECRET_FILE

DEFAULT_AGENT_PORT = 6690
START_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 30.0


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of one process from /proc (0 once it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    # Fields after the parenthesised command name (which may hold spaces): utime and
    # stime are fields 14 and 15 of proc(5), 12 and 13 after the name.
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """The direct children of a process (from /proc: every thread's children list)."""
    out: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def process_tree_cpu_seconds(pid: int) -> float:
    """utime + stime of a process and all its running descendants (an agent is a Python
    process waiting on its native loop: what counts is what runs)."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        total += process_cpu_seconds(p)
        todo += child_pids(p)
    return total


class AgentStartError(RuntimeError):
    """An agent did not come up; the message carries its log tail."""


@dataclass(frozen=True)
class AgentFiles:
    directory: Path

    @classmethod
    def create(cls) -> AgentFiles:
        directory = Path(tempfile.mkdtemp(prefix="dcnlab-uc3-"))
        directory.chmod(0o755)  # agents in host namespaces read it as root anyway
        secret = directory / "secret"
        fd = os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
        return cls(directory)

    @property
    def secret(self) -> Path:
        return self.directory / "secret"

    @property
    def agents(self) -> Path:
        return self.directory / "agents.json"

    def env(self) -> dict[str, str]:
        return {ENV_AGENTS: str(self.agents), ENV_SECRET_FILE: str(self.secret)}

    def keep_logs(self, dest: Path) -> list[Path]:
        """Copy the agents' logs and last status files to ``dest`` (before remove())."""
        kept = []
        for path in sorted(self.directory.glob("agent-*")):
            if path.suffix in (".log", ".json"):
                dest.mkdir(parents=True, exist_ok=True)
                kept.append(Path(shutil.copy(path, dest / path.name)))
        return kept

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


class HostAgents:
    def __init__(self, net: Any, files: AgentFiles, hosts: list[str], *,
                 port: int = DEFAULT_AGENT_PORT, interval_s: float = 0.1,
                 timeout_s: float = 2.0) -> None:
        self.net, self.files, self.hosts = net, files, list(hosts)
        self.port, self.interval_s, self.timeout_s = port, interval_s, timeout_s
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.cgroups: dict[str, Path] = {}

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _state_file(self, host: str) -> Path:
        return self.files.directory / f"agent-{host}.json"

    def _log(self, host: str) -> Path:
        return self.files.directory / f"agent-{host}.log"

    def _remote(self, host: str) -> Any:
        """How ``host``'s files travel (a lab server), or None where the host sees this
        machine's files (Mininet)."""
        return self.net.host_files(host)

    def _where(self, host: str, local: Path) -> str:
        """The path of one of the agent's files as the host sees it."""
        remote = self._remote(host)
        return str(local) if remote is None else f"{remote.workdir}/uc3-{local.name}"

    def _read(self, host: str, local: Path) -> str:
        """One of the agent's files, read where it is (OSError: not there yet)."""
        if self._remote(host) is None:
            return local.read_text(errors="replace")
        out = self.net.host(host).cmd(f"cat {shlex.quote(self._where(host, local))} "
                                      "2>/dev/null || echo dcnlab-absent")
        if out.strip() == "dcnlab-absent":
            raise OSError(f"{self._where(host, local)} is not there")
        return out

    def _argv(self, host: str) -> list[str]:
        from dcnlab.benchmarks.engine.fabric import host_python

        remote = self._remote(host)
        argv = [host_python(self.net, host), "-m", "dcnlab.hosts.uc3_agent",
                "--listen", self.net.management_ip(host), "--port", str(self.port),
                "--secret-file", self._where(host, self.files.secret),
                "--interval", f"{self.interval_s:g}", "--timeout", f"{self.timeout_s:g}",
                "--tag", f"{self.net.prefix}{host}", "--name", host,
                "--state-file", self._where(host, self._state_file(host))]
        if remote is None:
            return argv
        # a lab server: its log stays there (fetched at the end, fetch_logs)
        log = shlex.quote(self._where(host, self._log(host)))
        return ["sh", "-c", f"exec {shlex.join(argv)} > {log} 2>&1"]

    def start(self) -> Self:
        try:
            for host in self.hosts:
                remote = self._remote(host)
                if remote is not None:  # the secret goes to the host, readable by root only
                    where = self._where(host, self.files.secret)
                    remote.put(self.files.secret, where)
                    self.net.host(host).cmd(f"chmod 600 {shlex.quote(where)}")
                    self.procs[host] = self.net.host(host).popen(self._argv(host))
                    continue
                with open(self._log(host), "wb") as log:
                    self.procs[host] = self.net.host(host).popen(
                        self._argv(host), stdout=log, stderr=subprocess.STDOUT)
            for host in self.hosts:
                self.cgroups[host] = self._wait_state(host)
            mapping = {self.net.host(h).IP(): f"{self.net.management_ip(h)}:{self.port}"
                       for h in self.hosts}
            tmp = self.files.agents.with_suffix(".tmp")
            tmp.write_text(json.dumps(mapping, indent=1))
            tmp.replace(self.files.agents)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_state(self, host: str) -> Path:
        deadline = time.monotonic() + START_TIMEOUT_S
        state_file = self._state_file(host)
        while time.monotonic() < deadline:
            if self.procs[host].poll() is not None:
                break
            try:
                return Path(json.loads(self._read(host, state_file))["cgroup"])
            except (OSError, ValueError, KeyError):
                time.sleep(0.1)
        raise AgentStartError(f"agent on {host} did not start:\n{self.log_tail(host)}")

    def wait_connected(self, timeout: float = CONNECT_TIMEOUT_S) -> None:
        """Until the app has loaded the agents file and connected to every agent.

        Flows started earlier would run unclamped for their first seconds, and the app
        picks up the agents file only on its next reload."""
        deadline = time.monotonic() + timeout
        agents: dict[str, Any] = {}
        while time.monotonic() < deadline:
            agents = ((self.net.state() or {}).get("uc3") or {}).get("agents") or {}
            if len(agents) >= len(self.hosts) and all(a.get("connected")
                                                      for a in agents.values()):
                return
            dead = self.dead()
            if dead:
                raise AgentStartError(f"agent(s) exited: {', '.join(dead)}")
            time.sleep(0.2)
        waiting = sorted(name for name, a in agents.items() if not a.get("connected"))
        raise AgentStartError(
            f"the app connected to {len(agents) - len(waiting)} of {len(self.hosts)} agents "
            f"within {timeout:g} s (not connected: {', '.join(waiting) or 'none listed'}; "
            "is the app dcnlab.apps.uc3 with DCNLAB_UC3_AGENTS/DCNLAB_UC3_SECRET_FILE?)")

    def status(self, host: str) -> dict[str, Any]:
        """The agent's last status: clamps held, BPF counters (applied, lifted, errors)."""
        try:
            data = json.loads(self._read(host, self._state_file(host)))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def dead(self) -> list[str]:
        """Hosts whose agent has exited."""
        return [h for h, proc in self.procs.items() if proc.poll() is not None]

    def cpu_seconds(self) -> float:
        """User + system CPU time the running agents have used so far, in seconds: each
        agent process and its children (the native loop, ``--engine native``); agents in
        this machine's hosts (Mininet) only, whose processes this machine sees."""
        return sum(process_tree_cpu_seconds(proc.pid) for proc in self.procs.values()
                   if proc.poll() is None)

    def log_tail(self, host: str, chars: int = 2000) -> str:
        try:
            return self._read(host, self._log(host))[-chars:]
        except OSError:
            return "(no log)"

    def cgroup_procs(self, host: str) -> Path:
        """The cgroup.procs file a sender in ``host`` writes its PID to (host's view)."""
        return self.cgroups[host] / "cgroup.procs"

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()  # ours: started above
                proc.wait()
        self.fetch_logs()
        self.procs.clear()
        self.files.agents.unlink(missing_ok=True)

    def fetch_logs(self) -> None:
        """Lab servers' agent logs and last status files, into the local directory
        (where Mininet hosts wrote theirs), for AgentFiles.keep_logs."""
        for host in self.procs:
            if self._remote(host) is None:
                continue
            for local in (self._log(host), self._state_file(host)):
                with contextlib.suppress(OSError):
                    local.write_text(self._read(host, local))
