"""CFS (seed 003): the "choose fastest subflow" multipath scheduler, against minRTT.

The scheme's host side is the multipath transport ``dcnlab-mp`` (``hosts/mptransport/``,
Rust): one connection over one kernel TCP subflow per client interface, with the
schedulers minRTT, round-robin, redundant, ECF, BLEST and CFS.  The network side is plain
single-path routing (``apps/cfs.py``, the single_path app under the scheme's own name;
every interface address is a host of its own); the paths differ by
their emulated links (``twopath``: switch_ext rate, delay and jitter), hence
``requires_switch=("ext",)``.  :mod:`.paths` gives a multi-homed host source routing so
each subflow leaves by its own interface; :mod:`.check` is the ``dcnlab check``
invariant: the same 64 KB and 1 MB transfers with minRTT and with CFS, all intact.
In experiments the traffic agents send every TCP flow over ``dcnlab-mp``
(:data:`TRANSPORT`); ``transport_options: {scheduler: ecf}`` in an experiment's scheme
entry picks another scheduler (default ``cfs``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..base import CheckContext, CheckOutcome, Scheme, Transport

TRANSPORT_PORT = 5600
TRANSPORT_OPTIONS = ("scheduler", "window", "segment", "lowat", "timeout")


def _check(ctx: CheckContext) -> CheckOutcome:
    from .check import cfs_check

    return cfs_check(ctx.net, ctx.spec)


def _serve(listen: str) -> list[str]:
    from dcnlab.hosts.mptransport import binary

    return [binary(), "serve", "--listen", listen]


def _send(dst: str, size: int, addresses: Sequence[str],
          options: Mapping[str, Any]) -> list[str]:
    from dcnlab.hosts.mptransport import send_argv

    unknown = sorted(set(options) - set(TRANSPORT_OPTIONS))
    if unknown:
        raise ValueError(f"unknown dcnlab-mp option(s) {', '.join(unknown)}; valid: "
                         f"{', '.join(TRANSPORT_OPTIONS)}")
    rest = {k: v for k, v in options.items() if k != "scheduler"}
    return send_argv([dst], size, str(options.get("scheduler", "cfs")), via=addresses,
                     **rest)


def _prepare(net: Any, host: str) -> None:
    from .paths import source_routing

    source_routing(net, host)


TRANSPORT = Transport(
    name="dcnlab-mp",
    summary="one connection over one kernel TCP subflow per host address, scheduled in "
            "user space (hosts/mptransport/)",
    port=TRANSPORT_PORT,
    serve=_serve,
    send=_send,
    prepare=_prepare,
    option_names=TRANSPORT_OPTIONS,
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
