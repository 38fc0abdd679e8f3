"""``dcnlab check``: bring a network up, test it, print one JSON line.

Every app is checked for connectivity (all-pairs ping) and for TCP transfers that
complete, then for its own invariant:

* ``ecmp``: concurrent inter-pod flows spread over the top tier (cores/spines), counted
  from OpenFlow port statistics the app polls: at least 3 of 4 on a k=4 fat-tree;
* ``spray``: on per-packet switches (``--switch ext``) one TCP flow's packets split
  evenly over the source switch's uplinks (within 5 %); on hashing switches it is
  ECMP and is checked as such;
* ``single_path``: connectivity and completed transfers only;
* ``uc3`` (on ``dumbbell``): Jain's fairness index of a group-A and a group-B long TCP
  flow, with agents clamping windows (``jain``, at least 0.95), and without (``jain_plain``,
  recorded only); see :mod:`dcnlab.uc3_check`;
* ``tcppath`` and ``tfe``: congestion avoidance (:func:`tcppath_congestion`): with one
  spine's path between two leaves loaded by a long transfer, at least 80 % of new
  (elephant-marked) connections between those leaves are explored onto another spine.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from dcnlab.tcppath_check import TCPPATH_APPS, tcppath_congestion
from dcnlab.topo.agents import AgentFiles
from dcnlab.topo.network import Network
from dcnlab.topo.spec import TopologySpec, parse
from dcnlab.uc3_check import uc3_fairness

TOP_TIERS = ("core", "spine")
FLOW_BYTES = "4M"
TRANSFER_TIMEOUT = 120.0
SPLIT_TOLERANCE = 0.05
UC3_APPS = ("uc3", "dcnlab.apps.uc3")


@dataclass
class CheckResult:
    fields: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def line(self) -> str:
        return json.dumps({**self.fields, "ok": self.ok, "failures": self.failures})


def app_module(app: str) -> str:
    """``ecmp`` -> ``dcnlab.apps.ecmp``; dotted names and file paths pass through."""
    if "." in app or "/" in app:
        return app
    return f"dcnlab.apps.{app}"


def _top_tier(spec: TopologySpec) -> list[str]:
    return [s.name for s in spec.switches if s.tier in TOP_TIERS]


def _locality(spec: TopologySpec) -> dict[str, Any]:
    """Per host: its pod where the fabric has several pods, else its edge switch."""
    edge = {h.name: spec.switch(h.interfaces[0].switch) for h in spec.hosts}
    pods = {sw.pod for sw in edge.values()}
    if len(pods) > 1:
        return {h: sw.pod for h, sw in edge.items()}
    return {h: sw.name for h, sw in edge.items()}


def inter_pod_pairs(spec: TopologySpec, count: int, seed: int = 1) -> list[tuple[str, str]]:
    """``count`` (src, dst) pairs in different pods (racks where there is one pod), each
    host sending at most once and receiving at most once."""
    rng = random.Random(seed)
    where = _locality(spec)
    names = [h.name for h in spec.hosts]
    best: list[tuple[str, str]] = []
    for _ in range(200):
        dsts = names[:]
        rng.shuffle(dsts)
        pairs = [(s, d) for s, d in zip(names, dsts, strict=True) if where[s] != where[d]]
        if len(pairs) > len(best):
            best = pairs
        if len(best) >= min(count, len(names)):
            break
    return best[:count]


def _core_bytes(net: Network, spec: TopologySpec) -> dict[str, int]:
    """tx bytes per top-tier switch, from the app's OpenFlow port stats."""
    state = net.state() or {}
    stats = state.get("port_stats", {})
    out = {}
    for name in _top_tier(spec):
        ports = stats.get(str(spec.switch(name).dpid), {})
        out[name] = sum(p["tx_bytes"] for p in ports.values())
    return out


