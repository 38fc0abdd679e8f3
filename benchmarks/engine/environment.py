"""What a result depends on besides the spec: versions and the machine.

Collected once per experiment into meta.json.  Every probe is best effort: a missing
program or file yields None, never an error (the run itself checks what it needs).
"""

from __future__ import annotations

import functools
import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("dcnlab", "ryu", "mininet", "numpy", "scipy", "matplotlib", "PyYAML",
            "networkx", "eventlet")
REPO = Path(__file__).absolute().parents[2]


def _run(argv: list[str], cwd: Path | None = None) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd=cwd,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def versions() -> dict[str, Any]:
    found: dict[str, Any] = {"python": sys.version.split()[0]}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    ovs = _run(["ovs-vswitchd", "--version"])
    found["openvswitch"] = ovs.splitlines()[0] if ovs else None
    found.update(_git())
    return found


@functools.cache
def _git() -> dict[str, Any]:
    """The checkout's commit and whether it had local changes, read once per process:
    the code a process runs is what it loaded when it started, so an experiment whose
    later scenarios start after a commit was made meanwhile still names the commit (and
    the local changes) its code came from."""
    commit = _run(["git", "rev-parse", "HEAD"], cwd=REPO)
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO)
    return {"git_commit": commit, "git_dirty": bool(status) if status is not None else None}


def machine() -> dict[str, Any]:
    cpu_model = None
    cpuinfo = _read("/proc/cpuinfo") or ""
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            cpu_model = line.split(":", 1)[1].strip()
            break
    mem_kib = None
    for line in (_read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "os": _os_release(),
        "cpus": os.cpu_count(),
        "cpu_model": cpu_model,
        "mem_gib": round(mem_kib / 2**20, 1) if mem_kib else None,
        "default_congestion_control": _read("/proc/sys/net/ipv4/tcp_congestion_control"),
        "available_congestion_control": _read(
            "/proc/sys/net/ipv4/tcp_available_congestion_control"),
    }


def _os_release() -> str | None:
    for line in (_read("/etc/os-release") or "").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return None
