"""Shared fixtures for switch_ext tests: the dcnlab-switch binary and network helpers."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

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
