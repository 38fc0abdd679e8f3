"""Rule compilation benchmark: fat-trees K=4..48, single_path vs ecmp.

Prints, per K and policy, the wall time to compile every switch's entries and groups
from the network view, and the entries+groups per switch (max and mean), next to what
per-host entries on every switch would cost.  Goal: K=48 (2,880 switches, 27,648 hosts)
compiles in under 60 s on a 2-core machine.

    python -m dcnlab.benchmarks.compile_rules [--k 4 8 16 24 32 48]
"""

from __future__ import annotations

import argparse
import time

from dcnlab.controller.compiler import POLICIES, compile_policy
from dcnlab.controller.view import NetworkView
from dcnlab.topo.spec import parse

GOAL_SECONDS = 60.0


def measure(k: int, policy: str, view: NetworkView) -> dict[str, float]:
    t0 = time.perf_counter()
    rules = compile_policy(view, policy)
    seconds = time.perf_counter() - t0
    sizes = [len(r.flows) + len(r.groups) for r in rules.values()]
    return {"seconds": seconds, "max": max(sizes), "mean": sum(sizes) / len(sizes),
            "total": sum(sizes)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k", type=int, nargs="+", default=[4, 8, 16, 24, 32, 48])
    args = ap.parse_args()
    print(f"{'K':>3} {'switches':>8} {'hosts':>6} {'policy':>11} {'compile s':>9} "
          f"{'max/sw':>6} {'mean/sw':>7} {'total':>8} {'per-host total':>14}")
    for k in args.k:
        view = NetworkView.from_topology(parse(f"fattree:{k}"))
        n_sw, n_hosts = len(view.switches), len(view.hosts)
        for policy in POLICIES:
            m = measure(k, policy, view)
            flag = "" if k != 48 or m["seconds"] < GOAL_SECONDS else "  (over the 60 s goal)"
            print(f"{k:>3} {n_sw:>8} {n_hosts:>6} {policy:>11} {m['seconds']:>9.2f} "
                  f"{m['max']:>6} {m['mean']:>7.1f} {m['total']:>8} {n_sw * n_hosts:>14}{flag}",
                  flush=True)


if __name__ == "__main__":
    main()
