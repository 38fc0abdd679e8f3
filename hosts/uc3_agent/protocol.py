"""Controller <-> agent wire protocol, version 2: authenticated, bounded, length-prefixed JSON.

Frame::

    magic "U3" (2) | version (1) | reserved 0 (1) | payload length N (4, big endian)
    | HMAC-SHA256(key, context + first 8 bytes + payload) (32) | payload: UTF-8 JSON (N)

Keys.  Nobody signs with the shared secret itself: each agent and each direction has its
own key, ``HMAC-SHA256(secret, "dcnlab-uc3/2|" + identity + "|c2a" or "|a2c")``, where the
identity is the agent's address as the controller dialled it (``ip:port``; the agent sees
it as its socket's local address).  A host that learns its own keys can neither speak
for another agent nor forge the controller's messages to another agent.

Handshake and replay.  The controller speaks first: ``hello`` {nonce_c} (context empty).
An agent says nothing to a peer until such a hello verifies; it answers ``hello`` {agent,
nonce_a, cgroup} with context = nonce_c, so a recorded agent hello is useless on a new
connection.  From then on both directions bind the session, nonce_c + nonce_a, into every
MAC, and each side checks that the other's ``seq`` strictly increases (hello is seq 1):
a frame recorded on one connection is rejected on any other, and twice on the same one.

Messages (all fields checked against the bounds below; anything else is a
:class:`ProtocolError` with a message that says what and where, never an exception of
another kind; numbers in the JSON are bounded before they are converted):

- controller -> agent: ``hello`` {nonce}, ``alloc`` {clamps: [{flow, window}], replace},
  ``keepalive`` {}, ``clear`` {}
- agent -> controller: ``hello`` {agent, nonce, cgroup}, ``report`` {flows: [FlowStats]},
  ``ack`` {ack_seq, clamps}, ``error`` {reason}

A flow is ``{"local": ip, "lport": n, "remote": ip, "rport": n}`` seen from the agent's
host (the sender whose window is clamped).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import math
import secrets
import struct
from dataclasses import dataclass, field
from typing import Any

from .bpf import Tuple4

MAGIC = b"U3"
VERSION = 2
HEADER = struct.Struct("!2sBBI")
MAC_LEN = 32
MAX_PAYLOAD = 1 << 20  # 1 MiB: a report of MAX_FLOWS flows fits with room to spare
MAX_FLOWS = 4096  # clamps per alloc, flows per report
MIN_WINDOW, MAX_WINDOW = 1, 65535  # segments
MAX_STRING = 256
MAX_SEQ = 2**63 - 1
MIN_SECRET = 16  # bytes
NONCE_HEX = 32  # 16 random bytes
MAX_INT_DIGITS = 20  # 2**64 has 20 digits: no field needs more
MAX_FLOAT_CHARS = 32

CONTROLLER_TYPES = frozenset({"hello", "alloc", "keepalive", "clear"})
AGENT_TYPES = frozenset({"hello", "report", "ack", "error"})


class ProtocolError(ValueError):
    """A frame or message that breaks the protocol; the message says what is wrong."""


class AuthError(ProtocolError):
    """A frame whose HMAC does not verify (wrong secret, tampering, or not our protocol)."""


def check_secret(secret: bytes) -> bytes:
    if len(secret) < MIN_SECRET:
        raise ProtocolError(f"shared secret must be at least {MIN_SECRET} bytes")
    return secret


# ---------------------------------------------------------------------------
# Keys


def identity(host: str, port: int) -> str:
    """An agent's identity: its address as dialled, ``ip:port`` (IPv6 in brackets)."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        raise ProtocolError(f"agent address {host!r} is not an IP address") from None
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


@dataclass(frozen=True)
class Keys:
    """One agent's two keys: controller -> agent and agent -> controller."""

    c2a: bytes
    a2c: bytes

    @classmethod
    def derive(cls, secret: bytes, agent: str) -> Keys:
        check_secret(secret)
        base = b"dcnlab-uc3/2|" + agent.encode() + b"|"
        return cls(hmac.new(secret, base + b"c2a", hashlib.sha256).digest(),
                   hmac.new(secret, base + b"a2c", hashlib.sha256).digest())


