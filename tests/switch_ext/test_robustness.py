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

    # Controller goes away: the switch comes back by itself (the fake's accept() gives
    # up after 15 s; how long the switch waits is test_reconnect_backoff_...'s subject).
    fake.close()
    fake.handshake()
    fake.send(ofp.OFPT_BARRIER_REQUEST, 8)
    assert fake.recv_type(ofp.OFPT_BARRIER_REPLY)[0] == 8


# The switch's reconnect backoff (switch_ext/src/conn.rs, Backoff): 100 ms after the first
# loss, doubling after every failed attempt up to --max-backoff-ms (default 4000, at least
# 100), back to 100 ms after a good handshake.  Attempts are made on the switch's 100 ms
# housekeeping tick (switch.rs, TICK_NS), so an attempt comes between its delay and one
# tick later, plus whatever the scheduler adds.
BACKOFF_CAP_MS = 300
BACKOFF_FIRST_MS = 100
# Room above the cap for the tick and a loaded 2-core machine's scheduling.  Without the
# cap the 5th gap would be 1600 ms and the 6th 3200 ms, both beyond the cap plus this.
BACKOFF_SLACK_MS = 1000


def _refused_attempts(fake: FakeController, n: int) -> list[float]:
    """Accept ``n`` connection attempts of the switch and hang up on each at once (no
    hello back: the handshake never completes, so the backoff is never reset); the
    time.monotonic() of each accept."""
    times = []
    for _ in range(n):
        conn, _ = fake.srv.accept()  # the fake's 15 s timeout: an attempt must come
        times.append(time.monotonic())
        conn.close()
    return times


def test_reconnect_backoff_doubles_up_to_its_cap_and_stays_there(
        line, switch_binary, fake, tmp_path):
    """The gaps between the switch's connection attempts grow 100, 200, ... ms up to
    --max-backoff-ms and never beyond it (beyond it plus a tick and scheduling)."""
    line.start_switch(
        switch_binary,
        args=["--controller", f"tcp:127.0.0.1:{fake.port}",
              "--max-backoff-ms", str(BACKOFF_CAP_MS)],
        log_path=str(tmp_path / "switch.log"),
    )
    fake.handshake()  # a good handshake: the backoff starts from 100 ms again
    fake.send(ofp.OFPT_BARRIER_REQUEST, 1)
    assert fake.recv_type(ofp.OFPT_BARRIER_REPLY)[0] == 1
    lost = time.monotonic()  # before the switch can see the loss
    fake.close()
    attempts = _refused_attempts(fake, 8)
    gaps_ms = [1e3 * (b - a) for a, b in zip([lost, *attempts], attempts, strict=False)]
    # The delay the switch waits before each attempt, by hand: 100, 200, then the cap.
    delays_ms = [min(BACKOFF_FIRST_MS * 2 ** k, BACKOFF_CAP_MS) for k in range(len(gaps_ms))]
    assert delays_ms == [100, 200, 300, 300, 300, 300, 300, 300]
    # Never early: each gap starts before the switch saw the previous loss and ends after
    # its next attempt, so it holds the whole delay (no scheduling can shorten it).
    assert all(g >= d for g, d in zip(gaps_ms, delays_ms, strict=True)), gaps_ms
    # Never beyond the cap: once reached, the delay stops growing.
    assert max(gaps_ms) < BACKOFF_CAP_MS + BACKOFF_SLACK_MS, gaps_ms
    # And after all that it still connects by itself.
    fake.handshake()
    fake.send(ofp.OFPT_BARRIER_REQUEST, 2)
    assert fake.recv_type(ofp.OFPT_BARRIER_REPLY)[0] == 2


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
        (["--name", "s1", "--port", "1=lo", "--select-mode", "spray"],
         "unknown load balancer 'spray' (known: hash, rr, random, letflow, drill, flowcell, "
         "conga)"),
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
