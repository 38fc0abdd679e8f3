"""The datapath latency benchmark's table (benchmarks/datapath_latency.py), in memory:
percentiles and each setup's p50 against the first setup's."""

from __future__ import annotations

from dcnlab.benchmarks import datapath_latency as dl


def test_percentiles_and_ratios_to_the_first_setup() -> None:
    fast = {"setup": "ovs/ecmp", "ping_ms": dl._percentiles([1.0] * 10),
            "ping_lost": 0, "connect_ms": dl._percentiles([2.0] * 10), "connect_failed": 0}
    slow = {"setup": "authors-tcppath/switch_forwarding",
            "ping_ms": dl._percentiles([3.0] * 9 + [30.0]), "ping_lost": 1,
            "connect_ms": {"n": 0}, "connect_failed": 10}
    assert slow["ping_ms"]["p50"] == 3.0 and slow["ping_ms"]["p99"] > 20
    text = dl.render([fast, slow]).splitlines()
    assert "1.00/1.00/1.00" in text[1] and "x1.00" in text[1]
    assert "x3.00" in text[2] and "lost 1 pings, 10 connects failed" in text[2]
    assert text[2].split()[-1] != "x1.00"
