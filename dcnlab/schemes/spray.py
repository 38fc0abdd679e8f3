"""spray (seed 000): the ECMP groups with per-packet selection (random packet spraying).

Per-packet selection needs a switch that can choose a bucket per packet (``ext``); the
app asks switch_ext for it at run time as well, and on hashing switches it warns and
behaves as ECMP.  ``dcnlab check``: on ``ext`` one TCP flow's packets split evenly over
the source switch's uplinks (within 5 %), elsewhere the ECMP spread.
"""

from __future__ import annotations

from .base import CheckContext, CheckOutcome, Scheme
from .common import top_tier_spread

SPLIT_TOLERANCE = 0.05


def per_packet_split(ctx: CheckContext) -> CheckOutcome:
    fields, failures = top_tier_spread(ctx)
    if ctx.switch != "ext":
        return fields, failures
    from dcnlab.check import one_flow_split

    done, share = one_flow_split(ctx.net, *ctx.pairs[0])
    fields["per_packet_split"] = share
    even = 1 / len(share)
    if not done or any(abs(x - even) > SPLIT_TOLERANCE for x in share):
        failures.append(f"one flow's packets split {share} over uplinks, expected "
                        f"{even:.2f} each within {SPLIT_TOLERANCE}")
    return fields, failures


SCHEMES = [
    Scheme(
        name="spray",
        app="dcnlab.apps.spray",
        summary="ECMP groups with per-packet selection (random packet spraying) on ext",
        seed="000",
        # per packet only where switches can choose so (ext); elsewhere it warns and
        # behaves as ECMP, so it is not refused there
        switch_options={"ext": {"select_mode": "random"}},
        check=per_packet_split,
        check_topology="fattree:4",
    ),
]
