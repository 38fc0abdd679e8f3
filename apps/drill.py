"""DRILL: select groups whose switches send each packet to the candidate with the
shortest egress queue among ``d`` random ones and the ``m`` remembered (switch_ext's
``drill`` balancer, switch_ext/src/lb/drill.rs); ``DCNLAB_SELECT_MODE=drill/d=N/m=N``.
"""

from __future__ import annotations

from dcnlab.controller.switch_balancer import SwitchBalancerApp


class Drill(SwitchBalancerApp):
    BALANCER = "drill"
    FAMILY = ("drill",)
