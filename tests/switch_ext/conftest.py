"""Shared fixtures for switch_ext tests: the dcnlab-switch binary and network helpers."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

import pytest
from swext_net import Line, free_tcp_port, network_available
from waiting import wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SWITCH_DIR = os.path.join(ROOT, "switch_ext")
BINARY = os.path.join(SWITCH_DIR, "target", "release", "dcnlab-switch")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "network: needs root, network namespaces and veths (creates its own)"
    )


def _cargo() -> str | None:
    return shutil.which("cargo") or (
        os.path.expanduser("~/.cargo/bin/cargo")
        if os.path.exists(os.path.expanduser("~/.cargo/bin/cargo"))
        else None
    )


@pytest.fixture(scope="session")
def switch_binary() -> str:
    """Path to a release build of dcnlab-switch, building it if needed."""
    cargo = _cargo()
    if cargo is not None:
        # Incremental: a no-op when the binary is current.
        subprocess.run(
            [cargo, "build", "--release", "--quiet"], cwd=SWITCH_DIR, check=True, timeout=900
        )
    if not os.path.exists(BINARY):
        pytest.skip("dcnlab-switch is not built and cargo is not available")
    return BINARY


@pytest.fixture
def line(request):
    why = network_available()
    if why:
        pytest.skip(why)
    n = getattr(request, "param", 2)
    net = Line(n)
    try:
        net.setup()
        yield net
    finally:
        net.cleanup()


RYU_MANAGER = os.path.join(os.path.dirname(sys.executable), "ryu-manager")


@pytest.fixture
def ryu_app(line, tmp_path):
    """Starts ryu-manager with the given app on a free loopback port; returns the port."""

    def start(app: str = "ryu.app.simple_switch_13") -> int:
        if not os.path.exists(RYU_MANAGER):
            pytest.skip("ryu-manager not installed next to this Python")
        port = free_tcp_port()
        with open(tmp_path / "ryu.log", "w") as log:
            line.popen(
                [
                    RYU_MANAGER,
                    "--ofp-listen-host",
                    "127.0.0.1",
                    "--ofp-tcp-listen-port",
                    str(port),
                    app,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        ok = wait_for(lambda: _listening(port), timeout=20, interval=0.1)
        if not ok:
            pytest.fail("ryu-manager did not start: " + (tmp_path / "ryu.log").read_text())
        return port

    return start


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
