"""Benchmark: one TCP flow (iperf3) through one dcnlab-switch between two netns.

Usage (root): python3 switch_ext/scripts/bench_throughput.py [--seconds 10] [--batch 64]
Prints one JSON line: throughput, retransmits and the switch's CPU use. Creates its own
namespaces/veths (prefix sxb<pid>) and removes them; uses no controller (standalone).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BINARY = os.path.join(HERE, "..", "target", "release", "dcnlab-switch")


def sh(*cmd: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--port-opts", default="", help="e.g. rate=100M (applied to both ports)")
    a = ap.parse_args()
    p = f"sxb{os.getpid()}"
    made_ns, made_links, procs = [], [], []
    try:
        for i in (1, 2):
            ns, sw, host = f"{p}h{i}", f"{p}s{i}", f"{p}e{i}"
            sh("ip", "netns", "add", ns)
            made_ns.append(ns)
            sh("ip", "link", "add", sw, "type", "veth", "peer", "name", host)
            made_links.append(sw)
            sh("ip", "link", "set", host, "netns", ns)
            sh("ip", "-n", ns, "addr", "add", f"10.78.0.{i}/24", "dev", host)
            sh("ip", "-n", ns, "link", "set", host, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "link", "set", sw, "up")
            sh("ethtool", "-K", sw, "tx", "off", "tso", "off", "gso", "off", check=False)
            sh(
                "ip",
                "netns",
                "exec",
                ns,
                "ethtool",
                "-K",
                host,
                "tx",
                "off",
                "tso",
                "off",
                "gso",
                "off",
                check=False,
            )
        opts = f",{a.port_opts}" if a.port_opts else ""
        sw = subprocess.Popen(
            [
                BINARY,
                "--name",
                "bench1",
                "--fail-mode",
                "standalone",
                "--batch",
                str(a.batch),
                "--port",
                f"1={p}s1{opts}",
                "--port",
                f"2={p}s2{opts}",
            ]
        )
        procs.append(sw)
        srv = subprocess.Popen(
            ["ip", "netns", "exec", f"{p}h2", "iperf3", "-s", "-1", "-p", "15299"],
            stdout=subprocess.DEVNULL,
        )
        procs.append(srv)
        time.sleep(0.5)
        sh(
            "ip",
            "netns",
            "exec",
            f"{p}h1",
            "ping",
            "-c",
            "2",
            "-i",
            "0.2",
            "10.78.0.2",
            check=False,
        )
        c0, t0 = cpu_seconds(sw.pid), time.monotonic()
        r = sh(
            "ip",
            "netns",
            "exec",
            f"{p}h1",
            "iperf3",
            "-c",
            "10.78.0.2",
            "-p",
            "15299",
            "-t",
            str(a.seconds),
            "-J",
        )
        c1, t1 = cpu_seconds(sw.pid), time.monotonic()
        d = json.loads(r.stdout)
        print(
            json.dumps(
                {
                    "bench": "tcp_one_flow_one_switch",
                    "port_opts": a.port_opts,
                    "batch": a.batch,
                    "seconds": a.seconds,
                    "mbit_s": round(d["end"]["sum_received"]["bits_per_second"] / 1e6, 1),
                    "retransmits": d["end"]["sum_sent"].get("retransmits"),
                    "switch_cpu": round((c1 - c0) / (t1 - t0), 2),
                }
            )
        )
    finally:
        for pr in reversed(procs):
            if pr.poll() is None:
                pr.terminate()
                pr.wait(timeout=5)
        for link in made_links:
            sh("ip", "link", "del", link, check=False)
        for ns in made_ns:
            sh("ip", "netns", "del", ns, check=False)


if __name__ == "__main__":
    main()
