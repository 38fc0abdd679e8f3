"""Presto-style flowcells: select groups whose switches move each flow to the next bucket
after every 64 KiB of its bytes (switch_ext's ``flowcell`` balancer,
switch_ext/src/lb/flowcell.rs); ``DCNLAB_SELECT_MODE=flowcell/cell=SIZE`` sets the cell.
"""

from __future__ import annotations

from dcnlab.controller.switch_balancer import SwitchBalancerApp


class Flowcell(SwitchBalancerApp):
    BALANCER = "flowcell"
    FAMILY = ("flowcell",)
