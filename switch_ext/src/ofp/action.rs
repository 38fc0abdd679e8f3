//! Actions (`ofp_action_*`): apply/write-actions lists, packet-out and bucket actions.

use super::consts::*;
use super::nx::{NxAction, NX_EXPERIMENTER_ID};
use super::oxm::Oxm;
use super::wire::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Output {
        port: u32,
        max_len: u16,
    },
    CopyTtlOut,
    CopyTtlIn,
    SetMplsTtl(u8),
    DecMplsTtl,
    PushVlan(u16),
    PopVlan,
    PushMpls(u16),
    PopMpls(u16),
    SetQueue(u32),
    Group(u32),
    SetNwTtl(u8),
    DecNwTtl,
    SetField(Oxm),
    PushPbb(u16),
    PopPbb,
    /// A Nicira extension action (experimenter 0x00002320), decoded.
    Nx(NxAction),
    /// Any other experimenter's action, kept raw (the datapath refuses it).
    Experimenter {
        experimenter: u32,
        data: Vec<u8>,
    },
}

impl Action {
    pub fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        let hdr = |w: &mut Vec<u8>, t: u16, l: u16| {
            w.u16(t);
            w.u16(l);
        };
        match self {
            Action::Output { port, max_len } => {
                hdr(w, OFPAT_OUTPUT, 16);
                w.u32(*port);
                w.u16(*max_len);
                w.pad(6);
            }
            Action::CopyTtlOut => {
                hdr(w, OFPAT_COPY_TTL_OUT, 8);
                w.pad(4)
            }
            Action::CopyTtlIn => {
                hdr(w, OFPAT_COPY_TTL_IN, 8);
                w.pad(4)
            }
            Action::SetMplsTtl(t) => {
                hdr(w, OFPAT_SET_MPLS_TTL, 8);
                w.u8(*t);
                w.pad(3)
            }
            Action::DecMplsTtl => {
                hdr(w, OFPAT_DEC_MPLS_TTL, 8);
                w.pad(4)
            }
            Action::PushVlan(e) | Action::PushMpls(e) | Action::PopMpls(e) | Action::PushPbb(e) => {
                let t = match self {
                    Action::PushVlan(_) => OFPAT_PUSH_VLAN,
                    Action::PushMpls(_) => OFPAT_PUSH_MPLS,
                    Action::PopMpls(_) => OFPAT_POP_MPLS,
                    _ => OFPAT_PUSH_PBB,
                };
                hdr(w, t, 8);
                w.u16(*e);
                w.pad(2)
            }
            Action::PopVlan => {
                hdr(w, OFPAT_POP_VLAN, 8);
                w.pad(4)
            }
            Action::PopPbb => {
                hdr(w, OFPAT_POP_PBB, 8);
                w.pad(4)
            }
            Action::SetQueue(q) => {
                hdr(w, OFPAT_SET_QUEUE, 8);
                w.u32(*q)
            }
            Action::Group(g) => {
                hdr(w, OFPAT_GROUP, 8);
                w.u32(*g)
            }
            Action::SetNwTtl(t) => {
                hdr(w, OFPAT_SET_NW_TTL, 8);
                w.u8(*t);
                w.pad(3)
            }
            Action::DecNwTtl => {
                hdr(w, OFPAT_DEC_NW_TTL, 8);
                w.pad(4)
            }
            Action::SetField(oxm) => {
                let len = 4 + oxm.encoded_len();
                let total = len + pad_to_8(len);
                hdr(w, OFPAT_SET_FIELD, total as u16);
                oxm.encode(w);
                w.pad(pad_to_8(len));
            }
            Action::Nx(a) => a.encode(w),
            Action::Experimenter { experimenter, data } => {
                let len = 8 + data.len();
                let total = len + pad_to_8(len);
                hdr(w, OFPAT_EXPERIMENTER, total as u16);
                w.u32(*experimenter);
                w.extend_from_slice(data);
                w.pad(pad_to_8(len));
            }
        }
        debug_assert_eq!((w.len() - start) % 8, 0);
    }

    pub(crate) fn decode(r: &mut Rd) -> Res<Action> {
        let bad_len = OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_LEN);
        let typ = r.u16().map_err(|_| bad_len)?;
        let len = r.u16().map_err(|_| bad_len)? as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(bad_len);
        }
        let body = r.bytes(len - 4).map_err(|_| bad_len)?;
        let mut b = Rd::new(body, bad_len);
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(bad_len) };
        let a = match typ {
            OFPAT_OUTPUT => {
                fixed(16)?;
                Action::Output { port: b.u32()?, max_len: b.u16()? }
            }
            OFPAT_COPY_TTL_OUT => {
                fixed(8)?;
                Action::CopyTtlOut
            }
            OFPAT_COPY_TTL_IN => {
                fixed(8)?;
                Action::CopyTtlIn
            }
            OFPAT_SET_MPLS_TTL => {
                fixed(8)?;
                Action::SetMplsTtl(b.u8()?)
            }
            OFPAT_DEC_MPLS_TTL => {
                fixed(8)?;
                Action::DecMplsTtl
            }
            OFPAT_PUSH_VLAN => {
                fixed(8)?;
                Action::PushVlan(b.u16()?)
            }
            OFPAT_POP_VLAN => {
                fixed(8)?;
                Action::PopVlan
            }
            OFPAT_PUSH_MPLS => {
                fixed(8)?;
                Action::PushMpls(b.u16()?)
            }
            OFPAT_POP_MPLS => {
                fixed(8)?;
                Action::PopMpls(b.u16()?)
            }
            OFPAT_SET_QUEUE => {
                fixed(8)?;
                Action::SetQueue(b.u32()?)
            }
            OFPAT_GROUP => {
                fixed(8)?;
                Action::Group(b.u32()?)
            }
            OFPAT_SET_NW_TTL => {
                fixed(8)?;
                Action::SetNwTtl(b.u8()?)
            }
            OFPAT_DEC_NW_TTL => {
                fixed(8)?;
                Action::DecNwTtl
            }
            OFPAT_PUSH_PBB => {
                fixed(8)?;
                Action::PushPbb(b.u16()?)
            }
            OFPAT_POP_PBB => {
                fixed(8)?;
                Action::PopPbb
            }
            OFPAT_SET_FIELD => {
                let set_len = OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_SET_LEN);
                let mut ob = Rd::new(body, set_len);
                let oxm = Oxm::decode(&mut ob, set_len)?;
                // What follows the TLV must be padding only, and no more than needed.
                if ob.remaining() >= 8 {
                    return Err(set_len);
                }
                Action::SetField(oxm)
            }
            OFPAT_EXPERIMENTER => {
                let experimenter = b.u32()?;
                if experimenter == NX_EXPERIMENTER_ID {
                    Action::Nx(NxAction::decode(b.rest(), len)?)
                } else {
                    Action::Experimenter { experimenter, data: b.rest().to_vec() }
                }
            }
            _ => return Err(OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_TYPE)),
        };
        Ok(a)
    }
}

pub fn encode_actions(actions: &[Action], w: &mut Vec<u8>) {
    for a in actions {
        a.encode(w);
    }
}

pub(crate) fn decode_actions(body: &[u8]) -> Res<Vec<Action>> {
    let mut r = Rd::new(body, OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_LEN));
    let mut v = Vec::new();
    while r.remaining() > 0 {
        v.push(Action::decode(&mut r)?);
    }
    Ok(v)
}
