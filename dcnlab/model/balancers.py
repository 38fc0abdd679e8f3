"""Load balancers switch_ext knows: how its select groups choose a bucket.

A copy of the switch's registry (switch_ext/src/lb/mod.rs, ``BALANCERS``, and each
balancer's constructor), one a line (name, option keys), so that a misspelt name or key
is refused when an experiment or a switch option is read rather than when a switch
starts; the values are the switch's to check (it refuses to start on a bad one, and
answers a bad SET_GROUP_BALANCER with an OpenFlow error).  The first is the switch's
default.  tests/unit/test_spec.py compares this with the Rust sources, so the two cannot
drift apart.  A table of text, as for the queue disciplines (dcnlab/model/topology.py).
"""

from __future__ import annotations

from dcnlab.model.named_spec import check_named

_BALANCER_TABLE = """
hash
rr
random
letflow  timeout table
drill    d m
flowcell cell table
conga    leaf timeout table age
"""

BALANCERS: dict[str, tuple[str, ...]] = {
    name: tuple(keys)
    for name, *keys in (line.split() for line in _BALANCER_TABLE.strip().splitlines())
}
DEFAULT_BALANCER = next(iter(BALANCERS))


def check_balancer(text: str) -> str:
    """``text`` if it names a balancer of :data:`BALANCERS` with keys it accepts
    (``NAME[/KEY=VALUE]...``), else ValueError saying what is wrong."""
    check_named(text, BALANCERS, "load balancer", "letflow/timeout=50ms")
    return text
