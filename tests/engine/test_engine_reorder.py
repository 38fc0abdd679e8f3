"""The per-flow reordering columns and the paths section on a real network (root).

Random packet spraying over two spines whose links jitter independently (switch_ext
keeps each link's order, so packets reorder only between the two paths): the long
flow's sender must see reordering (tcpi_reord_seen) or retransmit, every diagnosis
column is filled, and paths.csv shows the leaf's two up ports sharing the bytes.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import pytest
import yaml
from engine_runs import assert_report_rerenders
from figure_content import panels, saved_figures, scatter_points

from dcnlab.benchmarks.engine import run_experiment

pytestmark = [
    pytest.mark.network,
    pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, switch_ext)"),
]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_spraying_over_jittered_paths_fills_the_reordering_columns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = {
        "name": "reorder", "topology": "spineleaf:2,2,1", "switch": "ext",
        "link": {"rate": "20M", "delay": "1ms", "jitter": "2ms"},
        "schemes": [{"name": "spray", "app": "dcnlab.apps.spray",
                     "env": {"DCNLAB_SELECT_MODE": "random"},
                     "switch_options": {"select_mode": "random"}}],
        "workload": {"type": "rps_static", "receiver": "h2", "sources": ["h1"],
                     "short_src": "h1", "long_size": "2MB", "short_size": "100KB",
                     "short_start": "0.5s"},
        "loads": [1], "seeds": [1], "drain": 60, "settle": 0.5,
        "classes": {"mouse_max": "10KB", "elephant_min": "1MB"},
    }
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    figures = saved_figures(monkeypatch)

    result = run_experiment(path, out, progress=False)

    assert result.ok and result.not_ok == 0
    rows = _rows(out / "flows.csv")
    assert len(rows) == 2
    for row in rows:
        for column in ("retransmits", "reord_seen", "dsack_dups", "reordering"):
            assert row[column] != "", (column, row)
        assert int(row["reordering"]) >= 3  # the kernel's threshold starts at 3
    long = next(r for r in rows if r["class"] == "elephant")
    assert int(long["reord_seen"]) > 0 or int(long["retransmits"]) > 0, long
    assert int(long["ooo"]) > 0  # the receiver saw segments above a hole
    paths = _rows(out / "paths.csv")
    assert len(paths) == 1
    run = paths[0]
    assert int(float(run["groups"])) >= 1  # h1's leaf sprayed over its two spines
    split = float(run["up_split"])
    assert 1.0 <= split < 1.5, run  # random per packet: close to even, never one path
    assert math.isfinite(float(run["qdiff_mean"]))
    assert run["recoveries"] != "" and run["sack_reorder"] != ""
    summary = (out / "summary.txt").read_text()
    assert "reorder events / flow" in summary and "up-port split" in summary
    # the figure of throughput against reordering: drawn when the long flow saw some
    reordered = int(long["reord_seen"]) > 0
    assert (out / "plots" / "reorder_vs_throughput.png").is_file() == reordered
    if reordered:
        (ax,) = panels(figures["reorder_vs_throughput.png"])
        ((events, _tput),) = scatter_points(ax)["spray"]  # one run, one long flow
        assert events == int(long["reord_seen"])
    assert_report_rerenders(out, result.table)
