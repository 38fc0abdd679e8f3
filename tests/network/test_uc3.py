"""UC3 end to end: app + agents make two flows with different RTTs share a bottleneck fairly.

Dumbbell (seed 004) on switch_ext: 100 Mbit/s links, 1 ms core delay.  A group-A client
with 2 ms access delay (RTT ~6 ms: switch_ext doubles host-link delay on the switch
egress, core 1 ms each way) and a group-B client with 16 ms (RTT ~34 ms) each send one
long TCP NewReno flow to the server.  Plain Reno is RTT-unfair: the window grows one
segment per RTT, so the short-RTT flow takes most of the shared core link.

Buffers are 50 packets here, not the seed's 200: with 200 packets (24 ms of queue at
100 Mbit/s) the shared queueing delay dominates both RTTs and plain Reno measured
anywhere between Jain 0.79 and 0.97 on this machine (the check, `dcnlab check --topo
dumbbell --app uc3`, runs the seed's 200 packets and records plain TCP without asserting
on it).  With 50 packets (6 ms) plain TCP measured 0.64-0.71 (about 77/11-17 Mbit/s).
With the uc3 app the agents clamp each window to its BDP at the fair share (50 Mbit/s x
own RTT), so the rates are equal whatever the RTTs: measured 0.994-0.999 without
reallocation; with it (the default, as here) 0.9994-1.0 in 8 runs (2026-11-28, load
average about 3), Jain's index measured after a 4 s warm-up.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dcnlab.schemes.uc3.agents import AgentFiles, HostAgents
from dcnlab.schemes.uc3.check import MIN_JAIN, fairness_run, rtt_pair
from dcnlab.topo.network import Network

pytestmark = [
    pytest.mark.network,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, BPF, cgroups)"),
]

TOPO = "dumbbell:4,buffer=50"
# UC3's total rate at least this fraction of plain TCP's in the same test: windows
# clamped to each flow's BDP at its fair share leave no standing queue, so they give up a
# little of what a full queue carries, never most of it
UTILISATION_OF_PLAIN = 0.75
CGROUP2 = Path("/sys/fs/cgroup/unified")


def _watch(net: Network, stop: threading.Event, seen: list[dict[str, Any]]) -> None:
    """Keep the last app state that had an allocation for two flows."""
    while not stop.is_set():
        uc3 = (net.state() or {}).get("uc3", {})
        if len(uc3.get("flows", {})) == 2:
            seen[:] = [uc3]
        time.sleep(0.5)


def test_uc3_makes_different_rtts_fair() -> None:
    files = AgentFiles.create()
    try:
        # The app's defaults, reallocation on: two backlogged flows are held at their
        # windows, so neither counts as under-using however its 50 ms throughput swings
        # (before that rule, 1 run in 4 locked in at 34/51 Mbit/s, Jain 0.947).
        env = files.env()
        with Network(TOPO, app="dcnlab.apps.uc3", switch="ext", management=True,
                     app_env=env) as net:
            clients, server = rtt_pair(net.spec)
            assert [net.spec.host(c).group for c in clients] == ["A", "B"]
            plain = fairness_run(net, clients, server, files.directory / "plain.jsonl")
            with HostAgents(net, files, clients) as agents:
                tags = [agents.cgroups[c].name for c in clients]
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    got = (net.state() or {}).get("uc3", {}).get("agents", {})
                    if len(got) == 2 and all(a["connected"] for a in got.values()):
                        break
                    time.sleep(0.2)
                seen: list[dict[str, Any]] = []
                stop = threading.Event()
                watcher = threading.Thread(target=_watch, args=(net, stop, seen))
                watcher.start()
                try:
                    uc3 = fairness_run(net, clients, server, files.directory / "uc3.jsonl",
                                       agents=agents, port=5401)
                finally:
                    stop.set()
                    watcher.join()
            print(f"plain: {plain}\nuc3: {uc3}")
            assert uc3["jain"] > MIN_JAIN, uc3
            assert plain["jain"] < uc3["jain"], (plain, uc3)
            # Fair, and the bottleneck stays busy: measured against what plain TCP, whose
            # queue stays full, carried through the same switch in this test.  A fixed
            # rate would measure the machine: with two busy loops beside it plain TCP
            # carried 78-85 Mbit/s and UC3 77-80 (ratios 0.95-1.01), alone 89-95 and
            # 86-95 (0.92-1.07), in the full suite once 88 and 75 (0.85).
            ratio = uc3["total_mbit"] / plain["total_mbit"]
            assert ratio > UTILISATION_OF_PLAIN, (plain, uc3)
            # The app's view: both flows cross the same core link, which it counts as
            # two competing flows; windows follow the RTTs (longer RTT, larger window).
            assert seen, "the app never allocated for both flows"
            flows = list(seen[0]["flows"].values())
            assert flows[0]["path"][0] == flows[1]["path"][0]
            assert seen[0]["links"][flows[0]["path"][0]]["flows"] == 2
            by_rtt = sorted(flows, key=lambda f: f["rtt_ms"])
            assert by_rtt[0]["window"] < by_rtt[1]["window"]
            assert all(f["share_bps"] == 50_000_000 for f in flows)
        # Agents stopped: their cgroups are gone; the run left nothing.
        assert not any((CGROUP2 / f"dcnlab-{t.removeprefix('dcnlab-')}").exists()
                       for t in tags)
        assert net.leftovers() == {"processes": [], "links": [], "dirs": []}
    finally:
        files.remove()
