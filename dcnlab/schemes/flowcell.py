"""flowcell: Presto-style flowcells, in switch_ext.

The app (apps/flowcell.py) asks every switch for the ``flowcell`` balancer
(switch_ext/src/lb/flowcell.rs): each flow's bytes are cut into 64 KiB cells and each
cell takes the next bucket in turn; as every switch cuts the flows it sees, a flow's
cells go round-robin over whole paths.  The receivers' reordering is Linux TCP's (the
flow tap's reordering counters show what it costs).  ``switch_options: {select_mode:
flowcell/cell=SIZE}`` sets the cell.  Needs ``--switch ext``.

``dcnlab check``: one connection of 4 MB splits evenly over its source switch's uplinks
(within 5 %) and over the top tier (within 8 %), in one cell per 64 KiB of the frames
its source switch sent up (its balancer's counter against its uplinks' byte counters,
retransmissions included).
"""

from __future__ import annotations

import time

from .base import CheckContext, CheckOutcome, Scheme, SwitchColumns
from .common import top_tier_spread

CELL = 64 * 1024
FLOW_BYTES = 4 * 1024 * 1024
UPLINK_TOLERANCE, TOP_TIER_TOLERANCE = 0.05, 0.08
# Cells the source switch may start beyond its uplinks' bytes / CELL: the last, partial
# cell, and frames its egress queues dropped after the group had counted them.
CELL_SLACK = 2


def _cells(ctx: CheckContext, switch: str, after: float | None = None) -> int:
    """Cells the flowcell balancers of ``switch`` started, from its last stats line."""
    from dcnlab.benchmarks.engine.netstats import balancers, switch_lines

    line = switch_lines(ctx.net, after).get(switch, {})
    return sum(int(b["balancer"].get("cells", 0)) for b in balancers({switch: line}).values()
               if b["balancer"].get("kind") == "flowcell")


def flows_split_in_cells(ctx: CheckContext) -> CheckOutcome:
    fields, failures = top_tier_spread(ctx)
    if ctx.select_mode != "flowcell":
        return fields, [*failures, f"--select-mode {ctx.select_mode}: flowcell's check "
                                   f"counts {CELL} B cells (give no --select-mode)"]
    from dcnlab.check import bursty_flow, top_tier_split, uplink_counters, uplink_split

    src, dst = ctx.pairs[0]
    edge = ctx.spec.host(src).interfaces[0].switch
    cells_before = _cells(ctx, edge, after=time.time())
    sent_before = sum(uplink_counters(ctx.net, src, "tx_bytes"))
    top: list[float] = []

    def one_flow() -> bool:
        done, shares = top_tier_split(
            ctx.net, lambda: bursty_flow(ctx.net, src, dst, 1, FLOW_BYTES, 0.0))
        top.extend(shares)
        return done

    done, up = uplink_split(ctx.net, src, one_flow)
    cells = _cells(ctx, edge, after=time.time()) - cells_before
    # what the uplinks carried, retransmissions included (port stats just polled)
    sent = sum(uplink_counters(ctx.net, src, "tx_bytes")) - sent_before
    fields.update(uplink_split=up, top_tier_split=top, cells=cells, uplink_bytes=sent)
    if not done:
        return fields, [*failures, f"the {FLOW_BYTES} B flow {src}->{dst} did not complete"]
    for what, shares, tolerance in (("its source's uplinks", up, UPLINK_TOLERANCE),
                                    ("the top tier", top, TOP_TIER_TOLERANCE)):
        even = 1 / len(shares)
        if any(abs(x - even) > tolerance for x in shares):
            failures.append(f"one flow split {shares} over {what}, expected {even:.2f} each "
                            f"within {tolerance}")
    least = sent // CELL
    if not least <= cells <= least + CELL_SLACK:
        failures.append(f"{src}'s switch {edge} started {cells} cells while its uplinks sent "
                        f"{sent} B: expected {least} to {least + CELL_SLACK} of {CELL} B")
    return fields, failures


COLUMNS = SwitchColumns(
    section="balancer", kind="flowcell",
    counters={"cells": "flowcell_cells", "path_changes": "flowcell_path_changes"},
    labels={"flowcell_cells": "flowcells started", "flowcell_path_changes": "flowcells moved"})

SCHEMES = [
    Scheme(
        name="flowcell",
        app="dcnlab.apps.flowcell",
        summary="select groups whose switches send each flow round-robin over the paths in "
                "64 KiB cells (Presto's flowcells; switch ext)",
        requires_switch=("ext",),
        switch_options={"ext": {"select_mode": "flowcell"}},
        check=flows_split_in_cells,
        check_topology="fattree:4",
        switch_columns=(COLUMNS,),
    ),
]
