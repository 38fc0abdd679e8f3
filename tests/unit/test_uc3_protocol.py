"""UC3 agent protocol: framing, HMAC, bounds, malformed input (always a ProtocolError)."""

from __future__ import annotations

import json
import random
import struct

import pytest

from dcnlab.hosts.uc3_agent import protocol as proto
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.flows import FlowSampler, parse_ss

SECRET = b"s" * 32
FLOW = Tuple4("10.0.0.1", 40000, "10.0.1.1", 5201)


def _alloc(window: int = 10, **extra: object) -> dict[str, object]:
    msg = proto.make_alloc(1, [proto.Clamp(FLOW, 10)])
    msg["clamps"][0]["window"] = window  # type: ignore[index]
    msg.update(extra)
    return msg


def test_round_trip_alloc() -> None:
    frame = proto.encode(_alloc(), SECRET)
    [raw] = proto.FrameReader(SECRET).feed(frame)
    msg = proto.parse_controller(raw)
    assert msg.type == "alloc" and msg.seq == 1 and msg.replace
    assert msg.clamps == (proto.Clamp(FLOW, 10),)


def test_frames_split_and_joined_arbitrarily() -> None:
    frames = b"".join(proto.encode(_alloc(w), SECRET) for w in (1, 2, 65535))
    reader, got = proto.FrameReader(SECRET), []
    for i in range(0, len(frames), 7):
        got += reader.feed(frames[i:i + 7])
    assert [proto.parse_controller(m).clamps[0].window for m in got] == [1, 2, 65535]


def test_report_round_trip() -> None:
    stats = proto.FlowStats(FLOW, rtt_us=1234.5, mss=1448, cwnd=20, delivery_bps=9e6,
                            throughput_bps=8e6, bytes_acked=10**9, clamp=20)
    raw = {"type": "report", "seq": 3, "flows": [stats.to_dict()]}
    [decoded] = proto.FrameReader(SECRET).feed(proto.encode(raw, SECRET))
    assert proto.parse_agent(decoded).flows == (stats,)


def test_wrong_secret_is_rejected() -> None:
    frame = proto.encode(_alloc(), b"x" * 32)
    with pytest.raises(proto.AuthError, match="HMAC"):
        proto.FrameReader(SECRET).feed(frame)


def test_tampered_payload_is_rejected() -> None:
    frame = bytearray(proto.encode(_alloc(10), SECRET))
    frame[-5] ^= 0x01
    with pytest.raises(proto.AuthError):
        proto.FrameReader(SECRET).feed(bytes(frame))


def test_short_secret_refused() -> None:
    with pytest.raises(proto.ProtocolError, match="at least"):
        proto.FrameReader(b"short")


@pytest.mark.parametrize("window", [0, -1, 65536, 10**9])
def test_window_out_of_bounds(window: int) -> None:
    with pytest.raises(proto.ProtocolError, match="window"):
        proto.parse_controller(_alloc(window))
    with pytest.raises(proto.ProtocolError, match="window"):
        proto.make_alloc(1, [proto.Clamp(FLOW, window)])


@pytest.mark.parametrize(("mutate", "match"), [
    (lambda m: m.update(type="reboot"), "unknown controller message type"),
    (lambda m: m.pop("seq"), "missing field 'seq'"),
    (lambda m: m.update(seq=True), "must be int, got bool"),
    (lambda m: m.update(seq=0), "outside"),
    (lambda m: m.update(replace="yes"), "replace"),
    (lambda m: m.update(clamps="all"), "must be list"),
    (lambda m: m.update(clamps=[7]), "must be an object"),
    (lambda m: m["clamps"][0].update(window=10.5), "must be int"),
    (lambda m: m["clamps"][0]["flow"].update(local="10.0.0.300"), "not an IP address"),
    (lambda m: m["clamps"][0]["flow"].update(lport=70000), "outside"),
    (lambda m: m["clamps"][0]["flow"].update(remote="::1"), "families differ"),
    (lambda m: m["clamps"][0].pop("flow"), "flow must be an object"),
    (lambda m: m.update(clamps=[m["clamps"][0]] * (proto.MAX_FLOWS + 1)), "exceed"),
    (lambda m: m.update(type="x" * 1000), "longer than"),
])
def test_malformed_messages_get_clear_errors(mutate, match: str) -> None:  # noqa: ANN001
    msg = _alloc()
    mutate(msg)
    with pytest.raises(proto.ProtocolError, match=match):
        proto.parse_controller(msg)


