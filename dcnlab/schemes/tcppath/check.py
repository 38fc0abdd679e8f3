"""The ``tcppath``/``tfe`` part of ``dcnlab check``: congestion avoidance.

A long transfer loads one spine between two leaves; new short connections between other
hosts of those leaves must explore around it (at least 80 %; ECMP would hit it about a
quarter of the time on four spines).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from dcnlab.topo.network import Network
from dcnlab.topo.spec import TopologySpec

CONGESTION_PROBES = 21
CONGESTION_MIN_AVOIDED = 0.8
BACKGROUND_SPORT = 40000  # source ports above 30000: TFE treats these flows as elephants
PROBE_SPORT = 45000
PROBE_PORT = 7000


def _hosts_by_edge(spec: TopologySpec) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for h in spec.hosts:
        out.setdefault(h.interfaces[0].switch, []).append(h.name)
    return out


def _flow_path(net: Network, src_ip: str, sport: int, timeout: float = 10.0) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        for f in (net.state() or {}).get("tcppath", {}).get("recent", []):
            if f["src"] == src_ip and f["sport"] == sport:
                return f["path"]
        time.sleep(0.2)
    return []


def tcppath_congestion(net: Network, spec: TopologySpec) -> tuple[dict[str, Any], list[str]]:
    """Load one spine between two leaves with a long transfer, then open short connections
    between other hosts of those leaves; return the share explored around that spine."""
    edges = [hosts for hosts in _hosts_by_edge(spec).values() if len(hosts) >= 2][:2]
    if len(edges) < 2:
        return {}, ["congestion check needs two edge switches with two hosts each"]
    (bg_src, *srcs), (bg_dst, *dsts) = edges
    ip = {h: net.host(h).IP() for h in [*srcs, *dsts, bg_src, bg_dst]}
    procs = [net.host(bg_dst).popen(["iperf3", "-s", "-1", "-p", "5299"])]
    try:
        procs += [net.host(d).popen([sys.executable, "-m", "dcnlab.benchmarks.tcp_connect",
                                     "serve", "--port", str(PROBE_PORT)]) for d in dsts]
        time.sleep(0.5)
        procs.append(net.host(bg_src).popen(
            ["iperf3", "-c", ip[bg_dst], "-p", "5299", "-t", "40", "--cport",
             str(BACKGROUND_SPORT), "--connect-timeout", "3000"]))
        path = _flow_path(net, ip[bg_src], BACKGROUND_SPORT)
        if len(path) != 3:
            return {"congestion_bg_path": path}, [f"background flow path {path}: not via "
                                                  "one spine"]
        loaded = path[1]
        time.sleep(3.0)  # the loaded spine's queues fill
        pairs = list(zip(srcs, dsts, strict=False))
        per_pair = -(-CONGESTION_PROBES // len(pairs))
        clients = []
        for i, (s, d) in enumerate(pairs):
            clients.append(net.host(s).popen(
                [sys.executable, "-m", "dcnlab.benchmarks.tcp_connect", "connect", "--host",
                 ip[d], "--port", str(PROBE_PORT), "--sport", str(PROBE_SPORT + i * per_pair),
                 "--count", str(per_pair), "--interval", "0.05"], stdout=-1))
        rows = []
        for c in clients:
            out, _ = c.communicate(timeout=120)
            rows += json.loads(out)["connections"]
        time.sleep(0.5)
        recent = (net.state() or {}).get("tcppath", {}).get("recent", [])
        probe_ips = {ip[s] for s in srcs}
        paths = [f["path"] for f in recent if f["src"] in probe_ips
                 and PROBE_SPORT <= f["sport"] < PROBE_SPORT + per_pair * len(pairs)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    avoided = sum(1 for p in paths if loaded not in p[1:-1])
    fraction = round(avoided / len(paths), 3) if paths else 0.0
    fields = {"congestion_loaded_spine": loaded, "congestion_probes": len(rows),
              "congestion_completed": sum(r["ok"] for r in rows),
              "congestion_explored": len(paths), "congestion_avoided_fraction": fraction}
    failures = []
    if fields["congestion_completed"] < len(rows) or len(paths) < len(rows):
        failures.append(f"congestion probes: {fields['congestion_completed']} of {len(rows)} "
                        f"completed, {len(paths)} explored")
    if fraction < CONGESTION_MIN_AVOIDED:
        failures.append(f"only {fraction:.0%} of new flows avoided the loaded spine "
                        f"(need {CONGESTION_MIN_AVOIDED:.0%})")
    return fields, failures
