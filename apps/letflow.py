"""LetFlow: select groups whose switches move a flow to a random bucket after each idle
gap longer than the flowlet timeout (switch_ext's ``letflow`` balancer,
switch_ext/src/lb/letflow.rs).  ``DCNLAB_SELECT_MODE=letflow/timeout=D`` sets the
timeout; by default each switch scales LetFlow's 500 us at 10 Gbit/s to its ports' rate.
"""

from __future__ import annotations

from dcnlab.controller.switch_balancer import SwitchBalancerApp


class LetFlow(SwitchBalancerApp):
    BALANCER = "letflow"
    FAMILY = ("letflow",)
