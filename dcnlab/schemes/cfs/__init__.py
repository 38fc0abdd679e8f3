"""CFS (seed 003): the "choose fastest subflow" multipath scheduler, against minRTT.

The scheme's host side is the multipath transport ``dcnlab-mp`` (``hosts/mptransport/``,
Rust): one connection over one kernel TCP subflow per client interface, with the
schedulers minRTT, round-robin, redundant, ECF, BLEST and CFS.  The network side is plain
single-path routing (``apps/cfs.py``, the single_path app under the scheme's own name;
every interface address is a host of its own); the paths differ by
their emulated links (``twopath``: switch_ext rate, delay and jitter), hence
``requires_switch=("ext",)``.  :mod:`.paths` gives a multi-homed host source routing so
each subflow leaves by its own interface; :mod:`.check` is the ``dcnlab check``
invariant: the same 64 KB, 1 MB and 64 MB transfers with minRTT and with CFS, all intact,
the long one over both paths.
In experiments the traffic agents send every TCP flow over ``dcnlab-mp``
(:data:`TRANSPORT`); ``transport_options: {scheduler: ecf}`` in an experiment's scheme
entry picks another scheduler (default ``cfs``), ``warm: true`` connects every subflow
before the flow starts and counts its FCT from then (a connection kept open between
transfers, where the scheduler has both paths from the first byte).

The seed's references run through the same transport entry, so one experiment gives the
whole table: ``mode: tcp`` sends each flow as one plain kernel TCP connection bound to
the client's address number ``path`` (1 = its first interface; ``dcnlab-mp plain-send
--via``), which is what the seed compares against (single-path TCP, none of our
framing or send-queue limit); ``mode: mptcp`` as one kernel MPTCP connection (default
scheduler; :func:`.paths.mptcp_endpoints` gives the client one ``subflow`` endpoint per
further interface).  The receivers are ``dcnlab-mp plain-serve`` (``--mptcp 1``: an
MPTCP listener) then.  flows.csv gets the transport's :data:`COLUMNS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..base import CheckContext, CheckOutcome, Scheme, Transport

TRANSPORT_PORT = 5600
TRANSPORT_OPTIONS = ("scheduler", "window", "segment", "lowat", "timeout", "mode", "path",
                     "warm")
MODES = ("mp", "tcp", "mptcp")  # dcnlab-mp, plain TCP on one path, the kernel's MPTCP
# flows.csv columns (from the sender's result line): bytes sent more than once, the
# receiver's reorder-buffer peak, and the payload bytes each subflow carried (";"-joined,
# in the order of the client's addresses; duplicates included)
COLUMNS = ("dup_bytes", "reorder_peak_bytes", "subflow_bytes")


def _check(ctx: CheckContext) -> CheckOutcome:
    from .check import cfs_check

    return cfs_check(ctx.net, ctx.spec)


def _check_options(options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - set(TRANSPORT_OPTIONS))
    if unknown:
        raise ValueError(f"unknown dcnlab-mp option(s) {', '.join(unknown)}; valid: "
                         f"{', '.join(TRANSPORT_OPTIONS)}")
    mode = options.get("mode", "mp")
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(MODES)}")
    if "path" in options:
        path = options["path"]
        if mode != "tcp":
            raise ValueError("path: only with mode tcp (the one path a plain TCP flow uses)")
        if not isinstance(path, int) or isinstance(path, bool) or path < 1:
            raise ValueError(f"path {path!r}: the client address's number, 1 or more")
    if "warm" in options:
        if not isinstance(options["warm"], bool):
            raise ValueError(f"warm {options['warm']!r}: true or false")
        if mode != "mp":
            raise ValueError("warm: only with mode mp (dcnlab-mp's subflows connect first)")
    from dcnlab.hosts.mptransport import MpError, check_scheduler

    try:
        check_scheduler(str(options.get("scheduler", "cfs")))
    except MpError as exc:
        raise ValueError(str(exc)) from None


def _serve(program: str, listen: str, options: Mapping[str, Any]) -> list[str]:
    mode = options.get("mode", "mp")
    if mode == "mp":
        return [program, "serve", "--listen", listen]
    return [program, "plain-serve", "--listen", listen,
            *(["--mptcp", "1"] if mode == "mptcp" else [])]


def _send(program: str, dst: str, size: int, addresses: Sequence[str],
          options: Mapping[str, Any]) -> list[str]:
    from dcnlab.hosts.mptransport import send_argv

    _check_options(options)
    mode = options.get("mode", "mp")
    if mode != "mp":
        path = int(options.get("path", 1))
        if path > len(addresses):
            raise ValueError(f"path {path}: the sending host has {len(addresses)} "
                             "address(es)")
        return [program, "plain-send", "--to", dst, "--size", str(size),
                "--via", addresses[path - 1], *(["--mptcp", "1"] if mode == "mptcp" else [])]
    rest = {k: v for k, v in options.items() if k not in ("scheduler", "mode", "warm")}
    if options.get("warm"):
        rest["warm"] = 1  # every subflow connects before the flow starts (its FCT)
    return send_argv([dst], size, str(options.get("scheduler", "cfs")), via=addresses,
                     program=program, **rest)


def _row(result: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`COLUMNS` of one flow from its sender's JSON line (plain TCP and kernel
    MPTCP report none of them: their cells stay empty)."""
    out: dict[str, Any] = {}
    if "dup_bytes" in result:
        out["dup_bytes"] = int(result["dup_bytes"])
    if "peak_reorder_bytes" in result:
        out["reorder_peak_bytes"] = int(result["peak_reorder_bytes"])
    subflows = result.get("subflows")
    if isinstance(subflows, list) and subflows:
        out["subflow_bytes"] = ";".join(str(int(s.get("bytes", 0))) for s in subflows)
    return out


def _prepare(net: Any, host: str) -> None:
    from .paths import mptcp_endpoints, source_routing

    source_routing(net, host)
    mptcp_endpoints(net, host)


def _local_program() -> str:
    from dcnlab.hosts.mptransport import binary

    return binary()


TRANSPORT = Transport(
    name="dcnlab-mp",
    summary="one connection over one kernel TCP subflow per host address, scheduled in "
            "user space (hosts/mptransport/)",
    port=TRANSPORT_PORT,
    program="dcnlab-mp",
    local_program=_local_program,
    serve=_serve,
    send=_send,
    prepare=_prepare,
    option_names=TRANSPORT_OPTIONS,
    check_options=_check_options,
    columns=COLUMNS,
    row=_row,
)

SCHEMES = [
    Scheme(
        name="cfs",
        app="dcnlab.apps.cfs",
        summary="single_path routing; hosts send over the multipath transport dcnlab-mp "
                "(one TCP subflow per interface) with the CFS scheduler (minRTT, ECF, "
                "BLEST, redundant, round-robin for comparison)",
        seed="003",
        requires_switch=("ext",),
        check=_check,
        check_topology="twopath",
        transport=TRANSPORT,
        transport_options={"scheduler": "cfs"},
    ),
]
