"""conga: congestion-aware flowlets at the source leaf (CONGA), in switch_ext.

The app (apps/conga.py) gives every switch the ``conga`` balancer and each leaf (a
switch hosts attach to) its id: packets between switches carry an MPLS label with the
largest congestion metric on their path so far (each egress port's admitted rate over
its line rate, in eighths), the destination leaf sends that back on its own traffic,
and the source leaf puts a new flowlet on the uplink whose path is least congested
(switch_ext/src/conga.rs, switch_ext/src/lb/conga.rs).  On a fat-tree the edge switches
are the leaves and choose the aggregation switch; the switches above hash, which on a
fat-tree still decides the path into the destination's pod (aggregation switch k of one
pod reaches aggregation switch k of every other).  The metrics need line rates: on
links without one (twopath's) every path reads 0 and CONGA keeps each flow where it
started.
Needs ``--switch ext``.

``dcnlab check`` (on a fabric with a link rate, as fattree:4's 100 Mbit/s; flowlet
timeout 50 ms, tables aged after 5 s): a UDP
flow at 90 % of the link rate from a third pod fills one way into the destination edge
switch; a TCP connection to the other host there sends 16 bursts 150 ms apart; its
source edge switch, told the path's congestion by the acknowledgements' labels, puts at
most 30 % of its packets on the uplink that leads into the filled way (an oblivious
choice puts half there on average).
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

from .base import CheckContext, CheckOutcome, Scheme, SwitchColumns
from .common import top_tier_spread

# The check's flowlet timeout, and an ageing time longer than its 16 bursts (2.4 s):
# with the default (1 s at 100 Mbit/s) the filled path's entry ages out mid-check and a
# flowlet goes back to probe it, as CONGA does, which the check would count against it.
CHECK_BALANCER = "conga/timeout=50ms/age=5s"
BURSTS, BURST_BYTES, GAP_S = 16, 32 * 1024, 0.15
FLOOD_SHARE = 0.9  # of the link rate
# The flood has been arriving this long before the bursts start: its rate is in the
# ports' meters (their time constant is 100 frame times, 120 ms at 10 Mbit/s).
SETTLE_S = 0.5
SETTLE_TIMEOUT_S = 15.0
MAX_SHARE = 0.30  # of the bursts' packets on the uplink into the filled way


def _edge(ctx: CheckContext, host: str) -> str:
    return ctx.spec.host(host).interfaces[0].switch


def _uplink_peers(ctx: CheckContext, switch: str) -> dict[int, Any]:
    """``switch``'s ports towards other switches, each with the switch at its far end."""
    out = {}
    for lk in ctx.spec.fabric_links():
        if lk.a == switch:
            out[lk.a_port] = ctx.spec.switch(lk.b)
        elif lk.b == switch:
            out[lk.b_port] = ctx.spec.switch(lk.a)
    return out


def _rx(ctx: CheckContext, switch: str) -> dict[int, int]:
    ports = (ctx.net.state() or {}).get("port_stats", {}).get(
        str(ctx.spec.switch(switch).dpid), {})
    return {int(p): s.get("rx_packets", 0) for p, s in ports.items()}


