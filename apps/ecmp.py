"""ECMP: one OpenFlow select group per equal-cost next-hop set.

Switches choose a bucket per flow (Open vSwitch hashes the 5-tuple; ``switch_ext`` in
its default ``hash`` mode does the same), so each TCP flow keeps one path while
different flows spread over every shortest path.  Run it with
``ryu-manager dcnlab.apps.ecmp`` (or ``ryu-manager apps/ecmp.py`` from a checkout).
"""

from dcnlab.controller.compiler import SELECT_GROUPS
from dcnlab.controller.fabric_app import FabricApp


class Ecmp(FabricApp):
    POLICY = SELECT_GROUPS
