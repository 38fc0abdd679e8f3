"""TFE against TCP-Path: per-flow table size on the same workload (seed 001, Fig. 16).

The paper samples the TCP-Path forwarding table every second in ns-3 (1 Gbit/s links,
10 s ageing) and finds TFE's average at about 5.6 % of TCP-Path's for web search and 5.1 %
for data mining: close to the share of flows that are elephants (> 10 MB), because at
1 Gbit/s most entries belong to short flows waiting out their 10 s idle timeout.

This benchmark runs both apps through the experiment engine on one spine-leaf fabric,
with the same generated flows, and prints per workload and load: the mean and maximum of
the per-flow entries summed over all switches (sampled every 0.5 s during the replay, see
engine/controller_stats.py), the TFE/TCP-Path ratio of the means, and the elephant share
of the generated flows (the paper's expected ~5 %).  Slower links keep elephants alive
for longer, so the ratio grows as the link rate falls: compare ``--rate 10M`` (the
paper's Mininet rate) with a faster ``--switch ext --rate 100M``.

::

    sudo .venv/bin/python -m dcnlab.benchmarks.tfe_table_size \\
        [--rate 10M] [--switch ovs] [--loads 0.2] [--duration 30] [--seeds 1] \\
        [--cdf websearch datamining] [--out DIR]

Prints one JSON document; the engine's results (tables, plots) stay in --out.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

import yaml

from dcnlab.benchmarks.engine import run_experiment
from dcnlab.benchmarks.engine.controller_stats import CONTROLLER_CSV

ELEPHANT = 10_000_000  # bytes: the paper's elephant threshold, as in seed001.yaml


def experiment(args: argparse.Namespace) -> dict[str, Any]:
    """An engine spec: TCP-Path and TFE on one fabric, one scenario per flow-size CDF."""
    return {
        "name": "tfe_table_size",
        "topology": args.topo,
        "switch": args.switch,
        "link": {"rate": args.rate},
        "schemes": ["dcnlab.apps.tcppath",
                    {"name": "tfe", "app": "dcnlab.apps.tfe",
                     "env": {"DCNLAB_TFE_PORTS": "30001-65535", "DCNLAB_TFE_DSCP": "off"}}],
        "baseline": "tcppath",
        "loads": args.loads,
        "seeds": args.seeds,
        "duration": args.duration,
        "warmup": 0,
        "cooldown": 0,
        "drain": args.drain,
        "settle": 12,  # > the 10 s idle timeout: each run starts from an empty table
        "network": "per_scheme",
        "classes": {"mouse_max": "10KB", "elephant_min": "10MB"},
        "marking": {"elephant_min": "10MB", "ports": True, "dscp": 0,
                    "elephant_ports": [30001, 60999], "other_ports": [10000, 29999]},
        "scenarios": {cdf: {"workload": {"type": "poisson", "cdf": cdf,
                                         "pairs": "inter_rack"}} for cdf in args.cdf},
    }


def summarize(out: Path, cdfs: list[str]) -> dict[str, Any]:
    """Per workload and load: mean table sizes of both schemes and their ratio."""
    result: dict[str, Any] = {}
    for cdf in cdfs:
        rows, workload = _read(out / cdf / CONTROLLER_CSV), _read(out / cdf / "workload.csv")
        per_load: dict[str, Any] = {}
        for load in sorted({r["load"] for r in rows}, key=float):
            sizes = [int(w["size"]) for w in workload if w["load"] == load]
            entry: dict[str, Any] = {
                "flows": len(sizes),
                "elephant_share_pct": round(100 * sum(s > ELEPHANT for s in sizes)
                                            / max(1, len(sizes)), 2)}
            for scheme in ("tcppath", "tfe"):
                mine = [r for r in rows if r["load"] == load and r["scheme"] == scheme
                        and r["entries_mean"] != ""]
                entry[scheme] = {
                    "entries_mean": round(statistics.fmean(
                        float(r["entries_mean"]) for r in mine), 1) if mine else None,
                    "entries_max": max((int(r["entries_max"]) for r in mine), default=None),
                    "explorations": sum(int(r["explorations"] or 0) for r in mine)}
            a, b = entry["tcppath"]["entries_mean"], entry["tfe"]["entries_mean"]
            entry["tfe_over_tcppath_pct"] = round(100 * b / a, 2) if a and b is not None \
                else None
            per_load[load] = entry
        result[cdf] = per_load
    return result


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topo", default="spineleaf:4,4,4")
    ap.add_argument("--switch", default="ovs", choices=["ovs", "ext"])
    ap.add_argument("--rate", default="10M", help="link rate (default: the paper's 10M)")
    ap.add_argument("--loads", type=float, nargs="+", default=[0.2])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1])
    ap.add_argument("--duration", type=float, default=30.0, help="s of arrivals per run")
    ap.add_argument("--drain", type=float, default=60.0)
    ap.add_argument("--cdf", nargs="+", default=["websearch", "datamining"],
                    choices=["websearch", "datamining"])
    ap.add_argument("--out", type=Path, default=None,
                    help="results directory (default: a new temporary one)")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="dcnlab-tfe-table-"))
    out.mkdir(parents=True, exist_ok=True)
    spec_file = out / "experiment.yaml"
    spec_file.write_text(yaml.safe_dump(experiment(args), sort_keys=False))
    run_experiment(spec_file, out, progress=True)
    print(json.dumps({"topo": args.topo, "switch": args.switch, "rate": args.rate,
                      "duration_s": args.duration, "seeds": args.seeds, "results": str(out),
                      "paper_pct": {"websearch": 5.6, "datamining": 5.1},
                      **summarize(out, args.cdf)}, indent=1))


if __name__ == "__main__":
    main()
