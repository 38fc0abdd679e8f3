"""single_path: one deterministic shortest path per host pair (the seeds' baseline)."""

from .base import Scheme

SCHEMES = [
    Scheme(
        name="single_path",
        app="dcnlab.apps.single_path",
        summary="one deterministic shortest path per host pair (the seeds' baseline)",
        seed="000",
    ),
]
