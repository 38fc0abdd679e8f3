"""drill: per-packet choice by local egress queue length (DRILL), in switch_ext.

The app (apps/drill.py) asks every switch for the ``drill`` balancer
(switch_ext/src/lb/drill.rs): each packet goes to the candidate whose egress buffer
holds the fewest bytes among ``d`` random ones and the ``m`` least loaded of the
previous choice (2 and 1, the paper's), and a remembered candidate wins ties, as in the
ns-3 DRILL of the public load-balancing suites: where queues stay empty a group keeps
the port it started on.  switch_ext's ports without a rate (twopath's, say) send at once
and queue nothing, so DRILL needs links with a rate (every other topology family has
one by default).  Needs ``--switch ext``.

``dcnlab check`` (on a fabric with a link rate, as fattree:4's 100 Mbit/s): the two
hosts of one edge switch each send a TCP connection to another pod at once, together
twice what one uplink carries: the queue that builds on the uplink a group's packets take sends the
next ones to the other, so each uplink carries at least 30 % of the packets, where a
per-flow hash puts both on one uplink half the time.
"""

from __future__ import annotations

from .base import CheckContext, CheckOutcome, Scheme, SwitchColumns
from .common import top_tier_spread

FLOW_BYTES = 8_000_000
MIN_SHARE = 0.30


def drill_follows_queues(ctx: CheckContext) -> CheckOutcome:
    if ctx.spec.default_params.rate_mbit is None:
        return {}, ["DRILL chooses by egress queue length and switch_ext ports without a "
                    "rate queue nothing: check on a shaped fabric, e.g. --topo "
                    "fattree:4 (100 Mbit/s links)"]
    fields, failures = top_tier_spread(ctx)
    from dcnlab.check import bursty_flow, concurrently, uplink_split

    edge = ctx.spec.host(ctx.pairs[0][0]).interfaces[0].switch
    on_edge = [h.name for h in ctx.spec.hosts if h.interfaces[0].switch == edge]
    far = [h.name for h in ctx.spec.hosts if h.interfaces[0].switch != edge]
    pairs = list(zip(on_edge[:2], far[-2:], strict=True))
    done, split = uplink_split(ctx.net, pairs[0][0], lambda: all(concurrently(
        [lambda a=a, b=b: bursty_flow(ctx.net, a, b, 1, FLOW_BYTES, 0.0) for a, b in pairs])))
    fields["uplink_split"] = split
    if not done:
        failures.append(f"the {FLOW_BYTES} B flows {pairs} did not all complete")
    elif min(split) < MIN_SHARE:
        failures.append(f"two flows from {edge} split {split} over its uplinks: expected "
                        f"every uplink to take {MIN_SHARE:.0%} or more as queues grow")
    return fields, failures


COLUMNS = SwitchColumns(section="balancer", kind="drill",
                        counters={"path_changes": "drill_path_changes"},
                        labels={"drill_path_changes": "DRILL packets moved"})

SCHEMES = [
    Scheme(
        name="drill",
        app="dcnlab.apps.drill",
        summary="select groups whose switches send each packet to the shortest of d random "
                "and m remembered egress queues (DRILL; switch ext, shaped links)",
        requires_switch=("ext",),
        switch_options={"ext": {"select_mode": "drill"}},
        check=drill_follows_queues,
        check_topology="fattree:4",
        switch_columns=(COLUMNS,),
    ),
]
