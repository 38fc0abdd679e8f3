"""The exploration broadcast at the leaf switches, per run, on a real network (root):
controller.csv's leaf_copy_bytes, leaf_rx_bytes and bcast_data_pct (the measurement
behind paper 001's Table 2 and Fig. 17).

TCP-Path and ECMP replay the same short Poisson workload between racks of
spineleaf:2,2,2 on Open vSwitch.  What must hold: TCP-Path's copies reached the leaves
(bytes > 0); the leaves received at least every payload byte twice (once from the source
host, once from a spine on the way down), so the bytes they received are counted whole;
the percentage is the copies' bytes over the rest; ECMP, which explores nothing, has
empty cells; the summary shows the row.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from engine_runs import csv_rows, run_spec

pytestmark = [
    pytest.mark.network,
    pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, OVS)"),
]

SMALL_CDF = "# test sizes\n1000 0\n10000 0.4\n100000 0.8\n500000 1\n"


def test_leaf_broadcast_overhead_is_measured_per_run(tmp_path: Path) -> None:
    (tmp_path / "small.cdf").write_text(SMALL_CDF)
    spec = {
        "name": "overhead", "topology": "spineleaf:2,2,2", "switch": "ovs",
        "link": {"rate": "20M"},
        "schemes": ["dcnlab.apps.ecmp", "dcnlab.apps.tcppath"],
        "workload": {"type": "poisson", "cdf": "small.cdf",
                     "pairs": "inter_rack"},
        "loads": [0.2], "seeds": [1], "duration": 4, "drain": 60, "settle": 0.5,
        "classes": {"mouse_max": "10KB", "elephant_min": "1MB"},
    }
    result, out = run_spec(spec, tmp_path)
    assert result.ok and result.not_ok == 0, result.errors

    flows = csv_rows(out / "flows.csv")
    rows = {r["scheme"]: r for r in csv_rows(out / "controller.csv")}
    tcppath, ecmp = rows["tcppath"], rows["ecmp"]
    assert int(tcppath["explorations"]) > 0, tcppath
    copies, rx = int(tcppath["leaf_copy_bytes"]), int(tcppath["leaf_rx_bytes"])
    payload = sum(int(f["bytes"]) for f in flows if f["scheme"] == "tcppath")
    assert copies > 0 and rx >= 2 * payload > 0, (copies, rx, payload)
    # (results CSVs keep 9 decimals)
    assert math.isclose(float(tcppath["bcast_data_pct"]), 100 * copies / (rx - copies),
                        rel_tol=1e-6)
    assert 0 < float(tcppath["bcast_data_pct"]) < 100
    assert ecmp["leaf_copy_bytes"] == "" and ecmp["bcast_data_pct"] == "", ecmp
    assert "exploration / data bytes at leaves (%)" in result.table
