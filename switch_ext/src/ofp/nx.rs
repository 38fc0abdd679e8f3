//! Nicira extension actions (`OFPAT_EXPERIMENTER`, experimenter `0x00002320`): the subset
//! Open vSwitch and Ryu's `nx_actions` speak that the switch implements (README "Nicira
//! extensions"): resubmit, resubmit-table, reg_load, reg_move, output_reg, learn,
//! fin_timeout, note and exit.
//!
//! Wire layout (ovs `nx-match.h`/`ofp-actions.c`): every action starts with
//! `ofp_action_experimenter_header` (type 0xffff, len, experimenter) and a 16-bit
//! `subtype`, then a subtype-specific body, zero-padded to a multiple of 8. Fields are
//! named by 32-bit NXM/OXM headers (`class:16 field:7 hasmask:1 length:8`). Bit ranges
//! are `ofs_nbits = ofs << 6 | (n_bits - 1)` in reg_load and output_reg.
//!
//! Decoding is strict so that everything accepted re-encodes byte-identically: reserved
//! and padding bytes must be zero (`OFPBAC_BAD_ARGUMENT`), fixed-size actions must have
//! their size and a learn action no more padding than needed (`OFPBAC_BAD_LEN`), and an
//! unknown subtype is `OFPBAC_BAD_EXP_TYPE`. What a field header names and whether a bit
//! range fits is the datapath's check (`crate::nx`), as in Open vSwitch.

use super::consts::*;
use super::wire::*;

pub const NX_EXPERIMENTER_ID: u32 = 0x0000_2320;

pub const NXAST_RESUBMIT: u16 = 1;
pub const NXAST_REG_MOVE: u16 = 6;
pub const NXAST_REG_LOAD: u16 = 7;
pub const NXAST_NOTE: u16 = 8;
pub const NXAST_RESUBMIT_TABLE: u16 = 14;
pub const NXAST_OUTPUT_REG: u16 = 15;
pub const NXAST_LEARN: u16 = 16;
pub const NXAST_EXIT: u16 = 17;
pub const NXAST_FIN_TIMEOUT: u16 = 19;

/// NXM class 0 (`NXM_OF_*`) and 1 (`NXM_NX_*`, registers among them).
pub const NXM_CLASS_0: u16 = 0x0000;
pub const NXM_CLASS_1: u16 = 0x0001;

/// `NX_LEARN_F_SEND_FLOW_REM`: the learned flow has `OFPFF_SEND_FLOW_REM`.
pub const NX_LEARN_F_SEND_FLOW_REM: u16 = 1;
/// `NX_LEARN_F_DELETE_LEARNED`: when the last flow holding such a learn action goes, the
/// flows it learned (its table and cookie) go too.
pub const NX_LEARN_F_DELETE_LEARNED: u16 = 2;

/// The 16-bit form of `OFPP_IN_PORT` a resubmit uses for "keep the packet's in_port".
pub const NX_RESUBMIT_IN_PORT: u16 = 0xfff8;
/// Resubmit-table's "the current table".
pub const NX_RESUBMIT_CURRENT_TABLE: u8 = 0xff;

fn bad_len() -> OfpErr {
    OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_LEN)
}

fn bad_arg() -> OfpErr {
    OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_ARGUMENT)
}

/// A 32-bit NXM/OXM field header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NxmHeader(pub u32);

impl NxmHeader {
    pub const fn new(class: u16, field: u8, len: u8) -> Self {
        NxmHeader(((class as u32) << 16) | ((field as u32) << 9) | len as u32)
    }
    pub const fn class(self) -> u16 {
        (self.0 >> 16) as u16
    }
    pub const fn field(self) -> u8 {
        ((self.0 >> 9) & 0x7f) as u8
    }
    pub const fn has_mask(self) -> bool {
        self.0 & 0x100 != 0
    }
    /// The payload length in bytes (value, plus mask when present).
    pub const fn payload_len(self) -> u8 {
        self.0 as u8
    }
}

/// `field[ofs .. ofs + n_bits - 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubField {
    pub field: NxmHeader,
    pub ofs: u16,
    pub n_bits: u16,
}

/// Packs a bit range as reg_load and output_reg carry it (`ofs` < 1024, `n_bits` 1..=64:
/// the values the decoder yields; others are truncated to their fields, never a panic).
pub fn ofs_nbits(ofs: u16, n_bits: u16) -> u16 {
    ((ofs & 0x3ff) << 6) | (n_bits.wrapping_sub(1) & 0x3f)
}

