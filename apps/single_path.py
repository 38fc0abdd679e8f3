"""Single path: one deterministic shortest path per host pair (the seeds' baseline).

Destinations are spread over the uplinks by address (host suffix, as in Al-Fares et
al.'s two-level tables), but every packet from one host to another takes the same path.
"""

from dcnlab.controller.compiler import STRIPED
from dcnlab.controller.fabric_app import FabricApp


class SinglePath(FabricApp):
    POLICY = STRIPED
