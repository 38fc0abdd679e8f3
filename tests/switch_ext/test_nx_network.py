"""Nicira extensions end to end (marker ``network``): ryu-manager runs
``nx_learn_app.py``, a MAC-learning switch built from learn, resubmit, reg_load and
output_reg only; dcnlab-switch forwards pings between namespaces with it, and Ryu's own
parser reads the learned entries back from flow stats.
"""

from __future__ import annotations

import os
import re

import pytest
from swext_net import read_stats
from waiting import wait_for

pytestmark = pytest.mark.network

APP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nx_learn_app.py")


def learned(log: str) -> dict[str, tuple[int, int]]:
    """The latest LEARNED line per MAC: (port, packets)."""
    out: dict[str, tuple[int, int]] = {}
    for mac, port, pkts in re.findall(r"LEARNED (\S+) (\d+) (\d+)", log):
        out[mac] = (int(port), int(pkts))
    return out


def mac_of(line, i: int) -> str:
    r = line.exec(i, ["cat", f"/sys/class/net/{line.prefix}e{i}/address"])
    return r.stdout.strip()


def rx_packets(line, i: int) -> int:
    path = f"/sys/class/net/{line.prefix}e{i}/statistics/rx_packets"
    return int(line.exec(i, ["cat", path]).stdout)


@pytest.mark.parametrize("line", [3], indirect=True)
def test_learning_switch_from_nicira_actions(line, ryu_app, switch_binary, tmp_path):
    port = ryu_app(APP)
    stats = str(tmp_path / "stats.jsonl")
    log = tmp_path / "switch.log"
    sw = line.start_switch(
        switch_binary, args=["--controller", f"tcp:127.0.0.1:{port}"], stats_file=stats,
        log_path=str(log),
    )
    ryu_log = tmp_path / "ryu.log"

    def connected() -> bool:
        rows = read_stats(stats)
        return bool(rows) and rows[-1]["connected"]

    assert wait_for(connected, timeout=15), log.read_text()
    rx3 = rx_packets(line, 3)
    r = line.exec(1, ["ping", "-c", "5", "-i", "0.2", "-W", "2", line.ip(2)], check=False)
    assert " 0% packet loss" in r.stdout, r.stdout + ryu_log.read_text()
    macs = {i: mac_of(line, i) for i in (1, 2)}
    # Both hosts' addresses were learned on their ports, and the learned entries count
    # the five echoes each way (flow stats are polled every 0.5 s).
    def both_learned() -> bool:
        seen = learned(ryu_log.read_text())
        return all(seen.get(macs[i], (0, 0))[0] == i for i in (1, 2)) and all(
            seen[macs[i]][1] >= 5 for i in (1, 2)
        )

    assert wait_for(both_learned, timeout=10), (macs, ryu_log.read_text())
    assert "OFPT_ERROR" not in ryu_log.read_text()
    last = read_stats(stats)[-1]
    assert last["resubmit_drops"] == 0 and last["learn_failures"] == 0
    # Host 3 got the flooded ARP request at most, none of the ten unicast echoes.
    rx3 = rx_packets(line, 3) - rx3
    assert rx3 <= 3, rx3
    assert sw.poll() is None
