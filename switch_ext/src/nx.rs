//! Nicira extensions, the datapath side: which field an NXM/OXM header names, bit-range
//! reads and writes, the checks a flow mod's NX actions pass (Open vSwitch's errors), and
//! the flow a learn action builds from a packet. The wire format is [`crate::ofp::nx`];
//! execution (resubmit, output_reg, installing learned flows) is in [`crate::datapath`].

use crate::flow::{MField, MatchSpec};
use crate::ofp::codec::*;
use crate::ofp::consts::*;
use crate::packet::{Field, Key};

/// A field as an NX action sees it: `bits` low bits of a [`Field`]'s value (NXM_OF_IN_PORT
/// is the low 16 bits of in_port; OXM vlan_vid its 13).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NxField {
    pub field: Field,
    pub bits: u16,
}

/// The NXM class-0 (`NXM_OF_*`) and class-1 (`NXM_NX_*`) fields the switch knows, with
/// their width in bytes.
fn nxm_field(class: u16, n: u8) -> Option<(Field, u8)> {
    use Field::*;
    Some(match (class, n) {
        (NXM_CLASS_0, 0) => (InPort, 2),
        (NXM_CLASS_0, 1) => (EthDst, 6),
        (NXM_CLASS_0, 2) => (EthSrc, 6),
        (NXM_CLASS_0, 3) => (EthType, 2),
        (NXM_CLASS_0, 4) => (VlanTci, 2),
        (NXM_CLASS_0, 6) => (IpProto, 1),
        (NXM_CLASS_0, 7) => (Ipv4Src, 4),
        (NXM_CLASS_0, 8) => (Ipv4Dst, 4),
        (NXM_CLASS_0, 9) => (TcpSrc, 2),
        (NXM_CLASS_0, 10) => (TcpDst, 2),
        (NXM_CLASS_0, 11) => (UdpSrc, 2),
        (NXM_CLASS_0, 12) => (UdpDst, 2),
        (NXM_CLASS_0, 13) => (Icmpv4Type, 1),
        (NXM_CLASS_0, 14) => (Icmpv4Code, 1),
        (NXM_CLASS_0, 15) => (ArpOp, 2),
        (NXM_CLASS_0, 16) => (ArpSpa, 4),
        (NXM_CLASS_0, 17) => (ArpTpa, 4),
        (NXM_CLASS_1, 0..=7) => (Field::reg(n)?, 4),
        (NXM_CLASS_1, 17) => (ArpSha, 6),
        (NXM_CLASS_1, 18) => (ArpTha, 6),
        (NXM_CLASS_1, 19) => (Ipv6Src, 16),
        (NXM_CLASS_1, 20) => (Ipv6Dst, 16),
        (NXM_CLASS_1, 21) => (Icmpv6Type, 1),
        (NXM_CLASS_1, 22) => (Icmpv6Code, 1),
        (NXM_CLASS_1, 27) => (Ipv6Flabel, 4),
        (NXM_CLASS_1, 28) => (IpEcn, 1),
        (NXM_CLASS_1, 34) => (TcpFlags, 2),
        _ => return None,
    })
}

fn value_bit_count(f: Field) -> u16 {
    (128 - f.value_bits().leading_zeros()) as u16
}

/// The field a 32-bit header names: an OXM basic field or an NXM one, without a mask and
/// with its own length. Anything else is `OFPBMC_BAD_FIELD`, as Open vSwitch answers.
pub fn nx_field(h: NxmHeader) -> Result<NxField, OfpErr> {
    let bad = OfpErr::new(OFPET_BAD_MATCH, OFPBMC_BAD_FIELD);
    if h.has_mask() {
        return Err(bad);
    }
    let (field, bytes) = match h.class() {
        OFPXMC_OPENFLOW_BASIC => {
            let f = Field::from_basic(h.field()).ok_or(bad)?;
            (f, f.width() as u8)
        }
        c => nxm_field(c, h.field()).ok_or(bad)?,
    };
    if h.payload_len() != bytes {
        return Err(bad);
    }
    Ok(NxField { field, bits: (bytes as u16 * 8).min(value_bit_count(field)) })
}

