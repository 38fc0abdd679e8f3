"""Fabricated results of the reproduction fixture (tests/fixtures/reproduction/), written
with the engine's own writers (CsvAppender under the engine's column lists, write_json,
runner.spec_summary), so extraction reads exactly what ``dcnlab run`` would have left.

The numbers are chosen so that every claim of the fixture paper p900 has a verdict that
can be computed by hand (see the claims' comments in test_reproduction_extract.py):

- network.csv, per seed s (the same at every sweep value): ``qout_mean`` base 100, fast
  100 e^x(s), slow 100 e^-x(s) with x = -1, -0.9, -1.1 for seeds 1, 2, 3; ``qout_p95``
  twice that for base and fast, 200 for slow; ``drops`` base 50, fast 50 + 5, 7, 9, slow
  50 + 1, -1, 3;
- flows.csv: four flows per run (sizes 5000, 50000, 5000, 50000: mouse, rabbit, mouse,
  rabbit), FCT 0.125 (k + 1) s for flow k under base, half under fast, and, in the size
  sweep, three flows of the sweep's size, 0.25 (k + 1) s under base, half under fast --
  binary fractions, so every ratio is exactly 0.5.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from dcnlab.benchmarks.engine import netstats
from dcnlab.benchmarks.engine.reproduction import registry
from dcnlab.benchmarks.engine.results import FLOW_COLUMNS, CsvAppender, write_json
from dcnlab.benchmarks.engine.runner import spec_summary
from dcnlab.benchmarks.engine.spec import ExperimentSpec, load_specs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "reproduction"
EXPERIMENTS = FIXTURE / "experiments"
PAPERS = FIXTURE / "papers"
X = {1: -1.0, 2: -0.9, 3: -1.1}  # fast's log queue ratio per seed
FAST_DROPS = {1: 5.0, 2: 7.0, 3: 9.0}
SLOW_DROPS = {1: 1.0, 2: -1.0, 3: 3.0}
STARTED = "2026-11-28T10:00:00+0000"
FINISHED = "2026-11-28T10:30:00+0000"
VERSIONS = {"git_commit": "0123456789abcdef0123456789abcdef01234567", "git_dirty": False,
            "dcnlab": "0.1.0"}
MACHINE = {"os": "Debian GNU/Linux 12 (bookworm)", "cpus": 2, "kernel": "6.1.0-test",
           "cpu_model": "Test CPU", "hostname": "not-in-the-summary"}


def use_fixture(monkeypatch: pytest.MonkeyPatch, papers: Path = PAPERS) -> None:
    """Make the fixture's papers and experiments the registry's."""
    monkeypatch.setattr(registry, "PAPERS_DIR", papers)
    monkeypatch.setattr(registry, "EXPERIMENTS_DIR", EXPERIMENTS)


def network_row(scheme: str, load: float, seed: int) -> dict[str, Any]:
    x = X[seed]
    queue = {"base": 100.0, "fast": 100 * math.exp(x), "slow": 100 * math.exp(-x)}[scheme]
    p95 = 200.0 if scheme == "slow" else 2 * queue
    drops = 50 + {"base": 0.0, "fast": FAST_DROPS[seed], "slow": SLOW_DROPS[seed]}[scheme]
    return {"scheme": scheme, "load": load, "seed": seed, "qout_mean": queue,
            "qout_p95": p95, "drops": drops}


def flow_rows(spec: ExperimentSpec, scheme: str, load: float, seed: int
              ) -> list[dict[str, Any]]:
    factor = 0.5 if scheme == "fast" else 1.0
    if spec.sweep == "size":
        sizes, unit = [int(load)] * 3, 0.25
    else:
        sizes, unit = [5000, 50000, 5000, 50000], 0.125
    rows = []
    for k, size in enumerate(sizes):
        cls = ("mouse" if size < spec.classes.mouse_max else
               "elephant" if size > spec.classes.elephant_min else "rabbit")
        rows.append({"scheme": scheme, "load": load, "seed": seed, "flow_id": k,
                     "src": "h2", "dst": "h1", "size": size, "class": cls, "kind": "tcp",
                     "sched": 0.0, "start": 0.0, "end": unit * (k + 1) * factor,
                     "fct": unit * (k + 1) * factor, "bytes": size, "status": "ok",
                     "measured": True})
    return rows


def write_spec_results(out: Path, spec: ExperimentSpec, status: str = "complete",
                       network: bool = True, schemes: list[str] | None = None) -> Path:
    """One experiment's (scenario's) results directory, as ``dcnlab run`` leaves it."""
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "meta.json", {
        "name": spec.name, "scenario": spec.scenario, "status": status,
        "started": STARTED, "finished": FINISHED, "spec_file": str(spec.source),
        "spec": spec_summary(spec), "versions": VERSIONS, "machine": MACHINE,
        "runs": [], "errors": []})
    (out / "spec.yaml").write_bytes(spec.source.read_bytes() if spec.source else b"")
    names = schemes if schemes is not None else [s.name for s in spec.schemes]
    flows = CsvAppender(out / "flows.csv", FLOW_COLUMNS)
    net = CsvAppender(out / netstats.NETWORK_CSV, netstats.COLUMNS) if network else None
    for scheme in names:
        for load in spec.loads:
            for seed in spec.seeds:
                flows.write(flow_rows(spec, scheme, load, seed))
                if net is not None:
                    net.write([network_row(scheme, load, seed)])
    flows.close()
    if net is not None:
        net.close()
    return out


def write_results(out: Path, experiments: Path = EXPERIMENTS) -> Path:
    """The fixture paper's whole reproduction under ``out`` (OUT/<stem>[/<scenario>])."""
    for name in ("tiny", "tiny_sizes"):
        for spec in load_specs(experiments / f"{name}.yaml"):
            where = out / name / spec.scenario if spec.scenario else out / name
            write_spec_results(where, spec)
    return out
