"""This host's TCP flows in one cgroup, read in-process over NETLINK_SOCK_DIAG.

What ``ss -tin`` does, without forking it on every report: one inet_diag dump request
per address family for established TCP sockets with their ``tcp_info``
(``INET_DIAG_INFO``), keeping the sockets whose ``INET_DIAG_CGROUP_ID`` is the agent's
cgroup (the id of a cgroup v2 directory is its inode number), so a report holds the
flows the agent governs and nothing else on the host.

Layouts (``include/uapi/linux/inet_diag.h``, ``netlink.h``)::

    nlmsghdr          len u32 | type u16 | flags u16 | seq u32 | pid u32
    inet_diag_req_v2  family u8 | protocol u8 | ext u8 | pad u8 | states u32 | sockid
    inet_diag_sockid  sport be16 | dport be16 | src 16 | dst 16 | if u32 | cookie 2*u32
    inet_diag_msg     family u8 | state u8 | timer u8 | retrans u8 | sockid
                      | expires u32 | rqueue u32 | wqueue u32 | uid u32 | inode u32
    rtattr            len u16 | type u16 | payload (4-byte aligned)

Malformed replies end the dump with :class:`SockDiagError`; a socket whose attributes
are short is skipped.
"""

from __future__ import annotations

import ctypes
import ipaddress
import os
import socket
import struct
from pathlib import Path

from dcnlab.benchmarks.engine.tcpinfo import TcpInfoStruct

from .bpf import Tuple4
from .flows import FlowSample

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300
NLMSG_ERROR = 2
NLMSG_DONE = 3
INET_DIAG_INFO = 2
INET_DIAG_CGROUP_ID = 21
TCP_ESTABLISHED = 1

NLMSGHDR = struct.Struct("=IHHII")
REQ = struct.Struct("=BBBxI48s")
MSG = struct.Struct("=BBBB48sIIIII")
RTATTR = struct.Struct("=HH")
SOCKID = struct.Struct("!HH16s16sI8s")


class SockDiagError(OSError):
    """The kernel's sock_diag answer could not be read."""


def cgroup_id(path: str | os.PathLike[str]) -> int:
    """The id sock_diag reports for sockets of this cgroup v2 directory."""
    return os.stat(path).st_ino


def _align(n: int) -> int:
    return (n + 3) & ~3


def _request(family: int, seq: int) -> bytes:
    req = REQ.pack(family, socket.IPPROTO_TCP, 1 << (INET_DIAG_INFO - 1),
                   1 << TCP_ESTABLISHED, b"\0" * 48)
    return NLMSGHDR.pack(NLMSGHDR.size + len(req), SOCK_DIAG_BY_FAMILY,
                         NLM_F_REQUEST | NLM_F_DUMP, seq, 0) + req


def _address(family: int, raw: bytes) -> str:
    if family == socket.AF_INET:
        return str(ipaddress.IPv4Address(raw[:4]))
    return str(ipaddress.IPv6Address(raw))


def parse_message(payload: bytes, cgroup: int | None) -> FlowSample | None:
    """One inet_diag_msg with its attributes; None when it is not one of ``cgroup``'s
    sockets (or carries no tcp_info)."""
    if len(payload) < MSG.size:
        raise SockDiagError(f"inet_diag_msg of {len(payload)} bytes")
    family, _state, _timer, _retrans, sockid, *_rest = MSG.unpack_from(payload)
    sport, dport, src, dst, _ifindex, _cookie = SOCKID.unpack(sockid)
    info: bytes | None = None
    group: int | None = None
    off = MSG.size
    while off + RTATTR.size <= len(payload):
        length, kind = RTATTR.unpack_from(payload, off)
        if length < RTATTR.size or off + length > len(payload):
            break
        body = payload[off + RTATTR.size:off + length]
        if kind == INET_DIAG_INFO:
            info = body
        elif kind == INET_DIAG_CGROUP_ID and len(body) >= 8:
            group = struct.unpack_from("=Q", body)[0]
        off += _align(length)
    if info is None or (cgroup is not None and group != cgroup):
        return None
    buf = info.ljust(ctypes.sizeof(TcpInfoStruct), b"\0")[:ctypes.sizeof(TcpInfoStruct)]
    ti = TcpInfoStruct.from_buffer_copy(buf)
    return FlowSample(flow=Tuple4(_address(family, src), sport, _address(family, dst), dport),
                  rtt_us=float(ti.tcpi_rtt), mss=int(ti.tcpi_snd_mss),
                  cwnd=int(ti.tcpi_snd_cwnd), delivery_bps=float(ti.tcpi_delivery_rate) * 8,
                  bytes_acked=int(ti.tcpi_bytes_acked))


def parse_dump(data: bytes, cgroup: int | None) -> tuple[list[FlowSample], bool]:
    """The flows in one recv()'s worth of netlink messages, and whether the dump ended."""
    flows: list[FlowSample] = []
    off = 0
    while off + NLMSGHDR.size <= len(data):
        length, kind, _flags, _seq, _pid = NLMSGHDR.unpack_from(data, off)
        if length < NLMSGHDR.size or off + length > len(data):
            raise SockDiagError(f"netlink message of length {length} at {off}")
        payload = data[off + NLMSGHDR.size:off + length]
        if kind == NLMSG_DONE:
            return flows, True
        if kind == NLMSG_ERROR:
            errno = -struct.unpack_from("=i", payload)[0] if len(payload) >= 4 else 0
            raise SockDiagError(errno, f"sock_diag: {os.strerror(errno)}")
        if kind == SOCK_DIAG_BY_FAMILY:
            flow = parse_message(payload, cgroup)
            if flow is not None:
                flows.append(flow)
        off += _align(length)
    return flows, False


class FlowReader:
    """Reads the established TCP flows of one cgroup (all of the host's with None)."""

    def __init__(self, cgroup: str | os.PathLike[str] | None) -> None:
        self.cgroup = cgroup_id(cgroup) if cgroup is not None and Path(cgroup).exists() \
            else None
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_SOCK_DIAG)
        self._sock.settimeout(2.0)
        self._seq = 0

    def read(self) -> list[FlowSample]:
        flows: list[FlowSample] = []
        for family in (socket.AF_INET, socket.AF_INET6):
            self._seq += 1
            self._sock.send(_request(family, self._seq))
            done = False
            while not done:
                try:
                    data = self._sock.recv(1 << 16)
                except TimeoutError as exc:
                    raise SockDiagError(f"sock_diag did not answer: {exc}") from None
                batch, done = parse_dump(data, self.cgroup)
                flows += batch
        return flows

    def close(self) -> None:
        self._sock.close()
