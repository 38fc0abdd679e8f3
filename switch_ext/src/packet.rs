//! Frame parsing into OpenFlow match fields, and the header rewrites actions need.
//!
//! Parsing never panics on short or bogus frames: a field that cannot be read is simply
//! absent, and a flow that matches on it does not match (OpenFlow semantics).
//! Rewrites keep checksums valid with incremental updates (RFC 1624), and never touch a
//! checksum unless a header field under it changed.

/// Match field identifiers we understand (OXM basic field numbers, plus tcp_flags, the
/// Nicira registers and the NXM-only vlan_tci; those have numbers no OXM basic field has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Field {
    InPort = 0,
    InPhyPort = 1,
    Metadata = 2,
    EthDst = 3,
    EthSrc = 4,
    EthType = 5,
    VlanVid = 6,
    VlanPcp = 7,
    IpDscp = 8,
    IpEcn = 9,
    IpProto = 10,
    Ipv4Src = 11,
    Ipv4Dst = 12,
    TcpSrc = 13,
    TcpDst = 14,
    UdpSrc = 15,
    UdpDst = 16,
    SctpSrc = 17,
    SctpDst = 18,
    Icmpv4Type = 19,
    Icmpv4Code = 20,
    ArpOp = 21,
    ArpSpa = 22,
    ArpTpa = 23,
    ArpSha = 24,
    ArpTha = 25,
    Ipv6Src = 26,
    Ipv6Dst = 27,
    Ipv6Flabel = 28,
    Icmpv6Type = 29,
    Icmpv6Code = 30,
    /// ONF experimenter field 42 (EXT-109), the way Ryu encodes `tcp_flags` for OF1.3.
    TcpFlags = 42,
    /// `NXM_NX_REG0..7` (NXM class 1, fields 0..7): 32-bit pipeline registers.
    Reg0 = 100,
    Reg1 = 101,
    Reg2 = 102,
    Reg3 = 103,
    Reg4 = 104,
    Reg5 = 105,
    Reg6 = 106,
    Reg7 = 107,
    /// `NXM_OF_VLAN_TCI`: the outer tag's TCI with the CFI bit set, 0 when untagged.
    VlanTci = 110,
}

impl Field {
    /// Maps an OXM basic field number to a field.
    pub fn from_basic(n: u8) -> Option<Field> {
        use Field::*;
        Some(match n {
            0 => InPort,
            1 => InPhyPort,
            2 => Metadata,
            3 => EthDst,
            4 => EthSrc,
            5 => EthType,
            6 => VlanVid,
            7 => VlanPcp,
            8 => IpDscp,
            9 => IpEcn,
            10 => IpProto,
            11 => Ipv4Src,
            12 => Ipv4Dst,
            13 => TcpSrc,
            14 => TcpDst,
            15 => UdpSrc,
            16 => UdpDst,
            17 => SctpSrc,
            18 => SctpDst,
            19 => Icmpv4Type,
            20 => Icmpv4Code,
            21 => ArpOp,
            22 => ArpSpa,
            23 => ArpTpa,
            24 => ArpSha,
            25 => ArpTha,
            26 => Ipv6Src,
            27 => Ipv6Dst,
            28 => Ipv6Flabel,
            29 => Icmpv6Type,
            30 => Icmpv6Code,
            _ => return None,
        })
    }

    /// Register `n` (0..7).
    pub fn reg(n: u8) -> Option<Field> {
        use Field::*;
        [Reg0, Reg1, Reg2, Reg3, Reg4, Reg5, Reg6, Reg7].get(n as usize).copied()
    }

    /// The register number, if this is a register.
    pub fn reg_index(self) -> Option<usize> {
        let n = self as u8;
        (100..108).contains(&n).then(|| (n - 100) as usize)
    }

    /// Width of the field's OXM value in bytes.
    pub fn width(self) -> usize {
        use Field::*;
        match self {
            InPort | InPhyPort | Ipv4Src | Ipv4Dst | ArpSpa | ArpTpa | Ipv6Flabel => 4,
            Reg0 | Reg1 | Reg2 | Reg3 | Reg4 | Reg5 | Reg6 | Reg7 => 4,
            VlanTci => 2,
            Metadata => 8,
            EthDst | EthSrc | ArpSha | ArpTha => 6,
            EthType | VlanVid | TcpSrc | TcpDst | UdpSrc | UdpDst | SctpSrc | SctpDst | ArpOp | TcpFlags => 2,
            VlanPcp | IpDscp | IpEcn | IpProto | Icmpv4Type | Icmpv4Code | Icmpv6Type | Icmpv6Code => 1,
            Ipv6Src | Ipv6Dst => 16,
        }
    }

    /// Whether the spec allows a mask on this field.
    pub fn maskable(self) -> bool {
        use Field::*;
        matches!(
            self,
            Metadata
                | EthDst
                | EthSrc
                | VlanVid
                | Ipv4Src
                | Ipv4Dst
                | ArpSpa
                | ArpTpa
                | ArpSha
                | ArpTha
                | Ipv6Src
                | Ipv6Dst
                | Ipv6Flabel
                | TcpFlags
                | Reg0
                | Reg1
                | Reg2
                | Reg3
                | Reg4
                | Reg5
                | Reg6
                | Reg7
                | VlanTci
        )
    }

