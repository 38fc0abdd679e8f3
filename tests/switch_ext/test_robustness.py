"""Control-channel robustness against a scripted fake controller (marker ``network``).

The switch must answer malformed and unsupported messages with the spec's OFPT_ERROR
and keep running, reconnect with backoff when the controller goes away, refuse a
controller that cannot speak OpenFlow 1.3, and fall back to MAC learning only in
``--fail-mode standalone``.
"""

from __future__ import annotations

import struct
import subprocess
import time

import pytest
from ryu.ofproto import ofproto_v1_3 as ofp
from swext_net import FakeController

pytestmark = pytest.mark.network


def error_of(buf: bytes) -> tuple[int, int]:
    return struct.unpack("!HH", buf[8:12])


@pytest.fixture
def fake():
    f = FakeController()
    try:
        yield f
    finally:
        f.shutdown()


def test_errors_keep_switch_running_and_reconnect(line, switch_binary, fake, tmp_path):
    sw = line.start_switch(
        switch_binary,
        args=["--controller", f"tcp:127.0.0.1:{fake.port}", "--max-backoff-ms", "400"],
        log_path=str(tmp_path / "switch.log"),
    )
    fake.handshake()
    fake.send(ofp.OFPT_FEATURES_REQUEST, 2)
    xid, buf = fake.recv_type(ofp.OFPT_FEATURES_REPLY)
    assert xid == 2 and struct.unpack("!Q", buf[8:16])[0] == 1

    cases = [
        # (type, body, version, expected (type, code))
        (99, b"", 4, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE)),
        (ofp.OFPT_FEATURES_REQUEST, b"", 1, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_VERSION)),
        (ofp.OFPT_BARRIER_REQUEST, b"junk", 4, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_LEN)),
        (ofp.OFPT_METER_MOD, b"\0" * 8, 4, (ofp.OFPET_BAD_REQUEST, ofp.OFPBRC_BAD_TYPE)),
        # Flow mod to table 200 of 8.
        (
            ofp.OFPT_FLOW_MOD,
            struct.pack("!QQBBHHHIIIH2x", 0, 0, 200, 0, 0, 0, 1, 0xFFFFFFFF, 0, 0, 0)
            + struct.pack("!HH4x", 1, 4),
            4,
            (ofp.OFPET_FLOW_MOD_FAILED, ofp.OFPFMFC_BAD_TABLE_ID),
        ),
        # Flow mod whose match claims more bytes than the message has.
        (
            ofp.OFPT_FLOW_MOD,
            struct.pack("!QQBBHHHIIIH2x", 0, 0, 0, 0, 0, 0, 1, 0xFFFFFFFF, 0, 0, 0)
            + struct.pack("!HH4x", 1, 200),
            4,
            (ofp.OFPET_BAD_MATCH, ofp.OFPBMC_BAD_LEN),
        ),
        # Group mod of an unknown type.
        (
            ofp.OFPT_GROUP_MOD,
            struct.pack("!HBxI", ofp.OFPGC_ADD, 9, 1),
            4,
            (ofp.OFPET_GROUP_MOD_FAILED, ofp.OFPGMFC_BAD_TYPE),
        ),
    ]
    for i, (typ, body, version, want) in enumerate(cases, start=100):
        fake.send(typ, i, body, version=version)
        xid, buf = fake.recv_type(ofp.OFPT_ERROR)
        assert (xid, error_of(buf)) == (i, want), (typ, body)
        # The echoed request starts with the offending header.
        assert buf[12:14] == bytes([version, typ])
    fake.send(ofp.OFPT_ECHO_REQUEST, 7, b"alive")
    xid, buf = fake.recv_type(ofp.OFPT_ECHO_REPLY)
    assert xid == 7 and buf[8:] == b"alive"
    assert sw.poll() is None

    # Controller goes away: the switch comes back by itself.
    fake.close()
    t0 = time.monotonic()
    fake.handshake()
    # Reconnects by itself; the backoff is capped at 4 s (--max-backoff-ms), the bound is
    # generous so that a loaded machine's scheduling never fails it.
    assert time.monotonic() - t0 < 30
    fake.send(ofp.OFPT_BARRIER_REQUEST, 8)
    assert fake.recv_type(ofp.OFPT_BARRIER_REPLY)[0] == 8