fn split_ofs_nbits(v: u16) -> (u16, u16) {
    (v >> 6, (v & 0x3f) + 1)
}

/// Where a learn spec takes its bits from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnSrc {
    /// `field[ofs..]` of the packet being processed.
    Field { field: NxmHeader, ofs: u16 },
    /// A constant, `(n_bits + 15) / 16 * 2` bytes big-endian.
    Immediate(Vec<u8>),
}

/// What a learn spec does with them in the new flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LearnDst {
    /// Match `field[ofs..]` against the bits.
    Match { field: NxmHeader, ofs: u16 },
    /// A reg_load of the bits into `field[ofs..]`.
    Load { field: NxmHeader, ofs: u16 },
    /// An output to the port the bits hold.
    Output,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnSpec {
    pub n_bits: u16,
    pub src: LearnSrc,
    pub dst: LearnDst,
}

impl LearnSpec {
    fn encode(&self, w: &mut Vec<u8>) {
        let src_type = u16::from(matches!(self.src, LearnSrc::Immediate(_)));
        let dst_type = match self.dst {
            LearnDst::Match { .. } => 0,
            LearnDst::Load { .. } => 1,
            LearnDst::Output => 2,
        };
        w.u16((src_type << 13) | (dst_type << 11) | self.n_bits);
        match &self.src {
            LearnSrc::Field { field, ofs } => {
                w.u32(field.0);
                w.u16(*ofs);
            }
            LearnSrc::Immediate(v) => w.extend_from_slice(v),
        }
        match self.dst {
            LearnDst::Match { field, ofs } | LearnDst::Load { field, ofs } => {
                w.u32(field.0);
                w.u16(ofs);
            }
            LearnDst::Output => {}
        }
    }

    /// One spec after its (nonzero) header.
    fn decode(hdr: u16, r: &mut Rd) -> Res<LearnSpec> {
        if hdr & 0xc000 != 0 || hdr & 0x400 != 0 {
            // Reserved bits (OVS keeps n_bits to 10 bits).
            return Err(bad_arg());
        }
        let n_bits = hdr & 0x3ff;
        let immediate = hdr & 0x2000 != 0;
        let dst_type = (hdr >> 11) & 3;
        if n_bits == 0 || dst_type == 3 {
            return Err(bad_arg());
        }
        let src = if immediate {
            LearnSrc::Immediate(r.bytes(n_bits.div_ceil(16) as usize * 2)?.to_vec())
        } else {
            LearnSrc::Field { field: NxmHeader(r.u32()?), ofs: r.u16()? }
        };
        let dst = match dst_type {
            0 => LearnDst::Match { field: NxmHeader(r.u32()?), ofs: r.u16()? },
            1 => LearnDst::Load { field: NxmHeader(r.u32()?), ofs: r.u16()? },
            _ => LearnDst::Output,
        };
        Ok(LearnSpec { n_bits, src, dst })
    }
}

/// NXAST_LEARN: add or refresh a flow built from the packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learn {
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub cookie: u64,
    pub flags: u16,
    pub table_id: u8,
    pub fin_idle_timeout: u16,
    pub fin_hard_timeout: u16,
    pub specs: Vec<LearnSpec>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NxAction {
    /// Look the packet up again, with `in_port` replaced (0xfff8 = keep), in the current table.
    Resubmit {
        in_port: u16,
    },
    /// The same in `table_id` (0xff = the current table).
    ResubmitTable {
        in_port: u16,
        table_id: u8,
    },
    /// `load:value->dst[ofs..]`.
    RegLoad {
        dst: SubField,
        value: u64,
    },
    /// `move:src[src_ofs..]->dst[dst_ofs..]`, `n_bits` bits.
    RegMove {
        n_bits: u16,
        src_ofs: u16,
        dst_ofs: u16,
        src: NxmHeader,
        dst: NxmHeader,
    },
    /// `output:src[ofs..]`.
    OutputReg {
        src: SubField,
        max_len: u16,
    },
    Learn(Box<Learn>),
    /// On a TCP FIN or RST, lower the flow's idle/hard timeouts to these (0: leave).
    FinTimeout {
        fin_idle_timeout: u16,
        fin_hard_timeout: u16,
    },
    /// Does nothing; the bytes after the subtype, padding included, kept for re-encoding.
    Note(Vec<u8>),
    /// Stop executing actions (the action set still runs).
    Exit,
}

