"""TCP-Path set-up cost (seed 001), measured, not asserted:

* connect() latency (median, p99) of short connections, TCP-Path vs ECMP, with the same
  host pairs and source ports in one invocation;
* broadcast control overhead: exploration copies punted at leaf switches per exploration
  and their size, against the paper's ``NS*(NL-1)`` copies of ``LB`` = 64 bytes, and the
  resulting broadcast-to-data ratio ``copies*L_copy / (2*LF)`` for the web-search and
  data-mining mean flow sizes, next to the paper's formula ``NS*(NL-1)/2 * LB/LF``.

::

    .venv/bin/python -m dcnlab.benchmarks.tcppath_setup [--topo spineleaf:4,4,4] [--pairs 20]

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any

import numpy as np

from dcnlab.benchmarks.engine.cdf import load_cdf
from dcnlab.model.runtime import ControllerState
from dcnlab.topo.network import Network
from dcnlab.topo.spec import TopologySpec, parse

PORT = 7000
TOOL = [sys.executable, "-m", "dcnlab.benchmarks.tcp_connect"]
PAPER_LB = 64


def _pairs(spec: TopologySpec, n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    edge = {h.name: h.interfaces[0].switch for h in spec.hosts}
    out: list[tuple[str, str]] = []
    while len(out) < n:
        a, b = rng.sample(sorted(edge), 2)
        if edge[a] != edge[b]:
            out.append((a, b))
    return out


def _run(spec: TopologySpec, app: str, pairs: list[tuple[str, str]],
         per_pair: int) -> tuple[list[float], ControllerState | None]:
    with Network(spec, app=app) as net:
        servers = [h.popen([*TOOL, "serve", "--port", str(PORT)]) for h in net.hosts]
        time.sleep(0.5)
        latencies: list[float] = []
        try:
            for i, (a, b) in enumerate(pairs):
                proc = net.host(a).popen([*TOOL, "connect", "--host", net.host(b).IP(),
                                          "--port", str(PORT), "--sport",
                                          str(40000 + i * per_pair), "--count",
                                          str(per_pair), "--interval", "0.02"], stdout=-1)
                out, _ = proc.communicate(timeout=120)
                latencies += [r["connect_s"] for r in json.loads(out)["connections"]
                              if r["ok"]]
            time.sleep(0.5)
            state = net.state()
        finally:
            for p in servers:
                p.kill()
                p.wait()
    return latencies, state


def _summary(lat: list[float]) -> dict[str, Any]:
    a = np.array(lat) * 1e3
    return {"n": len(lat), "median_ms": round(float(np.median(a)), 3),
            "p99_ms": round(float(np.percentile(a, 99)), 3),
            "mean_ms": round(float(a.mean()), 3)}


def overhead(spec: TopologySpec, state: ControllerState | None) -> dict[str, Any]:
    """Exploration overhead from the tcppath app's state (zeros when it wrote none)."""
    leaves = {str(s.dpid) for s in spec.switches if s.tier in ("leaf", "edge", "rack")}
    ns = sum(1 for s in spec.switches if s.tier == "spine")
    nl = len(leaves)
    tp = state.get("tcppath") if state else None
    explorations = state["counters"].get("tcppath_explorations", 0) if state else 0
    at_leaves = sum(n for d, n in tp["copies_in"].items() if d in leaves) if tp else 0
    per_expl = at_leaves / explorations if explorations else 0.0
    copy_bytes = tp["copy_bytes"] if tp else 0
    out: dict[str, Any] = {"spines": ns, "leaves": nl, "explorations": explorations,
                           "copies_at_leaves_per_exploration": round(per_expl, 2),
                           "paper_copies_at_leaves": ns * (nl - 1),
                           "copy_bytes": copy_bytes, "paper_LB": PAPER_LB}
    for name in ("websearch", "datamining"):
        lf = load_cdf(name, None).mean()
        out[name] = {
            "mean_flow_bytes": round(lf),
            "measured_ratio_pct": round(100 * per_expl * copy_bytes / (2 * lf), 4),
            "paper_formula_pct": round(100 * ns * (nl - 1) / 2 * PAPER_LB / lf, 4),
        }
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topo", default="spineleaf:4,4,4")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--per-pair", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    spec = parse(args.topo)
    pairs = _pairs(spec, args.pairs, args.seed)
    result: dict[str, Any] = {"topo": spec.spec, "pairs": len(pairs), "per_pair": args.per_pair}
    for app in ("ecmp", "tcppath"):
        lat, state = _run(spec, f"dcnlab.apps.{app}", pairs, args.per_pair)
        result[app] = _summary(lat)
        if app == "tcppath":
            result["overhead"] = overhead(spec, state)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
