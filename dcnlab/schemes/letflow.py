"""letflow: flowlet switching with random path choice (LetFlow), in switch_ext.

The app (apps/letflow.py) asks every switch for the ``letflow`` balancer
(switch_ext/src/lb/letflow.rs): a flow keeps its bucket while its packets come closer
together than the flowlet timeout, and a packet after a longer gap starts a flowlet on a
bucket drawn at random.  By default each switch scales LetFlow's 500 us at 10 Gbit/s
to its ports' rate (500 ms at 10 Mbit/s); ``switch_options: {select_mode:
letflow/timeout=D}`` sets it.  Needs ``--switch ext``.

``dcnlab check``: with a 200 ms timeout, one connection sending without pause keeps one
uplink of its source switch (at least 99 % of the packets on one), and one that sends 16
bursts 0.6 s apart moves between uplinks (each carried some of it).
"""

from __future__ import annotations

import re

from .base import CheckContext, CheckOutcome, Scheme, SwitchColumns
from .common import top_tier_spread

CHECK_TIMEOUT_MS = 200
STEADY_BYTES = 2_000_000
BURSTS, BURST_BYTES, GAP_TIMEOUTS = 16, 32 * 1024, 3
STEADY_SHARE = 0.99  # of the packets on one uplink without gaps
MIN_SHARE = 0.03  # the least share each uplink takes with gaps (one burst of 16 is 0.06)

_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def timeout_ms(spec: str) -> float | None:
    """The ``timeout=`` of a letflow balancer spec in ms (None: none given)."""
    m = re.search(r"/timeout=([0-9.]+)(ns|us|ms|s)(?:/|$)", spec)
    return float(m.group(1)) * _UNITS_MS[m.group(2)] if m else None


def flowlets_follow_gaps(ctx: CheckContext) -> CheckOutcome:
    fields, failures = top_tier_spread(ctx)
    timeout = timeout_ms(ctx.select_mode)
    if timeout is None:
        return fields, [*failures, f"--select-mode {ctx.select_mode}: letflow's check needs "
                                   "an explicit timeout= (its gaps are 3 timeouts long)"]
    from dcnlab.check import bursty_flow, uplink_split

    src, dst = ctx.pairs[0]
    done, steady = uplink_split(
        ctx.net, src, lambda: bursty_flow(ctx.net, src, dst, 1, STEADY_BYTES, 0.0))
    fields["steady_split"] = steady
    if not done:
        failures.append(f"the steady {STEADY_BYTES} B flow {src}->{dst} did not complete")
    elif max(steady) < STEADY_SHARE:
        failures.append(f"a flow without idle gaps split {steady} over its source's uplinks: "
                        f"expected {STEADY_SHARE:.0%} or more on one")
    gap = GAP_TIMEOUTS * timeout / 1000
    done, gapped = uplink_split(
        ctx.net, src, lambda: bursty_flow(ctx.net, src, dst, BURSTS, BURST_BYTES, gap))
    fields["gapped_split"] = gapped
    if not done:
        failures.append(f"the flow of {BURSTS} bursts {src}->{dst} did not complete")
    elif min(gapped) < MIN_SHARE:
        failures.append(f"a flow of {BURSTS} bursts {gap:g} s apart (timeout {timeout:g} ms) "
                        f"split {gapped} over its source's uplinks: expected every uplink "
                        f"to carry {MIN_SHARE:.0%} or more")
    return fields, failures


COLUMNS = SwitchColumns(
    section="balancer", kind="letflow",
    counters={"flowlets": "letflow_flowlets", "path_changes": "letflow_path_changes"},
    labels={"letflow_flowlets": "LetFlow flowlets started",
            "letflow_path_changes": "LetFlow flowlets moved"})

SCHEMES = [
    Scheme(
        name="letflow",
        app="dcnlab.apps.letflow",
        summary="select groups whose switches move a flow to a random bucket after an idle "
                "gap longer than the flowlet timeout (LetFlow; switch ext)",
        requires_switch=("ext",),
        switch_options={"ext": {"select_mode": "letflow"}},
        check=flowlets_follow_gaps,
        check_topology="fattree:4",
        check_select_mode=f"letflow/timeout={CHECK_TIMEOUT_MS}ms",
        switch_columns=(COLUMNS,),
    ),
]
