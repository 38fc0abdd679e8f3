"""Switch forwarding: a controller that installs nothing, for switches that forward by
themselves (the scheme ``switch_forwarding``, :mod:`dcnlab.schemes.switch_forwarding`).

The switch still connects, is cleared of dcnlab's entries, confirms with a barrier and
has its ports polled, so readiness, port counters and the state file are as under any
other app; but not even the table-miss entry is installed, since a table-miss entry
with no instructions would drop what the switch's own forwarding should take.
"""

from __future__ import annotations

from dcnlab.controller.compiler import Forwarding
from dcnlab.controller.fabric_app import FabricApp
from dcnlab.controller.rules import SwitchRules
from dcnlab.controller.view import NetworkView


class ByTheSwitch(Forwarding):
    """No forwarding of the controller's: the switch decides."""

    name = "switch"


class SwitchForwarding(FabricApp):
    POLICY = ByTheSwitch()

    def compile(self, view: NetworkView) -> dict[int, SwitchRules]:
        return {dpid: SwitchRules(dpid) for dpid in view.switches}
