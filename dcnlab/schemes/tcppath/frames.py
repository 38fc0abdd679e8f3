"""Frames TCP-Path punts and sends: TCP SYN / SYN-ACK parsing, exploration copies.

An exploration copy is the paper's *Path Request*: the original SYN frame encapsulated
behind an Ethernet header with the IEEE local-experimental EtherType 0x88B5, so every
switch's punt entry can tell it from data (a SYN is IPv4, a copy is not) and no host ever
mistakes one for traffic.  The header carries an exploration id, which tells copies of
different explorations of one flow apart (a retransmitted SYN starts a new one)::

    dst MAC, src MAC (of the SYN) | 0x88B5 | "TCPP" | version | kind | id (u32) | SYN frame

Parsing never trusts a punted frame: anything malformed raises :class:`BadFrame`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ryu.lib.packet import ethernet, ipv4, packet, tcp

from dcnlab.schemes.tcppath.state import FlowKey

ETH_TYPE_EXPLORATION = 0x88B5
MAGIC = b"TCPP"
VERSION = 1
KIND_REQUEST = 1  # carries a host's SYN, to be delivered at the destination edge
KIND_RECOVERY = 2  # Path Recovery Request: carries a synthetic segment, never delivered
HEADER = struct.Struct("!4sBBI")
ETH_HEADER = 14

TCP_SYN, TCP_ACK = 0x002, 0x010


class BadFrame(ValueError):
    """A punted frame that is not what its punt entry promised."""


@dataclass(frozen=True)
class TcpFrame:
    key: FlowKey
    flags: int
    dscp: int
    data: bytes

    @property
    def is_syn(self) -> bool:
        return self.flags & (TCP_SYN | TCP_ACK) == TCP_SYN

    @property
    def is_synack(self) -> bool:
        return self.flags & (TCP_SYN | TCP_ACK) == TCP_SYN | TCP_ACK


def parse_tcp(frame: bytes) -> TcpFrame:
    """An untagged Ethernet/IPv4/TCP frame, or :class:`BadFrame`."""
    try:
        pkt = packet.Packet(frame)
    except Exception as exc:  # Ryu's parsers raise many types on garbage
        raise BadFrame(f"unparseable frame ({exc.__class__.__name__})") from None
    eth = pkt.get_protocol(ethernet.ethernet)
    ip = pkt.get_protocol(ipv4.ipv4)
    seg = pkt.get_protocol(tcp.tcp)
    if eth is None or eth.ethertype != 0x0800 or ip is None:
        raise BadFrame("not an IPv4 frame")
    if ip.proto != 6 or seg is None or not isinstance(seg, tcp.tcp):
        raise BadFrame("not a TCP segment")
    if ip.flags & 0x1 or ip.offset:
        raise BadFrame("IP fragment")
    key = FlowKey(eth.src, ip.src, seg.src_port, eth.dst, ip.dst, seg.dst_port)
    return TcpFrame(key, seg.bits, ip.tos >> 2, bytes(frame))


def exploration(xid: int, kind: int, inner: bytes) -> bytes:
    """The copy flooded for exploration ``xid`` around ``inner`` (a TCP frame)."""
    return inner[0:12] + struct.pack("!H", ETH_TYPE_EXPLORATION) + HEADER.pack(
        MAGIC, VERSION, kind, xid) + inner


def parse_exploration(frame: bytes) -> tuple[int, int, TcpFrame]:
    """(exploration id, kind, the encapsulated TCP frame) or :class:`BadFrame`."""
    if len(frame) < ETH_HEADER + HEADER.size:
        raise BadFrame("truncated exploration copy")
    if struct.unpack_from("!H", frame, 12)[0] != ETH_TYPE_EXPLORATION:
        raise BadFrame("not an exploration copy")
    magic, version, kind, xid = HEADER.unpack_from(frame, ETH_HEADER)
    if magic != MAGIC or version != VERSION or kind not in (KIND_REQUEST, KIND_RECOVERY):
        raise BadFrame(f"foreign 0x88b5 frame (magic {magic!r}, version {version})")
    inner = parse_tcp(frame[ETH_HEADER + HEADER.size:])
    if inner.data[0:12] != frame[0:12]:
        raise BadFrame("outer and inner addresses differ")
    if kind == KIND_REQUEST and not inner.is_syn:
        raise BadFrame("exploration request without a SYN inside")
    return xid, kind, inner


def synthetic_segment(key: FlowKey) -> bytes:
    """A bare ACK segment of ``key`` (what a Path Recovery Request carries)."""
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(dst=key.dst_mac, src=key.src_mac, ethertype=0x0800))
    pkt.add_protocol(ipv4.ipv4(src=key.src_ip, dst=key.dst_ip, proto=6))
    pkt.add_protocol(tcp.tcp(src_port=key.src_port, dst_port=key.dst_port, bits=TCP_ACK))
    pkt.serialize()
    return bytes(pkt.data)
