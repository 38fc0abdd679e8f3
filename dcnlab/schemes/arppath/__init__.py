"""ARP-Path (seed 001's default forwarding and baseline): per-address paths found by the
fastest copy of each host's broadcast and confirmed by the first frame back, which
follows it, in the switches' data plane.

This package is the scheme's home: :mod:`.dataplane` (the tables), :mod:`.view` (what the
controller reads of them), :mod:`.part` (ARP-Path as a part of an app), :mod:`.check`
(the ``dcnlab check`` invariant).  The Ryu app is ``apps/arppath.py``.
"""

from __future__ import annotations

from ..base import CheckContext, CheckOutcome, ControllerColumns, Scheme

# app counter -> controller.csv column, and the summary's label for it
# (its own columns: under TCP-Path, whose default forwarding it can be, both count)
_COUNTERS = {
    "arppath_explorations": ("arppath_explorations", "ARP-Path explorations"),
    "arppath_copy_late": ("arppath_late_dropped", "ARP-Path late copies dropped"),
    "arppath_copy_dead_end": ("arppath_dead_end_dropped", None),
    "arppath_fabric_miss": ("arppath_fabric_miss", "frames on the fallback routes"),
    "arppath_path_fail": ("arppath_path_fail", None),
    "arppath_repaired": ("arppath_repaired", "ARP-Path dangling entries deleted"),
}
CONTROLLER = ControllerColumns(
    counters={name: column for name, (column, _) in _COUNTERS.items()},
    labels={column: label for column, label in _COUNTERS.values() if label},
    entries_section="arppath",
)


def paths_learned(ctx: CheckContext) -> CheckOutcome:
    from .check import paths_learned as check

    return check(ctx.net, ctx.spec)


SCHEMES = [
    Scheme(
        name="arppath",
        app="dcnlab.apps.arppath",
        summary="ARP-Path: paths found by the fastest copy of a host's broadcast and "
                "confirmed by the first frame back, in the data plane",
        seed="001",
        check=paths_learned,
        check_topology="spineleaf:4,4,4",
        controller=CONTROLLER,
    ),
]
