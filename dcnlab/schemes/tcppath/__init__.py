"""TCP-Path and TFE (seed 001): SYN-driven path exploration, first-arrival locking.

This package is the schemes' home: :mod:`.state` (per-flow state machine), :mod:`.rules`
(punt and per-flow entries as data), :mod:`.frames` (exploration frames), :mod:`.check`
(the ``dcnlab check`` invariant: new connections avoid a loaded spine).  The Ryu apps
are ``apps/tcppath.py`` and ``apps/tfe.py``; benchmarks ``benchmarks/tcppath_setup.py``
and ``benchmarks/tfe_table_size.py``.
"""

from __future__ import annotations

from ..arppath import CONTROLLER as ARPPATH_CONTROLLER
from ..base import CheckContext, CheckOutcome, ControllerColumns, Scheme

# app counter -> controller.csv column, and the summary's label for it
_COUNTERS = {
    "tcppath_explorations": ("explorations", "explorations"),
    "tcppath_copy_packet_in": ("copy_packet_in", "exploration packet-ins"),
    "tcppath_copy_packet_out": ("copy_packet_out", "exploration packet-outs"),
    "tcppath_copies_sent": ("copies_sent", None),
    "tcppath_copy_late": ("late_dropped", "late copies dropped"),
    "tcppath_copy_dead_end": ("dead_end_dropped", "copies dropped at other edges"),
    "tcppath_copy_duplicate": ("duplicate_dropped", None),
    "tcppath_copy_unknown": ("unknown_dropped", None),
    "tcppath_not_elephant": ("not_elephant", None),
}
CONTROLLER = ControllerColumns(
    # ARP-Path's too: it is the default forwarding (DCNLAB_TCPPATH_DEFAULT)
    counters={**{name: column for name, (column, _) in _COUNTERS.items()},
              **ARPPATH_CONTROLLER.counters},
    labels={**{column: label for column, label in _COUNTERS.values() if label},
            **ARPPATH_CONTROLLER.labels},
    entries_section="tcppath",
    copies_section="tcppath",
)
# ARP-Path's tables follow TCP-Path's eight: switch_ext must have room for them
SWITCH_OPTIONS = {"ext": {"tables": 16}}


def congestion_avoided(ctx: CheckContext) -> CheckOutcome:
    from .check import connect_speed, tcppath_congestion

    fields, failures = tcppath_congestion(ctx.net, ctx.spec)
    speed, slow = connect_speed(ctx.net, ctx.spec)
    return {**fields, **speed}, failures + slow


SCHEMES = [
    Scheme(
        name="tcppath",
        app="dcnlab.apps.tcppath",
        summary="SYNs explored through the data plane, first arrival locks the path, "
                "the SYN-ACK confirms it; the rest takes ARP-Path (the paper's default "
                "forwarding; DCNLAB_TCPPATH_DEFAULT=ecmp: ECMP routes)",
        seed="001",
        check=congestion_avoided,
        check_topology="spineleaf:4,4,4",
        controller=CONTROLLER,
        switch_options=SWITCH_OPTIONS,
    ),
    Scheme(
        name="tfe",
        app="dcnlab.apps.tfe",
        summary="TCP-Path for elephants only (source port above 30000 or nonzero DSCP); "
                "other flows take ARP-Path (DCNLAB_TCPPATH_DEFAULT=ecmp: ECMP routes)",
        seed="001",
        check=congestion_avoided,
        check_topology="spineleaf:4,4,4",
        controller=CONTROLLER,
        switch_options=SWITCH_OPTIONS,
    ),
]
