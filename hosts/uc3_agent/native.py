"""The native engine: Python sets up, ``dcnlab-uc3-agentd`` (Rust, ``native/``) runs.

The steady state of an agent is a wake-up every report interval and one per controller
message (an allocation every 0.05 s at most); in Python each costs ~0.3-0.5 ms on a
loaded 2-core machine, which at 64 agents is more than half a core.  So the loop itself is
native: it speaks the same protocol (:mod:`.protocol`, byte for byte: keys, handshake,
session, sequence numbers, bounds, error replies), reads the same flows map, applies the
same leases (:class:`~.agent.Agent` is the reference implementation and the
``--engine python`` fallback).

What stays here: loading, attaching and pinning the BPF program (libbpf, :mod:`.bpf`),
and after the native process has exited, the tear-down exactly as the Python agent does
it (lift the clamps with a grace period, unpin, remove the cgroup) and the final state
file.  The secret reaches the child through an inherited pipe, never its argv.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from . import agent as agent_mod
from .agent import AgentConfig
from .bpf import ClampProgram

log = logging.getLogger("dcnlab.agent")

HERE = Path(__file__).resolve().parent
BINARY = HERE / "native" / "target" / "release" / "dcnlab-uc3-agentd"
ENGINES = ("native", "python")


def binary() -> Path | None:
    """The built native agent, or None (``scripts/setup.sh`` builds it): this source
    tree's build, else the copy beside the interpreter (a lab host's virtual
    environment, where ``dcnlab lab prepare`` puts it)."""
    for exe in (BINARY, Path(sys.executable).parent / BINARY.name):
        if os.access(exe, os.X_OK):
            return exe
    return None


def default_engine() -> str:
    return "native" if binary() is not None else "python"


def command(cfg: AgentConfig, program: ClampProgram, name: str,
            secret_fd: int) -> tuple[list[str], tuple[int, ...]]:
    """The native agent's argv for ``cfg`` and the fds it must inherit."""
    exe = binary()
    if exe is None:
        raise FileNotFoundError(f"{BINARY} is not built (scripts/setup.sh builds it)")
    maps, fds = program.map_specs()
    argv = [str(exe), "--listen", cfg.listen, "--port", str(cfg.port),
            "--secret-fd", str(secret_fd),
            "--interval", repr(cfg.interval_s), "--timeout", repr(cfg.timeout_s),
            # read when called, so a test that shortens them shortens both engines'
            "--auth-timeout", repr(float(agent_mod.AUTH_TIMEOUT_S)),
            "--max-connections", str(agent_mod.MAX_CONNECTIONS),
            "--name", name, "--cgroup", str(program.cgroup),
            "--clamps-map", maps["clamps"], "--flows-map", maps["flows"],
            "--stats-map", maps["stats"]]
    if program.pin_dir is not None:
        argv += ["--pins", str(program.pin_dir)]
    if cfg.state_file is not None:
        argv += ["--state-file", str(cfg.state_file)]
    return argv, (secret_fd, *fds)


def spawn(cfg: AgentConfig, program: ClampProgram, name: str,
          **popen: Any) -> subprocess.Popen[bytes]:
    """Start the native loop for an already loaded ``program``; the secret goes down a
    pipe the child reads to its end."""
    read_end, write_end = os.pipe()
    try:
        argv, fds = command(cfg, program, name, read_end)
        proc = subprocess.Popen(argv, pass_fds=fds, **popen)
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    try:
        view = memoryview(cfg.secret)
        while view:
            view = view[os.write(write_end, view):]
    except OSError:
        pass  # the child died at once: its exit status and log say why
    finally:
        os.close(write_end)
    return proc


class NativeAgent:
    """:class:`~.agent.Agent`'s lifecycle with the native loop in the middle."""

    def __init__(self, config: AgentConfig, program: ClampProgram | None = None) -> None:
        self.cfg = config
        self.tag = config.tag or f"agent-{os.getpid()}"
        self.name = config.name or self.tag
        self.work_dir = config.work_dir or Path(f"/run/dcnlab-{self.tag}")
        self.program = program
        self.proc: subprocess.Popen[bytes] | None = None
        self._stop_signal = 0

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self._stop_signal = signum
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signum)

    def run(self) -> int:
        """Until SIGTERM/SIGINT (forwarded to the native process) or its exit; its exit
        status (0 after a signal)."""
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGTERM, signal.SIGINT)}
        created = not self.work_dir.exists()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        status = 1
        try:
            if self.program is None:
                self.program = ClampProgram(self.tag, self.work_dir)
            if self._stop_signal:
                return 0
            self.proc = spawn(self.cfg, self.program, self.name)
            if self._stop_signal:  # arrived while starting
                self.proc.send_signal(self._stop_signal)
            status = self.proc.wait()  # blocking: no CPU here while the loop runs
            if status != 0:
                log.error("native agent exited with status %d", status)
            return status
        finally:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.terminate()  # ours; an exception above left it running
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            if self.program is not None:
                self.program.close(grace_s=0.2)
                self._write_stopped_state()
            if created:  # leave nothing behind that this run made
                (self.work_dir / "clamp.bpf.o").unlink(missing_ok=True)
                with contextlib.suppress(OSError):
                    self.work_dir.rmdir()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _write_stopped_state(self) -> None:
        """The Python agent's last state: the native loop's counters, no clamps left."""
        if self.cfg.state_file is None or self.program is None:
            return
        last: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(self.cfg.state_file.read_text())
            last = loaded if isinstance(loaded, dict) else {}
        agent_mod.write_state(self.cfg, self.program, self.name, stopped=True, clamps=0,
                              rejected=int(last.get("rejected", 0)),
                              refused=int(last.get("refused", 0)),
                              over_cap=int(last.get("over_cap", 0)))


def wait_listening(state_file: Path, proc: subprocess.Popen[bytes],
                   timeout_s: float = 20.0) -> dict[str, Any]:
    """The native agent's first state (written once it listens); raises if it exits."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"native agent exited with status {proc.returncode}")
        with contextlib.suppress(OSError, ValueError):
            state = json.loads(state_file.read_text())
            if isinstance(state, dict) and not state.get("stopped"):
                return state
        time.sleep(0.02)
    raise TimeoutError(f"native agent wrote no state to {state_file} in {timeout_s:g} s")