def new_flowlets_avoid_a_filled_path(ctx: CheckContext) -> CheckOutcome:
    rate = ctx.spec.default_params.rate_mbit
    if rate is None:
        return {}, ["CONGA's metrics are a port's rate over its line rate and switch_ext "
                    "ports without a rate have none: check on a shaped fabric, e.g. --topo "
                    "fattree:4 (100 Mbit/s links)"]
    fields, failures = top_tier_spread(ctx)
    from dcnlab.check import bursty_flow, fresh_stats, uplink_split

    edges = list(dict.fromkeys(_edge(ctx, h.name) for h in ctx.spec.hosts))
    on = {e: [h.name for h in ctx.spec.hosts if _edge(ctx, h.name) == e] for e in edges}
    dst_edge, src_edge = edges[-1], edges[0]
    pods = {e: ctx.spec.switch(e).pod for e in edges}
    third = next((e for e in edges[1:-1] if pods[e] not in (pods[src_edge], pods[dst_edge])),
                 edges[len(edges) // 2])
    flood_src, flood_dst, dst, src = on[third][0], on[dst_edge][0], on[dst_edge][-1], \
        on[src_edge][0]
    net = ctx.net
    server = net.host(flood_dst).popen(["iperf3", "-s", "-1", "-p", "5301"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    flood = None
    try:
        from dcnlab.topo.readiness import in_host, wait_listening

        wait_listening(in_host(net.host(flood_dst)), 5301, what="iperf3 server")
        before = _rx(ctx, dst_edge)
        flood = net.host(flood_src).popen(
            ["iperf3", "-c", net.host(flood_dst).IP(), "-p", "5301", "-u", "-l", "1400",
             "-b", f"{rate * FLOOD_SHARE:g}M", "-t", "30"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        peers = _uplink_peers(ctx, dst_edge)
        settled = rate * 1e6 / 8 / 1400 * FLOOD_SHARE * SETTLE_S  # packets
        deadline = time.time() + SETTLE_TIMEOUT_S
        while True:
            fresh_stats(net, time.time())
            after = _rx(ctx, dst_edge)
            filled = max(peers, key=lambda p: after.get(p, 0) - before.get(p, 0))
            if after.get(filled, 0) - before.get(filled, 0) >= settled:
                break
            if time.time() > deadline:
                return fields, [*failures, f"the UDP flow {flood_src}->{flood_dst} did not "
                                           f"reach {dst_edge} within {SETTLE_TIMEOUT_S:g} s"]
        # the source edge's uplink towards the same position one tier up
        way = next((p for p, sw in _uplink_peers(ctx, src_edge).items()
                    if sw.index == peers[filled].index), None)
        done, split = uplink_split(net, src, lambda: bursty_flow(
            net, src, dst, BURSTS, BURST_BYTES, GAP_S))
    finally:
        for proc in (flood, server):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    ups = sorted(_uplink_peers(ctx, src_edge))
    fields.update(filled_way=peers[filled].name, uplink_split=split)
    if way is None:
        return fields, [*failures, f"no uplink of {src_edge} leads towards "
                                   f"{peers[filled].name}'s position"]
    share = split[ups.index(way)]
    fields["share_into_filled"] = share
    if not done:
        failures.append(f"the {BURSTS} bursts {src}->{dst} did not all arrive")
    elif share > MAX_SHARE:
        failures.append(f"{src_edge} put {share:.0%} of {src}->{dst}'s packets on the uplink "
                        f"into the way {peers[filled].name}->{dst_edge} a UDP flow fills: "
                        f"expected {MAX_SHARE:.0%} or less")
    return fields, failures


COLUMNS = SwitchColumns(
    section="balancer", kind="conga",
    counters={"flowlets": "conga_flowlets", "path_changes": "conga_path_changes",
              "informed": "conga_informed"},
    labels={"conga_flowlets": "CONGA flowlets started",
            "conga_path_changes": "CONGA flowlets moved",
            "conga_informed": "CONGA flowlets with path metrics"})
OVERLAY = SwitchColumns(
    section="overlay", kind="conga",
    counters={"labels_in": "conga_labels_in", "feedback_in": "conga_feedback_in",
              "feedback_out": "conga_feedback_out"},
    labels={"conga_labels_in": "CONGA labels read at leaves",
            "conga_feedback_in": "CONGA feedback received",
            "conga_feedback_out": "CONGA feedback sent"})

SCHEMES = [
    Scheme(
        name="conga",
        app="dcnlab.apps.conga",
        summary="leaves put new flowlets on the least congested path, the paths' congestion "
                "carried in-band (CONGA; switch ext, shaped links)",
        requires_switch=("ext",),
        switch_options={"ext": {"select_mode": "conga"}},
        check=new_flowlets_avoid_a_filled_path,
        check_topology="fattree:4",
        check_select_mode=CHECK_BALANCER,
        switch_columns=(COLUMNS, OVERLAY),
    ),
]
