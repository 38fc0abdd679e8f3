"""The standing queue UC3's windows leave at the bottleneck, windows in frames vs payload.

UC3 computes a flow's share in wire bits and enforces it as a window of segments.  Counted
in payload segments (``DCNLAB_UC3_HEADER_BYTES=0``) the windows of the flows that share a
link add up to about 4.6 % more than the link carries (1448 payload bytes ride in a
1514-byte frame), which must sit in a queue; counted in frames (the default, 66 header
bytes) they fit.  This runs the same two long Reno flows with different RTTs
(``dumbbell:2``, 100 Mbit/s, 200-packet buffers, switch_ext) once each way, side by side,
and reports the bottleneck's queue over the run (sampled by the switch every 10 ms), the
flows' total throughput and Jain's index.  Needs root.

    python -m dcnlab.benchmarks.uc3_standing_queue [--seconds 14] [--rounding up|round|down]

Measured here (2026-11-23, 2 cores shared with other work; queue in packets at s1's
bottleneck port, mean / p95; total throughput; Jain):

    rounding up:   payload 142.6 / 191, 95.6 Mbit/s, 1.000;  frames 57.5 / 78, 95.6, 1.000
    rounding down: payload 142.9 / 190, 95.6 Mbit/s, 1.000;  frames 17.4 / 58, 93.2, 1.000

Counting frames removes most of the standing queue at the same throughput and fairness;
what remains comes from rounding up and from srtt, which includes the queue it measures.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from dcnlab.schemes.uc3.agents import AgentFiles, HostAgents
from dcnlab.schemes.uc3.check import WARMUP_S, fairness_run, rtt_pair
from dcnlab.topo.network import Network
from dcnlab.topo.spec import parse

TOPOLOGY = "dumbbell:2,rate=100M,buffer=200"
STATS_MS = 10


def _percentile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def measure(header_bytes: int, seconds: float, rounding: str) -> dict[str, Any]:
    """One run: the busiest port's queue (packets) over the measured part of the run."""
    spec = parse(TOPOLOGY)
    files = AgentFiles.create()
    env = {**files.env(), "DCNLAB_UC3_HEADER_BYTES": str(header_bytes),
           "DCNLAB_UC3_ROUNDING": rounding, "DCNLAB_UC3_REALLOCATION": "0"}
    try:
        with Network(spec, app="dcnlab.apps.uc3", switch="ext", app_env=env, management=True,
                     switch_options={"stats_interval_ms": STATS_MS}) as net:
            clients, server = rtt_pair(spec)
            with HostAgents(net, files, clients) as agents:
                agents.wait_connected()
                began = time.time()
                result = fairness_run(net, clients, server, files.directory / "rx.jsonl",
                                      seconds=seconds, agents=agents)
            queues: dict[str, list[int]] = {}
            for sw in spec.switches:
                for row in net.switch(sw.name).stats_history():
                    if began + WARMUP_S <= row["ts"] <= began + seconds:
                        for port in row["ports"]:
                            queues.setdefault(f"{sw.name}:{port['port']}", []).append(
                                port["qlen"])
    finally:
        files.remove()
    where, samples = max(queues.items(), key=lambda kv: statistics.fmean(kv[1]))
    return {"header_bytes": header_bytes, "port": where,
            "qlen_mean": statistics.fmean(samples), "qlen_p50": _percentile(samples, 0.5),
            "qlen_p95": _percentile(samples, 0.95), "samples": len(samples),
            "total_mbit": result["total_mbit"], "jain": result["jain"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=14.0)
    ap.add_argument("--rounding", default="up", choices=("up", "round", "down"))
    args = ap.parse_args()
    print(f"{TOPOLOGY}, uc3 without reallocation, rounding {args.rounding}; queue at the "
          f"busiest port after {WARMUP_S:g} s, sampled every {STATS_MS} ms")
    print(f"{'windows in':<16} {'port':>8} {'Q mean':>7} {'Q p50':>6} {'Q p95':>6} "
          f"{'Mbit/s':>7} {'Jain':>6}")
    for header, label in ((0, "payload (old)"), (66, "frames (66 B)")):
        m = measure(header, args.seconds, args.rounding)
        print(f"{label:<16} {m['port']:>8} {m['qlen_mean']:>7.1f} {m['qlen_p50']:>6.0f} "
              f"{m['qlen_p95']:>6.0f} {m['total_mbit']:>7.1f} {m['jain']:>6.3f}", flush=True)


if __name__ == "__main__":
    main()