/// Fields a set-field, reg_load, reg_move or learn load may write in a packet header.
pub fn settable(f: Field) -> bool {
    use Field::*;
    matches!(
        f,
        EthDst
            | EthSrc
            | VlanVid
            | VlanPcp
            | IpDscp
            | IpEcn
            | Ipv4Src
            | Ipv4Dst
            | TcpSrc
            | TcpDst
            | UdpSrc
            | UdpDst
            | SctpSrc
            | SctpDst
            | Ipv6Src
            | Ipv6Dst
            | EthType
            | IpProto
            | Icmpv4Type
            | Icmpv4Code
            | Icmpv6Type
            | Icmpv6Code
            | ArpOp
            | ArpSpa
            | ArpTpa
            | ArpSha
            | ArpTha
            | Ipv6Flabel
    )
}

/// Writable by an NX action: the pipeline fields (registers, metadata, in_port) and the
/// settable header fields.
pub fn writable(f: Field) -> bool {
    f.reg_index().is_some() || matches!(f, Field::Metadata | Field::InPort) || settable(f)
}

fn set_len() -> OfpErr {
    OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_SET_LEN)
}

fn bad_arg() -> OfpErr {
    OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT)
}

/// `field[ofs..ofs + n_bits - 1]` must be a nonempty range inside the field
/// (`OFPBAC_BAD_SET_LEN` otherwise), have its prerequisites in `m` when given
/// (`OFPBAC_MATCH_INCONSISTENT`) and, for a destination, be writable
/// (`OFPBAC_BAD_SET_ARGUMENT`): Open vSwitch's `mf_check_src`/`mf_check_dst`.
pub fn check_range(
    h: NxmHeader,
    ofs: u16,
    n_bits: u16,
    dst: bool,
    m: Option<&MatchSpec>,
) -> Result<NxField, OfpErr> {
    let f = nx_field(h)?;
    if n_bits == 0 || ofs as u32 + n_bits as u32 > f.bits as u32 {
        return Err(set_len());
    }
    if m.is_some_and(|m| !m.prereqs_ok(f.field)) {
        return Err(OfpErr::new(OFPET_BAD_ACTION, OFPBAC_MATCH_INCONSISTENT));
    }
    if dst && !writable(f.field) {
        return Err(OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_SET_ARGUMENT));
    }
    Ok(f)
}

/// `n` one bits (n <= 128).
pub fn ones(n: u16) -> u128 {
    if n >= 128 {
        u128::MAX
    } else {
        (1u128 << n) - 1
    }
}

/// Bits `ofs..ofs + n` of `v`, shifted down.
pub fn extract(v: u128, ofs: u16, n: u16) -> u128 {
    (v >> ofs) & ones(n)
}

/// `old` with bits `ofs..ofs + n` replaced by the low `n` bits of `bits`.
pub fn deposit(old: u128, ofs: u16, n: u16, bits: u128) -> u128 {
    let m = ones(n) << ofs;
    (old & !m) | ((bits << ofs) & m)
}

/// The field's value in a packet (0 when the packet lacks it, as Open vSwitch reads it).
pub fn read(k: &Key, f: NxField) -> u128 {
    k.get(f.field).unwrap_or(0) & ones(f.bits)
}

/// A 16-bit OpenFlow 1.0 port number as a 32-bit one (reserved ports move up).
pub fn port_from_u16(p: u16) -> u32 {
    if p >= 0xff00 {
        p as u32 | 0xffff_0000
    } else {
        p as u32
    }
}

/// The output port a field's bits hold (16 bits or fewer: an OpenFlow 1.0 number).
pub fn port_from_bits(v: u128, n_bits: u16) -> u32 {
    if n_bits <= 16 {
        port_from_u16(v as u16)
    } else {
        v as u32
    }
}

