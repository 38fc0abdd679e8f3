"""UC3 agent protocol: framing, HMAC, bounds, malformed input (always a ProtocolError)."""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import struct
from pathlib import Path

import pytest

from dcnlab.hosts.uc3_agent import protocol as proto
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.flows import FlowSample, FlowSampler

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


# The vectors the native agent (hosts/uc3_agent/native, RustCrypto's hmac and sha2) asserts
# too, from the same file: both engines must put the same bytes on the wire.
VECTORS = Path(__file__).resolve().parents[2] / "hosts/uc3_agent/native/tests/protocol_vectors.json"


def test_vectors_shared_with_the_native_agent() -> None:
    vectors = json.loads(VECTORS.read_text())
    assert len(vectors["rfc4231"]) == 6 and len(vectors["keys"]) == 2
    for case in vectors["rfc4231"]:
        got = hmac.new(bytes.fromhex(case["key"]), bytes.fromhex(case["data"]), hashlib.sha256)
        assert got.hexdigest() == case["mac"]
    for case in vectors["keys"]:
        keys = proto.Keys.derive(bytes.fromhex(case["secret"]), case["agent"])
        assert (keys.c2a.hex(), keys.a2c.hex()) == (case["c2a"], case["a2c"])
    first = vectors["keys"][0]
    assert len(vectors["frames"]) == 2
    for case in vectors["frames"]:
        key, context = bytes.fromhex(first[case["key"]]), bytes.fromhex(case["context"])
        frame = proto.encode(case["message"], key, context)
        assert frame.hex() == case["frame"]
        assert proto.FrameReader(key, context).feed(frame) == [case["message"]]
        tampered = bytearray(frame)
        tampered[proto.HEADER.size + proto.MAC_LEN - 1] ^= 0x01  # the tag's last byte
        with pytest.raises(proto.AuthError):
            proto.FrameReader(key, context).feed(bytes(tampered))


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


def test_throughput_between_samples() -> None:
    first = FlowSample(FLOW, rtt_us=10512.0, mss=1448, cwnd=20, delivery_bps=21.9e6,
                       bytes_acked=900001)
    sampler = FlowSampler()
    assert sampler.sample([first], {}, now=10.0)[0].throughput_bps == 0.0  # no history yet
    later = FlowSample(FLOW, rtt_us=10512.0, mss=1448, cwnd=20, delivery_bps=21.9e6,
                       bytes_acked=900001 + 125000)
    stats = sampler.sample([later], {FLOW: 20}, now=10.5)
    assert stats[0].throughput_bps == pytest.approx(2e6) and stats[0].clamp == 20
    assert (stats[0].rtt_us, stats[0].mss, stats[0].cwnd) == (10512.0, 1448, 20)
