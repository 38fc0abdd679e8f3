"""Seed 004's variable scenario on a real network: clients stop and start again.

A tiny longlived experiment on ``dumbbell:4`` (switch_ext, 100 Mbit/s, 50-packet buffers
as in test_engine_uc3.py): h1, h2 in group A, h3, h4 in group B send to the server with
TCP NewReno under the ``uc3`` app and its host agents (no reallocation, no UDP).  The
schedule stops one client of each group at 3 s (h2 and h4, each group's last) and starts
them again at 5 s as new connections; the run lasts 8 s.

What must hold: every connection, the restarted ones too, ends ``ok`` in flows.csv with
bytes received; the restarted ones are new flows from h2 and h4 that began on time;
fairness_series.csv counts 4, then 2, then 4 flows, each period only the flows that send
during all of it; and the allocation follows the clients: while two clients run they
fill the link fairly, and after the restart the four share it fairly again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from engine_runs import csv_rows, run_spec

pytestmark = [
    pytest.mark.network,
    pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, BPF, cgroups)"),
]


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_clients_stop_and_start_again_under_uc3(tmp_path: Path) -> None:
    spec: dict[str, Any] = {
        "name": "schedule", "topology": "dumbbell:4", "switch": "ext",
        "link": {"rate": "100M", "buffer": 50},
        "schemes": [{"name": "uc3", "app": "uc3",
                     "env": {"DCNLAB_UC3_INTERVAL": "0.05",
                             "DCNLAB_UC3_REALLOCATION": "0"}}],
        "workload": {"type": "longlived", "udp_rate": 0,
                     "schedule": [{"at": 3, "stop": 1}, {"at": 5, "start": 1}]},
        "loads": [4], "seeds": [1], "duration": 8, "warmup": 1, "drain": 5, "settle": 1,
        "congestion": "reno",
    }
    result, out = run_spec(spec, tmp_path)
    assert result.ok and result.runs == 1 and result.not_ok == 0

    flows = csv_rows(out / "flows.csv")
    assert len(flows) == 6 and all(r["status"] == "ok" for r in flows), flows
    assert all(int(r["bytes"]) > 0 for r in flows), flows
    again = [r for r in flows if float(r["sched"]) == 5.0]
    assert sorted(r["src"] for r in again) == ["h2", "h4"]
    assert all(float(r["late"]) < 0.1 for r in again), again
    first = {r["src"]: r for r in flows if float(r["sched"]) == 0.0}
    assert {first[h]["flow_id"] for h in ("h2", "h4")}.isdisjoint(
        {r["flow_id"] for r in again})

    series = [r for r in csv_rows(out / "fairness_series.csv") if float(r["t"]) <= 8.0 + 1e-6]
    counts = {round(float(r["t"]), 1): int(r["flows"]) for r in series}
    assert {counts[t] for t in (1.0, 2.0, 3.0)} == {4}
    assert {counts[t] for t in (3.1, 4.0, 5.0)} == {2}
    assert {counts[t] for t in (5.1, 7.0, 8.0)} == {4}

    def period(low: float, high: float, column: str) -> list[float]:
        return [float(r[column]) for r in series if low < float(r["t"]) <= high]

    # two clients alone (from 3.5 s, once the stopped ones' last bytes are in): each
    # gets half the link; four again from 6 s (1 s after the restart): a quarter each
    assert _mean(period(3.5, 5.0, "jain")) > 0.9, series
    # The two take what the four took (clamped to a quarter each they would carry half
    # of it).  Compared with the four-client period of the same run, not with the link's
    # 100 Mbit/s: on a loaded CI machine the two carried 79 Mbit/s through switch_ext.
    four, two = _mean(period(1.5, 3.0, "tcp_mbps")), _mean(period(3.5, 5.0, "tcp_mbps"))
    assert two > 0.8 * four, (four, two, series)
    assert _mean(period(6.0, 8.0, "jain")) > 0.9, series
