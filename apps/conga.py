"""CONGA: congestion-aware flowlets decided at the source leaf, with the paths'
congestion carried in-band (switch_ext's ``conga`` balancer and overlay,
switch_ext/src/lb/conga.rs and switch_ext/src/conga.rs).

Every switch runs ``conga``; the leaves (the switches hosts attach to, from the
topology) each get their id with it, ``conga/leaf=N`` (0..63 in dpid order), and decide
the paths; the others only add their ports' congestion to the packets' labels.
``DCNLAB_SELECT_MODE=conga/timeout=D/age=D`` sets the flowlet timeout and the tables'
ageing time; the app gives the leaf ids.
"""

from __future__ import annotations

from typing import Any

from dcnlab.controller.switch_balancer import SwitchBalancerApp

MAX_LEAVES = 64  # the label's 6-bit leaf id


class Conga(SwitchBalancerApp):
    BALANCER = "conga"
    FAMILY = ("conga",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "/leaf=" in self.balancer:
            raise ValueError(f"DCNLAB_SELECT_MODE={self.balancer!r}: the app gives each leaf "
                             "its id; leave leaf= out")

    def balancer_for(self, dpid: int) -> str:
        leaves = sorted(d for d in self.view.switches if self.view.hosts_on(d))
        if not leaves and not getattr(self, "_warned_no_leaves", False):
            self._warned_no_leaves = True
            self.warn("CONGA's leaves are the switches hosts attach to, from the topology "
                      "(DCNLAB_TOPOLOGY); none is known, so every switch hashes as ECMP")
        if dpid not in leaves:
            return self.balancer
        leaf = leaves.index(dpid)
        if leaf >= MAX_LEAVES:
            self.warn(f"switch {dpid:#x}: CONGA's label has room for {MAX_LEAVES} leaves; "
                      "this one forwards as a spine does (its flows hash)")
            return self.balancer
        return f"{self.balancer}/leaf={leaf}"
