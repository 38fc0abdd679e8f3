"""Helpers for the engine tests that run a small experiment on a real network."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import yaml

from dcnlab.benchmarks.engine import run_experiment
from dcnlab.benchmarks.engine.runner import RunResult


def run_spec(spec: dict[str, Any], tmp_path: Path) -> tuple[RunResult, Path]:
    """Write ``spec`` to tmp_path/spec.yaml (as a user would) and run it into
    tmp_path/out, without a progress bar; returns the result and the out folder."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    out = tmp_path / "out"
    return run_experiment(path, out, progress=False), out


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))
