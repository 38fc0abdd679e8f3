"""Benchmark: switch_ext's flow-table lookup, its tuple-space index against the linear scan.

    .venv/bin/python -m dcnlab.benchmarks.switch_lookup [--sizes 10,100,1000,5000]
        [--binary PATH] [--json FILE]

Runs ``dcnlab-switch --bench-lookup SIZES`` (switch_ext/src/bench.rs), which builds, per
size N, one flow table shaped like TCP-Path's data-plane pipeline on a leaf with 4
fabric and 4 host ports: the pipeline's 46 wildcard entries (the shapes and priorities
of ``dcnlab/schemes/tcppath/dataplane.py``'s static entries, tables 0-6 in one,
DEFAULT's routes left out: more for the scan to pass than any one table holds) plus N
learned exact entries, half per-flow entries (in_port, eth_src/dst, eth_type, ip_proto,
tcp_src/dst, priority 800) and half locks (the same tuple without in_port, priority
100). 1024 packets, three in four of a learned connection (they hit its per-flow entry),
one in four of a new connection (it falls through to the wildcard entries). Side by side
in one process, alternating, the fastest of 2 x 5 passes of at least 40 ms each:

- lookup: ``FlowTable::lookup_linear`` (the scan every packet did before) against
  ``FlowTable::find`` (the index; what ``lookup`` uses), ns per packet;
- replace: the OFPFC_ADD check for an entry of the same priority and match (what every
  ``learn`` action does), scan against index, ns per flow mod.

Both answer the same for every packet and flow mod (the binary stops otherwise).  Needs
no root and no network; about 2 s per size.

Measured 2026-11-24 (one run, ``--sizes 10,100,1000,5000``, under the measurement lock at
raised priority on the otherwise idle 2-core lab VM)::

    learned  entries  shapes  lookup scan  index  speedup  replace scan  index  speedup
         10       56      14       292 ns  127 ns     2.3x         50 ns  130 ns     0.4x
        100      146      14       670 ns  144 ns     4.7x        210 ns  150 ns     1.4x
       1000     1046      14      3759 ns  175 ns    21.5x       1501 ns  177 ns     8.5x
       5000     5046      14     18376 ns  199 ns    92.2x      10533 ns  259 ns    40.7x

The index costs one hash probe per match shape visited (shapes in order of their highest
priority, stopping once none left can beat the hit), so its time hardly grows with N;
the scan's grows linearly. With 10 learned entries (56 in all) the replace check is
slower through the index (it hashes the new match's shape and values: ~80 ns more than
finding it among a few entries by priority).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dcnlab.topo.ext_switch import find_binary


def run(binary: str, sizes: Sequence[int]) -> dict[str, Any]:
    """The binary's JSON document for these table sizes."""
    proc = subprocess.run([binary, "--bench-lookup", ",".join(map(str, sizes))],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{binary} --bench-lookup failed ({proc.returncode}): "
                           f"{proc.stderr.strip()}")
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def table(doc: dict[str, Any]) -> str:
    lines = ["learned  entries  shapes  lookup scan  index  speedup  "
             "replace scan  index  speedup"]
    for r in doc["rows"]:
        lines.append(
            f"{r['learned']:7d} {r['entries']:8d} {r['shapes']:7d} "
            f"{r['lookup_linear_ns']:9.0f} ns {r['lookup_index_ns']:4.0f} ns "
            f"{r['lookup_speedup']:7.1f}x "
            f"{r['replace_linear_ns']:10.0f} ns {r['replace_index_ns']:4.0f} ns "
            f"{r['replace_speedup']:7.1f}x")
    return "\n".join(lines)


def parse_sizes(text: str) -> list[int]:
    try:
        sizes = [int(s) for s in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}': expected sizes like 10,100,1000") from None
    if not sizes or any(not 0 <= s <= 100_000 for s in sizes):
        raise argparse.ArgumentTypeError(f"'{text}': each size must be 0..100000")
    return sizes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=[10, 100, 1000, 5000],
                        help="learned entries per table, comma-separated")
    parser.add_argument("--binary", help="dcnlab-switch to run (default: the source tree's)")
    parser.add_argument("--json", type=Path, help="also write the JSON document here")
    args = parser.parse_args(argv)
    doc = run(find_binary(args.binary), args.sizes)
    print(table(doc))
    print(json.dumps(doc, indent=1))
    if args.json is not None:
        args.json.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
