//! Flow and group table modifications: OFPT_FLOW_MOD, OFPT_GROUP_MOD (with their
//! buckets) and OFPT_FLOW_REMOVED, the flow table's answer.

use super::action::{decode_actions, encode_actions, Action};
use super::consts::*;
use super::instruction::{decode_instructions, Instruction};
use super::oxm::Match;
use super::wire::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub matches: Match,
    pub instructions: Vec<Instruction>,
}

impl FlowMod {
    /// An OFPFC_ADD into table 0 at `priority` with nothing else set: no cookie, match,
    /// instructions, timeouts or flags, no buffer, any out port and group. Change the rest
    /// with struct update syntax (`FlowMod { table_id: 3, ..FlowMod::add(100) }`).
    pub fn add(priority: u16) -> FlowMod {
        FlowMod {
            cookie: 0,
            cookie_mask: 0,
            table_id: 0,
            command: OFPFC_ADD,
            idle_timeout: 0,
            hard_timeout: 0,
            priority,
            buffer_id: OFP_NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: 0,
            matches: Match::default(),
            instructions: vec![],
        }
    }

    pub(crate) fn encode(&self, w: &mut Vec<u8>) {
        w.u64(self.cookie);
        w.u64(self.cookie_mask);
        w.u8(self.table_id);
        w.u8(self.command);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u16(self.priority);
        w.u32(self.buffer_id);
        w.u32(self.out_port);
        w.u32(self.out_group);
        w.u16(self.flags);
        w.pad(2);
        self.matches.encode(w);
        for i in &self.instructions {
            i.encode(w);
        }
    }

