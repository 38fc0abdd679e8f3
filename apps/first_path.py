"""First path: every destination through the first equal-cost next hop (lowest port).

A router without ECMP that keeps the first of its equal-cost routes does this: ns-3's
global routing with ``RandomEcmpRouting`` off (its default in ns-3.23, the seed 000
paper's simulator) takes the equal-cost next hop with the lowest address, the same
neighbour when addresses follow the links' creation order (docs/diagnoses/p000.md,
"first_path against ns-3's global routing"). Unlike ``single_path``, which stripes destinations over
the uplinks, every flow leaving a switch upwards takes the same uplink, so on a fat-tree
all traffic between pods crosses one aggregation switch per pod and one core switch.
"""

from dcnlab.controller.compiler import Pinned
from dcnlab.controller.fabric_app import FabricApp


class FirstPort(Pinned):
    """The lowest port of every equal-cost next-hop set, for every destination."""

    name = "first"

    def pick(self, dpid: int, hops: tuple[int, ...], key: int) -> int:
        return min(hops)


class FirstPath(FabricApp):
    POLICY = FirstPort()