def new_nonce() -> str:
    return secrets.token_hex(NONCE_HEX // 2)


def session_context(nonce_c: str, nonce_a: str) -> bytes:
    return bytes.fromhex(nonce_c) + bytes.fromhex(nonce_a)


# ---------------------------------------------------------------------------
# Framing


def encode(message: dict[str, Any], key: bytes, context: bytes = b"") -> bytes:
    payload = json.dumps(message, separators=(",", ":"), sort_keys=True).encode()
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError(f"message of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    header = HEADER.pack(MAGIC, VERSION, 0, len(payload))
    mac = hmac.new(key, context + header + payload, hashlib.sha256).digest()
    return header + mac + payload


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ProtocolError(f"integer of {len(text)} digits exceeds {MAX_INT_DIGITS}")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > MAX_FLOAT_CHARS:
        raise ProtocolError(f"number {text[:MAX_FLOAT_CHARS]}... is too long")
    value = float(text)
    if not math.isfinite(value):
        raise ProtocolError(f"number {text} is not finite")
    return value


def _no_constant(text: str) -> Any:
    raise ProtocolError(f"{text} is not a number this protocol accepts")


def decode_payload(payload: bytes) -> dict[str, Any]:
    """A verified payload as a JSON object; every failure is a ProtocolError."""
    try:
        message = json.loads(payload.decode("utf-8"), parse_int=_bounded_int,
                             parse_float=_bounded_float, parse_constant=_no_constant)
    except ProtocolError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # JSONDecodeError too
        raise ProtocolError(f"payload is not UTF-8 JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("payload must be a JSON object")
    return message


class FrameReader:
    """Incremental decoder: push bytes, pop verified JSON objects one at a time.

    ``context`` (bytes bound into every MAC: the session) may change between pops, as it
    does after the handshake.  Errors in the header or the MAC lose the framing: the
    caller must close the connection.  A payload that verifies but is no JSON object is
    also a ProtocolError.
    """

    def __init__(self, key: bytes, context: bytes = b"") -> None:
        self.key = check_secret(key)
        self.context = context
        self._buf = bytearray()

    def push(self, data: bytes) -> None:
        self._buf += data
        if len(self._buf) > HEADER.size + MAC_LEN + MAX_PAYLOAD:
            self._header()  # a peer cannot make us buffer more than one frame's worth

    def _header(self) -> int:
        magic, version, _reserved, length = HEADER.unpack_from(self._buf)
        if magic != MAGIC:
            raise ProtocolError(f"bad magic {bytes(magic)!r}: not a dcnlab agent peer")
        if version != VERSION:
            raise ProtocolError(f"unsupported protocol version {version} (speak {VERSION})")
        if length > MAX_PAYLOAD:
            raise ProtocolError(f"frame length {length} exceeds {MAX_PAYLOAD}")
        return HEADER.size + MAC_LEN + length

    def pop(self) -> dict[str, Any] | None:
        """The next complete frame's message, verified with the current context."""
        if len(self._buf) < HEADER.size:
            return None
        total = self._header()
        if len(self._buf) < total:
            return None
        header = bytes(self._buf[:HEADER.size])
        mac = bytes(self._buf[HEADER.size:HEADER.size + MAC_LEN])
        payload = bytes(self._buf[HEADER.size + MAC_LEN:total])
        del self._buf[:total]
        want = hmac.new(self.key, self.context + header + payload, hashlib.sha256).digest()
        if not hmac.compare_digest(mac, want):
            raise AuthError("HMAC mismatch: wrong key or session, or a tampered frame")
        return decode_payload(payload)

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """Push ``data`` and pop every complete frame (all with the current context)."""
        self.push(data)
        out = []
        while (message := self.pop()) is not None:
            out.append(message)
        return out


# ---------------------------------------------------------------------------
# Field validation


def _field(msg: dict[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    if name not in msg:
        raise ProtocolError(f"{where}: missing field {name!r}")
    value = msg[name]
    # bool is an int in Python; never accept it where a number is expected.
    if isinstance(value, bool) and kind is not bool:
        raise ProtocolError(f"{where}: field {name!r} must be {_kind_name(kind)}, got bool")
    if not isinstance(value, kind):
        raise ProtocolError(f"{where}: field {name!r} must be {_kind_name(kind)}, "
                            f"got {type(value).__name__}")
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return "/".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__


def _int(msg: dict[str, Any], name: str, lo: int, hi: int, where: str) -> int:
    value = _field(msg, name, int, where)
    if not lo <= value <= hi:
        raise ProtocolError(f"{where}: {name}={value} outside [{lo}, {hi}]")
    return value


def _num(msg: dict[str, Any], name: str, where: str, hi: float = 1e15) -> float:
    raw = _field(msg, name, (int, float), where)
    if isinstance(raw, int) and not 0 <= raw <= hi:  # float() of a huge int overflows
        raise ProtocolError(f"{where}: {name}={raw} outside [0, {hi:g}]")
    value = float(raw)
    if not 0.0 <= value <= hi:  # also rejects NaN
        raise ProtocolError(f"{where}: {name}={value} outside [0, {hi:g}]")
    return value


def _str(msg: dict[str, Any], name: str, where: str) -> str:
    value = _field(msg, name, str, where)
    if len(value) > MAX_STRING:
        raise ProtocolError(f"{where}: {name} longer than {MAX_STRING} characters")
    return value


def _list(msg: dict[str, Any], name: str, where: str) -> list[Any]:
    value = _field(msg, name, list, where)
    if len(value) > MAX_FLOWS:
        raise ProtocolError(f"{where}: {len(value)} {name} exceed the limit of {MAX_FLOWS}")
    return value


def _ip(msg: dict[str, Any], name: str, where: str) -> str:
    text = _str(msg, name, where)
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ProtocolError(f"{where}: {name}={text!r} is not an IP address") from None


def flow_to_dict(flow: Tuple4) -> dict[str, Any]:
    return {"local": flow.local, "lport": flow.lport, "remote": flow.remote,
            "rport": flow.rport}


def flow_from_dict(obj: Any, where: str) -> Tuple4:
    if not isinstance(obj, dict):
        raise ProtocolError(f"{where}: flow must be an object")
    local, remote = _ip(obj, "local", where), _ip(obj, "remote", where)
    if ipaddress.ip_address(local).version != ipaddress.ip_address(remote).version:
        raise ProtocolError(f"{where}: local and remote address families differ")
    return Tuple4(local, _int(obj, "lport", 1, 65535, where), remote,
                  _int(obj, "rport", 1, 65535, where))


# ---------------------------------------------------------------------------
# Messages


@dataclass(frozen=True)
class Clamp:
    flow: Tuple4
    window: int  # segments


@dataclass(frozen=True)
class FlowStats:
    flow: Tuple4
    rtt_us: float
    mss: int
    cwnd: int
    delivery_bps: float  # the kernel's delivery-rate estimate
    throughput_bps: float  # bytes acked since the previous report, per second
    bytes_acked: int
    clamp: int = 0  # window currently requested for this flow (0: none)

    def to_dict(self) -> dict[str, Any]:
        return {"flow": flow_to_dict(self.flow), "rtt_us": self.rtt_us, "mss": self.mss,
                "cwnd": self.cwnd, "delivery_bps": self.delivery_bps,
                "throughput_bps": self.throughput_bps, "bytes_acked": self.bytes_acked,
                "clamp": self.clamp}

    @classmethod
    def from_dict(cls, obj: Any, where: str) -> FlowStats:
        if not isinstance(obj, dict):
            raise ProtocolError(f"{where}: flow stats must be an object")
        return cls(flow=flow_from_dict(obj.get("flow"), where),
                   rtt_us=_num(obj, "rtt_us", where, 1e8),
                   mss=_int(obj, "mss", 1, 65535, where),
                   cwnd=_int(obj, "cwnd", 0, 2**31 - 1, where),
                   delivery_bps=_num(obj, "delivery_bps", where),
                   throughput_bps=_num(obj, "throughput_bps", where),
                   bytes_acked=_int(obj, "bytes_acked", 0, 2**64 - 1, where),
                   clamp=_int(obj, "clamp", 0, MAX_WINDOW, where))


@dataclass(frozen=True)
class ControllerMessage:
    """A validated message from the controller."""

    type: str
    seq: int
    nonce: str = ""  # hello only
    clamps: tuple[Clamp, ...] = ()
    replace: bool = True


@dataclass(frozen=True)
class AgentMessage:
    """A validated message from an agent."""

    type: str
    seq: int
    agent: str = ""
    nonce: str = ""  # hello only
    cgroup: str = ""
    flows: tuple[FlowStats, ...] = ()
    ack_seq: int = 0
    clamps: int = 0
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _nonce(msg: dict[str, Any], where: str) -> str:
    text = _str(msg, "nonce", where)
    if len(text) != NONCE_HEX or any(c not in "0123456789abcdef" for c in text):
        raise ProtocolError(f"{where}: nonce must be {NONCE_HEX} lower-case hex digits")
    return text


def make_alloc(seq: int, clamps: list[Clamp], replace: bool = True) -> dict[str, Any]:
    for clamp in clamps:  # check on the way out too: a bug here must not reach a host
        if not MIN_WINDOW <= clamp.window <= MAX_WINDOW:
            raise ProtocolError(f"window {clamp.window} outside [{MIN_WINDOW}, {MAX_WINDOW}]")
    if len(clamps) > MAX_FLOWS:
        raise ProtocolError(f"{len(clamps)} clamps exceed the limit of {MAX_FLOWS}")
    return {"type": "alloc", "seq": seq, "replace": replace,
            "clamps": [{"flow": flow_to_dict(c.flow), "window": c.window} for c in clamps]}


def parse_controller(msg: dict[str, Any]) -> ControllerMessage:
    kind = _str(msg, "type", "message")
    if kind not in CONTROLLER_TYPES:
        raise ProtocolError(f"unknown controller message type {kind!r}")
    seq = _int(msg, "seq", 1, MAX_SEQ, kind)
    if kind == "hello":
        return ControllerMessage(kind, seq, nonce=_nonce(msg, kind))
    if kind != "alloc":
        return ControllerMessage(kind, seq)
    clamps = []
    for i, obj in enumerate(_list(msg, "clamps", kind)):
        where = f"alloc.clamps[{i}]"
        if not isinstance(obj, dict):
            raise ProtocolError(f"{where}: must be an object")
        clamps.append(Clamp(flow_from_dict(obj.get("flow"), where),
                            _int(obj, "window", MIN_WINDOW, MAX_WINDOW, where)))
    replace = _field(msg, "replace", bool, kind)
    return ControllerMessage(kind, seq, clamps=tuple(clamps), replace=replace)


def parse_agent(msg: dict[str, Any]) -> AgentMessage:
    kind = _str(msg, "type", "message")
    if kind not in AGENT_TYPES:
        raise ProtocolError(f"unknown agent message type {kind!r}")
    seq = _int(msg, "seq", 1, MAX_SEQ, kind)
    if kind == "hello":
        return AgentMessage(kind, seq, agent=_str(msg, "agent", kind),
                            nonce=_nonce(msg, kind), cgroup=_str(msg, "cgroup", kind))
    if kind == "report":
        flows = tuple(FlowStats.from_dict(obj, f"report.flows[{i}]")
                      for i, obj in enumerate(_list(msg, "flows", kind)))
        return AgentMessage(kind, seq, flows=flows)
    if kind == "ack":
        return AgentMessage(kind, seq, ack_seq=_int(msg, "ack_seq", 1, MAX_SEQ, kind),
                            clamps=_int(msg, "clamps", 0, MAX_FLOWS, kind))
    return AgentMessage(kind, seq, reason=_str(msg, "reason", kind))


class SeqCheck:
    """Strictly increasing sequence numbers within one connection (replay guard)."""

    def __init__(self, last: int = 0) -> None:
        self.last = last

    def check(self, seq: int) -> None:
        if seq <= self.last:
            raise ProtocolError(f"sequence number {seq} not above {self.last} (replay?)")
        self.last = seq
