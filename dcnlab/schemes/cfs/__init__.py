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
"""

from __future__ import annotations

from ..base import CheckContext, CheckOutcome, Scheme


def _check(ctx: CheckContext) -> CheckOutcome:
    from .check import cfs_check

    return cfs_check(ctx.net, ctx.spec)


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
    ),
]
