"""Preflight: what a run needs from the machine, checked before anything is touched.

Root, the programs the lifecycle calls (each named with its Debian package, so the error
says what to install), the switch kind's own programs, the private Open vSwitch's
binaries for kinds that use it, and ``ryu-manager``.  A failed check raises
:class:`~.errors.NetworkError` before any namespace, process or directory exists.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from dcnlab.model.topology import TopologySpec

from .errors import NetworkError
from .ovs import OvsError, find_binaries
from .switches import SwitchKind, SwitchKindError

TOOLS = {  # program -> Debian package
    "mnexec": "mininet",
    "ifconfig": "net-tools",
    "ip": "iproute2",
    "tc": "iproute2",
    "ethtool": "ethtool",
}


def find_ryu_manager() -> str:
    """ryu-manager next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / "ryu-manager"
    if beside.exists():
        return str(beside)
    found = shutil.which("ryu-manager")
    if found is None:
        raise NetworkError("ryu-manager not found: pip install ryu==4.34 into this "
                           "environment (scripts/setup.sh does it, into .venv)")
    return found


def preflight(kind: SwitchKind) -> str:
    """Check what a run needs before touching anything; returns ryu-manager's path."""
    if os.geteuid() != 0:
        raise NetworkError("a dcnlab network needs root (network namespaces, veth pairs, tc): "
                           "run it as root or with sudo")
    missing = [f"{tool} (Debian package {pkg})" for tool, pkg in TOOLS.items()
               if shutil.which(tool) is None]
    if missing:
        raise NetworkError(f"missing program(s): {', '.join(missing)}; "
                           "scripts/setup.sh installs them")
    if kind.needs_ovs:
        try:
            find_binaries()
        except OvsError as exc:
            raise NetworkError(str(exc)) from None
    try:
        kind.check_programs()
    except SwitchKindError as exc:
        raise NetworkError(str(exc)) from None
    return find_ryu_manager()


ENV_MAX_NODES = "DCNLAB_MAX_NODES"
# Switches + hosts one run may build.  Every node is a process or a namespace with veths,
# and a userspace switch is CPU-bound: fattree:8 (208 nodes) still starts on 2 cores,
# much beyond that a run spends its time starting up and its results measure the CPU.
DEFAULT_MAX_NODES = 512


def check_size(spec: TopologySpec) -> None:
    """Refuse a topology larger than this machine should build (raises NetworkError that
    says the limit and how to lift it)."""
    nodes = len(spec.switches) + len(spec.hosts)
    text = os.environ.get(ENV_MAX_NODES, "")
    try:
        limit = int(text) if text else DEFAULT_MAX_NODES
    except ValueError:
        raise NetworkError(f"{ENV_MAX_NODES}={text!r}: expected a whole number of "
                           "nodes") from None
    if nodes > limit:
        raise NetworkError(
            f"{spec.spec} has {nodes} nodes ({len(spec.switches)} switches, "
            f"{len(spec.hosts)} hosts), more than the {limit} a run builds by default; "
            f"set {ENV_MAX_NODES}={nodes} to build it anyway (every node is a namespace "
            "or a process: expect minutes of start-up and CPU-bound switches)")
