"""Benchmark: what going through Dask costs, and what more machines would buy.

    sudo .venv/bin/python -m dcnlab.benchmarks.cluster_scaling
        [--experiment benchmarks/experiments/ecmp_vs_single.yaml] [--seeds 1,2]
        [--modes sequential,local:1,local:2] [--project DIR] [--project-seeds 10]
        [--json FILE]

1. The same experiment run as ``dcnlab run`` would, once per mode, one after the other in
   this one invocation (same machine, same load): sequential (the local runner), then
   ``--cluster local:1`` and ``--cluster local:2``.  Printed: each mode's wall time and
   its ratio to sequential.  local:1 / sequential is Dask's overhead (workers starting,
   the task's child process, results shipped back and merged, and, with ``network:
   per_scheme``, the extra network start-ups of a task per (scheme, seed)), also as
   seconds per run.  local:2 on a 2-core machine runs two emulations on the cores one
   carries alone: its ratio says how much that machine gains, not what two machines would.
2. A projection from measured durations: the wall time of an experiment (``--project
   DIR``, a results directory or one scenario's, by default
   ``results/p001/seed001_long/ovs``, where ``dcnlab reproduce p001`` puts seed001_long's
   OVS scenario) at ``--project-seeds`` seeds on 1, 4 and 16 machines.  Each (scheme,
   seed) task lasts a network start-up (the directory's median ``startup_s`` per scheme)
   plus its runs (the median ``elapsed_s`` per scheme and sweep value; a scheme or value
   not measured yet takes the median of the other schemes' runs at that value, and is
   named) plus the settle pauses between them; tasks go, in the order the cluster client
   submits them (scheme by scheme, seed by seed), each to the machine that is free
   first, as a free Dask worker takes the next task; the projection is when the last
   machine ends.

Needs root (the runs build networks).  Stops only what it started; each mode's results
directory is kept under ``--out`` (default a temporary directory) for inspection.
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from dcnlab.benchmarks.engine.runner import hours
from dcnlab.benchmarks.engine.spec import load_specs

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EXPERIMENT = ROOT / "benchmarks" / "experiments" / "ecmp_vs_single.yaml"
DEFAULT_PROJECT = Path("results/p001/seed001_long/ovs")  # dcnlab reproduce p001's default
MACHINES = (1, 4, 16)


def run_mode(mode: str, experiment: Path, seeds: str, out: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "dcnlab.cli", "run", str(experiment), "--out", str(out),
            "--quiet", "--seeds", seeds]
    if mode != "sequential":
        argv += ["--cluster", mode]
    began = time.monotonic()
    ran = subprocess.run(argv, capture_output=True, text=True)
    wall = time.monotonic() - began
    if ran.returncode != 0:
        raise SystemExit(f"{mode}: dcnlab run failed ({ran.returncode}):\n{ran.stderr[-2000:]}")
    meta = json.loads((out / "meta.json").read_text())
    return {"mode": mode, "wall_s": round(wall, 1), "runs": len(meta["runs"]),
            "networks": len(meta["networks"]),
            "run_s": round(sum(r["elapsed_s"] for r in meta["runs"]), 1)}


def project(results: Path, seeds: int, machines: tuple[int, ...] = MACHINES
            ) -> tuple[dict[int, float], list[str]]:
    """Projected wall seconds of ``results``' experiment at ``seeds`` seeds on each
    number of machines (see the module doc), and the (scheme, value) runs filled in from
    the other schemes."""
    meta = json.loads((results / "meta.json").read_text())
    [spec] = [s for s in load_specs(results / "spec.yaml")
              if s.scenario == meta.get("scenario")]
    elapsed: dict[tuple[str, float], list[float]] = defaultdict(list)
    for run in meta["runs"]:
        elapsed[(run["scheme"], float(run["load"]))].append(run["elapsed_s"])
    startup: dict[str, list[float]] = defaultdict(list)
    for network in meta["networks"]:
        startup[network["scheme"]].append(network["startup_s"])
    every_startup = [x for xs in startup.values() for x in xs]
    filled, tasks = [], []
    for scheme in spec.schemes:
        per_seed = statistics.median(startup.get(scheme.name) or every_startup or [30.0])
        per_seed += spec.settle * (len(spec.loads) - 1)
        for value in spec.loads:
            mine = elapsed.get((scheme.name, float(value)))
            if not mine:
                mine = [x for (_, v), xs in elapsed.items() if v == float(value) for x in xs]
                filled.append(f"{scheme.name} {spec.sweep} {value}")
            if not mine:
                raise SystemExit(f"{results}: no run measured at {spec.sweep} {value}")
            per_seed += statistics.median(mine)
        tasks += [per_seed] * seeds
    return {m: _makespan(tasks, m) for m in machines}, filled


def _makespan(tasks: list[float], machines: int) -> float:
    loads = [0.0] * machines
    heapq.heapify(loads)
    for task in tasks:  # in submission order: the next task to the first free machine
        heapq.heappush(loads, heapq.heappop(loads) + task)
    return max(loads)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--experiment", type=Path, default=DEFAULT_EXPERIMENT)
    p.add_argument("--seeds", default="1,2", help="the seeds each mode runs (1,2)")
    p.add_argument("--modes", default="sequential,local:1,local:2")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--project", type=Path, default=None,
                   help="a results directory to project from (default: seed001_long's)")
    p.add_argument("--project-seeds", type=int, default=10)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="dcnlab-cluster-bench-"))
    modes = [m for m in args.modes.split(",") if m]
    measured = []
    for mode in modes:
        print(f"== {mode}", file=sys.stderr, flush=True)
        measured.append(run_mode(mode, args.experiment, args.seeds,
                                 out / mode.replace(":", "")))
    base = next((m for m in measured if m["mode"] == "sequential"), measured[0])
    print(f"\n{args.experiment.name}, seeds {args.seeds}, modes one after another here")
    print(f"{'mode':<12} {'wall s':>8} {'x seq':>6} {'runs':>5} {'networks':>9} "
          f"{'overhead s/run':>15}")
    for m in measured:
        m["ratio"] = round(m["wall_s"] / base["wall_s"], 3)
        m["overhead_s_per_run"] = round((m["wall_s"] - base["wall_s"]) / max(1, m["runs"]), 2)
        print(f"{m['mode']:<12} {m['wall_s']:>8.1f} {m['ratio']:>6.2f} {m['runs']:>5} "
              f"{m['networks']:>9} {m['overhead_s_per_run']:>15.2f}")
    report: dict[str, Any] = {"experiment": str(args.experiment), "seeds": args.seeds,
                              "modes": measured, "results": str(out)}
    source = args.project or DEFAULT_PROJECT
    if source.exists():
        projected, filled = project(source, args.project_seeds)
        report["projection"] = {"from": str(source), "seeds": args.project_seeds,
                                "wall_s": projected, "filled_from_other_schemes": filled}
        print(f"\nprojected from {source} at {args.project_seeds} seeds:")
        for machines, seconds in projected.items():
            print(f"  {machines:>3} machine(s): {hours(seconds)}")
        if filled:
            print(f"  (not measured yet, taken from the other schemes: {', '.join(filled)})")
    else:
        print(f"\nno projection: {source} does not exist (give --project DIR)")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
