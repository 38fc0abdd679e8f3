"""Process helpers shared by the engine tests."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path


def agent_pid(plan: Path, timeout: float = 10.0, poll: float = 0.05) -> int:
    """The traffic agent started for ``plan`` (found by its unique plan path)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if str(plan).encode() in cmdline:
                return int(entry)
        time.sleep(poll)
    raise AssertionError(f"no agent process for {plan}")


def marked_processes(mark: str) -> list[str]:
    """Processes (other than this one) whose environment or working directory names
    ``mark``: a network's controller says neither prefix nor run in its command line, but
    runs in the run's directory with its state file in its environment."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                marks = (proc / "environ").read_bytes() + os.readlink(proc / "cwd").encode()
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if mark.encode() in marks:
                found.append(f"pid {proc.name}: {cmdline[:100]!r}")
    return found


def leftovers(prefix: str, run_dir: str | None = None) -> list[str]:
    """Anything of a run with ``prefix`` still on the machine: links, processes (named by
    the prefix, or living in ``run_dir``, the network's run directory, as its controller
    does), dirs."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True,
                           check=True).stdout
    found = [m for m in re.findall(r"^\d+:\s+(\S+?):", links, re.MULTILINE)
             if m.startswith(prefix)]
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if prefix in cmdline or f"dcnlab-{prefix.rstrip('-')}" in cmdline:
            found.append(f"pid {proc.name}: {cmdline[:120]}")
    if run_dir is not None:
        found += [p for p in marked_processes(str(Path(run_dir).resolve())) if p not in found]
    reserved = Path("/tmp") / f"dcnlab-{prefix.rstrip('-')}"
    if reserved.exists():
        found.append(str(reserved))
    return found
