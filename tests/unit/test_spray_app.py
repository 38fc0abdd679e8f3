"""apps/spray.py: the SET_GROUP_BALANCER encoder (the bytes are checked against the
switch's decoder in switch_ext/tests/vectors.rs)."""

from __future__ import annotations

import pytest

from dcnlab.apps import spray


def test_body_layout_pads_to_eight_bytes() -> None:
    assert spray.group_balancer_body("rr", 2) == bytes.fromhex("00000002" "0002" "0000"
                                                              "7272000000000000")
    assert spray.group_balancer_body("random") == bytes.fromhex("fffffffc" "0006" "0000"
                                                               "72616e646f6d0000")
    # Empty: the group goes back to the switch default; the body is the header alone.
    assert spray.group_balancer_body("", 7) == bytes.fromhex("00000007" "0000" "0000")
    for spec in ("hash", "random", "rr"):
        assert len(spray.group_balancer_body(spec)) % 8 == 0


@pytest.mark.parametrize("kw, msg", [
    ({"spec": "spray"}, "unknown load balancer 'spray'; known: hash, rr, random"),
    ({"spec": "rr/k=1"}, "load balancer 'rr' has no option 'k'"),
    ({"spec": "Random"}, "expected NAME"),
    ({"spec": "rr", "group_id": -1}, "group -1"),
    ({"spec": "rr", "group_id": 1 << 32}, "not a 32-bit OpenFlow group id"),
])
def test_bad_arguments_are_refused(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        spray.group_balancer_body(**kw)
