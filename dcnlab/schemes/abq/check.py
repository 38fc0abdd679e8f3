"""The ``abq`` part of ``dcnlab check``: an incast through an ABQ port.

Every other host sends ``SIZE`` bytes to the receiver at the same moment, ``ROUNDS``
times (request/answer on one connection each, with the scheme's congestion control),
so the receiver's switch port builds a queue above K. The invariant: that port's ABQ
held ACKs and released them, its counters add up (held = released + forced out +
superseded + still held), every round of every sender completed, and the senders' sockets
really ran the scheme's congestion control (read back from the kernel).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

SIZE = 64_000
ROUNDS = 5
INTERVAL = 0.25  # s between rounds
PORT = 7100
TIMEOUT = 60.0

SUMMED = ("acks_held", "released", "ece_marked", "rewritten", "forced_cap",
          "forced_timeout", "superseded")


def receiver_port(net: Any, spec: Any, receiver: str) -> tuple[str, int]:
    """(switch name, port number) of the switch port facing ``receiver``."""
    from dcnlab.topo.ext_switch import plan_ports

    iface = spec.host(receiver).interfaces[0]
    for port, plan in plan_ports(spec, iface.switch).items():
        if plan.peer == receiver:
            return iface.switch, port
    raise LookupError(f"no switch port faces {receiver}")


def port_line(net: Any, switch: str, port: int, after: float,
              timeout: float = 5.0) -> dict[str, Any]:
    """The port's entry in the first stats line written after wall time ``after``."""
    deadline = time.time() + timeout
    while True:
        last = net.switch(switch).stats() or {}
        if last.get("ts", 0) > after or time.time() > deadline:
            break
        time.sleep(0.05)
    for p in last.get("ports", []):
        if p.get("port") == port:
            return dict(p)
    return {}


def abq_totals(p: dict[str, Any]) -> dict[str, int]:
    ing = p.get("ingress") or {}
    if ing.get("kind") != "abq":
        return {}
    out = {k: int(ing.get(k, 0)) for k in SUMMED}
    out["held"] = int(ing.get("held", 0))
    return out


def run_incast(net: Any, receiver: str, senders: list[str], congestion: str | None
               ) -> tuple[int, int, list[str]]:
    """(flows, flows lost, congestion controls the senders' sockets used)."""
    ip = net.host(receiver).IP()
    server = net.host(receiver).popen(
        [sys.executable, "-m", "dcnlab.schemes.abq.incast", "serve", "--port", str(PORT),
         "--senders", str(len(senders)), "--size", str(SIZE), "--rounds", str(ROUNDS),
         "--timeout", str(TIMEOUT), *(["--congestion", congestion] if congestion else [])],
        stdout=-1, text=True)
    clients = []
    try:
        assert server.stdout is not None
        server.stdout.readline()  # "ready"
        start = time.time() + 1.0 + 0.02 * len(senders)
        for s in senders:
            clients.append(net.host(s).popen(
                [sys.executable, "-m", "dcnlab.schemes.abq.incast", "send", "--to", ip,
                 "--port", str(PORT), "--size", str(SIZE), "--rounds", str(ROUNDS),
                 "--start", f"{start:.6f}", "--interval", str(INTERVAL),
                 *(["--congestion", congestion] if congestion else [])],
                stdout=-1, text=True))
        done, used = 0, []
        for c in clients:
            out, _ = c.communicate(timeout=TIMEOUT)
            try:
                r = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                continue
            done += int(r.get("rounds", 0))
            used.append(r.get("congestion", ""))
        return len(senders) * ROUNDS, len(senders) * ROUNDS - done, sorted(set(used))
    finally:
        for proc in [*clients, server]:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def abq_incast(net: Any, spec: Any, congestion: str | None) -> tuple[dict[str, Any], list[str]]:
    hosts = [h.name for h in spec.hosts]
    receiver = next((h.name for h in spec.hosts if h.role == "receiver"), hosts[0])
    senders = [h for h in hosts if h != receiver]
    switch, port = receiver_port(net, spec, receiver)
    before = abq_totals(port_line(net, switch, port, time.time()))
    if not before:
        return {}, [f"{switch} port {port} (towards {receiver}) has no abq ingress "
                    "discipline (the abq scheme needs --switch ext)"]
    want = net.congestion_name(senders[0], congestion)  # what the senders ask for
    flows, lost, used = run_incast(net, receiver, senders, want)
    line = port_line(net, switch, port, time.time())
    after = abq_totals(line)
    d = {k: after.get(k, 0) - before.get(k, 0) for k in SUMMED}
    fields: dict[str, Any] = {
        "abq_port": f"{switch}:{port}", "abq_held": d["acks_held"],
        "abq_released": d["released"], "abq_ece_marked": d["ece_marked"],
        "abq_rewritten": d["rewritten"],
        "abq_forced": d["forced_cap"] + d["forced_timeout"],
        "abq_held_now": after.get("held", 0), "abq_qout_p95": (line.get("qout") or {}).get("p95"),
        "abq_qin_max": (line.get("qin") or {}).get("max"),
        "flows": flows, "flows_lost": lost, "incast_congestion": used,
    }
    failures = []
    if d["acks_held"] <= 0:
        failures.append("ABQ held no ACKs during the incast")
    if d["released"] <= 0:
        failures.append("ABQ released no held ACKs (as the queue drained)")
    accounted = (d["released"] + d["forced_cap"] + d["forced_timeout"] + d["superseded"]
                 + after.get("held", 0) - before.get("held", 0))
    if accounted != d["acks_held"]:
        failures.append(f"ABQ counters do not add up: held {d['acks_held']} != released + "
                        f"forced + superseded + still held ({accounted})")
    if lost:
        failures.append(f"{lost} of {flows} incast flows did not complete")
    if want and used != [want]:
        failures.append(f"senders ran {used}, not {want}")
    return fields, failures
