"""The `mn --custom topo/mininet_topos.py --topo fattree,4` entry points build the same
topology the spec parser describes (mn itself is never run here)."""

from __future__ import annotations

import pytest

from dcnlab.topo import mininet_topos
from dcnlab.topo.spec import parse


@pytest.mark.parametrize(("family", "args", "spec"), [
    ("fattree", (4,), "fattree:4"),
    ("spineleaf", (2, 3, 2), "spineleaf:2,3,2"),
    ("incast", (5,), "incast:5"),
])
def test_custom_topos_match_the_spec(family: str, args: tuple, spec: str) -> None:
    topo = mininet_topos.topos[family](*args)
    model = parse(spec)
    assert len(topo.switches()) == len(model.switches)
    assert len(topo.hosts()) == len(model.hosts)
    assert len(topo.links()) == len(model.links)
