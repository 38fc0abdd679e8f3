"""Controller <-> agent wire protocol, version 1: authenticated, bounded, length-prefixed JSON.

Frame::

    magic "U3" (2) | version (1) | reserved 0 (1) | payload length N (4, big endian)
    | HMAC-SHA256(secret, first 8 bytes + payload) (32) | payload: UTF-8 JSON object (N)

Every message carries ``type`` and ``seq``.  The agent opens a connection with ``hello``
carrying a random ``session`` nonce; every controller message must echo it and use a
strictly increasing ``seq``, so a frame recorded on one connection cannot be replayed on
another or twice on the same one.

Messages (all fields checked against the bounds below; anything else is a
:class:`ProtocolError` with a message that says what and where, never an exception of
another kind):

- agent -> controller: ``hello`` {agent, session, cgroup}, ``report`` {flows: [FlowStats]},
  ``ack`` {ack_seq, clamps}, ``error`` {reason}
- controller -> agent: ``alloc`` {session, clamps: [{flow, window}], replace}, ``keepalive``
  {session}, ``clear`` {session}

A flow is ``{"local": ip, "lport": n, "remote": ip, "rport": n}`` seen from the agent's
host (the sender whose window is clamped).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import struct
from dataclasses import dataclass, field
from typing import Any

from .bpf import Tuple4

MAGIC = b"U3"
VERSION = 1
HEADER = struct.Struct("!2sBBI")
MAC_LEN = 32
MAX_PAYLOAD = 1 << 20  # 1 MiB: a report of MAX_FLOWS flows fits with room to spare
MAX_FLOWS = 4096  # clamps per alloc, flows per report
MIN_WINDOW, MAX_WINDOW = 1, 65535  # segments
MAX_STRING = 256
MAX_SEQ = 2**63 - 1
MIN_SECRET = 16  # bytes

CONTROLLER_TYPES = frozenset({"alloc", "keepalive", "clear"})
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
# Framing


def encode(message: dict[str, Any], secret: bytes) -> bytes:
    payload = json.dumps(message, separators=(",", ":"), sort_keys=True).encode()
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError(f"message of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    header = HEADER.pack(MAGIC, VERSION, 0, len(payload))
    mac = hmac.new(secret, header + payload, hashlib.sha256).digest()
    return header + mac + payload


class FrameReader:
    """Incremental decoder: feed bytes, get verified JSON objects.

    Errors in the header or the MAC lose the framing: the caller must close the
    connection.  A payload that verifies but is no JSON object is also a ProtocolError.
    """

    def __init__(self, secret: bytes) -> None:
        self.secret = check_secret(secret)
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        out = []
        while len(self._buf) >= HEADER.size:
            magic, version, _reserved, length = HEADER.unpack_from(self._buf)
            if magic != MAGIC:
                raise ProtocolError(f"bad magic {bytes(magic)!r}: not a dcnlab agent peer")
            if version != VERSION:
                raise ProtocolError(f"unsupported protocol version {version} (speak {VERSION})")
            if length > MAX_PAYLOAD:
                raise ProtocolError(f"frame length {length} exceeds {MAX_PAYLOAD}")
            total = HEADER.size + MAC_LEN + length
            if len(self._buf) < total:
                break
            header = bytes(self._buf[:HEADER.size])
            mac = bytes(self._buf[HEADER.size:HEADER.size + MAC_LEN])
            payload = bytes(self._buf[HEADER.size + MAC_LEN:total])
            del self._buf[:total]
            want = hmac.new(self.secret, header + payload, hashlib.sha256).digest()
            if not hmac.compare_digest(mac, want):
                raise AuthError("HMAC mismatch: wrong shared secret or tampered frame")
            try:
                message = json.loads(payload.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
                raise ProtocolError(f"payload is not UTF-8 JSON: {exc}") from None
            if not isinstance(message, dict):
                raise ProtocolError("payload must be a JSON object")
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
    value = float(_field(msg, name, (int, float), where))
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
    session: str
    clamps: tuple[Clamp, ...] = ()
    replace: bool = True


@dataclass(frozen=True)
class AgentMessage:
    """A validated message from an agent."""

    type: str
    seq: int
    agent: str = ""
    session: str = ""
    cgroup: str = ""
    flows: tuple[FlowStats, ...] = ()
    ack_seq: int = 0
    clamps: int = 0
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def make_alloc(seq: int, session: str, clamps: list[Clamp], replace: bool = True
               ) -> dict[str, Any]:
    for clamp in clamps:  # check on the way out too: a bug here must not reach a host
        if not MIN_WINDOW <= clamp.window <= MAX_WINDOW:
            raise ProtocolError(f"window {clamp.window} outside [{MIN_WINDOW}, {MAX_WINDOW}]")
    if len(clamps) > MAX_FLOWS:
        raise ProtocolError(f"{len(clamps)} clamps exceed the limit of {MAX_FLOWS}")
    return {"type": "alloc", "seq": seq, "session": session, "replace": replace,
            "clamps": [{"flow": flow_to_dict(c.flow), "window": c.window} for c in clamps]}


def parse_controller(msg: dict[str, Any]) -> ControllerMessage:
    kind = _str(msg, "type", "message")
    if kind not in CONTROLLER_TYPES:
        raise ProtocolError(f"unknown controller message type {kind!r}")
    seq = _int(msg, "seq", 1, MAX_SEQ, kind)
    session = _str(msg, "session", kind)
    if kind != "alloc":
        return ControllerMessage(kind, seq, session)
    clamps = []
    for i, obj in enumerate(_list(msg, "clamps", kind)):
        where = f"alloc.clamps[{i}]"
        if not isinstance(obj, dict):
            raise ProtocolError(f"{where}: must be an object")
        clamps.append(Clamp(flow_from_dict(obj.get("flow"), where),
                            _int(obj, "window", MIN_WINDOW, MAX_WINDOW, where)))
    replace = _field(msg, "replace", bool, kind)
    return ControllerMessage(kind, seq, session, tuple(clamps), replace)


def parse_agent(msg: dict[str, Any]) -> AgentMessage:
    kind = _str(msg, "type", "message")
    if kind not in AGENT_TYPES:
        raise ProtocolError(f"unknown agent message type {kind!r}")
    seq = _int(msg, "seq", 1, MAX_SEQ, kind)
    if kind == "hello":
        return AgentMessage(kind, seq, agent=_str(msg, "agent", kind),
                            session=_str(msg, "session", kind), cgroup=_str(msg, "cgroup", kind))
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

    def __init__(self) -> None:
        self.last = 0

    def check(self, seq: int) -> None:
        if seq <= self.last:
            raise ProtocolError(f"sequence number {seq} not above {self.last} (replay?)")
        self.last = seq
