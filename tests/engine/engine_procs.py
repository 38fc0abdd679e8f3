"""Process helpers shared by the engine tests."""

from __future__ import annotations

import os
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