    /// Largest legal value (for BAD_VALUE checks), as a bit mask of valid bits.
    pub fn value_bits(self) -> u128 {
        use Field::*;
        match self {
            VlanVid => 0x1fff,
            VlanPcp => 0x7,
            IpDscp => 0x3f,
            IpEcn => 0x3,
            Ipv6Flabel => 0xf_ffff,
            TcpFlags => 0x0fff,
            _ => {
                let w = self.width() * 8;
                if w >= 128 {
                    u128::MAX
                } else {
                    (1u128 << w) - 1
                }
            }
        }
    }
}

pub const ETH_TYPE_IPV4: u16 = 0x0800;
pub const ETH_TYPE_ARP: u16 = 0x0806;
pub const ETH_TYPE_IPV6: u16 = 0x86dd;
pub const ETH_TYPE_VLAN: u16 = 0x8100;
pub const ETH_TYPE_QINQ: u16 = 0x88a8;
pub const IPPROTO_ICMP: u8 = 1;
pub const IPPROTO_TCP: u8 = 6;
pub const IPPROTO_UDP: u8 = 17;
pub const IPPROTO_ICMPV6: u8 = 58;
pub const IPPROTO_SCTP: u8 = 132;

/// Offsets and values extracted from a frame. Recomputed after any header rewrite.
#[derive(Debug, Clone, Default)]
pub struct Key {
    pub in_port: u32,
    pub metadata: u64,
    /// Nicira registers: pipeline metadata, zero when a packet enters the pipeline.
    pub regs: [u32; 8],
    pub eth_dst: [u8; 6],
    pub eth_src: [u8; 6],
    /// Outermost VLAN tag's TCI if tagged.
    pub vlan_tci: Option<u16>,
    /// Ethertype after all VLAN tags (what OXM eth_type means).
    pub eth_type: u16,
    /// Offset of the L3 header.
    pub l3: usize,
    pub ip_proto: Option<u8>,
    pub ip_tos: u8,
    pub ip_ttl: u8,
    pub is_ipv4: bool,
    pub is_ipv6: bool,
    pub ipv4_src: u32,
    pub ipv4_dst: u32,
    pub ipv6_src: u128,
    pub ipv6_dst: u128,
    pub ipv6_flabel: u32,
    /// Offset of the L4 header when it is present (first fragment, complete enough).
    pub l4: Option<usize>,
    pub tp_src: u16,
    pub tp_dst: u16,
    pub tcp_flags: u16,
    pub icmp_type: u8,
    pub icmp_code: u8,
    pub arp: Option<ArpFields>,
}

#[derive(Debug, Clone, Copy, Default)]
pub struct ArpFields {
    pub op: u16,
    pub spa: u32,
    pub tpa: u32,
    pub sha: [u8; 6],
    pub tha: [u8; 6],
}

fn be16(b: &[u8], o: usize) -> Option<u16> {
    b.get(o..o + 2).map(|s| u16::from_be_bytes([s[0], s[1]]))
}