impl NxAction {
    pub fn subtype(&self) -> u16 {
        match self {
            NxAction::Resubmit { .. } => NXAST_RESUBMIT,
            NxAction::ResubmitTable { .. } => NXAST_RESUBMIT_TABLE,
            NxAction::RegLoad { .. } => NXAST_REG_LOAD,
            NxAction::RegMove { .. } => NXAST_REG_MOVE,
            NxAction::OutputReg { .. } => NXAST_OUTPUT_REG,
            NxAction::Learn(_) => NXAST_LEARN,
            NxAction::FinTimeout { .. } => NXAST_FIN_TIMEOUT,
            NxAction::Note(_) => NXAST_NOTE,
            NxAction::Exit => NXAST_EXIT,
        }
    }

    /// The whole action: experimenter header, subtype, body, zero padding.
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        w.u16(OFPAT_EXPERIMENTER);
        w.u16(0);
        w.u32(NX_EXPERIMENTER_ID);
        w.u16(self.subtype());
        match self {
            NxAction::Resubmit { in_port } => {
                w.u16(*in_port);
                w.pad(4);
            }
            NxAction::ResubmitTable { in_port, table_id } => {
                w.u16(*in_port);
                w.u8(*table_id);
                w.pad(3);
            }
            NxAction::RegLoad { dst, value } => {
                w.u16(ofs_nbits(dst.ofs, dst.n_bits));
                w.u32(dst.field.0);
                w.u64(*value);
            }
            NxAction::RegMove { n_bits, src_ofs, dst_ofs, src, dst } => {
                w.u16(*n_bits);
                w.u16(*src_ofs);
                w.u16(*dst_ofs);
                w.u32(src.0);
                w.u32(dst.0);
            }
            NxAction::OutputReg { src, max_len } => {
                w.u16(ofs_nbits(src.ofs, src.n_bits));
                w.u32(src.field.0);
                w.u16(*max_len);
                w.pad(6);
            }
            NxAction::Learn(l) => {
                w.u16(l.idle_timeout);
                w.u16(l.hard_timeout);
                w.u16(l.priority);
                w.u64(l.cookie);
                w.u16(l.flags);
                w.u8(l.table_id);
                w.pad(1);
                w.u16(l.fin_idle_timeout);
                w.u16(l.fin_hard_timeout);
                for s in &l.specs {
                    s.encode(w);
                }
            }
            NxAction::FinTimeout { fin_idle_timeout, fin_hard_timeout } => {
                w.u16(*fin_idle_timeout);
                w.u16(*fin_hard_timeout);
                w.pad(2);
            }
            NxAction::Note(b) => w.extend_from_slice(b),
            NxAction::Exit => w.pad(6),
        }
        let len = w.len() - start;
        w.pad(pad_to_8(len));
        let total = (w.len() - start) as u16;
        w.set_u16(start + 2, total);
    }

    /// The action body after the experimenter id; `len` is the action's length field.
    pub(crate) fn decode(body: &[u8], len: usize) -> Res<NxAction> {
        let mut r = Rd::new(body, bad_len());
        let subtype = r.u16()?;
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(bad_len()) };
        let zeros = |b: &[u8]| if b.iter().all(|&x| x == 0) { Ok(()) } else { Err(bad_arg()) };
        let a = match subtype {
            NXAST_RESUBMIT => {
                fixed(16)?;
                let in_port = r.u16()?;
                zeros(r.rest())?;
                NxAction::Resubmit { in_port }
            }
            NXAST_RESUBMIT_TABLE => {
                fixed(16)?;
                let in_port = r.u16()?;
                let table_id = r.u8()?;
                zeros(r.rest())?;
                NxAction::ResubmitTable { in_port, table_id }
            }
            NXAST_REG_LOAD => {
                fixed(24)?;
                let (ofs, n_bits) = split_ofs_nbits(r.u16()?);
                let field = NxmHeader(r.u32()?);
                NxAction::RegLoad { dst: SubField { field, ofs, n_bits }, value: r.u64()? }
            }
            NXAST_REG_MOVE => {
                fixed(24)?;
                NxAction::RegMove {
                    n_bits: r.u16()?,
                    src_ofs: r.u16()?,
                    dst_ofs: r.u16()?,
                    src: NxmHeader(r.u32()?),
                    dst: NxmHeader(r.u32()?),
                }
            }
            NXAST_OUTPUT_REG => {
                fixed(24)?;
                let (ofs, n_bits) = split_ofs_nbits(r.u16()?);
                let field = NxmHeader(r.u32()?);
                let max_len = r.u16()?;
                zeros(r.rest())?;
                NxAction::OutputReg { src: SubField { field, ofs, n_bits }, max_len }
            }
            NXAST_LEARN => {
                if len < 32 {
                    return Err(bad_len());
                }
                let idle_timeout = r.u16()?;
                let hard_timeout = r.u16()?;
                let priority = r.u16()?;
                let cookie = r.u64()?;
                let flags = r.u16()?;
                let table_id = r.u8()?;
                zeros(&[r.u8()?])?;
                let fin_idle_timeout = r.u16()?;
                let fin_hard_timeout = r.u16()?;
                let mut specs = Vec::new();
                let mut sr = Rd::new(r.rest(), bad_len());
                while sr.remaining() >= 2 {
                    let hdr = sr.u16()?;
                    if hdr == 0 {
                        break; // padding: the rest must be zeros
                    }
                    specs.push(LearnSpec::decode(hdr, &mut sr)?);
                }
                let rest = sr.rest();
                zeros(rest)?;
                // Only the padding the encoder writes, so the action re-encodes exactly.
                let used = 32 + specs.iter().map(spec_len).sum::<usize>();
                if len != used + pad_to_8(used) {
                    return Err(bad_len());
                }
                NxAction::Learn(Box::new(Learn {
                    idle_timeout,
                    hard_timeout,
                    priority,
                    cookie,
                    flags,
                    table_id,
                    fin_idle_timeout,
                    fin_hard_timeout,
                    specs,
                }))
            }
            NXAST_FIN_TIMEOUT => {
                fixed(16)?;
                let fin_idle_timeout = r.u16()?;
                let fin_hard_timeout = r.u16()?;
                zeros(r.rest())?;
                NxAction::FinTimeout { fin_idle_timeout, fin_hard_timeout }
            }
            NXAST_NOTE => NxAction::Note(r.rest().to_vec()),
            NXAST_EXIT => {
                fixed(16)?;
                zeros(r.rest())?;
                NxAction::Exit
            }
            _ => return Err(OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_EXP_TYPE)),
        };
        Ok(a)
    }
}