def _fresh_stats(net: Network, after: float, timeout: float = 10.0) -> None:
    """Wait until the app has polled port stats after time ``after``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = net.state() or {}
        if state.get("updated", 0) > after + 1.2:  # one poll period past ``after``
            return
        time.sleep(0.2)


def run_transfers(net: Network, pairs: list[tuple[str, str]],
                  timeout: float = TRANSFER_TIMEOUT) -> int:
    """Concurrent iperf3 transfers of FLOW_BYTES each; returns how many completed."""
    servers, clients = [], []
    try:
        for i, (_, dst) in enumerate(pairs):
            servers.append(net.host(dst).popen(["iperf3", "-s", "-1", "-p", str(5201 + i)]))
        time.sleep(0.5)
        for i, (src, dst) in enumerate(pairs):
            ip = net.host(dst).IP()
            clients.append(net.host(src).popen(
                ["iperf3", "-c", ip, "-p", str(5201 + i), "-n", FLOW_BYTES, "--connect-timeout",
                 "3000"]))
        deadline = time.time() + timeout
        done = 0
        for proc in clients:
            try:
                rc = proc.wait(timeout=max(0.1, deadline - time.time()))
            except Exception:
                rc = None
            done += rc == 0
        return done
    finally:
        for proc in clients + servers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _uplink_split(net: Network, spec: TopologySpec, src: str) -> list[int]:
    """tx packets on each uplink of ``src``'s switch, from the app's port stats."""
    iface = spec.host(src).interfaces[0]
    sw = spec.switch(iface.switch)
    ups = [lk.a_port if lk.a == sw.name else lk.b_port for lk in spec.fabric_links()
           if sw.name in (lk.a, lk.b)]
    ports = (net.state() or {}).get("port_stats", {}).get(str(sw.dpid), {})
    return [ports.get(str(p), {}).get("tx_packets", 0) for p in sorted(ups)]


def one_flow_split(net: Network, src: str, dst: str) -> tuple[bool, list[float]]:
    """Run one transfer; return whether it completed and the share of its packets on
    each uplink of the source's switch (from the app's OpenFlow port stats)."""
    before = _uplink_split(net, net.spec, src)
    done = run_transfers(net, [(src, dst)]) == 1
    _fresh_stats(net, time.time())
    after = _uplink_split(net, net.spec, src)
    moved = [a - b for a, b in zip(after, before, strict=True)]
    return done, [round(x / max(1, sum(moved)), 3) for x in moved]


def check(topo: str, app: str, switch: str = "ovs", select_mode: str = "random") -> CheckResult:
    spec = parse(topo)
    result = CheckResult({"topo": spec.spec, "app": app, "switch": switch})
    env = {"DCNLAB_SELECT_MODE": select_mode}
    options = {"select_mode": select_mode} if app == "spray" and switch == "ext" else None
    uc3_files = AgentFiles.create() if app in UC3_APPS else None
    if uc3_files is not None:
        env.update(uc3_files.env())
    started = time.time()
    try:
        with Network(spec, app=app_module(app), switch=switch, app_env=env,
                     switch_options=options, management=uc3_files is not None) as net:
            _checks(net, spec, app, switch, result, started, uc3_files)
    finally:
        if uc3_files is not None:
            uc3_files.remove()
    return result


def _checks(net: Network, spec: TopologySpec, app: str, switch: str, result: CheckResult,
            started: float, uc3_files: AgentFiles | None) -> None:
    result.fields["startup_s"] = round(time.time() - started, 1)
    loss = net.mn.pingAll(timeout=2)
    result.fields["pingall"] = round(1 - loss / 100.0, 4)
    if loss:
        result.failures.append(f"all-pairs ping lost {loss:.1f}%")

    pairs = inter_pod_pairs(spec, 16)
    before = _core_bytes(net, spec)
    t0 = time.time()
    done = run_transfers(net, pairs)
    _fresh_stats(net, time.time())
    after = _core_bytes(net, spec)
    result.fields.update(tcp_flows=len(pairs), tcp_completed=done,
                         transfer_s=round(time.time() - t0, 1))
    if done < len(pairs):
        result.failures.append(f"{len(pairs) - done} of {len(pairs)} TCP transfers failed")

    carried = {n: after[n] - before.get(n, 0) for n in after}
    total = sum(carried.values())
    used = sum(1 for v in carried.values() if total and v > 0.05 * total)
    result.fields["cores_used"] = used
    result.fields["cores"] = len(carried)
    if app in ("ecmp", "spray") and carried:
        need = min(3, len(carried))
        if used < need:
            result.failures.append(f"flows used {used} of {len(carried)} top-tier switches "
                                   f"(need {need})")

    state = net.state() or {}
    if app == "spray" and switch == "ext":
        done, share = one_flow_split(net, *pairs[0])
        result.fields["per_packet_split"] = share
        even = 1 / len(share)
        if not done or any(abs(x - even) > SPLIT_TOLERANCE for x in share):
            result.failures.append(f"one flow's packets split {share} over uplinks, "
                                   f"expected {even:.2f} each within {SPLIT_TOLERANCE}")
    if app in TCPPATH_APPS:
        fields, failures = tcppath_congestion(net, spec)
        result.fields.update(fields)
        result.failures += failures
        state = net.state() or {}
    if uc3_files is not None:
        fields, failures = uc3_fairness(net, spec, uc3_files)
        result.fields.update(fields)
        result.failures += failures
        state = net.state() or {}
    result.fields["warnings"] = state.get("warnings", [])
    result.fields["ryu_errors"] = state.get("counters", {}).get("errors", 0)
    if result.fields["ryu_errors"]:
        result.failures.append("switches reported OpenFlow errors")
