"""The UC3 host agent's trust boundary, tested through the agent itself on loopback, for
both engines (see tests/uc3_agent_harness.py).

The Python engine runs with a fake clamp program (no cgroup, no root); the native engine
(``dcnlab-uc3-agentd``) needs its real maps, so it runs on a real program (root).
Everything else is the real agent: its listener, handshake, session and sequence checks,
connection cap and auth deadline.  An unauthenticated peer must learn nothing: not even a
hello.  The same assertions hold for both engines: the native loop speaks the protocol of
protocol.py, error replies included.
"""

from __future__ import annotations

import hashlib
import hmac
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from uc3_agent_harness import (
    ENGINES,
    SECRET,
    RunningAgent,
    handshake,
    native_skip_reason,
    next_message,
    silent_close,
)

from dcnlab.hosts.uc3_agent import agent as agent_mod
from dcnlab.hosts.uc3_agent import protocol as proto
from dcnlab.hosts.uc3_agent.bpf import Tuple4
from dcnlab.hosts.uc3_agent.client import AgentClient

FLOW = Tuple4("10.0.0.1", 40000, "10.0.1.1", 5201)


@pytest.fixture(params=[pytest.param(e, marks=pytest.mark.built) if e == "native" else e
                        for e in ENGINES])
def running(request: pytest.FixtureRequest, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningAgent]:
    if request.param == "native" and (reason := native_skip_reason()):
        pytest.skip(reason)
    monkeypatch.setattr(agent_mod, "AUTH_TIMEOUT_S", 0.5)  # both engines read it
    ra = RunningAgent(request.param, tmp_path).start()
    try:
        yield ra
    finally:
        ra.close()


def test_an_unauthenticated_peer_learns_nothing_and_is_closed(running: RunningAgent) -> None:
    with socket.create_connection(("127.0.0.1", running.port)) as silent:
        assert silent_close(silent, 5) == b""  # no hello, closed at the auth deadline
    wrong = proto.Keys.derive(b"w" * 32, proto.identity("127.0.0.1", running.port))
    with socket.create_connection(("127.0.0.1", running.port)) as forger:
        forger.sendall(proto.encode({"type": "hello", "seq": 1, "nonce": proto.new_nonce()},
                                    wrong.c2a))
        assert silent_close(forger, 5) == b""
    with socket.create_connection(("127.0.0.1", running.port)) as http:
        http.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert silent_close(http, 5) == b""
    assert running.wait_counter("refused", 3) == 3 and running.windows() == {}
    if running.engine == "native":
        log = running.log_text()
        assert "no hello within 0.5 s" in log and "HMAC mismatch" in log
        assert "bad magic b'GE'" in log


def test_another_agents_key_does_not_open_this_one(running: RunningAgent) -> None:
    other = proto.Keys.derive(SECRET, proto.identity("127.0.0.2", running.port))
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(proto.encode({"type": "hello", "seq": 1, "nonce": proto.new_nonce()},
                                  other.c2a))
        assert silent_close(sock, 5) == b""


def test_a_first_frame_other_than_hello_is_refused(running: RunningAgent) -> None:
    keys = running.keys()
    with socket.create_connection(("127.0.0.1", running.port)) as sock:
        sock.sendall(proto.encode({"type": "keepalive", "seq": 1}, keys.c2a))
        assert silent_close(sock, 5) == b""
    assert running.wait_counter("refused", 1) == 1


def test_replayed_frames_are_refused_in_and_across_sessions(running: RunningAgent) -> None:
    keys = running.keys()
    sock, reader, session = handshake(running)
    alloc = proto.encode(proto.make_alloc(2, [proto.Clamp(FLOW, 12)]), keys.c2a, session)
    sock.sendall(alloc)
    assert next_message(sock, reader, "ack").ack_seq == 2
    assert running.windows() == {FLOW: 12}
    sock.sendall(alloc)  # the same frame again: its sequence number is not new
    assert next_message(sock, reader, "error").reason == \
        "sequence number 2 not above 2 (replay?)"
    sock.close()
    second, reader2, _ = handshake(running)
    second.sendall(alloc)  # recorded on the first session
    assert next_message(second, reader2, "error").reason == \
        "HMAC mismatch: wrong key or session, or a tampered frame"
    assert silent_close(second, 5) == b""  # and the connection is gone
    assert running.windows() == {FLOW: 12}


