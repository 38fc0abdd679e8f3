"""``dcnlab check``: bring a network up, test it, print one JSON line.

Every app is checked for connectivity (all-pairs ping) and for TCP transfers that
complete (16 concurrent inter-pod transfers; the bytes each top-tier switch carried are
counted from OpenFlow port statistics), then for its scheme's own invariant, declared in
its scheme (:mod:`dcnlab.schemes`, ``Scheme.check``): for example ECMP spreads the
transfers over the top tier, spray splits one flow's packets evenly on ``ext``, TCP-Path
explores around a loaded spine, UC3 equalises two flows with different RTTs.  Apps of no
scheme (a module or file of your own) get the generic part only.  A scheme with host
parts (agents) gets them created before the network and handed to its invariant.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dcnlab.benchmarks.engine.fabric import Fabric, FabricRequest, Mininet, Place
from dcnlab.hosts import dctcp
from dcnlab.schemes import registry
from dcnlab.schemes.base import CheckContext, HostSession, Scheme, with_topology_options
from dcnlab.topo.errors import NetworkError
from dcnlab.topo.readiness import in_host, wait_listening
from dcnlab.topo.spec import TopologySpec, parse

TOP_TIERS = ("core", "spine")
FLOW_BYTES = "4M"
TRANSFER_TIMEOUT = 120.0
# s a ping waits for its reply: the first ping of a pair waits for ARP, answered by the
# controller (the kernel asks again every second, three times), so a slow answer on a
# loaded machine delays the ping without losing it; a lost echo is lost for good.
PING_TIMEOUT_S = 5

# The fields of the JSON line every check prints, in order (``dcnlab check --help`` shows
# them; tests/unit/test_cli_help.py holds this list to the code below that sets them).  A
# scheme's invariant adds fields of its own after ``cores``; a check that stops early
# (a scheme that refuses the switch kind) prints only topo, app, switch, ok and failures.
FIELDS: dict[str, str] = {
    "topo": "the topology spec checked, in canonical form, with the scheme's own topology "
            "options appended",
    "app": "the --app given",
    "switch": "the switch kind",
    "startup_s": "seconds until the network and the controller were ready",
    "pingall": "share of ordered host pairs that reach each other by ping (1.0: all)",
    "tcp_flows": f"concurrent iperf3 transfers of {FLOW_BYTES}B between hosts in different "
                 f"pods (racks where there is one pod), at most 16",
    "tcp_completed": f"how many of them completed within {TRANSFER_TIMEOUT:g} s",
    "transfer_s": "seconds the transfers took",
    "cores_used": "top-tier switches (core/spine) that carried more than 5 % of the "
                  "transfers' bytes (OpenFlow port statistics)",
    "cores": "top-tier switches in the topology",
    "warnings": "the app's warnings",
    "ryu_errors": "OpenFlow errors the switches sent the app (any one fails the check)",
    "ok": "true when failures is empty",
    "failures": "one message per part of the check that failed",
}


@dataclass
class CheckResult:
    fields: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def line(self) -> str:
        return json.dumps({**self.fields, "ok": self.ok, "failures": self.failures})


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


def _core_bytes(net: Fabric, spec: TopologySpec) -> dict[str, int]:
    """tx bytes per top-tier switch, from the app's OpenFlow port stats."""
    state = net.state() or {}
    stats = state.get("port_stats", {})
    out = {}
    for name in _top_tier(spec):
        ports = stats.get(str(spec.switch(name).dpid), {})
        out[name] = sum(p["tx_bytes"] for p in ports.values())
    return out


def fresh_stats(net: Fabric, after: float, timeout: float = 10.0) -> None:
    """Wait until the app has polled port stats after time ``after``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        state = net.state() or {}
        if state.get("updated", 0) > after + 1.2:  # one poll period past ``after``
            return
        time.sleep(0.2)


@dataclass
class Transfers:
    """What :func:`run_transfers` saw: the pairs, and those that failed with why."""

    pairs: list[tuple[str, str]]
    failed: list[tuple[str, str, str]] = field(default_factory=list)  # (src, dst, why)

    @property
    def done(self) -> int:
        return len(self.pairs) - len(self.failed)

    def failure(self) -> str | None:
        """One line for the check's failures (None: every transfer completed)."""
        if not self.failed:
            return None
        shown = "; ".join(f"{a}->{b}: {why}" for a, b, why in self.failed[:4])
        more = f"; and {len(self.failed) - 4} more" if len(self.failed) > 4 else ""
        return (f"{len(self.failed)} of {len(self.pairs)} TCP transfers failed "
                f"({shown}{more})")