fn spec_len(s: &LearnSpec) -> usize {
    let src = match &s.src {
        LearnSrc::Field { .. } => 6,
        LearnSrc::Immediate(v) => v.len(),
    };
    let dst = if s.dst == LearnDst::Output { 0 } else { 6 };
    2 + src + dst
}

#[cfg(test)]
mod tests {
    use super::*;

    const REG0: NxmHeader = NxmHeader::new(NXM_CLASS_1, 0, 4);
    const NXM_IN_PORT: NxmHeader = NxmHeader::new(NXM_CLASS_0, 0, 2);

    fn roundtrip(a: &NxAction) -> Vec<u8> {
        let mut w = Vec::new();
        a.encode(&mut w);
        assert_eq!(w.len() % 8, 0);
        assert_eq!(u16::from_be_bytes([w[2], w[3]]) as usize, w.len());
        let back = NxAction::decode(&w[8..], w.len()).unwrap();
        assert_eq!(&back, a);
        w
    }

    #[test]
    fn header_fields() {
        assert_eq!(REG0.0, 0x0001_0004);
        assert_eq!(NXM_IN_PORT.0, 0x0000_0002);
        let h = NxmHeader(0x8000_0004); // OXM in_port
        assert_eq!((h.class(), h.field(), h.has_mask(), h.payload_len()), (0x8000, 0, false, 4));
        assert_eq!(ofs_nbits(4, 28), (4 << 6) | 27);
        assert_eq!(split_ofs_nbits(ofs_nbits(4, 28)), (4, 28));
        assert_eq!(split_ofs_nbits(ofs_nbits(0, 64)), (0, 64));
    }

