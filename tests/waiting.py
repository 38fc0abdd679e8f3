"""Waiting for a condition with a deadline, the suite's one way to synchronise with a
network, a process or a controller (a sleep followed by an assertion fails on a loaded
machine and passes on a fast one for the wrong reason).  A server's socket is waited for
with :func:`dcnlab.topo.readiness.wait_listening`, as the product does.

Imported by module name (pytest puts ``tests/`` on the path for its conftest)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(pred: Callable[[], T], timeout: float, interval: float = 0.05) -> T:
    """Call ``pred`` until it returns something true, at most ``timeout`` seconds; its
    last value either way, for the caller's assertion to show."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()