/// The checks an NX action passes when a flow mod, group mod or packet out carries it;
/// `m` is the flow's match (a flow mod): the fields the action reads or writes must have
/// their prerequisites there, as Open vSwitch checks.
pub fn validate(a: &NxAction, n_tables: u8, m: Option<&MatchSpec>) -> Result<(), OfpErr> {
    match a {
        NxAction::Resubmit { .. }
        | NxAction::ResubmitTable { .. }
        | NxAction::Note(_)
        | NxAction::Exit
        | NxAction::FinTimeout { .. } => Ok(()),
        NxAction::RegLoad { dst, value } => {
            check_range(dst.field, dst.ofs, dst.n_bits, true, m)?;
            if dst.n_bits < 64 && value >> dst.n_bits != 0 {
                return Err(bad_arg());
            }
            Ok(())
        }
        NxAction::RegMove { n_bits, src_ofs, dst_ofs, src, dst } => {
            check_range(*src, *src_ofs, *n_bits, false, m)?;
            check_range(*dst, *dst_ofs, *n_bits, true, m)?;
            Ok(())
        }
        NxAction::OutputReg { src, .. } => {
            check_range(src.field, src.ofs, src.n_bits, false, m)?;
            if src.n_bits > 32 {
                return Err(bad_arg());
            }
            Ok(())
        }
        NxAction::Learn(l) => validate_learn(l, n_tables, m),
    }
}

/// Open vSwitch's `learn_check`: sources against the learning flow's match; match and
/// load destinations against the match the immediate-valued match specs before them
/// build (so a learned tcp_src needs eth_type and ip_proto given as constants first).
fn validate_learn(l: &Learn, n_tables: u8, m: Option<&MatchSpec>) -> Result<(), OfpErr> {
    if l.table_id >= n_tables || l.flags & !(NX_LEARN_F_SEND_FLOW_REM | NX_LEARN_F_DELETE_LEARNED) != 0 {
        return Err(bad_arg());
    }
    let mut imm: Vec<MField> = Vec::new();
    for s in &l.specs {
        if let LearnSrc::Field { field, ofs } = s.src {
            check_range(field, ofs, s.n_bits, false, m)?;
        }
        let dst_match = MatchSpec::from_fields(imm.clone());
        match s.dst {
            LearnDst::Match { field, ofs } => {
                let f = check_range(field, ofs, s.n_bits, false, Some(&dst_match))?;
                if let LearnSrc::Immediate(b) = &s.src {
                    let v = immediate(b) & ones(s.n_bits);
                    match imm.iter_mut().find(|x| x.field == f.field) {
                        Some(x) => {
                            x.value = deposit(x.value, ofs, s.n_bits, v);
                            x.mask |= ones(s.n_bits) << ofs;
                        }
                        None => {
                            imm.push(MField { field: f.field, value: v << ofs, mask: ones(s.n_bits) << ofs })
                        }
                    }
                }
            }
            LearnDst::Load { field, ofs } => {
                check_range(field, ofs, s.n_bits, true, Some(&dst_match))?;
                // The learned flow carries it as a reg_load, whose value is 64 bits.
                if s.n_bits > 64 {
                    return Err(bad_arg());
                }
            }
            LearnDst::Output => {
                if s.n_bits > 32 {
                    return Err(bad_arg());
                }
            }
        }
    }
    Ok(())
}

/// The (cookie, table) of every learn action with `delete_learned` in an instruction list:
/// the learned flows that go when no flow holds such an action any more.
pub fn delete_learned_keys(instrs: &[Instruction], out: &mut Vec<(u64, u8)>) {
    for i in instrs {
        if let Instruction::ApplyActions(acts) = i {
            for a in acts {
                if let Action::Nx(NxAction::Learn(l)) = a {
                    if l.flags & NX_LEARN_F_DELETE_LEARNED != 0 && !out.contains(&(l.cookie, l.table_id)) {
                        out.push((l.cookie, l.table_id));
                    }
                }
            }
        }
    }
}

