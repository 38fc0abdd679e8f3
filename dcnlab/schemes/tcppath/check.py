"""The ``tcppath``/``tfe`` part of ``dcnlab check``: congestion avoidance, set-up speed.

A long transfer loads one spine between two leaves; new short connections between other
hosts of those leaves must explore around it (at least 80 %; ECMP would hit it about a
quarter of the time on four spines).

Then connect() latency is measured, the same host pairs and source ports under this app
(``connect_p50_ms``, ``connect_p99_ms``) and, after restarting the controller with the
ECMP app on the same network, under ECMP (``ecmp_connect_p50_ms``, ...); the ratio is
reported (``connect_p50_ratio``), not asserted: it is a speed figure (the benchmark
``tcppath_setup`` measures it properly).  The app is restarted again afterwards.  Both
measurements find ARP resolved: ``dcnlab check`` pings every pair of hosts before any
scheme's check, and the hosts keep their ARP entries across the restart.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from typing import Any

from dcnlab.benchmarks.engine.fabric import host_python
from dcnlab.topo.network import Network
from dcnlab.topo.readiness import in_host, wait_listening
from dcnlab.topo.spec import TopologySpec

CONGESTION_PROBES = 21
CONGESTION_MIN_AVOIDED = 0.8
BACKGROUND_SPORT = 40000  # source ports above 30000: TFE treats these flows as elephants
PROBE_SPORT = 45000
PROBE_PORT = 7000
SPEED_PAIRS = 12
SPEED_PER_PAIR = 5
SPEED_SPORT = 46000
BASELINE_APP = "dcnlab.apps.ecmp"
PATHS_TIMEOUT_S = 20.0  # for the probes' paths to appear in the app's state


def _hosts_by_edge(spec: TopologySpec) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for h in spec.hosts:
        out.setdefault(h.interfaces[0].switch, []).append(h.name)
    return out


def _flow_path(net: Network, src_ip: str, sport: int,
               timeout: float = PATHS_TIMEOUT_S) -> list[int]:
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
        procs += [net.host(d).popen([host_python(net, d), "-m",
                                     "dcnlab.benchmarks.tcp_connect", "serve", "--port",
                                     str(PROBE_PORT)]) for d in dsts]
        wait_listening(in_host(net.host(bg_dst)), 5299, what="iperf3 server")
        for d in dsts:
            wait_listening(in_host(net.host(d)), PROBE_PORT, what=f"probe server on {d}")
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
                [host_python(net, s), "-m", "dcnlab.benchmarks.tcp_connect", "connect", "--host",
                 ip[d], "--port", str(PROBE_PORT), "--sport", str(PROBE_SPORT + i * per_pair),
                 "--count", str(per_pair), "--interval", "0.05"], stdout=-1))
        rows = []
        for c in clients:
            out, _ = c.communicate(timeout=120)
            rows += json.loads(out)["connections"]
        probe_ips = {ip[s] for s in srcs}
        # Data-plane mode learns paths from flow-statistics rounds, at most 2 s apart
        # (longer only by a round's own cost on a loaded machine).
        deadline = time.time() + PATHS_TIMEOUT_S
        while True:
            time.sleep(0.5)
            recent = (net.state() or {}).get("tcppath", {}).get("recent", [])
            paths = [f["path"] for f in recent if f["src"] in probe_ips
                     and PROBE_SPORT <= f["sport"] < PROBE_SPORT + per_pair * len(pairs)]
            if len(paths) >= len(rows) or time.time() > deadline:
                break
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


def connect_latencies(net: Network, pairs: list[tuple[str, str]], per_pair: int,
                      sport: int) -> list[float]:
    """connect() seconds of ``per_pair`` sequential connections per pair (the ones that
    completed), each pair's source ports counting up from ``sport``."""
    servers = [net.host(d).popen([host_python(net, d), "-m", "dcnlab.benchmarks.tcp_connect",
                                  "serve", "--port", str(PROBE_PORT)])
               for d in sorted({d for _, d in pairs})]
    out: list[float] = []
    try:
        for d in sorted({d for _, d in pairs}):
            wait_listening(in_host(net.host(d)), PROBE_PORT, what=f"probe server on {d}")
        for i, (a, b) in enumerate(pairs):
            proc = net.host(a).popen(
                [host_python(net, a), "-m", "dcnlab.benchmarks.tcp_connect", "connect", "--host",
                 net.host(b).IP(), "--port", str(PROBE_PORT), "--sport",
                 str(sport + i * per_pair), "--count", str(per_pair), "--interval", "0.02"],
                stdout=-1)
            text, _ = proc.communicate(timeout=120)
            out += [r["connect_s"] for r in json.loads(text)["connections"] if r["ok"]]
    finally:
        for p in servers:
            p.kill()
            p.wait()
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def inter_edge_pairs(spec: TopologySpec, n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` random (client, server) host pairs on different edge switches."""
    rng = random.Random(seed)
    edge = {h.name: h.interfaces[0].switch for h in spec.hosts}
    out: list[tuple[str, str]] = []
    while len(out) < n:
        a, b = rng.sample(sorted(edge), 2)
        if edge[a] != edge[b]:
            out.append((a, b))
    return out


def connect_speed(net: Network, spec: TopologySpec) -> tuple[dict[str, Any], list[str]]:
    """connect() latency under this app, then under ECMP on the same network (the
    controller restarted with the ECMP app, and restarted back afterwards)."""
    pairs = inter_edge_pairs(spec, SPEED_PAIRS, seed=7)
    fields: dict[str, Any] = {}
    failures: list[str] = []
    app = net.app
    mine = connect_latencies(net, pairs, SPEED_PER_PAIR, SPEED_SPORT)
    state = net.state() or {}
    tp = state.get("tcppath", {})
    fields["tcppath_mode"] = tp.get("mode", "controller")
    fields["tcp_packet_in"] = state.get("counters", {}).get("tcppath_tcp_packet_in", 0)
    errors = state.get("counters", {}).get("errors", 0)
    if errors:
        failures.append(f"switches reported {errors} OpenFlow errors to the {app} app")
    try:
        net.restart_controller(app=BASELINE_APP)
        ecmp = connect_latencies(net, pairs, SPEED_PER_PAIR, SPEED_SPORT + 1000)
    finally:
        net.restart_controller(app=app)
    total = len(pairs) * SPEED_PER_PAIR
    for name, lat in (("connect", mine), ("ecmp_connect", ecmp)):
        if len(lat) < total:
            failures.append(f"{name}: {total - len(lat)} of {total} connections failed")
        if lat:
            fields[f"{name}_p50_ms"] = round(statistics.median(lat) * 1e3, 3)
            fields[f"{name}_p99_ms"] = round(_pct(lat, 0.99) * 1e3, 3)
    if fields.get("ecmp_connect_p50_ms"):
        fields["connect_p50_ratio"] = round(fields["connect_p50_ms"]
                                            / fields["ecmp_connect_p50_ms"], 2)
    return fields, failures