def test_bad_framing() -> None:
    with pytest.raises(proto.ProtocolError, match="magic"):
        proto.FrameReader(SECRET).feed(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(proto.ProtocolError, match="version"):
        proto.FrameReader(SECRET).feed(struct.pack("!2sBBI", b"U3", 9, 0, 0))
    with pytest.raises(proto.ProtocolError, match="exceeds"):
        proto.FrameReader(SECRET).feed(struct.pack("!2sBBI", b"U3", proto.VERSION, 0, 1 << 30))


def _signed(payload: bytes, key: bytes = SECRET, context: bytes = b"") -> bytes:
    import hashlib
    import hmac
    header = struct.pack("!2sBBI", b"U3", proto.VERSION, 0, len(payload))
    return header + hmac.new(key, context + header + payload, hashlib.sha256).digest() + payload


@pytest.mark.parametrize("payload", [b"\xff\xfe", b"[1, 2]", b"{", b"null", b"[" * 100000])
def test_signed_but_not_a_json_object(payload: bytes) -> None:
    with pytest.raises(proto.ProtocolError):
        proto.FrameReader(SECRET).feed(_signed(payload))


def test_random_garbage_never_crashes() -> None:
    rng = random.Random(4)
    for _ in range(2000):
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 120)))
        if rng.random() < 0.5:
            blob = b"U3\x02\x00" + blob
        try:
            for raw in proto.FrameReader(SECRET).feed(blob):
                proto.parse_controller(raw)
        except proto.ProtocolError:
            pass
    for _ in range(2000):  # signed JSON with random structure: validation, not crashes
        obj = _alloc()
        key = rng.choice(["seq", "nonce", "clamps", "replace", "type"])
        obj[key] = rng.choice([None, 1.5, -3, "", [], {}, [None], {"a": 1}, "x" * 300])
        try:
            for raw in proto.FrameReader(SECRET).feed(_signed(json.dumps(obj).encode())):
                proto.parse_controller(raw)
        except proto.ProtocolError:
            pass


def test_sequence_must_increase() -> None:
    check = proto.SeqCheck()
    check.check(1)
    check.check(5)
    with pytest.raises(proto.ProtocolError, match="replay"):
        check.check(5)


SS_OUTPUT = """\
0      0          10.0.0.1:40000     10.0.1.1:5201
\t cubic wscale:9,9 rto:204 rtt:10.512/0.3 ato:40 mss:1448 pmtu:1500 rcvmss:536 \
advmss:1448 cwnd:20 ssthresh:20 bytes_sent:1000000 bytes_acked:900001 segs_out:700 \
send 22.0Mbps lastsnd:1 pacing_rate 26.4Mbps delivery_rate 21.9Mbps delivered:622
0      0      [::ffff:10.0.0.1]:22     [::ffff:10.9.9.9]:50000
\t cubic rtt:0.5/0.2 mss:1448 cwnd:10 bytes_acked:1 delivery_rate 100Kbps
garbage line
"""


def test_parse_ss_and_throughput() -> None:
    flows = parse_ss(SS_OUTPUT)
    assert [f.flow for f in flows] == [FLOW, Tuple4("::ffff:10.0.0.1", 22, "::ffff:10.9.9.9",
                                                     50000)]
    first = flows[0]
    assert (first.rtt_us, first.mss, first.cwnd, first.bytes_acked) == (10512.0, 1448, 20,
                                                                        900001)
    assert first.delivery_bps == pytest.approx(21.9e6)
    sampler = FlowSampler()
    sampler.sample(flows, {}, now=10.0)
    later = [f.__class__(**{**f.__dict__, "bytes_acked": f.bytes_acked + 125000}) for f in flows]
    stats = sampler.sample(later, {FLOW: 20}, now=10.5)
    assert stats[0].throughput_bps == pytest.approx(2e6) and stats[0].clamp == 20


# ---------------------------------------------------------------------------- keys, sessions

AGENT_A, AGENT_B = proto.identity("192.168.0.2", 6690), proto.identity("192.168.0.3", 6690)