fn immediate(b: &[u8]) -> u128 {
    b.iter().rev().take(16).rev().fold(0u128, |a, &x| (a << 8) | x as u128)
}

/// What a learn action adds for one packet: the new flow's match and its actions.
/// The action must have passed [`validate`].
pub fn learn_flow(l: &Learn, k: &Key) -> (MatchSpec, Vec<Action>) {
    let mut fields: Vec<MField> = Vec::new();
    let mut actions = Vec::new();
    for s in &l.specs {
        let v = match &s.src {
            LearnSrc::Field { field, ofs } => {
                nx_field(*field).map_or(0, |f| extract(read(k, f), *ofs, s.n_bits))
            }
            LearnSrc::Immediate(b) => immediate(b) & ones(s.n_bits),
        };
        match s.dst {
            LearnDst::Match { field, ofs } => {
                let Ok(f) = nx_field(field) else { continue };
                let mask = ones(s.n_bits) << ofs;
                match fields.iter_mut().find(|m| m.field == f.field) {
                    Some(m) => {
                        m.value = deposit(m.value, ofs, s.n_bits, v);
                        m.mask |= mask;
                    }
                    None => fields.push(MField { field: f.field, value: v << ofs, mask }),
                }
            }
            LearnDst::Load { field, ofs } => actions.push(Action::Nx(NxAction::RegLoad {
                dst: SubField { field, ofs, n_bits: s.n_bits },
                value: v as u64,
            })),
            LearnDst::Output => {
                actions.push(Action::Output { port: port_from_bits(v, s.n_bits), max_len: 0xffff })
            }
        }
    }
    // A whole 16-bit NXM_OF_IN_PORT is an OpenFlow 1.0 port number: the learned flow
    // matches the 32-bit port it stands for (reserved ports move up), as in_port=N.
    for m in &mut fields {
        if m.field == Field::InPort && m.mask == 0xffff {
            m.value = port_from_u16(m.value as u16) as u128;
            m.mask = 0xffff_ffff;
        }
    }
    if l.fin_idle_timeout != 0 || l.fin_hard_timeout != 0 {
        actions.push(Action::Nx(NxAction::FinTimeout {
            fin_idle_timeout: l.fin_idle_timeout,
            fin_hard_timeout: l.fin_hard_timeout,
        }));
    }
    (MatchSpec::from_fields(fields), actions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::testpkt::ipv4_udp;

    const REG0: NxmHeader = NxmHeader::new(NXM_CLASS_1, 0, 4);
    const REG1: NxmHeader = NxmHeader::new(NXM_CLASS_1, 1, 4);
    const NXM_IN_PORT: NxmHeader = NxmHeader::new(NXM_CLASS_0, 0, 2);
    const NXM_IP_SRC: NxmHeader = NxmHeader::new(NXM_CLASS_0, 7, 4);
    const OXM_IN_PORT: NxmHeader = NxmHeader::new(OFPXMC_OPENFLOW_BASIC, 0, 4);

    #[test]
    fn headers_name_fields_with_their_widths() {
        assert_eq!(nx_field(NXM_IN_PORT).unwrap(), NxField { field: Field::InPort, bits: 16 });
        assert_eq!(nx_field(OXM_IN_PORT).unwrap(), NxField { field: Field::InPort, bits: 32 });
        assert_eq!(nx_field(REG1).unwrap(), NxField { field: Field::Reg1, bits: 32 });
        let tcp_flags = NxmHeader::new(NXM_CLASS_1, 34, 2);
        assert_eq!(nx_field(tcp_flags).unwrap(), NxField { field: Field::TcpFlags, bits: 12 });
        let vid = NxmHeader::new(OFPXMC_OPENFLOW_BASIC, Field::VlanVid as u8, 2);
        assert_eq!(nx_field(vid).unwrap().bits, 13);
        let bad = OfpErr::new(OFPET_BAD_MATCH, OFPBMC_BAD_FIELD);
        assert_eq!(nx_field(NxmHeader::new(NXM_CLASS_1, 8, 4)).unwrap_err(), bad); // reg8
        assert_eq!(nx_field(NxmHeader::new(NXM_CLASS_0, 0, 4)).unwrap_err(), bad); // wrong length
        assert_eq!(nx_field(NxmHeader(REG0.0 | 0x100)).unwrap_err(), bad); // masked
    }

    #[test]
    fn bit_ranges_copy_exactly_the_bits_named() {
        assert_eq!(extract(0xabcd, 4, 8), 0xbc);
        assert_eq!(deposit(0xffff_ffff, 8, 8, 0x12), 0xffff_12ff);
        assert_eq!(deposit(0, 0, 16, 0x1_2345), 0x2345); // only n bits are written
        assert_eq!(deposit(0, 120, 8, 0xff), 0xff << 120);
        assert_eq!(ones(128), u128::MAX);
        assert_eq!(extract(u128::MAX, 0, 128), u128::MAX);
    }

    #[test]
    fn ranges_are_checked_like_ovs() {
        assert!(check_range(REG0, 16, 16, true, None).is_ok());
        assert_eq!(check_range(REG0, 17, 16, true, None).unwrap_err(), set_len());
        assert_eq!(check_range(REG0, 0, 0, true, None).unwrap_err(), set_len());
        assert_eq!(check_range(NXM_IN_PORT, 0, 17, false, None).unwrap_err(), set_len());
        let tci = NxmHeader::new(NXM_CLASS_0, 4, 2);
        assert!(check_range(tci, 0, 16, false, None).is_ok());
        assert_eq!(
            check_range(tci, 0, 16, true, None).unwrap_err(),
            OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_SET_ARGUMENT)
        );
        let load = |value| NxAction::RegLoad { dst: SubField { field: REG0, ofs: 0, n_bits: 4 }, value };
        assert!(validate(&load(15), 8, None).is_ok());
        assert_eq!(validate(&load(16), 8, None).unwrap_err(), bad_arg());
    }

    fn learn(specs: Vec<LearnSpec>) -> Learn {
        Learn {
            idle_timeout: 5,
            hard_timeout: 0,
            priority: 10,
            cookie: 0x77,
            flags: 0,
            table_id: 1,
            fin_idle_timeout: 0,
            fin_hard_timeout: 0,
            specs,
        }
    }

    #[test]
    fn learn_builds_the_key_from_the_packet() {
        let f = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000, 0, b"x");
        let mut k = Key::parse(&f, 3);
        k.regs[1] = 0xdead_beef;
        let l = learn(vec![
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Immediate(vec![8, 0]),
                dst: LearnDst::Match { field: NxmHeader::new(NXM_CLASS_0, 3, 2), ofs: 0 },
            },
            // The source's address becomes the learned flow's destination match.
            LearnSpec {
                n_bits: 32,
                src: LearnSrc::Field { field: NXM_IP_SRC, ofs: 0 },
                dst: LearnDst::Match { field: NxmHeader::new(NXM_CLASS_0, 8, 4), ofs: 0 },
            },
            // Two specs on one register: low and high halves from different sources.
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Field { field: REG1, ofs: 16 },
                dst: LearnDst::Match { field: REG0, ofs: 0 },
            },
            LearnSpec {
                n_bits: 8,
                src: LearnSrc::Immediate(vec![0, 0x5a]),
                dst: LearnDst::Match { field: REG0, ofs: 24 },
            },
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Field { field: NXM_IN_PORT, ofs: 0 },
                dst: LearnDst::Load { field: REG1, ofs: 0 },
            },
            LearnSpec {
                n_bits: 16,
                src: LearnSrc::Field { field: NXM_IN_PORT, ofs: 0 },
                dst: LearnDst::Output,
            },
        ]);
        validate(&NxAction::Learn(Box::new(l.clone())), 4, None).unwrap();
        let (m, acts) = learn_flow(&l, &k);
        let get = |f: Field| m.fields.iter().find(|x| x.field == f).copied().unwrap();
        assert_eq!(get(Field::EthType), MField { field: Field::EthType, value: 0x0800, mask: 0xffff });
        assert_eq!(get(Field::Ipv4Dst).value, 0x0a00_0001);
        assert_eq!(get(Field::Reg0), MField { field: Field::Reg0, value: 0x5a00_dead, mask: 0xff00_ffff });
        assert_eq!(
            acts,
            vec![
                Action::Nx(NxAction::RegLoad { dst: SubField { field: REG1, ofs: 0, n_bits: 16 }, value: 3 }),
                Action::Output { port: 3, max_len: 0xffff },
            ]
        );
        // The learned flow matches its own reverse packet and shows as OXM TLVs.
        let back = ipv4_udp([10, 0, 0, 2], [10, 0, 0, 1], 2000, 1000, 0, b"y");
        let mut kb = Key::parse(&back, 1);
        kb.regs[0] = 0x5a12_dead;
        assert!(m.matches(&kb));
        kb.regs[0] = 0x5b12_dead;
        assert!(!m.matches(&kb));
        assert_eq!(m.raw.fields.len(), 3);
        assert!(m.raw.fields.iter().any(|o| o.class == NXM_CLASS_1 && o.field == 0 && o.mask.is_some()));
    }

    #[test]
    fn a_learned_16_bit_in_port_is_the_32_bit_port() {
        let f = ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, 0, b"");
        let l = learn(vec![LearnSpec {
            n_bits: 16,
            src: LearnSrc::Field { field: NXM_IN_PORT, ofs: 0 },
            dst: LearnDst::Match { field: NXM_IN_PORT, ofs: 0 },
        }]);
        let (m, _) = learn_flow(&l, &Key::parse(&f, 7));
        assert_eq!(m.fields, vec![MField { field: Field::InPort, value: 7, mask: 0xffff_ffff }]);
        assert_eq!(m.raw.fields, vec![Oxm::basic(0, vec![0, 0, 0, 7], None)]);
        // OFPP_LOCAL as an OpenFlow 1.0 number (0xfffe).
        let (m, _) = learn_flow(&l, &Key::parse(&f, 0xffff_fffe));
        assert_eq!(m.fields[0].value, 0xffff_fffe);
    }

    #[test]
    fn learn_checks_its_table_flags_and_widths() {
        let ok = learn(vec![]);
        assert!(validate(&NxAction::Learn(Box::new(ok.clone())), 4, None).is_ok());
        let far = Learn { table_id: 4, ..ok.clone() };
        assert_eq!(validate(&NxAction::Learn(Box::new(far)), 4, None).unwrap_err(), bad_arg());
        let write_result = Learn { flags: 4, ..ok.clone() };
        assert_eq!(validate(&NxAction::Learn(Box::new(write_result)), 4, None).unwrap_err(), bad_arg());
        let delete_learned = Learn { flags: 3, ..ok.clone() };
        assert!(validate(&NxAction::Learn(Box::new(delete_learned)), 4, None).is_ok());
        let wide = learn(vec![LearnSpec {
            n_bits: 17,
            src: LearnSrc::Field { field: NXM_IN_PORT, ofs: 0 },
            dst: LearnDst::Load { field: REG0, ofs: 0 },
        }]);
        assert_eq!(validate(&NxAction::Learn(Box::new(wide)), 4, None).unwrap_err(), set_len());
        assert_eq!(port_from_bits(0xfffd, 16), OFPP_CONTROLLER);
        assert_eq!(port_from_bits(7, 32), 7);
    }
}