fn be32(b: &[u8], o: usize) -> Option<u32> {
    b.get(o..o + 4).map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

fn be128(b: &[u8], o: usize) -> Option<u128> {
    b.get(o..o + 16).map(|s| {
        let mut a = [0u8; 16];
        a.copy_from_slice(s);
        u128::from_be_bytes(a)
    })
}

fn mac(b: &[u8], o: usize) -> [u8; 6] {
    let mut m = [0u8; 6];
    if let Some(s) = b.get(o..o + 6) {
        m.copy_from_slice(s);
    }
    m
}

fn mac_u128(m: &[u8; 6]) -> u128 {
    m.iter().fold(0u128, |a, &b| (a << 8) | b as u128)
}

impl Key {
    /// Parses `f` received on `in_port`. Frames shorter than an Ethernet header yield a key
    /// with only in_port set (eth_type 0), which matches only flows that wildcard L2.
    pub fn parse(f: &[u8], in_port: u32) -> Key {
        let mut k = Key { in_port, ..Default::default() };
        if f.len() < 14 {
            return k;
        }
        k.eth_dst = mac(f, 0);
        k.eth_src = mac(f, 6);
        let mut off = 12;
        let mut et = be16(f, off).unwrap_or(0);
        let mut first = true;
        while et == ETH_TYPE_VLAN || et == ETH_TYPE_QINQ {
            let Some(tci) = be16(f, off + 2) else {
                k.eth_type = 0;
                return k;
            };
            if first {
                k.vlan_tci = Some(tci);
                first = false;
            }
            off += 4;
            et = be16(f, off).unwrap_or(0);
        }
        k.eth_type = et;
        k.l3 = off + 2;
        let l3 = k.l3;
        match et {
            ETH_TYPE_IPV4 => {
                let Some(vihl) = f.get(l3) else { return k };
                let ihl = ((vihl & 0x0f) as usize) * 4;
                if vihl >> 4 != 4 || ihl < 20 || f.len() < l3 + 20 {
                    return k;
                }
                k.is_ipv4 = true;
                k.ip_tos = f[l3 + 1];
                k.ip_ttl = f[l3 + 8];
                let proto = f[l3 + 9];
                k.ip_proto = Some(proto);
                k.ipv4_src = be32(f, l3 + 12).unwrap_or(0);
                k.ipv4_dst = be32(f, l3 + 16).unwrap_or(0);
                let frag_off = be16(f, l3 + 6).unwrap_or(0) & 0x1fff;
                if frag_off == 0 {
                    k.parse_l4(f, l3 + ihl, proto, false);
                }
            }
            ETH_TYPE_IPV6 => {
                if f.len() < l3 + 40 || f[l3] >> 4 != 6 {
                    return k;
                }
                k.is_ipv6 = true;
                let w0 = be32(f, l3).unwrap_or(0);
                k.ip_tos = ((w0 >> 20) & 0xff) as u8;
                k.ipv6_flabel = w0 & 0xf_ffff;
                k.ip_ttl = f[l3 + 7];
                k.ipv6_src = be128(f, l3 + 8).unwrap_or(0);
                k.ipv6_dst = be128(f, l3 + 24).unwrap_or(0);
                let mut nh = f[l3 + 6];
                let mut o = l3 + 40;
                // Walk the common extension headers to find the transport header.
                let mut fragmented_later = false;
                for _ in 0..8 {
                    match nh {
                        0 | 43 | 60 => {
                            let (Some(&n), Some(&l)) = (f.get(o), f.get(o + 1)) else { break };
                            nh = n;
                            o += (l as usize + 1) * 8;
                        }
                        44 => {
                            let Some(&n) = f.get(o) else { break };
                            let fo = be16(f, o + 2).unwrap_or(0) >> 3;
                            fragmented_later = fo != 0;
                            nh = n;
                            o += 8;
                        }
                        _ => break,
                    }
                }
                k.ip_proto = Some(nh);
                if !fragmented_later {
                    k.parse_l4(f, o, nh, true);
                }
            }
            // Ethernet/IPv4 ARP only.
            ETH_TYPE_ARP
                if f.len() >= l3 + 28 && be16(f, l3) == Some(1) && be16(f, l3 + 2) == Some(0x0800) =>
            {
                k.arp = Some(ArpFields {
                    op: be16(f, l3 + 6).unwrap_or(0),
                    sha: mac(f, l3 + 8),
                    spa: be32(f, l3 + 14).unwrap_or(0),
                    tha: mac(f, l3 + 18),
                    tpa: be32(f, l3 + 24).unwrap_or(0),
                });
            }
            _ => {}
        }
        k
    }

    fn parse_l4(&mut self, f: &[u8], o: usize, proto: u8, v6: bool) {
        match proto {
            IPPROTO_TCP if f.len() >= o + 20 => {
                self.l4 = Some(o);
                self.tp_src = be16(f, o).unwrap_or(0);
                self.tp_dst = be16(f, o + 2).unwrap_or(0);
                self.tcp_flags = be16(f, o + 12).unwrap_or(0) & 0x0fff;
            }
            IPPROTO_UDP | IPPROTO_SCTP if f.len() >= o + 8 => {
                self.l4 = Some(o);
                self.tp_src = be16(f, o).unwrap_or(0);
                self.tp_dst = be16(f, o + 2).unwrap_or(0);
            }
            IPPROTO_ICMP if !v6 && f.len() >= o + 4 => {
                self.l4 = Some(o);
                self.icmp_type = f[o];
                self.icmp_code = f[o + 1];
            }
            IPPROTO_ICMPV6 if v6 && f.len() >= o + 4 => {
                self.l4 = Some(o);
                self.icmp_type = f[o];
                self.icmp_code = f[o + 1];
            }
            _ => {}
        }
    }

    fn is_ip(&self) -> bool {
        self.is_ipv4 || self.is_ipv6
    }

    /// The packet's value for `field`, or None when the packet does not have that field.
    pub fn get(&self, field: Field) -> Option<u128> {
        use Field::*;
        let proto = self.ip_proto;
        let l4 = self.l4.is_some();
        Some(match field {
            InPort | InPhyPort => self.in_port as u128,
            Metadata => self.metadata as u128,
            Reg0 | Reg1 | Reg2 | Reg3 | Reg4 | Reg5 | Reg6 | Reg7 => {
                self.regs[field.reg_index().unwrap_or(0)] as u128
            }
            VlanTci => self.vlan_tci.map_or(0, |t| (t | 0x1000) as u128),
            EthDst => mac_u128(&self.eth_dst),
            EthSrc => mac_u128(&self.eth_src),
            EthType => self.eth_type as u128,
            // Untagged frames have vlan_vid OFPVID_NONE (0), so they match vlan_vid=0.
            VlanVid => self.vlan_tci.map_or(0, |t| (t & 0x0fff) as u128 | 0x1000),
            VlanPcp => (self.vlan_tci? >> 13) as u128,
            IpDscp if self.is_ip() => (self.ip_tos >> 2) as u128,
            IpEcn if self.is_ip() => (self.ip_tos & 3) as u128,
            IpProto if self.is_ip() => proto? as u128,
            Ipv4Src if self.is_ipv4 => self.ipv4_src as u128,
            Ipv4Dst if self.is_ipv4 => self.ipv4_dst as u128,
            Ipv6Src if self.is_ipv6 => self.ipv6_src,
            Ipv6Dst if self.is_ipv6 => self.ipv6_dst,
            Ipv6Flabel if self.is_ipv6 => self.ipv6_flabel as u128,
            TcpSrc if l4 && proto == Some(IPPROTO_TCP) => self.tp_src as u128,
            TcpDst if l4 && proto == Some(IPPROTO_TCP) => self.tp_dst as u128,
            TcpFlags if l4 && proto == Some(IPPROTO_TCP) => self.tcp_flags as u128,
            UdpSrc if l4 && proto == Some(IPPROTO_UDP) => self.tp_src as u128,
            UdpDst if l4 && proto == Some(IPPROTO_UDP) => self.tp_dst as u128,
            SctpSrc if l4 && proto == Some(IPPROTO_SCTP) => self.tp_src as u128,
            SctpDst if l4 && proto == Some(IPPROTO_SCTP) => self.tp_dst as u128,
            Icmpv4Type if l4 && self.is_ipv4 && proto == Some(IPPROTO_ICMP) => self.icmp_type as u128,
            Icmpv4Code if l4 && self.is_ipv4 && proto == Some(IPPROTO_ICMP) => self.icmp_code as u128,
            Icmpv6Type if l4 && self.is_ipv6 && proto == Some(IPPROTO_ICMPV6) => self.icmp_type as u128,
            Icmpv6Code if l4 && self.is_ipv6 && proto == Some(IPPROTO_ICMPV6) => self.icmp_code as u128,
            ArpOp => self.arp?.op as u128,
            ArpSpa => self.arp?.spa as u128,
            ArpTpa => self.arp?.tpa as u128,
            ArpSha => mac_u128(&self.arp?.sha),
            ArpTha => mac_u128(&self.arp?.tha),
            _ => return None,
        })
    }

    /// A flow hash for ECMP-style select, over every field a flow is identified by from
    /// L2 to L4, as Open vSwitch's select groups hash: Ethernet addresses, VLAN and
    /// ethertype; ARP's addresses; IP addresses and protocol; transport ports.  Still per
    /// flow: nothing that changes within a flow (lengths, flags, TTL) is hashed.
    /// Symmetric inputs are not needed: each direction is hashed on its own switch path.
    pub fn flow_hash(&self) -> u64 {
        let mut h = Fnv::new();
        h.u64(mac_u128(&self.eth_src) as u64);
        h.u64(mac_u128(&self.eth_dst) as u64);
        h.u64(self.vlan_tci.map_or(0, |t| (t as u64 & 0x0fff) | 0x1_0000));
        h.u64(self.eth_type as u64);
        if let Some(arp) = &self.arp {
            h.u64(((arp.spa as u64) << 32) | arp.tpa as u64);
            h.u64(arp.op as u64);
            return h.finish();
        }
        if self.is_ipv4 {
            h.u64(self.ipv4_src as u64);
            h.u64(self.ipv4_dst as u64);
        } else if self.is_ipv6 {
            h.u64(self.ipv6_src as u64);
            h.u64((self.ipv6_src >> 64) as u64);
            h.u64(self.ipv6_dst as u64);
            h.u64((self.ipv6_dst >> 64) as u64);
        } else {
            return h.finish();
        }
        h.u64(self.ip_proto.unwrap_or(0) as u64);
        if self.l4.is_some() {
            h.u64(((self.tp_src as u64) << 16) | self.tp_dst as u64);
        }
        h.finish()
    }
}

/// FNV-1a with a final avalanche; deterministic across runs (unlike std's SipHash with
/// random keys), so hash-mode path choice is reproducible for a given seed-free topology.
struct Fnv(u64);
impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn u64(&mut self, v: u64) {
        for b in v.to_le_bytes() {
            self.0 ^= b as u64;
            self.0 = self.0.wrapping_mul(0x100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
}

// ---------------------------------------------------------------------------------------
// Checksums

/// Folds a 32-bit one's-complement sum into 16 bits.
fn fold(mut s: u32) -> u16 {
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for one changed 16-bit word.
pub fn csum_update16(csum: u16, old: u16, new: u16) -> u16 {
    let s = (!csum as u32) + (!old as u32) + (new as u32);
    !fold(s)
}

/// Internet checksum of `b` (used to build and verify headers in tests and packet-outs).
pub fn inet_csum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { (c[0] as u16) << 8 };
        s += w as u32;
    }
    !fold(s)
}

fn rd16(f: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([f[o], f[o + 1]])
}

fn wr16(f: &mut [u8], o: usize, v: u16) {
    f[o..o + 2].copy_from_slice(&v.to_be_bytes());
}

/// Replaces the 16-bit word at `o` and patches the checksum at `csum_off` accordingly.
fn replace16(f: &mut [u8], o: usize, new: u16, csum_off: Option<usize>) {
    let old = rd16(f, o);
    if old == new {
        return;
    }
    wr16(f, o, new);
    if let Some(c) = csum_off {
        let cs = rd16(f, c);
        wr16(f, c, csum_update16(cs, old, new));
    }
}

/// Where the L4 checksum lives, if the transport carries one we must maintain.
fn l4_csum_off(k: &Key, f: &[u8]) -> Option<usize> {
    let l4 = k.l4?;
    match k.ip_proto? {
        IPPROTO_TCP => Some(l4 + 16),
        // A zero UDP checksum over IPv4 means "none" and must stay zero.
        IPPROTO_UDP if k.is_ipv4 && rd16(f, l4 + 6) == 0 => None,
        IPPROTO_UDP => Some(l4 + 6),
        IPPROTO_ICMPV6 => Some(l4 + 2),
        _ => None,
    }
}

/// Sets the IPv4 TOS byte (DSCP/ECN) and patches the header checksum.
pub fn set_ipv4_tos(f: &mut [u8], k: &Key, tos: u8) {
    let l3 = k.l3;
    let old = rd16(f, l3);
    let new = (old & 0xff00) | tos as u16;
    replace16(f, l3, new, Some(l3 + 10));
}

fn set_ipv6_tclass(f: &mut [u8], k: &Key, tc: u8) {
    let l3 = k.l3;
    let w0 = u32::from_be_bytes([f[l3], f[l3 + 1], f[l3 + 2], f[l3 + 3]]);
    let w = (w0 & 0xf00f_ffff) | ((tc as u32) << 20);
    f[l3..l3 + 4].copy_from_slice(&w.to_be_bytes());
}

/// Sets the ECN bits of an IP packet (IPv4: header checksum fixed).
pub fn set_ecn(f: &mut [u8], k: &Key, ecn: u8) {
    let tos = (k.ip_tos & 0xfc) | (ecn & 3);
    if k.is_ipv4 {
        set_ipv4_tos(f, k, tos)
    } else if k.is_ipv6 {
        set_ipv6_tclass(f, k, tos)
    }
}

/// Decrements the IP TTL / hop limit. Returns false when it would reach zero (drop).
pub fn dec_ttl(f: &mut [u8], k: &Key) -> bool {
    set_ttl_inner(f, k, None)
}

pub fn set_ttl(f: &mut [u8], k: &Key, ttl: u8) {
    set_ttl_inner(f, k, Some(ttl));
}

fn set_ttl_inner(f: &mut [u8], k: &Key, ttl: Option<u8>) -> bool {
    if k.is_ipv4 {
        let o = k.l3 + 8;
        let cur = f[o];
        let new = match ttl {
            Some(t) => t,
            None if cur <= 1 => return false,
            None => cur - 1,
        };
        let old16 = rd16(f, o);
        let new16 = ((new as u16) << 8) | (old16 & 0xff);
        replace16(f, o, new16, Some(k.l3 + 10));
        true
    } else if k.is_ipv6 {
        let o = k.l3 + 7;
        let cur = f[o];
        f[o] = match ttl {
            Some(t) => t,
            None if cur <= 1 => return false,
            None => cur - 1,
        };
        true
    } else {
        true
    }
}

/// Applies OXM set_field of `field` to `value` (already validated width). Returns false if
/// the packet lacks the header (the action is then a no-op, as on hardware switches).
pub fn set_field(f: &mut [u8], k: &Key, field: Field, value: &[u8]) -> bool {
    use Field::*;
    if f.len() < 14 || value.len() < field.width() {
        return false;
    }
    let v16 = || u16::from_be_bytes([value[0], value[1]]);
    match field {
        EthDst => f[0..6].copy_from_slice(value),
        EthSrc => f[6..12].copy_from_slice(value),
        VlanVid | VlanPcp => {
            if k.vlan_tci.is_none() {
                return false;
            }
            let tci = rd16(f, 14);
            let tci = if field == VlanVid {
                (tci & 0xf000) | (v16() & 0x0fff)
            } else {
                (tci & 0x1fff) | (((value[0] & 7) as u16) << 13)
            };
            wr16(f, 14, tci);
        }
        IpDscp if k.is_ip() => {
            let tos = (value[0] << 2) | (k.ip_tos & 3);
            if k.is_ipv4 {
                set_ipv4_tos(f, k, tos)
            } else {
                set_ipv6_tclass(f, k, tos)
            }
        }
        IpEcn if k.is_ip() => set_ecn(f, k, value[0]),
        Ipv4Src | Ipv4Dst if k.is_ipv4 => {
            let o = k.l3 + if field == Ipv4Src { 12 } else { 16 };
            let l4c = l4_csum_off(k, f).filter(|_| k.ip_proto != Some(IPPROTO_ICMPV6));
            for i in 0..2 {
                let new = u16::from_be_bytes([value[2 * i], value[2 * i + 1]]);
                // The address is under both the IP header checksum and the L4 pseudo-header.
                let old = rd16(f, o + 2 * i);
                replace16(f, o + 2 * i, new, Some(k.l3 + 10));
                if let Some(c) = l4c {
                    let cs = rd16(f, c);
                    wr16(f, c, csum_update16(cs, old, new));
                }
            }
        }
        Ipv6Src | Ipv6Dst if k.is_ipv6 => {
            let o = k.l3 + if field == Ipv6Src { 8 } else { 24 };
            let l4c = l4_csum_off(k, f);
            for i in 0..8 {
                let new = u16::from_be_bytes([value[2 * i], value[2 * i + 1]]);
                replace16(f, o + 2 * i, new, l4c);
            }
        }
        TcpSrc | TcpDst | UdpSrc | UdpDst | SctpSrc | SctpDst => {
            let Some(l4) = k.l4 else { return false };
            let want = match field {
                TcpSrc | TcpDst => IPPROTO_TCP,
                UdpSrc | UdpDst => IPPROTO_UDP,
                _ => IPPROTO_SCTP,
            };
            if k.ip_proto != Some(want) {
                return false;
            }
            let o = l4 + if matches!(field, TcpSrc | UdpSrc | SctpSrc) { 0 } else { 2 };
            let c = if want == IPPROTO_SCTP { None } else { l4_csum_off(k, f) };
            replace16(f, o, v16(), c);
            if want == IPPROTO_SCTP {
                // SCTP's checksum is a CRC32c over the whole SCTP packet: recompute it.
                set_sctp_crc(f, k, l4);
            }
        }
        EthType => {
            // The ethertype after any VLAN tags: what OXM eth_type means.
            let o = k.l3.checked_sub(2).filter(|&o| o >= 12).unwrap_or(12);
            wr16(f, o, v16());
        }
        IpProto if k.is_ipv4 && f.len() >= k.l3 + 20 => {
            let old = rd16(f, k.l3 + 8); // TTL | protocol
            let new = (old & 0xff00) | value[0] as u16;
            replace16(f, k.l3 + 8, new, Some(k.l3 + 10));
            // The protocol is also in the L4 pseudo-header (as the 16-bit word 0 | proto).
            if let Some(c) = l4_csum_off(k, f) {
                wr16(f, c, csum_update16(rd16(f, c), old & 0xff, value[0] as u16));
            }
        }
        IpProto if k.is_ipv6 && f.len() >= k.l3 + 40 && k.ip_proto == Some(f[k.l3 + 6]) => {
            let old = f[k.l3 + 6] as u16;
            f[k.l3 + 6] = value[0];
            if let Some(c) = l4_csum_off(k, f) {
                wr16(f, c, csum_update16(rd16(f, c), old, value[0] as u16));
            }
        }
        Ipv6Flabel if k.is_ipv6 && f.len() >= k.l3 + 4 => {
            // No IPv6 header checksum; the flow label is not in any pseudo-header.
            let word = u32::from_be_bytes([f[k.l3], f[k.l3 + 1], f[k.l3 + 2], f[k.l3 + 3]]);
            let label = u32::from_be_bytes([0, value[1], value[2], value[3]]) & 0x000f_ffff;
            f[k.l3..k.l3 + 4].copy_from_slice(&((word & 0xfff0_0000) | label).to_be_bytes());
        }
        Icmpv4Type | Icmpv4Code | Icmpv6Type | Icmpv6Code => {
            let Some(l4) = k.l4 else { return false };
            let v4 = matches!(field, Icmpv4Type | Icmpv4Code);
            let ok = if v4 {
                k.is_ipv4 && k.ip_proto == Some(IPPROTO_ICMP)
            } else {
                k.is_ipv6 && k.ip_proto == Some(IPPROTO_ICMPV6)
            };
            if !ok || f.len() < l4 + 4 {
                return false;
            }
            // Type and code are one 16-bit word under the ICMP checksum (at l4 + 2).
            let old = rd16(f, l4);
            let new = if matches!(field, Icmpv4Type | Icmpv6Type) {
                (value[0] as u16) << 8 | (old & 0x00ff)
            } else {
                (old & 0xff00) | value[0] as u16
            };
            replace16(f, l4, new, Some(l4 + 2));
        }
        ArpOp | ArpSpa | ArpTpa | ArpSha | ArpTha => {
            if k.arp.is_none() || f.len() < k.l3 + 28 {
                return false;
            }
            // Ethernet/IPv4 ARP: htype, ptype, hlen, plen, op, sha, spa, tha, tpa.
            let (o, n) = match field {
                ArpOp => (6, 2),
                ArpSha => (8, 6),
                ArpSpa => (14, 4),
                ArpTha => (18, 6),
                _ => (24, 4),
            };
            f[k.l3 + o..k.l3 + o + n].copy_from_slice(&value[..n]);
        }
        _ => return false,
    }
    true
}

/// CRC32c (Castagnoli, reflected), as SCTP uses it (RFC 4960, appendix B).
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}

/// Recomputes the SCTP checksum of the packet whose SCTP header is at `l4`: CRC32c over
/// the SCTP packet (to the end of the IP payload, not Ethernet padding) with the
/// checksum field zero, stored least significant byte first as SCTP does.
fn set_sctp_crc(f: &mut [u8], k: &Key, l4: usize) {
    let end =
        if k.is_ipv4 { k.l3 + rd16(f, k.l3 + 2) as usize } else { k.l3 + 40 + rd16(f, k.l3 + 4) as usize };
    if f.len() < end || end < l4 + 12 {
        return;
    }
    f[l4 + 8..l4 + 12].copy_from_slice(&[0; 4]);
    let crc = crc32c(&f[l4..end]);
    f[l4 + 8..l4 + 12].copy_from_slice(&crc.to_le_bytes());
}

/// Pushes a VLAN tag with TPID `tpid`. The new tag copies VID/PCP from an existing outer
/// tag (OpenFlow 1.3 semantics); otherwise it starts at 0.
pub fn push_vlan(f: &mut Vec<u8>, k: &Key, tpid: u16) {
    if f.len() < 14 {
        return;
    }
    let tci = k.vlan_tci.unwrap_or(0);
    let mut tag = [0u8; 4];
    tag[0..2].copy_from_slice(&tpid.to_be_bytes());
    tag[2..4].copy_from_slice(&tci.to_be_bytes());
    f.splice(12..12, tag);
}

pub fn pop_vlan(f: &mut Vec<u8>, k: &Key) {
    if k.vlan_tci.is_some() && f.len() >= 18 {
        f.drain(12..16);
    }
}

#[cfg(test)]
pub mod testpkt {
    //! Frame builders shared by unit tests.
    use super::*;

    pub fn ipv4_udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, tos: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00];
        let tot = 20 + 8 + payload.len();
        let mut ip = vec![0x45, tos];
        ip.extend_from_slice(&(tot as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 1, 0x40, 0, 64, IPPROTO_UDP, 0, 0]);
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let c = inet_csum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut udp = Vec::new();
        udp.extend_from_slice(&sport.to_be_bytes());
        udp.extend_from_slice(&dport.to_be_bytes());
        udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        udp.extend_from_slice(&[0, 0]);
        udp.extend_from_slice(payload);
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&src);
        pseudo.extend_from_slice(&dst);
        pseudo.extend_from_slice(&[0, IPPROTO_UDP]);
        pseudo.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        pseudo.extend_from_slice(&udp);
        let c = inet_csum(&pseudo);
        udp[6..8].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&udp);
        f
    }

    /// Verifies IPv4 header and UDP checksums of a frame built by `ipv4_udp`.
    pub fn checksums_ok(f: &[u8]) -> bool {
        let k = Key::parse(f, 1);
        let l3 = k.l3;
        if inet_csum(&f[l3..l3 + 20]) != 0 {
            return false;
        }
        let l4 = k.l4.unwrap();
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&f[l3 + 12..l3 + 20]);
        pseudo.extend_from_slice(&[0, f[l3 + 9]]);
        pseudo.extend_from_slice(&((f.len() - l4) as u16).to_be_bytes());
        pseudo.extend_from_slice(&f[l4..]);
        inet_csum(&pseudo) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::testpkt::*;
    use super::*;

    #[test]
    fn parse_udp() {
        let f = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 0x02, b"hello");
        let k = Key::parse(&f, 3);
        assert_eq!(k.get(Field::InPort), Some(3));
        assert_eq!(k.get(Field::EthType), Some(0x0800));
        assert_eq!(k.get(Field::UdpDst), Some(80));
        assert_eq!(k.get(Field::TcpDst), None);
        assert_eq!(k.get(Field::IpEcn), Some(2));
        assert_eq!(k.get(Field::VlanVid), Some(0));
        assert!(checksums_ok(&f));
    }

    #[test]
    fn set_fields_keep_checksums_valid() {
        let mut f = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1234, 80, 0x02, b"hello world");
        let k = Key::parse(&f, 1);
        set_field(&mut f, &k, Field::Ipv4Dst, &[192, 168, 7, 9]);
        let k = Key::parse(&f, 1);
        set_field(&mut f, &k, Field::UdpSrc, &[0x12, 0x34]);
        let k = Key::parse(&f, 1);
        set_ecn(&mut f, &k, 3);
        let k = Key::parse(&f, 1);
        assert!(dec_ttl(&mut f, &k));
        assert!(checksums_ok(&f));
        let k = Key::parse(&f, 1);
        assert_eq!(k.ipv4_dst, 0xc0a8_0709);
        assert_eq!(k.tp_src, 0x1234);
        assert_eq!(k.ip_tos & 3, 3);
        assert_eq!(k.ip_ttl, 63);
    }

    #[test]
    fn vlan_push_pop() {
        let orig = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, b"x");
        let mut f = orig.clone();
        let k = Key::parse(&f, 1);
        push_vlan(&mut f, &k, 0x8100);
        let k = Key::parse(&f, 1);
        assert_eq!(k.get(Field::VlanVid), Some(0x1000));
        set_field(&mut f, &k, Field::VlanVid, &[0x10, 0x05]);
        let k = Key::parse(&f, 1);
        assert_eq!(k.get(Field::VlanVid), Some(0x1005));
        assert_eq!(k.get(Field::EthType), Some(0x0800));
        assert_eq!(k.get(Field::UdpDst), Some(2));
        pop_vlan(&mut f, &k);
        assert_eq!(f, orig);
    }

    #[test]
    fn short_frames_do_not_panic() {
        for n in 0..80 {
            let f = ipv4_udp([1, 2, 3, 4], [5, 6, 7, 8], 1, 2, 0, b"abcdefgh");
            let k = Key::parse(&f[..n.min(f.len())], 1);
            let _ = k.flow_hash();
        }
    }

    fn arp_request(sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&sha);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&sha);
        f.extend_from_slice(&spa);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&tpa);
        f
    }

    fn buckets(frames: &[Vec<u8>]) -> std::collections::HashSet<u64> {
        frames.iter().map(|f| Key::parse(f, 1).flow_hash() % 4).collect()
    }

    #[test]
    fn flow_hash_covers_l2_and_arp_addresses_and_stays_per_flow() {
        // Traffic that differs only in its MAC addresses spreads over buckets...
        let by_mac: Vec<Vec<u8>> = (0..32u8)
            .map(|i| {
                let mut f = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 0, b"x");
                f[11] = i; // eth_src
                f
            })
            .collect();
        assert_eq!(buckets(&by_mac).len(), 4);
        // ... so does ARP that differs only in its protocol addresses ...
        let by_arp: Vec<Vec<u8>> =
            (0..32u8).map(|i| arp_request([0, 0, 0, 0, 0, 1], [10, 0, 0, i], [10, 0, 1, 1])).collect();
        assert_eq!(buckets(&by_arp).len(), 4);
        // ... and one flow's packets hash alike whatever their payload or TTL.
        let a = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 0, b"one");
        let mut b = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 0, b"another payload");
        b[22] = 3; // TTL
        assert_eq!(Key::parse(&a, 1).flow_hash(), Key::parse(&b, 1).flow_hash());
    }

    /// IPv4 (no options) around `l4`, Ethernet in front; the IP checksum is correct.
    fn ipv4_with(proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x08, 0x00];
        let mut ip = vec![0x45, 0];
        ip.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        let c = inet_csum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(l4);
        f
    }

    /// IPv6 around `l4` with a correct L4 checksum at `csum_at` (pseudo-header included).
    fn ipv6_with(proto: u8, l4: &[u8], csum_at: usize) -> Vec<u8> {
        let mut f = vec![0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 1, 0x86, 0xdd];
        let (src, dst) = ([0xfdu8; 16], [0xfeu8; 16]);
        let mut ip = vec![0x61, 0x2a, 0xbc, 0xde]; // traffic class 0x12, flow label 0xabcde
        ip.extend_from_slice(&(l4.len() as u16).to_be_bytes());
        ip.extend_from_slice(&[proto, 64]);
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let mut seg = l4.to_vec();
        let mut pseudo = [src.as_slice(), dst.as_slice()].concat();
        pseudo.extend_from_slice(&(seg.len() as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, proto]);
        pseudo.extend_from_slice(&seg);
        let c = inet_csum(&pseudo);
        seg[csum_at..csum_at + 2].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&seg);
        f
    }

    fn l4_sum_ok_v6(f: &[u8]) -> bool {
        let k = Key::parse(f, 1);
        let l4 = k.l3 + 40; // our frames carry no extension headers
        let mut pseudo = f[k.l3 + 8..k.l3 + 40].to_vec();
        pseudo.extend_from_slice(&((f.len() - l4) as u32).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, f[k.l3 + 6]]);
        pseudo.extend_from_slice(&f[l4..]);
        inet_csum(&pseudo) == 0
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn set_sctp_port_recomputes_the_crc32c() {
        let mut sctp = vec![0x04, 0xd2, 0x00, 0x50, 0, 0, 0, 7, 0, 0, 0, 0];
        sctp.extend_from_slice(&[0, 0, 0, 8, 1, 2, 3, 4]); // one DATA-ish chunk
        let crc = crc32c(&sctp);
        sctp[8..12].copy_from_slice(&crc.to_le_bytes());
        let mut f = ipv4_with(IPPROTO_SCTP, &sctp);
        f.extend_from_slice(&[0; 6]); // Ethernet padding is not part of the packet
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::SctpSrc, &[0x23, 0x28]));
        let l4 = k.l4.unwrap();
        let end = l4 + sctp.len();
        let mut zeroed = f[l4..end].to_vec();
        zeroed[8..12].copy_from_slice(&[0; 4]);
        assert_eq!(f[l4 + 8..l4 + 12], crc32c(&zeroed).to_le_bytes());
        assert_eq!(Key::parse(&f, 1).tp_src, 9000);
    }

    #[test]
    fn set_icmp_type_and_code_keeps_the_checksum_valid() {
        let mut icmp = vec![8, 0, 0, 0, 0, 1, 0, 1, b'p', b'i', b'n', b'g'];
        let c = inet_csum(&icmp);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        let mut f = ipv4_with(IPPROTO_ICMP, &icmp);
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::Icmpv4Type, &[0]));
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::Icmpv4Code, &[3]));
        let k = Key::parse(&f, 1);
        assert_eq!((k.icmp_type, k.icmp_code), (0, 3));
        assert_eq!(inet_csum(&f[k.l4.unwrap()..]), 0);

        let icmp6 = vec![128, 0, 0, 0, 0, 1, 0, 1, b'x', b'y'];
        let mut f = ipv6_with(IPPROTO_ICMPV6, &icmp6, 2);
        assert!(l4_sum_ok_v6(&f));
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::Icmpv6Type, &[129]));
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::Icmpv6Code, &[1]));
        assert!(l4_sum_ok_v6(&f));
        let k = Key::parse(&f, 1);
        assert_eq!((k.icmp_type, k.icmp_code), (129, 1));
    }

    #[test]
    fn set_ip_proto_fixes_both_checksums() {
        let mut f = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, b"payload");
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::IpProto, &[99]));
        assert_eq!(f[k.l3 + 9], 99);
        assert_eq!(inet_csum(&f[k.l3..k.l3 + 20]), 0); // the IP header's checksum
        let l4 = k.l3 + 20; // and the UDP checksum, over a pseudo-header with the new protocol
        let mut pseudo = f[k.l3 + 12..k.l3 + 20].to_vec();
        pseudo.extend_from_slice(&[0, 99]);
        pseudo.extend_from_slice(&((f.len() - l4) as u16).to_be_bytes());
        pseudo.extend_from_slice(&f[l4..]);
        assert_eq!(inet_csum(&pseudo), 0);
        let udp6 = vec![0, 1, 0, 2, 0, 10, 0, 0, b'h', b'i'];
        let mut f = ipv6_with(IPPROTO_UDP, &udp6, 6);
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::IpProto, &[253]));
        assert_eq!(f[k.l3 + 6], 253);
        assert!(l4_sum_ok_v6(&f));
    }

    #[test]
    fn set_eth_type_flow_label_and_arp_fields() {
        let mut f = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, b"x");
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::EthType, &[0x88, 0xb5]));
        assert_eq!(Key::parse(&f, 1).eth_type, 0x88b5);

        let mut f = ipv6_with(IPPROTO_UDP, &[0, 1, 0, 2, 0, 8, 0, 0], 6);
        let k = Key::parse(&f, 1);
        assert!(set_field(&mut f, &k, Field::Ipv6Flabel, &[0, 0x0f, 0x12, 0x34]));
        let k = Key::parse(&f, 1);
        assert_eq!(k.ipv6_flabel, 0xf1234);
        assert_eq!((f[k.l3] >> 4, k.ip_tos), (6, 0x12)); // version, traffic class kept
        assert!(l4_sum_ok_v6(&f));

        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&[0, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0, 0, 0, 0, 0, 0, 10, 0, 0, 2]);
        for (field, value) in [
            (Field::ArpOp, vec![0, 2]),
            (Field::ArpSha, vec![2, 0, 0, 0, 0, 9]),
            (Field::ArpSpa, vec![10, 9, 9, 9]),
            (Field::ArpTha, vec![2, 0, 0, 0, 0, 8]),
            (Field::ArpTpa, vec![10, 8, 8, 8]),
        ] {
            let k = Key::parse(&f, 1);
            assert!(set_field(&mut f, &k, field, &value));
        }
        let arp = Key::parse(&f, 1).arp.unwrap();
        assert_eq!((arp.op, arp.spa, arp.tpa), (2, 0x0a09_0909, 0x0a08_0808));
        assert_eq!((arp.sha, arp.tha), ([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 8]));
    }
}
