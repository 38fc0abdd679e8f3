"""Paper 001 against its authors' switch: the table of seed001_authors.yaml's results.

Reads the output directory of ``dcnlab run benchmarks/experiments/seed001_authors.yaml``
and prints, per load, each comparison below as the geometric mean of per-seed ratios with
its 95 % interval and the verdict of the reproductions' one rule
(benchmarks/engine/reproduction/verdict.py) against the paper's value where the paper
file (benchmarks/papers/p001.yaml) states one for the same metric, class and load
(its claims on seed001_long.yaml's ovs scenario against ECMP):

- dcnlab's TCP-Path and the authors' against ECMP (the paper's comparison), and the
  authors' ARP-Path and dcnlab's against ECMP;
- the authors' TCP-Path against dcnlab's, and each TCP-Path against its own datapath's
  ARP-Path (the mechanism with the datapath held fixed); for seed001_authors_tfe.yaml's
  results, each TFE against ECMP and the authors' against dcnlab's;
- retransmitted segments per 100 data segments (each flow's size over a 1448-byte MSS)
  per scheme: what each datapath loses;
- per scheme, the means over seeds of the elephants' path diagnosis (flowdiag.csv: the
  share of elephants that met another on a link, their contention, how often the chosen
  path was the least loaded) and of the hosts' TCP recoveries and timeouts per run
  (paths.csv): where the elephants' throughput goes.

    python -m dcnlab.benchmarks.authors_comparison results/seed001_authors [--json F]
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dcnlab.benchmarks.engine.metrics import per_run_metrics
from dcnlab.benchmarks.engine.reproduction import papers
from dcnlab.benchmarks.engine.reproduction import verdict as rule
from dcnlab.benchmarks.engine.results import read_flows

MSS = 1448
METRICS = (("tput_mbps", "elephant", "elephant throughput", rule.HIGHER),
           ("fct_mean", "mouse", "mouse FCT mean", rule.LOWER),
           ("fct_p99", "mouse", "mouse FCT p99", rule.LOWER),
           ("fct_mean", "rabbit", "rabbit FCT mean", rule.LOWER))
# (scheme, baseline): what each comparison isolates
PAIRS = (("tcppath", "ecmp"), ("authors_tcppath", "ecmp"), ("arppath", "ecmp"),
         ("authors_arppath", "ecmp"), ("authors_tcppath", "tcppath"),
         ("authors_arppath", "arppath"), ("tcppath", "arppath"),
         ("authors_tcppath", "authors_arppath"),
         # seed001_authors_tfe.yaml
         ("tfe", "ecmp"), ("authors_tfe", "ecmp"), ("authors_tfe", "tfe"))
AUTHORS = "authors_"  # the authors' switch's schemes: the name of dcnlab's own after it
PAPER_EXPERIMENT, PAPER_SCENARIO = "seed001_long.yaml", "ovs"


Values = dict[tuple[str, float, str, str], dict[int, float]]  # -> {seed: value}


def per_seed_values(rows: Sequence[Mapping[str, Any]]) -> Values:
    """(scheme, load, metric, class) -> {seed: the run's value}, as the engine's summary
    computes them (measured flows only)."""
    out: Values = defaultdict(dict)
    for (scheme, load, seed), figures in per_run_metrics(rows).items():
        for (metric, cls), value in figures.items():
            out[(scheme, load, metric, cls)][seed] = value
    return out


def retransmitted_pct(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str, float], float]:
    """Per (scheme, load): retransmitted segments per 100 data segments, over the
    measured TCP flows that completed."""
    retx: dict[tuple[str, float], float] = defaultdict(float)
    segs: dict[tuple[str, float], float] = defaultdict(float)
    for r in rows:
        if not r.get("measured", True) or r.get("status") != "ok" or r.get("kind") == "udp":
            continue
        if r.get("retransmits") is None or not r.get("size"):
            continue
        key = (str(r["scheme"]), float(r["load"]))
        retx[key] += float(r["retransmits"])
        segs[key] += math.ceil(float(r["size"]) / MSS)
    return {k: 100.0 * retx[k] / segs[k] for k in segs if segs[k]}


# (file, column, header): the diagnosis table's columns, means over a scheme's seeds
DIAGNOSIS = (("flowdiag.csv", "eleph_shared_frac", "elephants sharing"),
             ("flowdiag.csv", "eleph_contention", "contention"),
             ("flowdiag.csv", "least_loaded_path_frac", "least loaded path"),
             ("paths.csv", "recoveries", "TCP recoveries"),
             ("paths.csv", "timeouts", "TCP timeouts"))


def diagnosis(results: Path) -> dict[tuple[str, float], dict[str, float]]:
    """(scheme, load) -> {header: mean over the runs} of :data:`DIAGNOSIS`, from the
    files present (a run without a value is left out of that mean)."""
    sums: dict[tuple[str, float], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(list))
    for name in dict.fromkeys(f for f, _, _ in DIAGNOSIS):
        path = results / name
        if not path.exists():
            continue
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                for file, column, header in DIAGNOSIS:
                    if file == name and row.get(column) not in (None, ""):
                        sums[(row["scheme"], float(row["load"]))][header].append(
                            float(row[column]))
    return {key: {h: sum(v) / len(v) for h, v in cols.items()} for key, cols in sums.items()}


def render_diagnosis(found: Mapping[tuple[str, float], Mapping[str, float]]) -> str:
    headers = [h for _, _, h in DIAGNOSIS]
    lines = ["| load | scheme | " + " | ".join(headers) + " |",
             "|---|---|" + "---|" * len(headers)]
    for (scheme, load), cols in sorted(found.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        cells = [f"{cols[h]:.3g}" if h in cols else "-" for h in headers]
        lines.append(f"| {load:g} | {scheme} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def paper_values(paper: papers.Paper) -> dict[tuple[str, str, str, float], float]:
    """(scheme, metric, class, load) -> the paper's ratio of that scheme to ECMP, from
    its claims on the experiment the comparison repeats."""
    out = {}
    for c in paper.claims:
        if (c.experiment, c.scenario, c.baseline) != (PAPER_EXPERIMENT, PAPER_SCENARIO,
                                                      "ecmp"):
            continue
        if c.paper_value is None or c.compare != rule.RATIO:
            continue
        for value in c.values:
            out[(c.scheme, c.metric, c.cls, float(value))] = c.paper_value
    return out


def comparisons(values: Values, paper: Mapping[tuple[str, str, str, float], float]
                ) -> list[dict[str, Any]]:
    loads = sorted({k[1] for k in values})
    schemes = {k[0] for k in values}
    out = []
    for load in loads:
        for metric, cls, label, direction in METRICS:
            for scheme, base in PAIRS:
                if scheme not in schemes or base not in schemes:
                    continue
                m = rule.per_seed(rule.RATIO, values.get((scheme, load, metric, cls), {}),
                                  values.get((base, load, metric, cls), {}))
                # the paper's value of the same scheme (the authors' or dcnlab's) to ECMP
                theirs = paper.get((scheme.removeprefix(AUTHORS), metric, cls, load)) \
                    if base == "ecmp" else None
                out.append({"load": load, "metric": metric, "class": cls, "label": label,
                            "scheme": scheme, "baseline": base, "seeds": m.n,
                            "ratio": m.estimate, "low": m.low, "high": m.high,
                            "paper": theirs,
                            "verdict": rule.verdict(m, theirs, direction)})
    return out


def _ratio(row: Mapping[str, Any]) -> str:
    if not math.isfinite(row["ratio"]):
        return "-"
    if not (math.isfinite(row["low"]) and math.isfinite(row["high"])):
        return f"x{row['ratio']:.2f}"
    return f"x{row['ratio']:.2f} [{row['low']:.2f}, {row['high']:.2f}]"


def render(rows: Sequence[Mapping[str, Any]],
           retx: Mapping[tuple[str, float], float]) -> str:
    lines = []
    for load in sorted({r["load"] for r in rows} | {ld for _, ld in retx}):
        lines += [f"### load {load:g}", ""]
        here_rows = [r for r in rows if r["load"] == load]
        if here_rows:
            lines += ["| figure | scheme / baseline | seeds | ratio [95 %] | paper | verdict |",
                      "|---|---|---|---|---|---|"]
        for r in here_rows:
            paper = f"x{r['paper']:g}" if r["paper"] is not None else ""
            lines.append(f"| {r['label']} | {r['scheme']} / {r['baseline']} | {r['seeds']} "
                         f"| {_ratio(r)} | {paper} | {r['verdict']} |")
        lines.append("")
        here = sorted((s, v) for (s, ld), v in retx.items() if ld == load)
        if here:
            lines.append("retransmitted segments per 100 data segments: "
                         + ", ".join(f"{s} {v:.2f}" for s, v in here))
            lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dcnlab.benchmarks.authors_comparison",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="seed001_authors.yaml's output directory")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = parser.parse_args(argv)
    rows = read_flows(args.results / "flows.csv")
    found = comparisons(per_seed_values(rows), paper_values(papers.load("p001")))
    retx = retransmitted_pct(rows)
    diag = diagnosis(args.results)
    print(render(found, retx))
    if diag:
        print("means over the runs (flowdiag.csv, paths.csv):\n")
        print(render_diagnosis(diag))
    if args.json is not None:
        args.json.write_text(json.dumps({"comparisons": found, "retransmitted_pct": [
            {"scheme": s, "load": ld, "pct": v} for (s, ld), v in sorted(retx.items())],
            "diagnosis": [{"scheme": s, "load": ld, **v} for (s, ld), v in sorted(diag.items())]},
            indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
