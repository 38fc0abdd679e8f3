"""ARP answered by the controller.

Loopy fabrics cannot flood broadcasts, so every switch punts ARP and the controller
answers from its host table.  These helpers are pure: they parse a punted frame into an
:class:`ArpPacket` (or say why it is not one) and build replies and probes as bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ryu.lib.packet import arp, ether_types, ethernet, packet

BROADCAST = "ff:ff:ff:ff:ff:ff"
ZERO_MAC = "00:00:00:00:00:00"


class NotArp(ValueError):
    """A punted frame that is not a well-formed Ethernet/IPv4 ARP packet."""


@dataclass(frozen=True)
class ArpPacket:
    opcode: int  # arp.ARP_REQUEST or arp.ARP_REPLY
    src_mac: str  # sender hardware address
    src_ip: str
    dst_mac: str
    dst_ip: str
    eth_src: str
    eth_dst: str

    @property
    def is_request(self) -> bool:
        return self.opcode == arp.ARP_REQUEST

    @property
    def is_gratuitous(self) -> bool:
        return self.src_ip == self.dst_ip


def parse(frame: bytes) -> ArpPacket:
    """Parse a punted frame; raises :class:`NotArp` for anything else or malformed."""
    try:
        pkt = packet.Packet(frame)
    except Exception as exc:  # Ryu's parsers raise many types on garbage
        raise NotArp(f"unparseable frame ({exc.__class__.__name__})") from None
    eth = pkt.get_protocol(ethernet.ethernet)
    if eth is None or eth.ethertype != ether_types.ETH_TYPE_ARP:
        raise NotArp("not an ARP frame")
    a = pkt.get_protocol(arp.arp)
    if a is None:
        raise NotArp("truncated ARP payload")
    if a.hwtype != 1 or a.proto != ether_types.ETH_TYPE_IP or a.hlen != 6 or a.plen != 4:
        raise NotArp("ARP for something other than Ethernet/IPv4")
    if a.opcode not in (arp.ARP_REQUEST, arp.ARP_REPLY):
        raise NotArp(f"ARP opcode {a.opcode}")
    if a.src_mac != eth.src:
        raise NotArp("ARP sender MAC differs from the Ethernet source")
    return ArpPacket(a.opcode, a.src_mac, a.src_ip, a.dst_mac, a.dst_ip, eth.src, eth.dst)


def _frame(eth_src: str, eth_dst: str, body: arp.arp) -> bytes:
    pkt = packet.Packet()
    pkt.add_protocol(ethernet.ethernet(ethertype=ether_types.ETH_TYPE_ARP, dst=eth_dst,
                                       src=eth_src))
    pkt.add_protocol(body)
    pkt.serialize()
    return bytes(pkt.data)


def reply(request: ArpPacket, target_mac: str) -> bytes:
    """The reply the target host would send to ``request``."""
    body = arp.arp(opcode=arp.ARP_REPLY, src_mac=target_mac, src_ip=request.dst_ip,
                   dst_mac=request.src_mac, dst_ip=request.src_ip)
    return _frame(target_mac, request.src_mac, body)


def probe(request: ArpPacket) -> bytes:
    """Re-issue ``request`` towards hosts (used when the target is not known yet)."""
    body = arp.arp(opcode=arp.ARP_REQUEST, src_mac=request.src_mac, src_ip=request.src_ip,
                   dst_mac=ZERO_MAC, dst_ip=request.dst_ip)
    return _frame(request.src_mac, BROADCAST, body)
