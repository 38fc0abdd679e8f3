"""The reordering diagnosis in memory: parallel up ports from a topology, the path
figures from stats lines, the hosts' counters, the per-flow columns' summary, and the
new tcp_info fields."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from figure_content import assert_readable, panels, saved_figures, scatter_points

from dcnlab.benchmarks.engine import pathdiag
from dcnlab.benchmarks.engine.metrics import run_metrics, summarize
from dcnlab.benchmarks.engine.replay import merge_records
from dcnlab.benchmarks.engine.table import render
from dcnlab.benchmarks.engine.tcpinfo import TcpInfoStruct, decode
from dcnlab.benchmarks.engine.workloads import Flow
from dcnlab.topo.spec import parse as parse_topology


def test_up_ports_of_a_fat_tree_are_the_edge_and_aggregation_uplinks() -> None:
    topo = parse_topology("fattree:4")
    ups = pathdiag.up_ports([s.name for s in topo.switches],
                            [(lk.a, lk.a_port, lk.b, lk.b_port) for lk in topo.links])
    tiers = {s.name: s.tier for s in topo.switches}
    assert sorted(tiers[s] for s in ups) == ["agg"] * 8 + ["edge"] * 8  # no core
    for sw, ports in ups.items():
        assert len(ports) == 2
        peers = {lk.b if lk.a == sw else lk.a for lk in topo.links
                 if (lk.a == sw and lk.a_port in ports) or (lk.b == sw and lk.b_port in ports)}
        expected = "agg" if tiers[sw] == "edge" else "core"
        assert {tiers[p] for p in peers} == {expected}, sw


def test_a_single_uplink_is_no_parallel_path() -> None:
    links = [("h1", 0, "s1", 1), ("s1", 2, "s2", 1), ("s2", 2, "s3", 1), ("s3", 2, "h2", 0)]
    assert pathdiag.up_ports(["s1", "s2", "s3"], links) == {}


def _line(ts: float, ports: dict[int, tuple[int, int]]) -> dict[str, object]:
    return {"ts": ts, "ports": [{"port": p, "tx_bytes": b, "qlen": q}
                                for p, (b, q) in ports.items()]}


def test_path_figures_split_and_queue_difference() -> None:
    lines = {"s1": [_line(0, {1: (0, 0), 2: (100, 0), 3: (0, 0), 4: (0, 9)}),
                    _line(1, {1: (0, 0), 2: (1100, 10), 3: (3000, 4), 4: (5, 9)}),
                    _line(2, {1: (0, 0), 2: (2100, 0), 3: (6000, 0), 4: (5, 9)})],
             "s2": [_line(0, {1: (0, 0), 2: (0, 0)}), _line(1, {1: (0, 0), 2: (0, 0)})]}
    fig = pathdiag.path_figures({"s1": [2, 3], "s2": [1, 2]}, lines)
    # s1 sent 2000 + 6000 bytes on its up ports 2 and 3: the larger share 0.75, x2
    assert fig["groups"] == 1  # s2 carried nothing
    assert fig["up_split"] == pytest.approx(1.5)
    # samples after the first: (10, 4) busy -> 6; (0, 0) idle, not counted
    assert fig["qdiff_mean"] == pytest.approx(6.0)
    assert fig["q_up"] == pytest.approx((10 + 4 + 0 + 0) / 4)  # idle s2 left out


def test_path_figures_without_stats_are_unknown() -> None:
    fig = pathdiag.path_figures({"s1": [1, 2]}, {})
    assert fig["groups"] == 0 and math.isnan(fig["up_split"]) and math.isnan(fig["q_up"])


def test_stats_lines_skip_a_line_being_written(tmp_path: Path) -> None:
    text = json.dumps(_line(1, {1: (5, 0)})) + "\n" + '{"ts": 2, "po'
    assert [r["ts"] for r in pathdiag.parse_lines(text)] == [1]


def test_run_row_takes_counter_deltas_or_leaves_them_empty() -> None:
    before = dict.fromkeys(pathdiag.TCPEXT, 1)
    after = {**before, "sack_reorder": 41, "undos": 3}
    row = pathdiag.run_row("spray", 8, 1, {"groups": 2.0}, before, after)
    assert row["sack_reorder"] == 40 and row["undos"] == 2 and row["timeouts"] == 0
    assert pathdiag.run_row("spray", 8, 1, {}, None, after)["recoveries"] is None


def test_host_counters_sum_the_tcpext_names_over_hosts() -> None:
    netstat = ("TcpExt: TCPSACKReorder TCPTSReorder TCPSackRecovery TCPDSACKUndo "
               "TCPFullUndo TCPDSACKRecv TCPTimeouts\n"
               "TcpExt: 5 1 7 2 1 4 3\n")

    class Host:
        def cmd(self, _command: str) -> str:
            return netstat

    class Net:
        spec = type("S", (), {"hosts": [type("H", (), {"name": n}) for n in ("h1", "h2")]})

        def host(self, _name: str) -> Host:
            return Host()

    totals = pathdiag.host_counters(Net())
    assert totals == {"sack_reorder": 12, "recoveries": 14, "undos": 6, "dsack_recv": 8,
                      "spurious_rtos": 0, "timeouts": 6}


def test_summary_and_render_of_paths_rows() -> None:
    rows = [{"scheme": s, "load": 8, "seed": seed, "up_split": v, "qdiff_mean": q,
             "undos": u}
            for s, v, q, u in (("ecmp", 1.8, 2.0, 0), ("spray", 1.02, 30.0, 50))
            for seed in (1, 2)]
    summary = pathdiag.summarize(rows, "ecmp")
    by = {(r.scheme, r.metric): r for r in summary}
    assert by[("spray", "qdiff_mean")].ratio == pytest.approx(15.0)
    assert by[("spray", "undos")].mean == 50 and math.isnan(by[("spray", "undos")].ratio)
    text = pathdiag.render(summary, ["ecmp", "spray"], "long_flows")
    assert "queue diff mean (pkts)" in text and "of them undone" in text


def test_plot_points_are_per_run_means_of_the_long_flows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [{"scheme": "spray", "load": 8.0, "seed": 1, "class": "elephant", "status": "ok",
             "measured": True, "reord_seen": n, "bytes": 10_000_000, "fct": f}
            for n, f in ((100, 2.0), (300, 4.0))]
    rows.append({**rows[0], "class": "rabbit", "reord_seen": 9999})
    points = pathdiag.run_points(rows)
    assert points == {("spray", 8.0): [(200.0, pytest.approx(30.0))]}
    figures = saved_figures(monkeypatch)
    files = pathdiag.plot(rows, tmp_path, "long_flows", ["spray"])
    assert files == [tmp_path / pathdiag.PLOT_FILE] and files[0].is_file()
    fig = figures[pathdiag.PLOT_FILE]
    assert_readable(fig, pathdiag.PLOT_FILE)
    (ax,) = panels(fig)  # a panel per sweep value
    assert ax.get_title() == "long_flows = 8" and ax.get_xlabel() == "reorder events / long flow"
    # the run's point: (100 + 300) / 2 events; 10 MB in 2 s and in 4 s: (40 + 20) / 2 Mbit/s
    assert scatter_points(ax) == {"spray": [(200.0, 30.0)]}


def test_diagnosis_columns_reach_the_summary_table() -> None:
    def row(scheme: str, seed: int, retrans: int, reord: int | None) -> dict[str, object]:
        return {"scheme": scheme, "load": 8.0, "seed": seed, "class": "elephant",
                "kind": "tcp", "status": "ok", "size": 10_000_000, "fct": 2.0,
                "bytes": 10_000_000, "retransmits": retrans, "reord_seen": reord,
                "dsack_dups": 0 if reord is not None else None, "ooo": 0, "segs_in": 10}

    one = run_metrics([row("spray", 1, 10, 100), row("spray", 1, 20, None)])
    assert one[("retrans", "elephant")] == 15  # both flows report retransmits
    assert one[("reord_seen", "elephant")] == 100  # only one knows reord_seen
    rows = [row("ecmp", s, 2, 1) for s in (1, 2)] + [row("spray", s, 8, 50) for s in (1, 2)]
    summary = summarize(rows, "ecmp")
    spray = {r.metric: r for r in summary if r.scheme == "spray" and r.cls == "elephant"}
    assert spray["retrans"].ratio == pytest.approx(4.0)
    assert spray["reord_seen"].ratio == pytest.approx(50.0)
    table = render(summary, "ecmp", "long_flows")
    assert "elephant reorder events / flow" in table and "x4.00" in table


def test_sender_reordering_fields_are_decoded_and_merged() -> None:
    st = TcpInfoStruct()
    st.tcpi_total_retrans, st.tcpi_reordering = 7, 42
    st.tcpi_dsack_dups, st.tcpi_reord_seen = 3, 11
    info = decode(bytes(st))
    assert (info.reordering, info.dsack_dups, info.reord_seen) == (42, 3, 11)
    old = decode(bytes(st)[:TcpInfoStruct.tcpi_dsack_dups.offset])  # a 4.x kernel
    assert old.reordering == 42 and old.dsack_dups is None and old.reord_seen is None
    flow = Flow(0, "h1", "h2", 1000, 0.0)
    merged = merge_records([{"role": "tx", "id": 0, "status": "ok", "retrans": 7,
                             "reord_seen": 11, "dsack_dups": 3, "reordering": 42}], [flow])
    assert (merged[0]["reord_seen"], merged[0]["dsack_dups"], merged[0]["reordering"]) == (
        11, 3, 42)
