"""Check invariants more than one scheme shares (pure: they read the check's context)."""

from __future__ import annotations

from .base import CheckContext, CheckOutcome

MIN_TOP_TIER_USED = 3  # of 4 cores on a k=4 fat-tree, 4 spines on spineleaf:4,...


def top_tier_spread(ctx: CheckContext) -> CheckOutcome:
    """Concurrent inter-pod flows spread over the top tier (cores/spines): at least 3 of
    them carried more than 5 % of the bytes, counted from OpenFlow port statistics."""
    carried = ctx.carried
    if not carried:
        return {}, []
    total = sum(carried.values())
    used = sum(1 for v in carried.values() if total and v > 0.05 * total)
    need = min(MIN_TOP_TIER_USED, len(carried))
    if used < need:
        return {}, [f"flows used {used} of {len(carried)} top-tier switches (need {need})"]
    return {}, []