def _iperf3_error(output: bytes) -> str:
    """iperf3's own words for why a client stopped (its last error line), else its tail."""
    lines = [ln.strip() for ln in output.decode(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    return (errors or lines or ["no output"])[-1][:200]


def run_transfers(net: Fabric, pairs: list[tuple[str, str]],
                  timeout: float = TRANSFER_TIMEOUT, congestion: str | None = None
                  ) -> Transfers:
    """Concurrent iperf3 transfers of FLOW_BYTES each (with TCP congestion control
    ``congestion``, or the hosts' default), each client started once its server listens;
    returns which completed and, for the others, why not (iperf3's error, its exit
    status, or no end within ``timeout``)."""
    result = Transfers(list(pairs))
    servers, clients = [], []
    try:
        for i, (_, dst) in enumerate(pairs):
            servers.append(net.host(dst).popen(["iperf3", "-s", "-1", "-p", str(5201 + i)]))
        listening = []
        for i, (src, dst) in enumerate(pairs):
            try:
                wait_listening(in_host(net.host(dst)), 5201 + i,
                               what=f"iperf3 server on {dst}")
                listening.append(i)
            except NetworkError as exc:
                result.failed.append((src, dst, str(exc)))
        # every client at once, as the transfers are meant to be concurrent (a client
        # started while earlier ones fill the fabric would open its connection into
        # their queues)
        for i in listening:
            src, dst = pairs[i]
            ip = net.host(dst).IP()
            cc = net.congestion_name(src, congestion)  # what the host's kernel calls it
            clients.append((src, dst, net.host(src).popen(
                ["iperf3", "-c", ip, "-p", str(5201 + i), "-n", FLOW_BYTES, "--connect-timeout",
                 "3000", *(["-C", cc] if cc else [])],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
        deadline = time.time() + timeout
        for src, dst, proc in clients:
            try:
                output, _ = proc.communicate(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                result.failed.append((src, dst, f"no end within {timeout:g} s"))
                continue
            if proc.returncode != 0:
                result.failed.append((src, dst, f"exit status {proc.returncode}: "
                                                f"{_iperf3_error(output or b'')}"))
        return result
    finally:
        for proc in [p for _, _, p in clients] + servers:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def uplink_counters(net: Fabric, src: str, counter: str = "tx_packets") -> list[int]:
    """``counter`` of each uplink of ``src``'s switch (by port number), from the app's
    OpenFlow port stats as last polled."""
    return _uplink_split(net, net.spec, src, counter)


def _uplink_split(net: Fabric, spec: TopologySpec, src: str, counter: str = "tx_packets"
                  ) -> list[int]:
    """tx packets (or ``counter``) on each uplink of ``src``'s switch, from the app's
    port stats."""
    iface = spec.host(src).interfaces[0]
    sw = spec.switch(iface.switch)
    ups = [lk.a_port if lk.a == sw.name else lk.b_port for lk in spec.fabric_links()
           if sw.name in (lk.a, lk.b)]
    ports = (net.state() or {}).get("port_stats", {}).get(str(sw.dpid), {})
    return [ports.get(str(p), {}).get(counter, 0) for p in sorted(ups)]


def one_flow_split(net: Fabric, src: str, dst: str) -> tuple[bool, list[float]]:
    """Run one transfer; return whether it completed and the share of its packets on
    each uplink of the source's switch (from the app's OpenFlow port stats)."""
    return uplink_split(net, src, lambda: run_transfers(net, [(src, dst)]).done == 1)


def uplink_split(net: Fabric, src: str, transfer: Callable[[], bool]
                 ) -> tuple[bool, list[float]]:
    """Run ``transfer`` (True: it completed); return that and the share of the packets
    sent meanwhile on each uplink of ``src``'s switch (the app's OpenFlow port stats)."""
    before = _uplink_split(net, net.spec, src)
    done = transfer()
    fresh_stats(net, time.time())
    after = _uplink_split(net, net.spec, src)
    moved = [a - b for a, b in zip(after, before, strict=True)]
    return done, [round(x / max(1, sum(moved)), 3) for x in moved]


def top_tier_split(net: Fabric, transfer: Callable[[], bool]) -> tuple[bool, list[float]]:
    """Run ``transfer``; return whether it completed and the share of the bytes each
    top-tier switch (cores/spines, by name) sent meanwhile."""
    before = _core_bytes(net, net.spec)
    done = transfer()
    fresh_stats(net, time.time())
    after = _core_bytes(net, net.spec)
    moved = [after[n] - before.get(n, 0) for n in sorted(after)]
    return done, [round(x / max(1, sum(moved)), 3) for x in moved]


# One TCP connection that sends its bytes in bursts with idle gaps between them (a flow
# whose gaps a flowlet balancer must see); the receiver answers one byte once it has
# read everything, so the sender knows the last burst arrived.
_BURST_RECEIVER = """
import socket, sys
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", int(sys.argv[1])))
srv.listen(1)
conn, _ = srv.accept()
total = 0
while data := conn.recv(65536):
    total += len(data)
conn.sendall(b"k")
print(total, flush=True)
"""
_BURST_SENDER = """
import socket, sys, time
host, port, bursts, size, gap = sys.argv[1:6]
s = socket.create_connection((host, int(port)), timeout=30)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for i in range(int(bursts)):
    if i:
        time.sleep(float(gap))
    s.sendall(bytes(int(size)))
s.shutdown(socket.SHUT_WR)
assert s.recv(1) == b"k"
"""
BURST_PORT = 5299


def bursty_flow(net: Fabric, src: str, dst: str, bursts: int, burst_bytes: int,
                gap_s: float, timeout: float = TRANSFER_TIMEOUT) -> bool:
    """One TCP connection from ``src`` to ``dst`` sending ``bursts`` bursts of
    ``burst_bytes`` with ``gap_s`` of silence between them (the gap starts once a burst
    is in the socket's buffer); True when ``dst`` received every byte in time."""
    receiver = net.host(dst).popen([sys.executable, "-c", _BURST_RECEIVER, str(BURST_PORT)],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sender = None
    try:
        wait_listening(in_host(net.host(dst)), BURST_PORT, what=f"burst receiver on {dst}")
        sender = net.host(src).popen(
            [sys.executable, "-c", _BURST_SENDER, net.host(dst).IP(), str(BURST_PORT),
             str(bursts), str(burst_bytes), str(gap_s)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        sender.communicate(timeout=timeout)
        output, _ = receiver.communicate(timeout=5)
        return sender.returncode == 0 and output.split() == [str(bursts * burst_bytes).encode()]
    except (subprocess.TimeoutExpired, NetworkError):
        return False
    finally:
        for proc in (sender, receiver):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def concurrently(calls: list[Callable[[], bool]]) -> list[bool]:
    """Run ``calls`` at the same time (one thread each; each waits on processes in the
    hosts) and return their results in order."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=max(1, len(calls))) as pool:
        return list(pool.map(lambda call: call(), calls))


def default_select_mode(scheme: Scheme | None) -> str:
    """The load balancer a check asks switch_ext for when it is given none: the scheme's
    ``check_select_mode``, else its ``ext`` switch option ``select_mode``, else random."""
    if scheme is None:
        return "random"
    return (scheme.check_select_mode or scheme.options_for("ext").get("select_mode")
            or "random")


def check(topo: str, app: str, switch: str = "ovs", select_mode: str | None = None,
          place: Place | None = None) -> CheckResult:
    """Check ``app`` on ``topo``: on a Mininet network of ``switch`` switches, or on a
    lab (``place``: dcnlab.lab.fabric.LabPlace; ``switch`` is then the lab's kind).
    ``select_mode``: the load balancer the scheme's app asks switch_ext for (None: its
    :func:`default_select_mode`)."""
    scheme = registry.lookup(app)
    spec = parse(with_topology_options(topo, scheme.topology_options if scheme else ()))
    place = place if place is not None else Mininet()
    result = CheckResult({"topo": spec.spec, "app": app, "switch": switch})
    why = scheme.refuses(switch) if scheme else None
    if why is None:
        why = place.refuse_network(
            spec.spec, app, host_parts=scheme.host_parts if scheme else None,
            congestion=frozenset({scheme.congestion} - {None}) if scheme else frozenset())
    if why is not None:
        result.failures.append(why)
        return result
    select_mode = select_mode or default_select_mode(scheme)
    env = {**(scheme.env if scheme else {}), "DCNLAB_SELECT_MODE": select_mode}
    options = scheme.options_for(switch) if scheme else {}
    if "select_mode" in options:
        options["select_mode"] = select_mode
    session: HostSession | None = None
    if scheme is not None and scheme.host_parts is not None:
        parts = registry.host_parts(scheme.host_parts)
        session = parts.open(parts.default_interval)
        env.update(session.app_env())
    started = time.time()
    try:
        with tempfile.TemporaryDirectory(prefix="dcnlab-check-") as run_dir:
            net = place.make(FabricRequest(
                spec.spec, registry.app_module(app), switch, Path(run_dir), env,
                switch_options=options or None,
                management=session is not None and session.management))
            net.start()  # a start that fails stops what it started
            stopped = False
            try:
                with net.congestion_controls({scheme.congestion} - {None} if scheme
                                             else set()):
                    try:
                        # net.spec, not spec: a switch kind may renumber the dpids
                        _checks(net, net.spec, switch, select_mode, result, started,
                                scheme, session)
                    finally:  # before the congestion controls go: no host socket left
                        stopped = True
                        net.stop()
            finally:
                if not stopped:
                    net.stop()
    finally:
        if session is not None:
            session.stop(None)
    return result


def _ping_ok(src: Any, dst: Any) -> bool:
    out = src.cmd(f"ping -c1 -W{PING_TIMEOUT_S} {dst.IP()}")
    return " 0 received" not in out and "received" in out


def all_pairs_ping(hosts: list[Any]) -> tuple[list[tuple[str, str]], int]:
    """One ping per ordered pair, each waiting up to ``PING_TIMEOUT_S`` for its reply (and
    so for ARP); no second chance: a fabric that loses a first packet fails.  Returns the
    pairs whose ping was lost and the number of pairs pinged.  When the first host
    reaches none of the others the rest are not pinged: a fabric that forwards nothing
    would otherwise take PING_TIMEOUT_S per pair to say so (20 min on 16 hosts)."""
    pairs = [(a, b) for a in hosts for b in hosts if a is not b]
    first = len(hosts) - 1  # the first host's pairs come first
    lost = []
    for i, (a, b) in enumerate(pairs):
        if not _ping_ok(a, b):
            lost.append((a.name, b.name))
        if i + 1 == first and len(lost) == first:
            return lost, first
    return lost, max(1, len(pairs))


def _checks(net: Fabric, spec: TopologySpec, switch: str, select_mode: str,
            result: CheckResult, started: float, scheme: Scheme | None,
            session: HostSession | None) -> None:
    result.fields["startup_s"] = round(time.time() - started, 1)
    hosts = [net.host(h.name) for h in spec.hosts]
    unreachable, pairs_n = all_pairs_ping(hosts)
    result.fields["pingall"] = round(1 - len(unreachable) / pairs_n, 4)
    if unreachable:
        shown = ", ".join(f"{a}->{b}" for a, b in unreachable[:10])
        hosts_n = len(hosts)
        rest = (f"; {unreachable[0][0]} reached none of the others, so the other pairs "
                "were not pinged" if pairs_n < hosts_n * (hosts_n - 1) else "")
        result.failures.append(f"all-pairs ping: {len(unreachable)} of {pairs_n} pairs "
                               f"unreachable ({shown}{', ...' if len(unreachable) > 10 else ''})"
                               + rest)

    congestion = scheme.congestion if scheme else None
    if congestion == dctcp.NAME:  # ECN on in the hosts, as DCTCP expects
        for h in spec.hosts:
            net.host(h.name).cmd(dctcp.host_commands(ecn=True, rto_min=None))
    pairs = inter_pod_pairs(spec, 16)
    before = _core_bytes(net, spec)
    t0 = time.time()
    transfers = run_transfers(net, pairs, congestion=congestion)
    fresh_stats(net, time.time())
    after = _core_bytes(net, spec)
    result.fields.update(tcp_flows=len(pairs), tcp_completed=transfers.done,
                         transfer_s=round(time.time() - t0, 1))
    failed = transfers.failure()
    if failed is not None:
        result.failures.append(failed)

    carried = {n: after[n] - before.get(n, 0) for n in after}
    total = sum(carried.values())
    result.fields["cores_used"] = sum(1 for v in carried.values() if total and v > 0.05 * total)
    result.fields["cores"] = len(carried)

    if scheme is not None and scheme.check is not None:
        ctx = CheckContext(net, spec, switch, select_mode, carried, pairs, session)
        fields, failures = scheme.check(ctx)
        result.fields.update(fields)
        result.failures += failures
    state = net.state() or {}
    result.fields["warnings"] = state.get("warnings", [])
    result.fields["ryu_errors"] = state.get("counters", {}).get("errors", 0)
    if result.fields["ryu_errors"]:
        result.failures.append("switches reported OpenFlow errors")
