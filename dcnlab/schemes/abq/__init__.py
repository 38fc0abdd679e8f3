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

from ..base import CheckContext, CheckOutcome, Scheme, SwitchColumns

# ABQ's K in packets, on every switch port facing a host (the paper: K = 20 packets).
K = "20p"


# ABQ's own counters per run (switch.csv), summed over every port running it (the
# switch_ext stats file's "ingress" section; switch_ext/README.md, "ABQ"). Per run:
# abq_held = abq_released + abq_forced_cap + abq_forced_timeout + abq_superseded
# + abq_still_held (the change in what the ports hold, 0 once a run has drained).
COLUMNS = SwitchColumns(
    section="ingress",
    kind="abq",
    counters={"acks_held": "abq_held", "released": "abq_released",
              "ece_marked": "abq_ece_marked", "rewritten": "abq_rewritten",
              "rewrite_unknown": "abq_rewrite_unknown", "superseded": "abq_superseded",
              "forced_cap": "abq_forced_cap", "forced_timeout": "abq_forced_timeout",
              "to_cs": "abq_to_cs", "to_lcs": "abq_to_lcs", "to_us": "abq_to_us",
              "halvings": "abq_halvings"},
    gauges={"held": "abq_still_held"},
    peaks={"qin": "abq_qin_peak"},
    labels={"abq_held": "ABQ ACKs held", "abq_released": "ABQ released",
            "abq_ece_marked": "ABQ ECE-marked", "abq_rewritten": "ABQ window rewritten",
            "abq_rewrite_unknown": "ABQ not rewritten (scale unknown)",
            "abq_superseded": "ABQ superseded (window mode)",
            "abq_forced_cap": "ABQ forced out (cap)",
            "abq_forced_timeout": "ABQ forced out (hold time)",
            "abq_still_held": "ABQ still held at the end",
            "abq_qin_peak": "ABQ Q_in peak (pkts)", "abq_to_cs": "ABQ -> CS",
            "abq_to_lcs": "ABQ -> LCS", "abq_to_us": "ABQ -> US",
            "abq_halvings": "ABQ X halvings"},
)


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
        switch_columns=(COLUMNS,),
    ),
]
