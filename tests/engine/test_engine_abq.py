"""Seed 002 through the engine on a real network: ABQ's own counters become switch.csv
columns (through the abq scheme's declaration; the engine names no scheme).

A short incast on ``incast:6`` (switch_ext, 100 Mbit/s, 400 us links, 80-packet
buffers): six senders x 64 KB to one receiver, three rounds, once with DCTCP over plain
ECN marking and once with the abq scheme (K = 10 packets, so the receiver's port passes
K in every round).  What must hold: switch.csv has a row per run; the abq run's columns
are present, ACKs were held and released, and they add up (held = released + forced out
by cap or hold time + superseded + still held); the other scheme's cells are empty;
the report has the section and re-renders from disk.  queue_series.csv has both runs'
bottleneck queue over time, and its plot is drawn.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from engine_runs import assert_report_rerenders, csv_rows, run_spec

from dcnlab.hosts import dctcp
from dcnlab.topo import ext_switch as ext
from dcnlab.topo.switches import SwitchKindError

pytestmark = [
    pytest.mark.network,
    pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, BPF)"),
]


def test_abq_counters_are_result_columns(tmp_path: Path) -> None:
    try:
        ext.find_binary()
    except SwitchKindError as exc:
        pytest.skip(str(exc))
    if dctcp.needs_bpf() and not dctcp.OBJECT.exists():
        pytest.skip(f"{dctcp.OBJECT} not built (scripts/setup.sh)")
    spec: dict[str, Any] = {
        "name": "abqmini", "topology": "incast:6", "switch": "ext",
        "link": {"rate": "100M", "delay": "400us", "buffer": 80},
        "schemes": [
            {"name": "ecn", "app": "dcnlab.apps.single_path", "congestion": "dctcp",
             "topology_options": ["ecn=40"], "switch_options": {"stats_interval_ms": 20}},
            {"name": "abq", "app": "abq",
             "topology_options": ["ingress@host=abq/k=10p/mode=ece/qmax=80p/hold=20ms"],
             "switch_options": {"stats_interval_ms": 20}}],
        "baseline": "ecn",
        "workload": {"type": "incast", "size": "64KB", "rounds": 3, "interval": 0.5},
        "loads": [6], "seeds": [1], "drain": 20, "settle": 0.5, "rto_min": "100ms",
    }
    result, out = run_spec(spec, tmp_path)
    assert result.ok and result.not_ok == 0, result.errors
    rows = {r["scheme"]: r for r in csv_rows(out / "switch.csv")}
    assert set(rows) == {"ecn", "abq"}
    assert all(v == "" for k, v in rows["ecn"].items() if k.startswith("abq_"))
    abq = {k: int(v) for k, v in rows["abq"].items() if k.startswith("abq_")}
    assert abq["abq_held"] > 0 and abq["abq_released"] > 0, abq
    assert abq["abq_ece_marked"] > 0 and abq["abq_to_cs"] > 0 and abq["abq_qin_peak"] > 0
    assert abq["abq_held"] == (abq["abq_released"] + abq["abq_forced_cap"]
                               + abq["abq_forced_timeout"] + abq["abq_superseded"]
                               + abq["abq_still_held"]), abq
    assert "ABQ ACKs held" in result.table
    # the bottleneck's queue over time (queue_series.csv): each run's course on the port
    # network.csv names, a row per 20 ms stats line, within the 80-frame buffer, the
    # interval's mean never above its peak
    bottleneck = {r["scheme"]: r["bottleneck"] for r in csv_rows(out / "network.csv")}
    series = csv_rows(out / "queue_series.csv")
    for scheme in ("ecn", "abq"):
        mine = [r for r in series if r["scheme"] == scheme]
        assert len(mine) >= 20 and {r["port"] for r in mine} == {bottleneck[scheme]}, mine
        times = [float(r["t"]) for r in mine]
        assert times == sorted(times) and times[-1] - times[0] >= 1.0, times
        peaks = [int(r["qlen_max"]) for r in mine]
        assert 0 < max(peaks) <= 80, peaks
        assert all(float(r["qout_mean"]) <= int(r["qlen_max"]) + 1
                   for r in mine if r["qout_mean"]), mine
    assert list((out / "plots").glob("queue_time_*.png")), "no queue-over-time plot"
    assert_report_rerenders(out, result.table)