def test_bad_messages_get_the_reference_error_replies(running: RunningAgent) -> None:
    """Each refused message gets the error text protocol.py words; the session goes on
    (only framing and MAC failures close it)."""
    keys = running.keys()
    sock, reader, session = handshake(running)
    seq = 1

    def send(message: dict) -> None:
        sock.sendall(proto.encode(message, keys.c2a, session))

    flow = proto.flow_to_dict(FLOW)
    cases = [
        ({"type": "alloc", "clamps": [{"flow": flow, "window": 0}], "replace": True},
         "alloc.clamps[0]: window=0 outside [1, 65535]"),
        ({"type": "alloc", "clamps": [{"flow": flow, "window": True}], "replace": True},
         "alloc.clamps[0]: field 'window' must be int, got bool"),
        ({"type": "alloc", "clamps": [{"flow": {**flow, "local": "::1"}, "window": 5}],
          "replace": True}, "alloc.clamps[0]: local and remote address families differ"),
        ({"type": "alloc", "clamps": [{"flow": {**flow, "remote": "10.0.1"}, "window": 5}],
          "replace": True}, "alloc.clamps[0]: remote='10.0.1' is not an IP address"),
        ({"type": "alloc", "clamps": [{"flow": flow, "window": 5}], "replace": "yes"},
         "alloc: field 'replace' must be bool, got str"),
        ({"type": "alloc", "clamps": "all", "replace": True},
         "alloc: field 'clamps' must be list, got str"),
        ({"type": "shutdown"}, "unknown controller message type 'shutdown'"),
        ({"type": "hello", "nonce": proto.new_nonce()}, "hello on an established session"),
    ]
    for message, reason in cases:
        seq += 1
        send({**message, "seq": seq})
        assert next_message(sock, reader, "error").reason == reason
    send({"type": "keepalive", "seq": seq})  # not above the hello's
    assert next_message(sock, reader, "error").reason == \
        f"sequence number {seq} not above {seq} (replay?)"
    send({"type": "clear", "seq": 0.5})
    assert next_message(sock, reader, "error").reason == \
        "clear: field 'seq' must be int, got float"
    seq += 1
    send({"type": "keepalive", "seq": seq})
    ack = next_message(sock, reader, "ack")
    assert (ack.ack_seq, ack.clamps) == (seq, 0)
    assert running.wait_counter("rejected", len(cases) + 2) == len(cases) + 2
    # A frame that verifies but holds no JSON object: replied to, then closed.
    payload = b"[1, 2]"
    header = proto.HEADER.pack(proto.MAGIC, proto.VERSION, 0, len(payload))
    mac = hmac.new(keys.c2a, session + header + payload, hashlib.sha256).digest()
    sock.sendall(header + mac + payload)
    assert next_message(sock, reader, "error").reason == "payload must be a JSON object"
    assert silent_close(sock, 5) == b""
    assert running.windows() == {}


def test_connections_beyond_the_cap_are_closed_at_once(running: RunningAgent) -> None:
    held = [socket.create_connection(("127.0.0.1", running.port))
            for _ in range(agent_mod.MAX_CONNECTIONS)]
    try:
        if running.agent is not None:  # Python: it shows its connections
            deadline = time.monotonic() + 5
            while len(running.agent.conns) < len(held) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert len(running.agent.conns) == agent_mod.MAX_CONNECTIONS
        # (native: the listener's queue is FIFO, so the extra one is accepted after them)
        with socket.create_connection(("127.0.0.1", running.port)) as extra:
            assert silent_close(extra, 5) == b""
        assert running.wait_counter("over_cap", 1) == 1
    finally:
        for sock in held:
            sock.close()


def test_the_controller_client_completes_the_handshake_and_clamps(
        running: RunningAgent) -> None:
    reports: list[proto.AgentMessage] = []
    client = AgentClient("127.0.0.1", running.port, SECRET, refresh_s=0.1,
                         on_report=lambda _name, msg: reports.append(msg)).start()
    try:
        assert client.wait_connected(10), client.last_error
        client.set_clamps({FLOW: 30})
        deadline = time.monotonic() + 10
        while (running.windows() != {FLOW: 30} or not reports) \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert running.windows() == {FLOW: 30}
        assert reports and all(r.seq > 1 for r in reports)
        assert client.errors_from_agent == []
    finally:
        client.stop()
    wrong = AgentClient("127.0.0.1", running.port, b"w" * 32, max_backoff_s=0.2).start()
    try:
        assert not wrong.wait_connected(2)
        assert "closed the connection" in wrong.last_error
    finally:
        wrong.stop()


