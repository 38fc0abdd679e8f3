"""A minimal results directory for the report tests that need no run: meta.json naming
the schemes (the first is the baseline) and one completed mouse per scheme in flows.csv,
so report() renders; the test adds the CSVs of the family it checks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dcnlab.benchmarks.engine.results import FLOW_COLUMNS, CsvAppender, write_json


def minimal_results(out: Path, schemes: Sequence[str], load: float,
                    topology: str = "fattree:4") -> None:
    out.mkdir(parents=True)
    write_json(out / "meta.json", {"name": "demo", "status": "complete", "spec": {
        "baseline": schemes[0], "sweep": "load", "topology": topology,
        "workload_type": "poisson", "schemes": [{"name": s} for s in schemes]}})
    appender = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    appender.write([{"scheme": s, "load": load, "seed": 1, "flow_id": i, "size": 5000,
                     "kind": "tcp", "class": "mouse", "fct": 0.01 * (i + 1), "status": "ok",
                     "measured": True} for i, s in enumerate(schemes)])
    appender.close()
