"""ABQ (seed 002): Active Buffer Queueing in the switches' input queues, DCTCP hosts.

The mechanism is switch_ext's ``abq`` ingress discipline (``switch_ext/src/qdisc/
abq.rs``; switch_ext/README.md, "ABQ"); the Ryu app ``apps/abq.py`` routes on one path
per host pair and can reconfigure ABQ at run time (``DCNLAB_ABQ_*``); DCTCP on the hosts
comes from ``hosts/dctcp`` when the kernel has none. :mod:`.check` is the ``dcnlab
check`` invariant (an incast through an ABQ port), :mod:`.incast` its traffic.

Schemes: ``abq`` (the paper: ECE on released ACKs). The window-rewriting variant of the
authors' ns-3 code is the same scheme with ``DCNLAB_ABQ_MODE=window`` (the experimenter
message switches every ABQ port), as ``benchmarks/experiments/seed002.yaml`` does.
"""

from __future__ import annotations

from ..base import CheckContext, CheckOutcome, Scheme

# ABQ's K in packets, on every switch port facing a host (the paper: K = 20 packets).
K = "20p"


def abq_check(ctx: CheckContext) -> CheckOutcome:
    from .check import abq_incast

    return abq_incast(ctx.net, ctx.spec, "dctcp")


SCHEMES = [
    Scheme(
        name="abq",
        app="dcnlab.apps.abq",
        summary="single-path routing; switch input queues hold pure ACKs while the same "
                "port's output queue is above K and release them ECE-marked as it drains "
                "(switch ext); DCTCP hosts",
        seed="002",
        requires_switch=("ext",),
        topology_options=(f"ingress@host=abq/k={K}/mode=ece",),
        congestion="dctcp",
        check=abq_check,
        check_topology="incast:20",
    ),
]
