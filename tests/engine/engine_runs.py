"""Helpers for the engine tests that run a small experiment on a real network."""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import Any

import yaml

from dcnlab.benchmarks.engine import report, run_experiment
from dcnlab.benchmarks.engine.runner import RunResult


def run_spec(spec: dict[str, Any], tmp_path: Path) -> tuple[RunResult, Path]:
    """Write ``spec`` to tmp_path/spec.yaml (as a user would) and run it into
    tmp_path/out, without a progress bar; returns the result and the out folder."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    return run_experiment(path, out, progress=False), out


SMALL_CDF = "# test sizes\n1000 0\n10000 0.5\n200000 1\n"


def small_spec_file(tmp_path: Path, name: str, **changes: Any) -> Path:
    """tmp_path/spec.yaml: two schemes (ECMP, single path), two seeds of a few small
    inter-rack flows on spineleaf:2,2,2 at 20 Mbit/s; about 30 s a run. ``changes``
    replace fields."""
    (tmp_path / "small.cdf").write_text(SMALL_CDF)
    spec = {"name": name, "topology": "spineleaf:2,2,2", "switch": "ovs",
            "link": {"rate": "20M"}, "schemes": ["ecmp", "single_path"],
            "workload": {"type": "poisson", "cdf": "small.cdf", "pairs": "inter_rack"},
            "loads": [0.05], "seeds": [1, 2], "duration": 4, "drain": 20, "settle": 0.2,
            **changes}
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def dcnlab_argv(*args: str) -> list[str]:
    """``dcnlab ARGS`` as a user runs it (this interpreter's dcnlab)."""
    return [sys.executable, "-m", "dcnlab.cli", *args]


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def assert_report_rerenders(out: Path, table: str) -> None:
    """With every rendered file removed, ``dcnlab report`` rebuilds them from the saved
    data alone (flows.csv, meta.json...), and the table is the one the run printed."""
    rendered = [out / "summary.txt", out / "summary.csv", *sorted((out / "plots").glob("*"))]
    assert all(p.is_file() for p in rendered) and len(rendered) > 2
    for path in rendered:
        path.unlink()
    again = report(out)
    assert again.table == table
    assert (out / "summary.txt").read_text() == table
    assert all(p.is_file() for p in rendered), [p for p in rendered if not p.is_file()]
