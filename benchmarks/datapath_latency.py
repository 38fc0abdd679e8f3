"""Benchmark: what one packet and one short connection cost across a fabric, per
datapath and scheme, side by side in one run.

    sudo .venv/bin/python -m dcnlab.benchmarks.datapath_latency \\
        [--setups ovs/ecmp,ovs/tcppath,authors-tcppath/switch_forwarding] \\
        [--topo spineleaf:4,4,4] [--pings 200] [--connects 100] [--json FILE]

A setup is ``SWITCH_KIND/SCHEME``; the authors' switch kinds need ``DCNLAB_OFSS_BUILDS``
(``python -m dcnlab.benchmarks.authors_switch``). For each, one network of ``--topo``
without link shaping (rate 1000M, so no queue forms and what is measured is the
switches' own work), warmed by one ping per host pair, then from the first host to the
last (different racks: a path over the top tier):

- ``ping``: ``--pings`` echoes 20 ms apart; RTT percentiles (ms).
- ``connect``: ``--connects`` sequential TCP connections (each a SYN, SYN-ACK, ACK, 1 KB
  each way and a close; under TCP-Path each SYN is explored); connect() latency
  percentiles (ms), from :mod:`dcnlab.benchmarks.tcp_connect`.

Printed: per setup the p50/p90/p99 of both, and each setup's p50 as a ratio to the first
setup's (the same machine, one after the other). Speed lives here, never in tests; run it
with nothing else heavy on the machine and keep the conditions (printed with the numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcnlab.benchmarks.engine import environment
from dcnlab.topo.network import Network
from dcnlab.topo.readiness import in_host, wait_listening

PROBE_PORT = 7100
SPORT = 47000
RTT_RE = re.compile(r"time=([0-9.]+) ms")


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    arr = np.asarray(values)
    return {"n": len(values), "p50": float(np.percentile(arr, 50)),
            "p90": float(np.percentile(arr, 90)), "p99": float(np.percentile(arr, 99))}


def measure(topo: str, kind: str, scheme: str, pings: int, connects: int) -> dict[str, Any]:
    from dcnlab.schemes import registry

    with Network(f"{topo},rate=1000M", app=registry.app_module(scheme), switch=kind) as net:
        hosts = [net.host(h.name) for h in net.spec.hosts]
        for h in hosts[1:]:  # learned paths and ARP everywhere first
            hosts[0].cmd(f"ping -c1 -W2 {h.IP()} >/dev/null")
        src, dst = hosts[0], hosts[-1]
        out = src.cmd(f"ping -c {pings} -i 0.02 -W 2 {dst.IP()}")
        rtts = [float(m) for m in RTT_RE.findall(out)]
        server = dst.popen([sys.executable, "-m", "dcnlab.benchmarks.tcp_connect", "serve",
                            "--port", str(PROBE_PORT)])
        try:
            wait_listening(in_host(dst), PROBE_PORT, what="probe server")
            client = src.popen([sys.executable, "-m", "dcnlab.benchmarks.tcp_connect",
                                "connect", "--host", dst.IP(), "--port", str(PROBE_PORT),
                                "--sport", str(SPORT), "--count", str(connects),
                                "--interval", "0.02"], stdout=-1)
            text, _ = client.communicate(timeout=300)
        finally:
            server.kill()
            server.wait()
        rows = json.loads(text)["connections"]
    return {"setup": f"{kind}/{scheme}", "ping_ms": _percentiles(rtts),
            "ping_lost": pings - len(rtts),
            "connect_ms": _percentiles([r["connect_s"] * 1000 for r in rows if r["ok"]]),
            "connect_failed": sum(1 for r in rows if not r["ok"])}


def render(results: list[dict[str, Any]]) -> str:
    first = results[0]
    lines = [f"{'setup':40} {'ping p50/p90/p99 (ms)':>24} {'x':>6}  "
             f"{'connect p50/p90/p99 (ms)':>26} {'x':>6}"]
    for r in results:
        cells = []
        for key in ("ping_ms", "connect_ms"):
            q = r[key]
            base = first[key].get("p50")
            text = (f"{q['p50']:.2f}/{q['p90']:.2f}/{q['p99']:.2f}" if q.get("n") else "-")
            ratio = f"x{q['p50'] / base:.2f}" if q.get("n") and base else "-"
            cells.append((text, ratio))
        lines.append(f"{r['setup']:40} {cells[0][0]:>24} {cells[0][1]:>6}  "
                     f"{cells[1][0]:>26} {cells[1][1]:>6}"
                     + (f"   lost {r['ping_lost']} pings" if r["ping_lost"] else "")
                     + (f", {r['connect_failed']} connects failed"
                        if r["connect_failed"] else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dcnlab.benchmarks.datapath_latency",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--setups", default="ovs/ecmp,ovs/tcppath",
                    help="SWITCH_KIND/SCHEME, comma list (default ovs/ecmp,ovs/tcppath)")
    ap.add_argument("--topo", default="spineleaf:4,4,4")
    ap.add_argument("--pings", type=int, default=200)
    ap.add_argument("--connects", type=int, default=100)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        ap.error("needs root (Mininet namespaces)")
    setups = []
    for item in args.setups.split(","):
        kind, sep, scheme = item.strip().partition("/")
        if not sep or not kind or not scheme:
            ap.error(f"--setups: {item!r} is not SWITCH_KIND/SCHEME")
        setups.append((kind, scheme))
    began = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    load = os.getloadavg()
    results = [measure(args.topo, kind, scheme, args.pings, args.connects)
               for kind, scheme in setups]
    print(f"{args.topo}, links unshaped (1000M); {args.pings} pings, {args.connects} "
          f"connects per setup; {began}, load average before {load[0]:.2f}, machine "
          f"{environment.machine()}")
    print(render(results))
    if args.json is not None:
        args.json.write_text(json.dumps({"topo": args.topo, "started": began,
                                         "load_before": load, "machine":
                                         environment.machine(), "results": results},
                                        indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
