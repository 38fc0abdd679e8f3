"""ARP parsing/building and the eventlet shim Ryu needs."""

from __future__ import annotations

import os
import random
import subprocess
import sys

import pytest
from ryu.lib.packet import arp as ryu_arp

from dcnlab.controller import arp


def _request() -> arp.ArpPacket:
    return arp.ArpPacket(ryu_arp.ARP_REQUEST, "02:00:0a:00:00:01", "10.0.0.1", arp.ZERO_MAC,
                         "10.0.0.2", "02:00:0a:00:00:01", arp.BROADCAST)


def test_probe_and_reply_round_trip() -> None:
    req = _request()
    probe = arp.parse(arp.probe(req))
    assert probe.is_request and probe.eth_dst == arp.BROADCAST and probe.dst_ip == "10.0.0.2"
    rep = arp.parse(arp.reply(req, "02:00:0a:00:00:02"))
    assert not rep.is_request
    assert (rep.src_mac, rep.src_ip, rep.dst_mac, rep.dst_ip, rep.eth_dst) == (
        "02:00:0a:00:00:02", "10.0.0.2", req.src_mac, "10.0.0.1", req.src_mac)


@pytest.mark.parametrize("frame", [b"", b"\x00" * 14, b"\xff" * 64])
def test_garbage_is_not_arp(frame: bytes) -> None:
    with pytest.raises(arp.NotArp):
        arp.parse(frame)


def test_sender_mac_must_match_ethernet_source() -> None:
    frame = bytearray(arp.probe(_request()))
    frame[6:12] = bytes.fromhex("020000000099")  # Ethernet source differs from ARP sha
    with pytest.raises(arp.NotArp, match="differs"):
        arp.parse(bytes(frame))


def test_random_mutations_never_raise_anything_but_not_arp() -> None:
    rng = random.Random(5)
    good = arp.probe(_request())
    for _ in range(3000):
        frame = bytearray(good[: rng.randrange(len(good) + 1)])
        for _ in range(rng.randrange(4)):
            if frame:
                frame[rng.randrange(len(frame))] = rng.randrange(256)
        try:
            arp.parse(bytes(frame))
        except arp.NotArp:
            pass


def test_ryu_manager_imports_with_new_eventlet() -> None:
    # The .pth hook must make Ryu's wsgi import work in a fresh interpreter.
    code = ("import eventlet.wsgi, ryu.app.wsgi, ryu.cmd.manager; "
            "print(eventlet.wsgi.ALREADY_HANDLED is not None)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONWARNINGS": "ignore"}, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().endswith("True")
