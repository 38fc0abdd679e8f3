"""Waiting for a condition with a deadline, the suite's one way to synchronise with a
network, a process or a controller (a sleep followed by an assertion fails on a loaded
machine and passes on a fast one for the wrong reason).

Imported by module name (pytest puts ``tests/`` on the path for its conftest)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from typing import Any, TypeVar

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


def listening(run: Callable[[list[str]], str], port: int, udp: bool = False) -> bool:
    """Whether a socket is bound to ``port`` (TCP: listening) where ``run`` runs a command
    and returns its output (a network namespace, a Mininet host)."""
    out = run(["ss", "-H", "-ln" + ("u" if udp else "t"), f"sport = :{port}"])
    return bool(out.strip())


def mininet_run(host: Any) -> Callable[[list[str]], str]:
    """A Mininet host as a ``run`` for :func:`listening`."""
    return lambda argv: host.cmd(" ".join(shlex.quote(a) for a in argv))


def wait_listening(run: Callable[[list[str]], str], port: int, udp: bool = False,
                   timeout: float = 15.0, what: str = "server") -> None:
    """Return once something is bound to ``port``; fail saying so at the deadline."""
    assert wait_for(lambda: listening(run, port, udp), timeout, interval=0.1), (
        f"{what} not bound to {'udp' if udp else 'tcp'} port {port} within {timeout} s")
