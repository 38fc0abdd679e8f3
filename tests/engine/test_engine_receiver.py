"""The engine's TCP receiver lets the kernel open the receive window (real network).

The traffic agent's receiver asks to be woken per batch of bytes (SO_RCVLOWAT) to save
CPU.  A batch as large as the initial window (64 KB) starved this kernel's receive-buffer
autotuning: the buffer stayed at its 128 KB default and every flow was held to ~64 KB in
flight, so one Reno flow over the 16 ms group-B access link of the seed-004 dumbbell
(RTT ~36 ms) carried 21 Mbit/s on a 100 Mbit/s path, and RTT-unfairness in every
experiment was an artefact of the receiver.  Here that flow must fill the link.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from engine_runs import csv_rows, run_spec

from dcnlab.benchmarks.engine.agent import RCV_LOWAT, lowat_for

pytestmark = [
    pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning"),
]


def test_lowat_is_a_small_share_of_the_receive_buffer() -> None:
    assert lowat_for(131072, None) == 8192  # the default buffer: a sixteenth, not 64 KB
    assert lowat_for(4 << 20, None) == RCV_LOWAT  # a grown buffer: capped
    assert lowat_for(4 << 20, 1000) == 1000  # the flow's last bytes wake it
    assert lowat_for(8, None) == 1 and lowat_for(131072, 0) == 1  # never 0


@pytest.mark.network
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths)")
def test_one_long_rtt_flow_fills_the_link(tmp_path: Path) -> None:
    spec = {
        "name": "rcvwin", "topology": "dumbbell:2", "switch": "ext",
        "link": {"rate": "100M", "buffer": 200},
        "schemes": ["dcnlab.apps.single_path"],
        # h2 is the group-B client: 16 ms access delay.
        "workload": {"type": "longlived", "clients": ["h2"], "udp_rate": 0},
        "loads": [1], "seeds": [1], "duration": 8, "warmup": 3, "drain": 5, "settle": 0,
        "congestion": "reno",
    }
    result, out = run_spec(spec, tmp_path)
    assert result.ok and result.not_ok == 0
    (row,) = csv_rows(out / "fairness.csv")
    # 100 Mbit/s of frames is ~94 Mbit/s of TCP payload; 64 KB per 36 ms is ~15-21.
    assert float(row["tcp_mbps"]) > 80, row
