"""seed003 through the engine on a real network (twopath on switch_ext): the cfs
transport's columns in flows.csv and the summary, and the seed's references (plain TCP
on each path, the kernel's MPTCP) in the same experiment."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_runs import csv_rows, run_spec
from figure_content import assert_readable, errorbar_series, panels, saved_figures

pytestmark = pytest.mark.network

SIZE = 1 << 20


def test_columns_and_references_in_one_run(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    schemes = [{"name": n, "app": "cfs", "transport_options": o} for n, o in (
        ("minrtt", {"scheduler": "minrtt"}), ("redundant", {"scheduler": "redundant"}),
        ("cfs", {"scheduler": "cfs"}), ("minrtt-warm", {"scheduler": "minrtt", "warm": True}),
        ("tcp-path1", {"mode": "tcp", "path": 1}),
        ("tcp-path2", {"mode": "tcp", "path": 2}), ("kernel-mptcp", {"mode": "mptcp"}))]
    spec = {"name": "seed003-mini", "topology": "twopath:reorder=1", "switch": "ext",
            "schemes": schemes, "baseline": "minrtt", "seeds": [1], "warmup": 0,
            "cooldown": 0, "settle": 1, "network": "per_scheme",
            "workload": {"type": "sizes", "src": "h1", "dst": "h2", "repetitions": 2,
                         "gap": 3.0},
            "loads": [SIZE], "duration": 6, "drain": 30}
    figures = saved_figures(monkeypatch)
    result, out = run_spec(spec, tmp_path)
    rows = csv_rows(out / "flows.csv")
    assert len(rows) == 14 and all(r["status"] == "ok" for r in rows), \
        [(r["scheme"], r["error"]) for r in rows if r["status"] != "ok"]
    for r in rows:
        assert int(r["bytes"]) == SIZE, r
        if r["scheme"] in ("tcp-path1", "tcp-path2", "kernel-mptcp"):
            # plain TCP / kernel MPTCP: no dcnlab-mp columns
            assert (r["dup_bytes"], r["subflow_bytes"]) == ("", ""), r
            continue
        dup = int(r["dup_bytes"])
        per_subflow = [int(b) for b in r["subflow_bytes"].split(";")]
        assert len(per_subflow) == 2, r
        # every byte once, plus what was sent again; only redundant and CFS's tail repeat
        assert sum(per_subflow) == SIZE + dup, r
        if r["scheme"] in ("minrtt", "minrtt-warm"):
            assert dup == 0, r
        if r["scheme"] == "minrtt-warm":
            # both subflows up from the first byte: once path 1's initial window is full,
            # minRTT sends on path 2 too (without warm its 200 ms handshake may outlast
            # the transfer)
            assert per_subflow[1] > 0, r
        if r["scheme"] == "cfs":
            assert dup <= per_subflow[1], r  # CFS re-sends only what the slow path carried
        assert int(r["reorder_peak_bytes"]) >= 0
    # plain TCP over path 2 (RTT 200 ms) takes longer than over path 1 (20 ms)
    fct = {s: sum(float(r["fct"]) for r in rows if r["scheme"] == s) for s in
           ("tcp-path1", "tcp-path2")}
    assert fct["tcp-path2"] > fct["tcp-path1"]
    summary = csv_rows(out / "summary.csv")
    assert {r["metric"] for r in summary} >= {"dup_bytes", "reorder_peak_bytes",
                                              "subflow_bytes_1", "subflow_bytes_2"}
    assert (out / "fct_by_size.csv").is_file() and (out / "plots/fct_by_size.png").is_file()
    assert_readable(figures["fct_by_size.png"], "fct_by_size.png")
    (by_size,) = panels(figures["fct_by_size.png"])  # a line per scheme, all completed
    assert errorbar_series(by_size) == [s["name"] for s in schemes]
    assert "FCT across the flows of each size" in result.table
