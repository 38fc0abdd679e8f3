//! Instructions (`ofp_instruction_*`) of flow mods and flow stats.

use super::action::{decode_actions, encode_actions, Action};
use super::consts::*;
use super::wire::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata { metadata: u64, mask: u64 },
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    Meter(u32),
    Experimenter { experimenter: u32, data: Vec<u8> },
}

impl Instruction {
    pub fn encode(&self, w: &mut Vec<u8>) {
        match self {
            Instruction::GotoTable(t) => {
                w.u16(OFPIT_GOTO_TABLE);
                w.u16(8);
                w.u8(*t);
                w.pad(3);
            }
            Instruction::WriteMetadata { metadata, mask } => {
                w.u16(OFPIT_WRITE_METADATA);
                w.u16(24);
                w.pad(4);
                w.u64(*metadata);
                w.u64(*mask);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                let t = if matches!(self, Instruction::WriteActions(_)) {
                    OFPIT_WRITE_ACTIONS
                } else {
                    OFPIT_APPLY_ACTIONS
                };
                let start = w.len();
                w.u16(t);
                w.u16(0);
                w.pad(4);
                encode_actions(a, w);
                let l = (w.len() - start) as u16;
                w.set_u16(start + 2, l);
            }
            Instruction::ClearActions => {
                w.u16(OFPIT_CLEAR_ACTIONS);
                w.u16(8);
                w.pad(4);
            }
            Instruction::Meter(m) => {
                w.u16(OFPIT_METER);
                w.u16(8);
                w.u32(*m);
            }
            Instruction::Experimenter { experimenter, data } => {
                let len = 8 + data.len();
                w.u16(OFPIT_EXPERIMENTER);
                w.u16((len + pad_to_8(len)) as u16);
                w.u32(*experimenter);
                w.extend_from_slice(data);
                w.pad(pad_to_8(len));
            }
        }
    }

    pub(crate) fn decode(r: &mut Rd) -> Res<Instruction> {
        let bad_len = OfpErr::new(OFPET_BAD_INSTRUCTION, OFPBIC_BAD_LEN);
        let typ = r.u16().map_err(|_| bad_len)?;
        let len = r.u16().map_err(|_| bad_len)? as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(bad_len);
        }
        let body = r.bytes(len - 4).map_err(|_| bad_len)?;
        let mut b = Rd::new(body, bad_len);
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(bad_len) };
        Ok(match typ {
            OFPIT_GOTO_TABLE => {
                fixed(8)?;
                Instruction::GotoTable(b.u8()?)
            }
            OFPIT_WRITE_METADATA => {
                fixed(24)?;
                b.skip(4)?;
                Instruction::WriteMetadata { metadata: b.u64()?, mask: b.u64()? }
            }
            OFPIT_WRITE_ACTIONS | OFPIT_APPLY_ACTIONS => {
                b.skip(4)?;
                let acts = decode_actions(b.rest())?;
                if typ == OFPIT_WRITE_ACTIONS {
                    Instruction::WriteActions(acts)
                } else {
                    Instruction::ApplyActions(acts)
                }
            }
            OFPIT_CLEAR_ACTIONS => {
                fixed(8)?;
                Instruction::ClearActions
            }
            OFPIT_METER => {
                fixed(8)?;
                Instruction::Meter(b.u32()?)
            }
            OFPIT_EXPERIMENTER => {
                let experimenter = b.u32()?;
                Instruction::Experimenter { experimenter, data: b.rest().to_vec() }
            }
            _ => return Err(OfpErr::new(OFPET_BAD_INSTRUCTION, OFPBIC_UNKNOWN_INST)),
        })
    }
}

pub(crate) fn decode_instructions(body: &[u8]) -> Res<Vec<Instruction>> {
    let mut r = Rd::new(body, OfpErr::new(OFPET_BAD_INSTRUCTION, OFPBIC_BAD_LEN));
    let mut v = Vec::new();
    while r.remaining() > 0 {
        v.push(Instruction::decode(&mut r)?);
    }
    Ok(v)
}
