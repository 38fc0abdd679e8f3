"""``dcnlab check --topo twopath --app cfs --switch ext``: the same 64 KB, 1 MB and 64 MB
transfers with minRTT and with CFS over both paths, every byte checked by the receiver (on
Mininet or on a lab: through the fabric's hosts).

The JSON line gets ``fct_ms`` (scheduler -> size -> ms), ``dup_bytes`` (the same shape),
``intact`` and ``both_paths`` (scheduler -> size -> whether every path carried data; None
where the transfer was too short to tell); the check fails when a transfer fails or is
not intact, or when a path carried nothing of a transfer that outlasted it.  FCTs are
reported, not judged: one transfer each says nothing about which scheduler is faster
(that is the experiment's job, ``benchmarks/experiments/seed003.yaml``).

Whether a scheduler *should* have used a path follows from time, not size: a subflow
carries its first byte no sooner than its handshake and one more one-way delay (1.5 of
its RTT) after the start, and CFS rightly leaves a path alone that could not deliver
before the fast one finishes.  So a path counts as unused only in a transfer that
lasted longer than that (:func:`path_unused`); a 1 MB transfer on twopath often ends
(290-330 ms) before the slow path's handshake (up to 350 ms) does, and a 64 KB one
always, so the check adds a 64 MB transfer, more than a second at twopath's 500 Mbit/s,
which every path has to carry part of (a 64 MB transfer the rule cannot judge fails too).
"""

from __future__ import annotations

from typing import Any

from dcnlab.benchmarks.engine.fabric import host_program
from dcnlab.hosts import mptransport as mp

from .paths import source_routing

PORT = 5500
SIZES = (("64KB", 64 * 1024), ("1MB", 1 << 20), ("64MB", 64 << 20))
SCHEDULERS = ("minrtt", "cfs")
FIRST_BYTE_RTTS = 1.5  # a subflow's handshake and a one-way delay: its first byte's arrival


def path_unused(result: dict[str, Any]) -> bool | None:
    """Whether some path carried nothing of a transfer (a dcnlab-mp sender's result) that
    lasted long enough for it to deliver: True, False, or None when the transfer ended
    before some subflow could have carried its first byte (too short to tell; a subflow
    with no RTT yet had not even connected)."""
    subflows = result.get("subflows") or []
    if any(s["bytes"] == 0 and s["srtt_ms"] > 0
           and result["fct_ms"] > FIRST_BYTE_RTTS * s["srtt_ms"] for s in subflows):
        return True
    if all(s["bytes"] > 0 for s in subflows):
        return False
    return None


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
    both: dict[str, dict[str, bool | None]] = {}
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
                unused = path_unused(res)
                both.setdefault(sched, {})[label] = None if unused is None else not unused
                if unused:
                    failures.append(f"{sched} {label}: a path carried nothing although the "
                                    f"transfer outlasted its first byte: {res}")
        long_label = SIZES[-1][0]
        for sched in SCHEDULERS:
            if long_label in both.get(sched, {}) and both[sched][long_label] is None:
                failures.append(f"{sched} {long_label}: the transfer ended before every "
                                "path could carry data, so the check cannot tell whether "
                                "both paths work (a path that never connected, or links "
                                "far faster than twopath's)")
    finally:
        lines = srv.stop()
    received = [ln for ln in lines if "conn" in ln]
    if not failures and not all(ln.get("intact") for ln in received):
        intact = False
        failures.append(f"the receiver reports a broken transfer: {received}")
    return ({"fct_ms": fct, "dup_bytes": dup, "intact": intact, "both_paths": both,
             "paths": via}, failures)


def _in(net: Any, host: str) -> dict[str, Any]:
    """How dcnlab-mp runs in ``host``: the fabric host's popen (Mininet's namespaces, a
    lab server over SSH) and the binary's path there."""
    return {"popen": net.host(host).popen,
            "program": host_program(net, host, "dcnlab-mp", mp.binary)}
