"""Which source port and DSCP each flow's sender uses: the elephant mark.

Switches that treat elephants differently (TFE, seed 001) recognise them by a TCP source
port above 30000 or a nonzero DSCP, set by the sending application.  The generator knows
every flow's size in advance, so the mark is part of the flow list and replayed
identically for every scheme -- as are the source ports, which ECMP hashes on.

Every flow binds an explicit source port: the kernel's ephemeral range (32768-60999 by
default) lies above 30000, so letting the kernel choose would mark every flow.
Elephants take ports from ``elephant_ports``, the rest from ``other_ports``; each source
host walks its range from a seeded random offset, so ports do not repeat within a run
(the agent moves to the next free port if one is still taken, and records the port it
used).  A flow is an elephant when ``size > elephant_min`` or it is long-lived.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .schema import field
from .workloads import Flow


@dataclass(frozen=True)
class Marking:
    elephant_min: int = field(10_000_000, unit="bytes", min=0,
                              doc="elephant: size above this (or long-lived)")
    ports: bool = field(True, doc="mark elephants by source port range")
    dscp: int = field(0, min=0, max=63, doc="DSCP of elephants (0: no DSCP mark)")
    elephant_ports: list[int] = field([30001, 60999], doc="[low, high] for elephants")
    other_ports: list[int] = field([10000, 29999], doc="[low, high] for other flows")

    def __post_init__(self) -> None:
        for name in ("elephant_ports", "other_ports"):
            rng = getattr(self, name)
            if len(rng) != 2 or not 1024 <= rng[0] <= rng[1] <= 65535:
                raise ValueError(f"{name} must be [low, high] with 1024 <= low <= high "
                                 f"<= 65535, got {rng}")
        lo_e, hi_e = self.elephant_ports
        lo_o, hi_o = self.other_ports
        if self.ports and not (hi_o < lo_e or hi_e < lo_o):
            raise ValueError("elephant_ports and other_ports overlap: switches could not "
                             "tell elephants apart")

    def is_elephant(self, flow: Flow) -> bool:
        return flow.kind == "tcp" and (flow.long_lived or flow.size > self.elephant_min)


def assign_marks(flows: list[Flow], marking: Marking, seed: int) -> list[Flow]:
    """Flows with sport and dscp set (deterministic in seed and the flow list)."""
    rng = np.random.default_rng([int(seed), 0x6D61726B])  # "mark": its own stream
    cursors: dict[tuple[str, bool], int] = {}
    out = []
    for flow in flows:
        elephant = marking.is_elephant(flow)
        low, high = (marking.elephant_ports if elephant and marking.ports
                     else marking.other_ports)
        key = (flow.src, elephant and marking.ports)
        span = high - low + 1
        if key not in cursors:
            cursors[key] = int(rng.integers(0, span))
        port = low + cursors[key] % span
        cursors[key] += 1
        dscp = marking.dscp if elephant else 0
        out.append(replace(flow, sport=port, dscp=dscp))
    return out
