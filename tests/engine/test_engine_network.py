"""Experiments on a real network (root, Mininet, Open vSwitch, ryu-manager).

A mini run compares ECMP and single-path on a k=4 fat-tree: every flow completes and
every row is written, with the same flow list for both schemes.  A run in which one
host's agent dies ends with a clear error and keeps every row it had.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from engine_procs import agent_pid
from engine_runs import assert_report_rerenders
from figure_content import (
    assert_readable,
    bar_series,
    intervals,
    line_series,
    panels,
    saved_figures,
)
from toy_section import toy_registered

from dcnlab.benchmarks.engine import ExperimentError, run_experiment
from dcnlab.benchmarks.engine.spec import flows_for, load_spec

pytestmark = [
    pytest.mark.network,
    pytest.mark.filterwarnings("ignore:distutils Version classes:DeprecationWarning"),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, veths, OVS)"),
]

# Sizes up to 2 MB keep the run short; any two-column CDF file is accepted.
SMALL_CDF = "# test sizes\n1000 0\n10000 0.4\n100000 0.8\n2000000 1\n"


def _write_spec(tmp_path: Path, **fields: Any) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    return path


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_mini_run_every_flow_completes_and_every_row_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "small.cdf").write_text(SMALL_CDF)
    spec_path = _write_spec(
        tmp_path, name="mini", topology="fattree:4", switch="ovs", link={"rate": "20M"},
        schemes=["dcnlab.apps.ecmp", {"name": "single", "app": "dcnlab.apps.single_path"}],
        workload={"type": "poisson", "cdf": "small.cdf", "pairs": "inter_rack"},
        loads=[0.05], seeds=[4], duration=3.5, warmup=0.5, drain=60, settle=0.5,
        classes={"mouse_max": "10KB", "elephant_min": "1MB"},
        marking={"elephant_min": "1MB"}, agent={"sample_interval": 0.2})
    flows = flows_for(load_spec(spec_path), 4, 0.05)
    assert 20 <= len(flows) <= 45  # "about 30 flows" for this seed
    out = tmp_path / "out"
    figures = saved_figures(monkeypatch)

    with toy_registered():  # a result section added here, through the registry alone
        result = run_experiment(spec_path, out, progress=False)

    assert result.ok and result.runs == 2
    assert result.rows == 2 * len(flows) and result.not_ok == 0
    toy = _rows(out / "toy.csv")  # the section's CSV: one row per run, with its flows
    assert [(r["scheme"], int(r["flows"])) for r in toy] == [("ecmp", len(flows)),
                                                             ("single", len(flows))]
    assert f"toy section: ecmp {len(flows)} flows per run" in result.table
    assert {r["scheme"] for r in _rows(out / "summary.csv") if r["metric"] == "toy_flows"} \
        == {"ecmp", "single"}
    # the engine's own sections: FCT slowdown from the topology (ovs keeps no stats file,
    # so no imbalance or throughput rows)
    assert "FCT slowdown: FCT / ideal FCT" in result.table
    for name in ("imbalance.csv", "throughput.csv"):
        assert (out / name).is_file() and _rows(out / name) == [], name
    rows = _rows(out / "flows.csv")
    assert len(rows) == 2 * len(flows)
    assert {r["status"] for r in rows} == {"ok"}
    by_scheme: dict[str, dict[int, dict[str, str]]] = {}
    for r in rows:
        by_scheme.setdefault(r["scheme"], {})[int(r["flow_id"])] = r
    assert set(by_scheme) == {"ecmp", "single"}
    for flow in flows:
        for scheme in ("ecmp", "single"):
            row = by_scheme[scheme][flow.id]
            # The same flow, from the same source port, for both schemes.
            assert (row["src"], row["dst"], int(row["size"]), int(row["sport"])) == (
                flow.src, flow.dst, flow.size, flow.sport)
            assert int(row["bytes"]) == flow.size and float(row["fct"]) > 0
            assert row["retransmits"] != "" and row["ooo"] != ""
    elephants = [f for f in flows if f.size > 1_000_000]
    assert elephants  # this seed draws two: the mark below is really checked
    for scheme in ("ecmp", "single"):
        assert all(int(by_scheme[scheme][f.id]["sport"]) > 30000 for f in elephants)
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["errors"] == []
    assert meta["versions"]["ryu"] == "4.34" and meta["machine"]["cpus"]
    assert len(meta["runs"]) == 2 and all(r["not_ok"] == 0 for r in meta["runs"])
    for name in ("spec.yaml", "workload.csv", "summary.csv", "summary.txt", "samples.csv",
                 "plots/fct_cdf_load0.05.png", "plots/fct_by_class.png"):
        assert (out / name).is_file(), name
    for name in ("fct_cdf_load0.05.png", "fct_by_class.png"):
        assert_readable(figures[name], name)
    (cdf,) = panels(figures["fct_cdf_load0.05.png"])
    assert [label.split(" (n=")[0] for label in line_series(cdf)] == ["ecmp", "single"]
    for ax in panels(figures["fct_by_class.png"]):  # a class with flows: both ran them
        assert bar_series(ax) == ["ecmp", "single"]
        assert all(low > 0 for low, _high in intervals(ax))
    assert "x" in result.table and "single" in result.table
    with toy_registered():  # the report renders the same sections as the run did
        assert_report_rerenders(out, result.table)


def test_an_agent_dying_mid_run_ends_with_a_clear_error(tmp_path: Path) -> None:
    spec_path = _write_spec(
        tmp_path, name="dies", topology="fattree:4", switch="ovs", link={"rate": "20M"},
        schemes=["dcnlab.apps.ecmp"],
        workload={"type": "rps_static", "receiver": "h16", "sources": ["h1", "h2", "h3"],
                  "short_src": "h1", "long_size": "5MB", "short_size": "200KB",
                  "short_start": 1.0},
        loads=[3], seeds=[1], drain=30)
    out = tmp_path / "out"
    plan = out / "runs" / "ecmp" / "seed1_long_flows3" / "plan_h3.json"
    killed: list[int] = []

    def kill_h3_agent() -> None:
        pid = agent_pid(plan, timeout=120)
        time.sleep(1.5)  # its 5 MB flow is under way (it needs ~2 s alone at 20 Mbit/s)
        os.kill(pid, signal.SIGKILL)  # the agent this test's run started, by PID
        killed.append(pid)

    killer = threading.Thread(target=kill_h3_agent, daemon=True)
    killer.start()
    with pytest.raises(ExperimentError) as info:
        run_experiment(spec_path, out, progress=False)
    killer.join(5)
    assert killed
    message = str(info.value)
    assert "agent on h3" in message and "signal 9" in message
    assert "flows.csv" in message
    rows = _rows(out / "flows.csv")
    assert len(rows) == 4  # every flow of the run has its row
    status = {r["src"] + "/" + r["tag"]: r["status"] for r in rows}
    assert status["h3/long"] == "agent_died"
    assert status["h1/long"] == "ok" and status["h2/long"] == "ok"
    assert status["h1/short"] == "ok"
    result = info.value.result
    assert result is not None and result.rows == 4 and result.not_ok == 1
    meta = json.loads((out / "meta.json").read_text())
    assert meta["status"] == "failed" and "agent on h3" in meta["errors"][0]
    assert (out / "summary.txt").is_file()
