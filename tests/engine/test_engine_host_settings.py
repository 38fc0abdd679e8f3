"""The experiment's host settings reach every host's namespace and nothing else (root)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from dcnlab.benchmarks.engine import runner
from dcnlab.topo.network import Network

pytestmark = [pytest.mark.network,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces)")]

KNOB = Path("/proc/sys/net/ipv4/tcp_reordering")


def test_sysctls_apply_in_each_host_and_not_on_the_machine() -> None:
    before = KNOB.read_text().strip()
    wanted = "9" if before != "9" else "8"
    state = SimpleNamespace(spec=SimpleNamespace(rto_min=None,
                                                 sysctls={"net.ipv4.tcp_reordering": wanted}),
                            errors=[])
    with Network("spineleaf:1,1,2", app="dcnlab.apps.single_path") as net:
        runner._host_settings(state, net, SimpleNamespace(name="s"), set())
        for host in ("h1", "h2"):
            assert net.host(host).cmd("sysctl -n net.ipv4.tcp_reordering").strip() == wanted
    assert state.errors == []
    assert KNOB.read_text().strip() == before  # the machine's own setting is untouched