def test_a_bad_mac_closes_only_that_connection(running: RunningAgent) -> None:
    keys = running.keys()
    good, good_reader, good_session = handshake(running)
    bad, bad_reader, bad_session = handshake(running)
    try:
        frame = bytearray(proto.encode(proto.make_alloc(2, [proto.Clamp(FLOW, 9)]), keys.c2a,
                                       bad_session))
        frame[-2] ^= 1  # tampered payload
        bad.sendall(bytes(frame))
        assert next_message(bad, bad_reader, "error").reason.startswith("HMAC mismatch")
        assert silent_close(bad, 5) == b""
        assert running.windows() == {}  # nothing of the tampered frame was applied
        # The other controller's session goes on: its alloc is applied and acked, and
        # reports keep coming.
        good.sendall(proto.encode(proto.make_alloc(2, [proto.Clamp(FLOW, 9)]), keys.c2a,
                                  good_session))
        assert next_message(good, good_reader, "ack").clamps == 1
        assert running.windows() == {FLOW: 9}
        assert next_message(good, good_reader, "report").seq > 2
    finally:
        good.close()
        bad.close()


def test_a_controller_that_reads_late_gets_every_reply_in_order(
        running: RunningAgent) -> None:
    """Replies queue up while the controller does not read (~7 MB of error replies: more
    than the sockets buffer, so the agent's own queue and its wait for writability are
    exercised), and all arrive, in order and numbered without a gap, once it reads."""
    keys = running.keys()
    sock, reader, session = handshake(running)
    count, kind = 20_000, "x" * 250
    frames = b"".join(proto.encode({"type": kind, "seq": seq}, keys.c2a, session)
                      for seq in range(2, count + 2))
    sender = threading.Thread(target=sock.sendall, args=(frames,), daemon=True)
    sender.start()  # (the agent may stop reading while its replies are not taken)
    time.sleep(1.0)  # not reading: the agent's replies pile up
    reasons, last = [], 1  # the agent's hello was its seq 1
    sock.settimeout(30)
    while len(reasons) < count:
        while (raw := reader.pop()) is not None:
            msg = proto.parse_agent(raw)
            assert msg.seq == last + 1  # reports between them: no gap, no reordering
            last = msg.seq
            if msg.type == "error":
                reasons.append(msg.reason)
        data = sock.recv(1 << 20)
        assert data, f"closed after {len(reasons)} replies"
        reader.push(data)
    sender.join(timeout=30)
    want = f"unknown controller message type {kind!r}"[:proto.MAX_STRING]
    assert reasons == [want] * count
    # and the session is still good
    sock.sendall(proto.encode({"type": "keepalive", "seq": 2}, keys.c2a, session))
    assert next_message(sock, reader, "ack").ack_seq == 2
    sock.close()


def test_a_controller_gone_before_its_acks_leaves_the_agent_serving(
        running: RunningAgent) -> None:
    """A controller that sends and goes away at once (reset, as a controller closing
    with unread reports does): the agent's acks then fail to send and the connection is
    dropped while its frames are still being handled.  The agent must carry on: another
    controller's session works and the clamps stay as the last applied message left them.
    (The native engine once died here on its next frame, so its clamps were never lifted.)"""
    keys = running.keys()
    sock, _reader, session = handshake(running)
    frames = b"".join(proto.encode(proto.make_alloc(seq, [proto.Clamp(FLOW, 7)]), keys.c2a,
                                   session) for seq in range(2, 2002))
    sock.sendall(frames)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # reset: the agent's acks meet a closed peer
    other, reader, other_session = handshake(running)
    try:
        other.sendall(proto.encode({"type": "keepalive", "seq": 2}, keys.c2a, other_session))
        assert next_message(other, reader, "ack").ack_seq == 2
        assert running.windows() == {FLOW: 7}
    finally:
        other.close()
    if running.proc is not None:
        assert running.proc.poll() is None, running.log_text()[-2000:]