def test_incompatible_controller_is_refused(line, switch_binary, fake):
    line.start_switch(switch_binary, args=["--controller", f"tcp:127.0.0.1:{fake.port}"])
    fake.accept()
    fake.recv()  # the switch's hello
    fake.send(ofp.OFPT_HELLO, 1, version=1)  # OpenFlow 1.0 only
    _xid, buf = fake.recv_type(ofp.OFPT_ERROR)
    assert error_of(buf) == (ofp.OFPET_HELLO_FAILED, ofp.OFPHFC_INCOMPATIBLE)


def _ping(line) -> bool:
    r = line.exec(1, ["ping", "-c", "3", "-i", "0.2", "-W", "1", line.ip(2)], check=False)
    return r.returncode == 0


def test_fail_modes_without_controller(line, switch_binary, fake):
    # Secure (default): an empty flow table and no controller forwards nothing.
    sw = line.start_switch(switch_binary, args=["--controller", f"tcp:127.0.0.1:{fake.port}"])
    assert not _ping(line)
    line.stop(sw)
    # Standalone: MAC learning while the controller is unreachable.
    line.start_switch(
        switch_binary,
        args=["--controller", f"tcp:127.0.0.1:{fake.port}", "--fail-mode", "standalone"],
    )
    assert _ping(line)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--name", "s1", "--port", "1=sx-no-such-if"], "interface sx-no-such-if"),
        (["--name", "s1", "--port", "1=lo,rate=10Q"], "rate '10Q'"),
        (["--name", "s1"], "--port"),
        (["--name", "s1", "--port", "1=lo", "--select-mode", "spray"], "hash, rr or random"),
        (["--name", "s1", "--port", "1=lo,ingress=nosuch/k=20p"],
         "--port '1=lo,ingress=nosuch/k=20p': unknown ingress discipline 'nosuch'"),
        (["--name", "s1", "--port", "1=lo,rate=10M,egress=droptail/k=5p"],
         "egress discipline 'droptail': unknown option 'k' (known: buffer, ecn)"),
    ],
)
def test_bad_launch_options_fail_clearly(switch_binary, args, message):
    r = subprocess.run(
        [switch_binary, *args], check=False, capture_output=True, text=True, timeout=10
    )
    assert r.returncode == 2
    assert "error" in r.stderr and message in r.stderr, r.stderr


def test_a_controller_that_never_answers_echo_is_dropped_and_reconnected(
        line, switch_binary, fake, tmp_path):
    # Probe after 200 ms of silence; no answer within 3 probe intervals ends the session
    # (the switch then reconnects with backoff, as after any loss).
    line.start_switch(
        switch_binary,
        args=["--controller", f"tcp:127.0.0.1:{fake.port}", "--probe-interval-ms", "200",
              "--max-backoff-ms", "400"],
        log_path=str(tmp_path / "switch.log"),
    )
    fake.handshake()
    xid, _ = fake.recv_type(ofp.OFPT_ECHO_REQUEST)  # the switch probes our silence
    assert xid != 0
    fake.conn.settimeout(30)
    while True:  # we never answer: the switch hangs up (reads end at EOF)
        if not fake.conn.recv(65536):
            break
    fake.close()
    fake.handshake()  # and comes back by itself
    fake.send(ofp.OFPT_ECHO_REQUEST, 9, b"again")
    xid, buf = fake.recv_type(ofp.OFPT_ECHO_REPLY)
    assert xid == 9 and buf[8:] == b"again"
    assert "echo timeout" in (tmp_path / "switch.log").read_text()