    #[test]
    fn every_action_roundtrips() {
        let learn = Learn {
            idle_timeout: 10,
            hard_timeout: 0,
            priority: 5,
            cookie: 7,
            flags: NX_LEARN_F_SEND_FLOW_REM,
            table_id: 2,
            fin_idle_timeout: 1,
            fin_hard_timeout: 2,
            specs: vec![
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Immediate(vec![8, 0]),
                    dst: LearnDst::Match { field: NxmHeader::new(NXM_CLASS_0, 3, 2), ofs: 0 },
                },
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Field { field: NXM_IN_PORT, ofs: 0 },
                    dst: LearnDst::Load { field: REG0, ofs: 0 },
                },
                LearnSpec {
                    n_bits: 16,
                    src: LearnSrc::Field { field: NXM_IN_PORT, ofs: 0 },
                    dst: LearnDst::Output,
                },
            ],
        };
        for a in [
            NxAction::Resubmit { in_port: NX_RESUBMIT_IN_PORT },
            NxAction::ResubmitTable { in_port: 3, table_id: 2 },
            NxAction::RegLoad { dst: SubField { field: REG0, ofs: 3, n_bits: 5 }, value: 17 },
            NxAction::RegMove { n_bits: 16, src_ofs: 0, dst_ofs: 16, src: NXM_IN_PORT, dst: REG0 },
            NxAction::OutputReg { src: SubField { field: REG0, ofs: 0, n_bits: 16 }, max_len: 128 },
            NxAction::Learn(Box::new(learn)),
            NxAction::FinTimeout { fin_idle_timeout: 1, fin_hard_timeout: 3 },
            NxAction::Note(vec![1, 2, 3, 0, 0, 0]),
            NxAction::Exit,
        ] {
            roundtrip(&a);
        }
    }

    #[test]
    fn learn_spec_kinds_parse_to_what_they_say() {
        // n_bits 16, immediate source, match destination: 0x2010.
        let b = [0x20, 0x10, 0x08, 0x00, 0x00, 0x00, 0x06, 0x02, 0x00, 0x00];
        let mut r = Rd::new(&b[2..], bad_len());
        let s = LearnSpec::decode(0x2010, &mut r).unwrap();
        assert_eq!(s.n_bits, 16);
        assert_eq!(s.src, LearnSrc::Immediate(vec![8, 0]));
        assert_eq!(s.dst, LearnDst::Match { field: NxmHeader(0x0000_0602), ofs: 0 });
        // Field source, output destination: 0x1010.
        let b = [0x80, 0x00, 0x00, 0x04, 0x00, 0x00];
        let s = LearnSpec::decode(0x1010, &mut Rd::new(&b, bad_len())).unwrap();
        assert_eq!(
            (s.src, s.dst),
            (LearnSrc::Field { field: NxmHeader(0x8000_0004), ofs: 0 }, LearnDst::Output)
        );
        // dst type 3 and reserved bits are bad arguments; a truncated spec is a bad length.
        assert_eq!(LearnSpec::decode(0x1810, &mut Rd::new(&b, bad_len())).unwrap_err(), bad_arg());
        assert_eq!(LearnSpec::decode(0x4010, &mut Rd::new(&b, bad_len())).unwrap_err(), bad_arg());
        assert_eq!(LearnSpec::decode(0x0010, &mut Rd::new(&b[..3], bad_len())).unwrap_err(), bad_len());
    }

    #[test]
    fn malformed_actions_get_the_ovs_errors() {
        let mut w = Vec::new();
        NxAction::ResubmitTable { in_port: 1, table_id: 1 }.encode(&mut w);
        // Unknown subtype.
        let mut u = w.clone();
        u[9] = 99;
        assert_eq!(
            NxAction::decode(&u[8..], 16).unwrap_err(),
            OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_EXP_TYPE)
        );
        // Nonzero padding.
        let mut p = w.clone();
        p[15] = 1;
        assert_eq!(NxAction::decode(&p[8..], 16).unwrap_err(), bad_arg());
        // A fixed-size action of another size.
        let mut long = w.clone();
        long.extend_from_slice(&[0; 8]);
        assert_eq!(NxAction::decode(&long[8..], 24).unwrap_err(), bad_len());
        // A learn action with a spec cut short, and with 8 bytes of extra padding.
        let mut l = Vec::new();
        NxAction::Learn(Box::new(Learn {
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 1,
            cookie: 0,
            flags: 0,
            table_id: 1,
            fin_idle_timeout: 0,
            fin_hard_timeout: 0,
            specs: vec![LearnSpec {
                n_bits: 32,
                src: LearnSrc::Field { field: REG0, ofs: 0 },
                dst: LearnDst::Match { field: REG0, ofs: 0 },
            }],
        }))
        .encode(&mut l);
        assert_eq!(l.len(), 48);
        assert_eq!(NxAction::decode(&l[8..40], 40).unwrap_err(), bad_len());
        let mut padded = l.clone();
        padded.extend_from_slice(&[0; 8]);
        assert_eq!(NxAction::decode(&padded[8..], 56).unwrap_err(), bad_len());
        assert_eq!(NxAction::decode(&[0], 8).unwrap_err(), bad_len());
    }
}
