"""Random packet spraying (seed 000): the ECMP groups, selecting a bucket per packet.

On switch_ext the app asks for per-packet selection (dcnlab.controller.switch_balancer):
``random`` (RPS, the default) or ``rr`` (weighted round-robin, ofsoftswitch13's
behaviour), from ``DCNLAB_SELECT_MODE``.  Open vSwitch hashes per flow: the app warns,
once, and the fabric behaves as ECMP there.
"""

from __future__ import annotations

from dcnlab.controller.switch_balancer import SwitchBalancerApp


class Spray(SwitchBalancerApp):
    BALANCER = "random"
    FAMILY = ("random", "rr")
