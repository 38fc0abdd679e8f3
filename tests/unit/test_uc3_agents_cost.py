"""The agents' CPU accounting and the check's choice of flows, in memory."""

from __future__ import annotations

import os
import time

from dcnlab.schemes.uc3.agents import process_cpu_seconds
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


def test_check_flows_cover_every_client_with_an_outside_switch() -> None:
    spec = parse("dumbbell:64,2,16")
    clients, server = all_clients(spec)
    assert len(clients) == 64 and server not in clients
    pair, _ = rtt_pair(spec)  # group A is split into A' and A'' here
    assert len(pair) == 2
    groups = {h.name: h.group for h in spec.hosts}
    assert groups[pair[0]].startswith("A") and groups[pair[1]] == "B"
