"""What `dcnlab lab describe` reports from the controller's discovery, against the lab
file (in memory: a state file as the discovery-mode app writes it)."""

from __future__ import annotations

from typing import Any

from dcnlab.lab import spec as lab
from dcnlab.lab.describe import HostReport, _compare, render

LAB = lab.parse({
    "controller": {"listen": "192.0.2.1"},
    "switches": [{"dpid": 1, "name": "spine"}, {"dpid": 2, "name": "leaf1"},
                 {"dpid": 3, "name": "leaf2"}],
    "fabric": [{"a": "spine:1", "b": "leaf1:1"}, {"a": "spine:2", "b": "leaf2:1"}],
    "hosts": [{"name": "h1", "ssh": "192.0.2.11", "interface": "eth1",
               "address": "10.0.0.1", "switch": "leaf1", "port": 2},
              {"name": "h2", "ssh": "192.0.2.12", "interface": "eth1",
               "address": "10.0.0.2"}]})


def _state(**changes: Any) -> Any:
    return {"connected": [1, 2, 3], "fabric": [[1, 1, 2, 1, 1], [1, 2, 3, 1, 1]],
            "host_locations": {"10.0.0.1": {"mac": "m", "dpid": 2, "port": 2},
                               "10.0.0.2": {"mac": "n", "dpid": 3, "port": 5}},
            **changes}


def test_a_lab_as_its_file_says() -> None:
    desc = _compare(LAB, [HostReport("h1"), HostReport("h2")], _state())
    assert desc.ok and desc.differences == []
    assert desc.links == [("leaf1:1", "spine:1"), ("leaf2:1", "spine:2")]
    assert desc.located == {"h1": "leaf1:2", "h2": "leaf2:5"}  # h2's port: found only
    assert "the lab is as the lab file says" in render(desc)


def test_every_difference_is_named() -> None:
    state = _state(connected=[1, 2, 9], fabric=[[1, 1, 2, 1, 1], [2, 7, 9, 1, 1]],
                   host_locations={"10.0.0.1": {"mac": "m", "dpid": 2, "port": 4}})
    report = HostReport("h2", ["the login lab is not root (uid 1000): log in as root"])
    desc = _compare(LAB, [HostReport("h1"), report], state)
    assert not desc.ok
    assert desc.differences == [
        "switch leaf2 (0x3) did not connect to 192.0.2.1:6653",
        "an unknown switch 0x9 connected (not in the lab file)",
        "link leaf2:1 -- spine:2 is in the lab file but LLDP did not find it",
        "link 0x9:1 -- leaf1:7 was found but is not in the lab file",
        "host h1 is at leaf1:4, the lab file says leaf1:2",
        "host h2 (10.0.0.2) was not seen on the fabric (is eth1 cabled to a switch?)",
    ]
    text = render(desc)
    assert "h2: the login lab is not root" in text and "differences from the lab file" in text