def test_each_agent_and_direction_has_its_own_key() -> None:
    a, b = proto.Keys.derive(SECRET, AGENT_A), proto.Keys.derive(SECRET, AGENT_B)
    assert len({a.c2a, a.a2c, b.c2a, b.a2c, SECRET}) == 5
    assert proto.Keys.derive(SECRET, AGENT_A) == a  # both ends derive the same
    frame = proto.encode(_alloc(), a.c2a)
    for wrong in (b.c2a, a.a2c, SECRET):  # another agent's, the other direction, the secret
        with pytest.raises(proto.AuthError):
            proto.FrameReader(wrong).feed(frame)
    assert proto.parse_controller(proto.FrameReader(a.c2a).feed(frame)[0]).clamps
    assert proto.identity("fe80::1", 1) == "[fe80::1]:1"
    with pytest.raises(proto.ProtocolError, match="not an IP address"):
        proto.identity("agent.example", 1)


def test_frames_are_bound_to_their_session() -> None:
    keys = proto.Keys.derive(SECRET, AGENT_A)
    one = proto.session_context(proto.new_nonce(), proto.new_nonce())
    two = proto.session_context(proto.new_nonce(), proto.new_nonce())
    frame = proto.encode(_alloc(), keys.c2a, one)
    assert proto.FrameReader(keys.c2a, one).feed(frame)
    with pytest.raises(proto.AuthError):  # replayed on another connection
        proto.FrameReader(keys.c2a, two).feed(frame)
    # an agent hello recorded earlier does not answer a new controller nonce
    hello = {"type": "hello", "seq": 1, "agent": "h1", "nonce": proto.new_nonce(),
             "cgroup": "/sys/fs/cgroup/x"}
    old_nonce, new_nonce = proto.new_nonce(), proto.new_nonce()
    recorded = proto.encode(hello, keys.a2c, bytes.fromhex(old_nonce))
    with pytest.raises(proto.AuthError):
        proto.FrameReader(keys.a2c, bytes.fromhex(new_nonce)).feed(recorded)


def test_frames_after_the_hello_wait_for_the_new_context() -> None:
    keys = proto.Keys.derive(SECRET, AGENT_A)
    nonce_c, nonce_a = proto.new_nonce(), proto.new_nonce()
    session = proto.session_context(nonce_c, nonce_a)
    hello = {"type": "hello", "seq": 1, "agent": "h1", "nonce": nonce_a, "cgroup": "c"}
    report = {"type": "report", "seq": 2, "flows": []}
    reader = proto.FrameReader(keys.a2c, bytes.fromhex(nonce_c))
    reader.push(proto.encode(hello, keys.a2c, bytes.fromhex(nonce_c))
                + proto.encode(report, keys.a2c, session))  # one read, two frames
    assert proto.parse_agent(reader.pop()).nonce == nonce_a
    reader.context = session
    assert proto.parse_agent(reader.pop()).type == "report"
    assert reader.pop() is None


@pytest.mark.parametrize("payload", [
    b'{"type": "alloc", "seq": ' + b"9" * 5000 + b"}",  # Python refuses > 4300 digits
    b'{"type": "alloc", "seq": 1e400}',  # float("inf")
    b'{"type": "alloc", "seq": NaN}',
    b'{"type": "alloc", "seq": -Infinity}',
    b'{"type": "alloc", "seq": 1.' + b"5" * 100 + b"}",
])
def test_numbers_are_bounded_before_they_are_converted(payload: bytes) -> None:
    with pytest.raises(proto.ProtocolError):
        proto.FrameReader(SECRET).feed(_signed(payload))


def test_a_huge_number_in_a_report_is_a_protocol_error_not_an_overflow() -> None:
    stats = proto.FlowStats(FLOW, rtt_us=1.0, mss=1448, cwnd=1, delivery_bps=1.0,
                            throughput_bps=1.0, bytes_acked=1).to_dict()
    stats["rtt_us"] = 10**19  # within the digit bound, beyond the field's
    with pytest.raises(proto.ProtocolError, match="rtt_us"):
        proto.parse_agent({"type": "report", "seq": 2, "flows": [stats]})


@pytest.mark.parametrize("nonce", ["abc", "A" * 32, "g" * 32, 7])
def test_hello_needs_a_proper_nonce(nonce: object) -> None:
    with pytest.raises(proto.ProtocolError):
        proto.parse_controller({"type": "hello", "seq": 1, "nonce": nonce})
