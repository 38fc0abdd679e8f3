"""The agents' CPU accounting and the check's choice of flows, in memory."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from dcnlab.schemes.uc3.agents import child_pids, process_cpu_seconds, process_tree_cpu_seconds
from dcnlab.schemes.uc3.check import all_clients, rtt_pair
from dcnlab.topo.spec import parse


def test_process_cpu_seconds_counts_this_process_work() -> None:
    before = process_cpu_seconds(os.getpid())
    end = time.process_time() + 0.2
    while time.process_time() < end:  # burn 0.2 s of CPU in this process
        pass
    used = process_cpu_seconds(os.getpid()) - before
    assert 0.15 <= used <= 5.0  # clock-tick granularity, plus whatever else ran here


def test_process_cpu_seconds_of_a_gone_process_is_zero() -> None:
    assert process_cpu_seconds(2**22 + 12345) == 0.0  # above pid_max's default range


def test_process_tree_cpu_seconds_counts_the_children() -> None:
    """An agent that hands its loop to a native child must be charged for the child."""
    burner = ("import time\nend = time.process_time() + 0.3\n"
              "while time.process_time() < end:\n    pass\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys\n"
                               f"p = subprocess.Popen([sys.executable, '-c', {burner!r}])\n"
                               "p.wait()\n"])
    try:
        deadline = time.monotonic() + 30
        while not child_pids(parent.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        (child,) = child_pids(parent.pid)
        while process_cpu_seconds(child) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        alone = process_cpu_seconds(parent.pid)
        tree = process_tree_cpu_seconds(parent.pid)
        assert tree - alone >= 0.25  # the child's burn, clock-tick granularity
        assert tree >= process_cpu_seconds(child) + alone - 0.02
    finally:
        for pid in child_pids(parent.pid):
            os.kill(pid, 15)  # ours: started above
        parent.wait(timeout=10)


def test_check_flows_cover_every_client_with_an_outside_switch() -> None:
    spec = parse("dumbbell:64,2,16")
    clients, server = all_clients(spec)
    assert len(clients) == 64 and server not in clients
    pair, _ = rtt_pair(spec)  # group A is split into A' and A'' here
    assert len(pair) == 2
    groups = {h.name: h.group for h in spec.hosts}
    assert groups[pair[0]].startswith("A") and groups[pair[1]] == "B"
