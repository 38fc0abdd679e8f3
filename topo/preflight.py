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