    pub(crate) fn decode(r: &mut Rd) -> Res<FlowMod> {
        let cookie = r.u64()?;
        let cookie_mask = r.u64()?;
        let table_id = r.u8()?;
        let command = r.u8()?;
        let idle_timeout = r.u16()?;
        let hard_timeout = r.u16()?;
        let priority = r.u16()?;
        let buffer_id = r.u32()?;
        let out_port = r.u32()?;
        let out_group = r.u32()?;
        let flags = r.u16()?;
        r.skip(2)?;
        let matches = Match::decode(r)?;
        let instructions = decode_instructions(r.rest())?;
        Ok(FlowMod {
            cookie,
            cookie_mask,
            table_id,
            command,
            idle_timeout,
            hard_timeout,
            priority,
            buffer_id,
            out_port,
            out_group,
            flags,
            matches,
            instructions,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

impl Bucket {
    pub(crate) fn encode(&self, w: &mut Vec<u8>) {
        let start = w.len();
        w.u16(0);
        w.u16(self.weight);
        w.u32(self.watch_port);
        w.u32(self.watch_group);
        w.pad(4);
        encode_actions(&self.actions, w);
        let l = (w.len() - start) as u16;
        w.set_u16(start, l);
    }

    pub(crate) fn decode(r: &mut Rd) -> Res<Bucket> {
        let bad = OfpErr::new(OFPET_GROUP_MOD_FAILED, OFPGMFC_BAD_BUCKET);
        let len = r.u16().map_err(|_| bad)? as usize;
        if len < 16 {
            return Err(bad);
        }
        let body = r.bytes(len - 2).map_err(|_| bad)?;
        let mut b = Rd::new(body, bad);
        let weight = b.u16()?;
        let watch_port = b.u32()?;
        let watch_group = b.u32()?;
        b.skip(4)?;
        Ok(Bucket { weight, watch_port, watch_group, actions: decode_actions(b.rest())? })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMod {
    pub command: u16,
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

impl GroupMod {
    pub(crate) fn encode(&self, w: &mut Vec<u8>) {
        w.u16(self.command);
        w.u8(self.group_type);
        w.pad(1);
        w.u32(self.group_id);
        for b in &self.buckets {
            b.encode(w);
        }
    }

    pub(crate) fn decode(r: &mut Rd) -> Res<GroupMod> {
        let command = r.u16()?;
        let group_type = r.u8()?;
        r.skip(1)?;
        let group_id = r.u32()?;
        let mut buckets = Vec::new();
        let bad = OfpErr::new(OFPET_GROUP_MOD_FAILED, OFPGMFC_BAD_BUCKET);
        let mut br = Rd::new(r.rest(), bad);
        while br.remaining() > 0 {
            buckets.push(Bucket::decode(&mut br)?);
        }
        Ok(GroupMod { command, group_type, group_id, buckets })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved {
    pub cookie: u64,
    pub priority: u16,
    pub reason: u8,
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matches: Match,
}

impl FlowRemoved {
    pub(crate) fn encode(&self, w: &mut Vec<u8>) {
        w.u64(self.cookie);
        w.u16(self.priority);
        w.u8(self.reason);
        w.u8(self.table_id);
        w.u32(self.duration_sec);
        w.u32(self.duration_nsec);
        w.u16(self.idle_timeout);
        w.u16(self.hard_timeout);
        w.u64(self.packet_count);
        w.u64(self.byte_count);
        self.matches.encode(w);
    }

    /// The body after the header; the caller checks that nothing follows.
    pub(crate) fn decode(r: &mut Rd) -> Res<FlowRemoved> {
        Ok(FlowRemoved {
            cookie: r.u64()?,
            priority: r.u16()?,
            reason: r.u8()?,
            table_id: r.u8()?,
            duration_sec: r.u32()?,
            duration_nsec: r.u32()?,
            idle_timeout: r.u16()?,
            hard_timeout: r.u16()?,
            packet_count: r.u64()?,
            byte_count: r.u64()?,
            matches: Match::decode(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofp::message::{Body, Msg};
    use crate::ofp::oxm::Oxm;

    fn roundtrip(m: &Msg) {
        let b = m.encode();
        let d = Msg::decode(&b).expect("decode");
        assert_eq!(&d, m);
        assert_eq!(d.encode(), b);
    }

    #[test]
    fn flow_mod_roundtrip() {
        let fm = FlowMod {
            cookie: 7,
            cookie_mask: 0,
            table_id: 0,
            command: OFPFC_ADD,
            idle_timeout: 10,
            hard_timeout: 0,
            priority: 100,
            buffer_id: OFP_NO_BUFFER,
            out_port: OFPP_ANY,
            out_group: OFPG_ANY,
            flags: OFPFF_SEND_FLOW_REM,
            matches: Match {
                fields: vec![
                    Oxm::basic(0, vec![0, 0, 0, 1], None),
                    Oxm::basic(3, vec![0, 0, 0, 0, 0, 1], Some(vec![0xff; 6])),
                ],
            },
            instructions: vec![
                Instruction::ApplyActions(vec![
                    Action::SetField(Oxm::basic(6, vec![0x10, 0x05], None)),
                    Action::Output { port: 2, max_len: 0xffe5 },
                ]),
                Instruction::GotoTable(1),
            ],
        };
        roundtrip(&Msg::new(42, Body::FlowMod(Box::new(fm))));
    }

    #[test]
    fn group_mod_roundtrip() {
        let g = GroupMod {
            command: OFPGC_ADD,
            group_type: OFPGT_SELECT,
            group_id: 5,
            buckets: vec![
                Bucket {
                    weight: 1,
                    watch_port: OFPP_ANY,
                    watch_group: OFPG_ANY,
                    actions: vec![Action::Output { port: 1, max_len: 0 }],
                },
                Bucket {
                    weight: 2,
                    watch_port: 2,
                    watch_group: OFPG_ANY,
                    actions: vec![Action::DecNwTtl, Action::Output { port: 2, max_len: 0 }],
                },
            ],
        };
        roundtrip(&Msg::new(1, Body::GroupMod(g)));
    }
}
