"""Benchmark: what the engine's flow tap (``diagnosis: {flow_paths: true}``) costs.

    sudo .venv/bin/python -m dcnlab.benchmarks.flowtap_cost [--seconds 5] [--reps 2]
        [--kinds ext,ovs] [--switches 3] [--json FILE]

Per switch kind, one network: ``--switches`` switches in a line without link shaping
(``switch_throughput.line_spec``), h1 on the first and h2 on the last, so every frame
crosses ``switches - 1`` tapped fabric links.  Side by side on that network, ``--reps``
times each, alternating: without the tap, then with it attached to every fabric veth
(flowtap.TapSession, sampling port counters every 0.2 s as in experiments):

- TCP: one iperf3 flow for ``--seconds``: goodput; the switch processes' cores.
- UDP: iperf3 64-byte datagrams at full speed: frames per second the last switch
  delivered (per packet, the tap's cost shows most here).

The table gives each figure with and without the tap and their ratio (with / without;
1.0 = free), plus the tap helper's own CPU (its sampling).  First, the program alone:
its mean time per packet of a known flow, in the kernel (BPF_PROG_TEST_RUN, a 1514-byte
TCP frame, 10^6 repetitions), no network involved.  2 cores run sender,
receiver, switches and tap together: the ratios are the point, not the absolute numbers.
Needs root; never runs ``mn``; everything it starts is stopped in ``finally``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dcnlab.benchmarks.engine import flowtap
from dcnlab.benchmarks.switch_throughput import (
    APP,
    Result,
    _switch_ports_offloads_off,
    _warm_up,
    line_spec,
    measure_tcp,
    measure_udp,
    switch_pids,
)
from dcnlab.topo.network import Network


def _taps(net: Network) -> list[str]:
    spec = net.spec
    return list(flowtap.fabric_ifaces(net.prefix, [(lk.a, lk.a_port, lk.b, lk.b_port)
                                                   for lk in spec.links],
                                      [s.name for s in spec.switches]))


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    """Per condition (off/on): TCP Mbit/s, switch cores, UDP delivered pps, per rep."""
    figures: dict[str, dict[str, list[float]]] = {
        c: {"tcp_mbit": [], "tcp_cpu": [], "udp_pps": []} for c in ("off", "on")}
    helper_cpu: list[float] = []
    with Network(line_spec(args.switches), app=APP, switch=kind) as net, \
            tempfile.TemporaryDirectory(prefix="dcnlab-flowtap-cost-") as tmp:
        if kind != "ext":
            _switch_ports_offloads_off(net)
        h1, h2 = net.host("h1"), net.host("h2")
        _warm_up(h1, h2)
        pids = switch_pids(net, kind)
        ifaces = _taps(net)
        for rep in range(args.reps):
            for condition in ("off", "on"):
                session = None
                if condition == "on":
                    session = flowtap.TapSession(net.netns_pid or 0, ifaces,
                                                 Path(tmp) / f"{rep}", 0.2)
                try:
                    if session is not None:
                        session.start()
                    result = Result(kind, args.switches)
                    measure_tcp(h1, h2, args.seconds, pids, result)
                    measure_udp(h1, h2, args.seconds, 64, pids, result)
                    if session is not None:
                        taps, _links = session.stop()
                        helper_cpu.append(float(taps.get("helper_cpu_s", 0.0)))
                finally:
                    if session is not None:
                        session.kill()
                f = figures[condition]
                f["tcp_mbit"].append(result.tcp_mbit)
                f["tcp_cpu"].append(result.tcp_switch_cpu or 0.0)
                f["udp_pps"].append(result.udp_rx_pps)
    return {"kind": kind, "figures": figures, "helper_cpu_s": helper_cpu,
            "tapped_ifaces": len(ifaces)}


def table(results: Sequence[dict[str, Any]], seconds: float) -> str:
    lines = [f"{'kind':6} {'figure':22} {'without tap':>12} {'with tap':>12} {'ratio':>7}"]
    for r in results:
        for key, label in (("tcp_mbit", "TCP goodput Mbit/s"),
                           ("tcp_cpu", "switch cores (TCP)"),
                           ("udp_pps", "UDP delivered pps")):
            off = statistics.mean(r["figures"]["off"][key])
            on = statistics.mean(r["figures"]["on"][key])
            ratio = f"{on / off:7.3f}" if off else "      -"
            lines.append(f"{r['kind']:6} {label:22} {off:12.1f} {on:12.1f} {ratio}")
        cpu = r["helper_cpu_s"]
        per = statistics.mean(cpu) / (2 * seconds) if cpu else float("nan")
        lines.append(f"{r['kind']:6} {'tap helper cores':22} {'':>12} {per:12.4f}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--kinds", default="ext,ovs")
    parser.add_argument("--switches", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if args.switches < 2 or args.reps < 1 or args.seconds <= 0:
        parser.error("--switches >= 2 (a fabric link to tap), --reps >= 1, --seconds > 0")
    flowtap.check_available()
    with tempfile.TemporaryDirectory(prefix="dcnlab-flowtap-cost-") as tmp:
        tap = flowtap.FlowTap([], flowtap.object_path(Path(tmp)))
        try:
            packet = flowtap.frame("10.0.0.1", "10.0.1.1", 30001, 5001, payload=1460)
            tap.test_run(packet)  # the entry exists: what follows is the steady state
            _ret, per_packet_ns = tap.test_run(packet, repeat=1_000_000)
        finally:
            tap.close()
    print(f"tap program: {per_packet_ns} ns per packet (BPF_PROG_TEST_RUN)")
    results = [measure(kind, args) for kind in args.kinds.split(",") if kind]
    print(table(results, args.seconds))
    if args.json is not None:
        args.json.write_text(json.dumps({"program_ns_per_packet": per_packet_ns,
                                         "networks": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
