"""random_path: one shortest path per host pair, drawn at random with a seed."""

from .base import Scheme
from .common import top_tier_spread

SCHEMES = [
    Scheme(
        name="random_path",
        app="dcnlab.apps.random_path",
        summary="one shortest path per host pair drawn at random "
                "(DCNLAB_RANDOM_PATH_SEED); a flow-agnostic baseline",
        check=top_tier_spread,  # drawn paths spread the check's 16 transfers
        check_topology="fattree:4",
    ),
]
