"""first_path (seed 000): every destination through the first equal-cost next hop (the
lowest port), as a router without ECMP keeps the first of its equal-cost routes."""

from .base import Scheme

SCHEMES = [
    Scheme(
        name="first_path",
        app="dcnlab.apps.first_path",
        summary="every destination through the lowest-port equal-cost next hop "
                "(a router without ECMP; seed 000's ns-3 baseline as we understand it)",
        seed="000",
    ),
]
