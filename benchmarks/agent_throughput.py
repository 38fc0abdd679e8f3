"""Can the traffic agents keep up with a 16-host fabric at 100 Mbit/s?  (A benchmark.)

An experiment needs, per host, up to 100 Mbit/s out and 100 Mbit/s in (1.6 Gbit/s of
goodput over 16 hosts) and flow starts at the workload's rate (web search at 80% load:
~6 flows/s per host) on time.  This script measures the agents alone, one process per
host as in a run, on loopback addresses 127.0.0.1..N (no switches, no shaping):

1. bulk: every host sends one long-lived TCP flow to the next (a permutation) for T s;
   per-flow and aggregate goodput, and the agents' CPU seconds per Gbit moved;
2. flow rate: every host starts small flows (10 KB) as a Poisson process of R flows/s
   to random hosts; completion, start lateness (actual - scheduled start), FCT;
3. optionally (``--fabric SPEC``, root): the bulk permutation on a real network built by
   the lifecycle (e.g. ``fattree:4,rate=100M`` with ``dcnlab.apps.ecmp``), then the same
   permutation with iperf3 on the same network: if the agents reach what iperf3 reaches,
   the fabric, not the agents, sets the pace.

CPU comes from getrusage(RUSAGE_CHILDREN): agents (and iperf3) are this process's
children and are reaped.  "user" is the agents' own (Python) work; "sys" is mostly the
kernel's TCP/IP and veth work done on their behalf, which any traffic generator pays
(compare iperf3's).  Run::

    python benchmarks/agent_throughput.py                    # loopback parts, ~30 s
    sudo python benchmarks/agent_throughput.py --fabric fattree:4,rate=100M
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcnlab.benchmarks.engine.replay import Endpoint, ReplayResult, replay
from dcnlab.benchmarks.engine.workloads import Flow

NEEDED_MBIT = 100.0  # per host and direction: the fabric's link rate


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _children_user() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime


def _timed_replay(flows: list[Flow], hosts: dict[str, Endpoint], drain: float,
                  horizon: float) -> tuple[ReplayResult, float, float]:
    with tempfile.TemporaryDirectory(prefix="agentbench-") as tmp:
        cpu0, user0, wall0 = _children_cpu(), _children_user(), time.monotonic()
        result = replay(flows, hosts, Path(tmp), drain=drain, horizon=horizon)
        cpu, wall = _children_cpu() - cpu0, time.monotonic() - wall0
        _timed_replay.user = _children_user() - user0  # type: ignore[attr-defined]
    if result.errors:
        raise SystemExit("agent errors:\n" + "\n".join(result.errors))
    return result, cpu, wall


def bulk(hosts: dict[str, Endpoint], seconds: float) -> dict[str, Any]:
    names = list(hosts)
    flows = [Flow(i, src, names[(i + 1) % len(names)], 0, 0.0, stop=seconds,
                  sport=30001 + i, tag="long") for i, src in enumerate(names)]
    result, cpu, wall = _timed_replay(flows, hosts, drain=10.0, horizon=seconds)
    goodput = [r["bytes"] * 8 / r["fct"] / 1e6 for r in result.records.values()
               if r["status"] == "ok" and r["fct"]]
    total_gbit = sum(r["bytes"] or 0 for r in result.records.values()) * 8 / 1e9
    return {
        "hosts": len(names), "seconds": seconds,
        "flows_ok": len(goodput), "flows": len(flows),
        "per_flow_mbit_min": round(min(goodput), 1) if goodput else None,
        "per_flow_mbit_median": round(float(np.median(goodput)), 1) if goodput else None,
        "aggregate_gbit_s": round(total_gbit / seconds, 2),
        "agent_cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
        "agent_user_s": round(_timed_replay.user, 2),  # type: ignore[attr-defined]
        "agent_cpu_s_per_gbit": round(cpu / total_gbit, 3) if total_gbit else None,
    }


def flow_rate(hosts: dict[str, Endpoint], seconds: float, rate: float, size: int,
              seed: int = 1) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    names = list(hosts)
    flows: list[Flow] = []
    ports: dict[str, int] = {}
    for src in names:
        t = float(rng.exponential(1 / rate))
        while t < seconds:
            dst = names[int(rng.integers(0, len(names) - 1))]
            dst = dst if dst != src else names[-1]
            port = ports.get(src, 10000)
            ports[src] = port + 1
            flows.append(Flow(0, src, dst, size, t, sport=port))
            t += float(rng.exponential(1 / rate))
    flows.sort(key=lambda f: f.start)
    flows = [Flow(i, f.src, f.dst, f.size, f.start, sport=f.sport)
             for i, f in enumerate(flows)]
    result, cpu, wall = _timed_replay(flows, hosts, drain=20.0, horizon=seconds)
    recs = list(result.records.values())
    ok = [r for r in recs if r["status"] == "ok"]
    late = np.array([r["late"] for r in recs if r.get("late") is not None]) * 1e3
    fct = np.array([r["fct"] for r in ok]) * 1e3
    return {
        "hosts": len(names), "seconds": seconds, "rate_per_host": rate, "size": size,
        "flows": len(flows), "flows_ok": len(ok),
        "flows_per_s": round(len(ok) / seconds, 1),
        "late_ms_p50": round(float(np.percentile(late, 50)), 2) if late.size else None,
        "late_ms_p99": round(float(np.percentile(late, 99)), 2) if late.size else None,
        "late_ms_max": round(float(late.max()), 2) if late.size else None,
        "fct_ms_p50": round(float(np.percentile(fct, 50)), 2) if fct.size else None,
        "fct_ms_p99": round(float(np.percentile(fct, 99)), 2) if fct.size else None,
        "agent_cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
    }


def loopback_hosts(n: int) -> dict[str, Endpoint]:
    if not 1 < n <= 250:
        raise SystemExit("--hosts must be between 2 and 250")
    return {f"h{i}": Endpoint(f"h{i}", f"127.0.0.{i}", congestion="cubic")
            for i in range(1, n + 1)}


def fabric(spec: str, app: str, switch: str, seconds: float) -> dict[str, Any]:
    from dcnlab.topo.network import Network

    with Network(spec, app=app, switch=switch) as net:
        hosts = {h.name: Endpoint(h.name, h.ip, net.host(h.name).popen, congestion="cubic")
                 for h in net.spec.hosts}
        busy0 = _machine_cpu()
        out = bulk(hosts, seconds)
        busy = _machine_cpu() - busy0
        time.sleep(2.0)  # let the fabric's queues drain before the reference run
        out["iperf3"] = _iperf3(net, seconds)
    out.update(fabric=spec, app=app, switch=switch, machine_cpu_s=round(busy, 2),
               agent_share_of_machine_cpu=round(out["agent_cpu_s"] / busy, 3) if busy else None)
    return out


def _iperf3(net: Any, seconds: float) -> dict[str, Any]:
    """The same permutation with iperf3 (one server and one client per host)."""
    import subprocess

    names = [h.name for h in net.spec.hosts]
    ips = {h.name: h.ip for h in net.spec.hosts}
    devnull = subprocess.DEVNULL
    cpu0 = _children_cpu()
    servers = [net.host(n).popen(["iperf3", "-s", "-1", "-B", ips[n], "-p", "5201"],
                                 stdout=devnull, stderr=devnull) for n in names]
    time.sleep(1.0)
    clients = []
    for i, n in enumerate(names):
        dst = names[(i + 1) % len(names)]
        clients.append(net.host(n).popen(
            # Ephemeral source ports: iperf3's --cport also binds its control connection.
            ["iperf3", "-c", ips[dst], "-p", "5201", "-B", ips[n],
             "-t", f"{seconds:g}", "-C", "cubic", "-J"], stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT))
    rates, errors = [], []
    for proc in clients:
        out, _err = proc.communicate(timeout=seconds + 60)
        doc: Any = None
        try:
            doc = json.loads(out)
            rates.append(doc["end"]["sum_received"]["bits_per_second"] / 1e6)
        except (ValueError, KeyError):
            rates.append(float("nan"))
            errors.append(str(doc.get("error") if isinstance(doc, dict) else out[-200:]))
    for proc in servers:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    ok = [r for r in rates if r == r]
    return {"flows_ok": len(ok), "per_flow_mbit_min": round(min(ok), 1) if ok else None,
            "per_flow_mbit_median": round(float(np.median(ok)), 1) if ok else None,
            "aggregate_gbit_s": round(sum(ok) / 1e3, 3),
            "cpu_s": round(_children_cpu() - cpu0, 2), "errors": errors}


def _machine_cpu() -> float:
    """Busy CPU seconds of the whole machine (all cores) from /proc/stat."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    ticks = [int(x) for x in fields]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--flow-rate", type=float, default=100.0,
                        help="flows per second per host in the flow-rate part")
    parser.add_argument("--flow-size", type=int, default=10_000)
    parser.add_argument("--fabric", default=None, help="topology spec for the network part")
    parser.add_argument("--app", default="dcnlab.apps.ecmp")
    parser.add_argument("--switch", default="ovs")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    results: dict[str, Any] = {"cpus": os.cpu_count()}
    hosts = loopback_hosts(args.hosts)
    print(f"agents: {args.hosts} processes on loopback, {os.cpu_count()} CPUs", flush=True)
    results["bulk"] = b = bulk(hosts, args.seconds)
    need = args.hosts * NEEDED_MBIT / 1e3
    print(f"bulk: {b['flows_ok']}/{b['flows']} flows, aggregate {b['aggregate_gbit_s']} "
          f"Gbit/s (a {args.hosts}-host fabric at {NEEDED_MBIT:g} Mbit/s needs {need:g}), "
          f"per flow min {b['per_flow_mbit_min']} / median {b['per_flow_mbit_median']} "
          f"Mbit/s; agent CPU {b['agent_cpu_s_per_gbit']} s per Gbit "
          f"({b['agent_user_s']} s user of {b['agent_cpu_s']} s) -> "
          f"{need * (b['agent_cpu_s_per_gbit'] or 0):.2f} cores at {need:g} Gbit/s",
          flush=True)
    results["flow_rate"] = f = flow_rate(hosts, args.seconds, args.flow_rate, args.flow_size)
    print(f"flow rate: {f['flows_ok']}/{f['flows']} flows of {args.flow_size} B at "
          f"{args.flow_rate:g}/s per host ({f['flows_per_s']}/s in all); start lateness "
          f"p50 {f['late_ms_p50']} ms, p99 {f['late_ms_p99']} ms, max {f['late_ms_max']} ms; "
          f"FCT p50 {f['fct_ms_p50']} ms, p99 {f['fct_ms_p99']} ms; agent CPU "
          f"{f['agent_cpu_s']} s in {f['wall_s']} s", flush=True)
    if args.fabric:
        if os.geteuid() != 0:
            print("--fabric needs root", file=sys.stderr)
            return 2
        results["fabric"] = n = fabric(args.fabric, args.app, args.switch, args.seconds)
        ip3 = n["iperf3"]
        print(f"fabric {args.fabric} ({args.app}, {args.switch}): agents {n['flows_ok']}/"
              f"{n['flows']} flows, per flow min {n['per_flow_mbit_min']} / median "
              f"{n['per_flow_mbit_median']} Mbit/s, aggregate {n['aggregate_gbit_s']} "
              f"Gbit/s; agent CPU {n['agent_cpu_s']} s ({n['agent_user_s']} s user) of "
              f"{n['machine_cpu_s']} busy CPU s on the machine\n"
              f"  iperf3, same permutation: per flow min {ip3['per_flow_mbit_min']} / median "
              f"{ip3['per_flow_mbit_median']} Mbit/s, aggregate {ip3['aggregate_gbit_s']} "
              f"Gbit/s, CPU {ip3['cpu_s']} s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
