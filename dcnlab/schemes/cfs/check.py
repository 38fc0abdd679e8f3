"""``dcnlab check --topo twopath --app cfs --switch ext``: the same 64 KB and 1 MB transfers
with minRTT and with CFS over both paths, every byte checked by the receiver (on Mininet
or on a lab: through the fabric's hosts).

The JSON line gets ``fct_ms`` (scheduler -> size -> ms), ``dup_bytes`` (the same shape)
and ``intact``; the check fails when a transfer fails or is not intact.  FCTs are
reported, not judged: one transfer each says nothing about which scheduler is faster
(that is the experiment's job, ``benchmarks/experiments/seed003.yaml``).
"""

from __future__ import annotations

from typing import Any

from dcnlab.benchmarks.engine.fabric import host_program
from dcnlab.hosts import mptransport as mp

from .paths import source_routing

PORT = 5500
SIZES = (("64KB", 64 * 1024), ("1MB", 1 << 20))
SCHEDULERS = ("minrtt", "cfs")


def endpoints(spec: Any) -> tuple[str, str]:
    """(client, server): the multi-homed host and the server of the topology."""
    multi = [h.name for h in spec.hosts if len(h.interfaces) > 1]
    servers = [h.name for h in spec.hosts if h.role == "server"]
    if not multi or not servers:
        raise ValueError("the cfs check needs a multi-homed client and a server "
                         "(topology twopath)")
    return multi[0], servers[0]


def cfs_check(net: Any, spec: Any) -> tuple[dict[str, Any], list[str]]:
    try:
        client, server = endpoints(spec)
    except ValueError as exc:
        return {}, [str(exc)]
    via = source_routing(net, client)
    dst = f"{net.host(server).IP()}:{PORT}"
    srv = mp.Server(dst, count=len(SIZES) * len(SCHEDULERS), **_in(net, server)).start()
    fct: dict[str, dict[str, float]] = {}
    dup: dict[str, dict[str, int]] = {}
    failures: list[str] = []
    intact = True
    try:
        for sched in SCHEDULERS:
            for label, size in SIZES:
                try:
                    res = mp.send([dst], size, sched, via=via, timeout=60,
                                  **_in(net, client))
                except mp.MpError as exc:
                    failures.append(f"{sched} {label}: {exc}")
                    intact = False
                    continue
                fct.setdefault(sched, {})[label] = res["fct_ms"]
                dup.setdefault(sched, {})[label] = res["dup_bytes"]
                if not res["intact"]:
                    intact = False
                    failures.append(f"{sched} {label}: not intact: {res}")
                if not all(s["bytes"] > 0 for s in res["subflows"]) and size > 64 * 1024:
                    failures.append(f"{sched} {label}: a path carried nothing: {res}")
    finally:
        lines = srv.stop()
    received = [ln for ln in lines if "conn" in ln]
    if not failures and not all(ln.get("intact") for ln in received):
        intact = False
        failures.append(f"the receiver reports a broken transfer: {received}")
    return {"fct_ms": fct, "dup_bytes": dup, "intact": intact, "paths": via}, failures


def _in(net: Any, host: str) -> dict[str, Any]:
    """How dcnlab-mp runs in ``host``: the fabric host's popen (Mininet's namespaces, a
    lab server over SSH) and the binary's path there."""
    return {"popen": net.host(host).popen,
            "program": host_program(net, host, "dcnlab-mp", mp.binary)}
