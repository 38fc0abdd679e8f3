"""Shared pytest configuration."""

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "network: builds a real network (root, Mininet, Open vSwitch); deselect with "
        "-m 'not network'",
    )
