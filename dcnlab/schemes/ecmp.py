"""ecmp: OpenFlow select groups over the equal-cost next hops; switches hash per flow."""

from .base import Scheme
from .common import top_tier_spread

SCHEMES = [
    Scheme(
        name="ecmp",
        app="dcnlab.apps.ecmp",
        summary="select groups over the equal-cost next hops; switches hash per flow",
        check=top_tier_spread,
        check_topology="fattree:4",
        baseline=True,
    ),
]
