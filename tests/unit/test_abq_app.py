"""apps/abq.py: the SET_PORT_ABQ encoder and its settings from DCNLAB_ABQ_* (the bytes
are checked against the switch's decoder in switch_ext/tests/vectors.rs)."""

from __future__ import annotations

import struct

import pytest

from dcnlab.apps import abq


def test_body_layout() -> None:
    assert abq.set_port_abq_body(2, True, "ece", "20p") == struct.pack("!IBBBxI", 2, 1, 1, 1, 20)
    assert abq.set_port_abq_body(mode="window", k="30000b") == bytes.fromhex(
        "fffffffc" "01" "02" "02" "00" "00007530")
    assert abq.set_port_abq_body(1, False) == bytes.fromhex("00000001" "00000000" "00000000")


@pytest.mark.parametrize("kw, msg", [
    ({"mode": "lifo"}, "mode 'lifo': expected ece or window"),
    ({"k": "20"}, "K '20': expected packets like 20p or bytes like 30000b"),
    ({"k": "0p"}, "K '0p'"),
    ({"k": "5000000000b"}, "K '5000000000b'"),
    ({"port_no": -1}, "port -1"),
])
def test_bad_arguments_are_refused(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        abq.set_port_abq_body(**kw)


def test_settings_from_env() -> None:
    assert abq.settings_from_env({}) is None
    assert abq.settings_from_env({"DCNLAB_ABQ_K": "10p"}) == {"enable": True, "mode": None,
                                                             "k": "10p"}
    assert abq.settings_from_env({"DCNLAB_ABQ_ENABLE": "0", "DCNLAB_ABQ_MODE": "window"}) == {
        "enable": False, "mode": "window", "k": None}
    for env, msg in [({"DCNLAB_ABQ_ENABLE": "yes"}, "DCNLAB_ABQ_ENABLE='yes'"),
                     ({"DCNLAB_ABQ_MODE": "red"}, "DCNLAB_ABQ_MODE='red'"),
                     ({"DCNLAB_ABQ_K": "x"}, "DCNLAB_ABQ_K='x'")]:
        with pytest.raises(ValueError, match=msg):
            abq.settings_from_env(env)
