//! Multipart (statistics and description) requests and replies.

use super::consts::*;
use super::flowmod::Bucket;
use super::instruction::Instruction;
use super::oxm::Match;
use super::port::PortDesc;
use super::wire::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStatsRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub matches: Match,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpRequest {
    Desc,
    Flow(FlowStatsRequest),
    Aggregate(FlowStatsRequest),
    Table,
    PortStats {
        port_no: u32,
    },
    Queue {
        port_no: u32,
        queue_id: u32,
    },
    Group {
        group_id: u32,
    },
    GroupDesc,
    GroupFeatures,
    PortDesc,
    /// Any other type, kept raw so the switch can answer BAD_MULTIPART.
    Other {
        body: Vec<u8>,
    },
}

impl MpRequest {
    pub(crate) fn encode(&self, w: &mut Vec<u8>) {
        match self {
            MpRequest::Desc
            | MpRequest::Table
            | MpRequest::GroupDesc
            | MpRequest::GroupFeatures
            | MpRequest::PortDesc => {}
            MpRequest::Flow(f) | MpRequest::Aggregate(f) => {
                w.u8(f.table_id);
                w.pad(3);
                w.u32(f.out_port);
                w.u32(f.out_group);
                w.pad(4);
                w.u64(f.cookie);
                w.u64(f.cookie_mask);
                f.matches.encode(w);
            }
            MpRequest::PortStats { port_no } => {
                w.u32(*port_no);
                w.pad(4);
            }
            MpRequest::Queue { port_no, queue_id } => {
                w.u32(*port_no);
                w.u32(*queue_id);
            }
            MpRequest::Group { group_id } => {
                w.u32(*group_id);
                w.pad(4);
            }
            MpRequest::Other { body } => w.extend_from_slice(body),
        }
    }

    /// The request body after the multipart header, by type.
    pub(crate) fn decode(mp_type: u16, r: &mut Rd) -> Res<MpRequest> {
        Ok(match mp_type {
            OFPMP_DESC | OFPMP_TABLE | OFPMP_GROUP_DESC | OFPMP_GROUP_FEATURES | OFPMP_PORT_DESC => {
                exact(r, 0)?;
                match mp_type {
                    OFPMP_DESC => MpRequest::Desc,
                    OFPMP_TABLE => MpRequest::Table,
                    OFPMP_GROUP_DESC => MpRequest::GroupDesc,
                    OFPMP_GROUP_FEATURES => MpRequest::GroupFeatures,
                    _ => MpRequest::PortDesc,
                }
            }
            OFPMP_FLOW | OFPMP_AGGREGATE => {
                let table_id = r.u8()?;
                r.skip(3)?;
                let out_port = r.u32()?;
                let out_group = r.u32()?;
                r.skip(4)?;
                let cookie = r.u64()?;
                let cookie_mask = r.u64()?;
                let matches = Match::decode(r)?;
                exact(r, 0)?;
                let f = FlowStatsRequest { table_id, out_port, out_group, cookie, cookie_mask, matches };
                if mp_type == OFPMP_FLOW {
                    MpRequest::Flow(f)
                } else {
                    MpRequest::Aggregate(f)
                }
            }
            OFPMP_PORT_STATS => {
                exact(r, 8)?;
                MpRequest::PortStats { port_no: r.u32()? }
            }
            OFPMP_QUEUE => {
                exact(r, 8)?;
                MpRequest::Queue { port_no: r.u32()?, queue_id: r.u32()? }
            }
            OFPMP_GROUP => {
                exact(r, 8)?;
                MpRequest::Group { group_id: r.u32()? }
            }
            _ => MpRequest::Other { body: r.rest().to_vec() },
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matches: Match,
    pub instructions: Vec<Instruction>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortStats {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_frame_err: u64,
    pub rx_over_err: u64,
    pub rx_crc_err: u64,
    pub collisions: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStats {
    pub group_id: u32,
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    /// (packet_count, byte_count) per bucket.
    pub buckets: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDesc {
    pub group_type: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchDesc {
    pub mfr_desc: String,
    pub hw_desc: String,
    pub sw_desc: String,
    pub serial_num: String,
    pub dp_desc: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MpReply {
    Desc(SwitchDesc),
    Flow(Vec<FlowStats>),
    Aggregate { packet_count: u64, byte_count: u64, flow_count: u32 },
    Table(Vec<TableStats>),
    PortStats(Vec<PortStats>),
    PortDesc(Vec<PortDesc>),
    Group(Vec<GroupStats>),
    GroupDesc(Vec<GroupDesc>),
    GroupFeatures { types: u32, capabilities: u32, max_groups: [u32; 4], actions: [u32; 4] },
    Queue,
}

impl MpReply {
    pub fn mp_type(&self) -> u16 {
        match self {
            MpReply::Desc(_) => OFPMP_DESC,
            MpReply::Flow(_) => OFPMP_FLOW,
            MpReply::Aggregate { .. } => OFPMP_AGGREGATE,
            MpReply::Table(_) => OFPMP_TABLE,
            MpReply::PortStats(_) => OFPMP_PORT_STATS,
            MpReply::PortDesc(_) => OFPMP_PORT_DESC,
            MpReply::Group(_) => OFPMP_GROUP,
            MpReply::GroupDesc(_) => OFPMP_GROUP_DESC,
            MpReply::GroupFeatures { .. } => OFPMP_GROUP_FEATURES,
            MpReply::Queue => OFPMP_QUEUE,
        }
    }

    pub(crate) fn encode(&self, w: &mut Vec<u8>) {
        match self {
            MpReply::Desc(d) => {
                put_str(w, &d.mfr_desc, 256);
                put_str(w, &d.hw_desc, 256);
                put_str(w, &d.sw_desc, 256);
                put_str(w, &d.serial_num, 32);
                put_str(w, &d.dp_desc, 256);
            }
            MpReply::Flow(v) => {
                for f in v {
                    let start = w.len();
                    w.u16(0);
                    w.u8(f.table_id);
                    w.pad(1);
                    w.u32(f.duration_sec);
                    w.u32(f.duration_nsec);
                    w.u16(f.priority);
                    w.u16(f.idle_timeout);
                    w.u16(f.hard_timeout);
                    w.u16(f.flags);
                    w.pad(4);
                    w.u64(f.cookie);
                    w.u64(f.packet_count);
                    w.u64(f.byte_count);
                    f.matches.encode(w);
                    for i in &f.instructions {
                        i.encode(w);
                    }
                    let l = (w.len() - start) as u16;
                    w.set_u16(start, l);
                }
            }
            MpReply::Aggregate { packet_count, byte_count, flow_count } => {
                w.u64(*packet_count);
                w.u64(*byte_count);
                w.u32(*flow_count);
                w.pad(4);
            }
            MpReply::Table(v) => {
                for t in v {
                    w.u8(t.table_id);
                    w.pad(3);
                    w.u32(t.active_count);
                    w.u64(t.lookup_count);
                    w.u64(t.matched_count);
                }
            }
            MpReply::PortStats(v) => {
                for p in v {
                    w.u32(p.port_no);
                    w.pad(4);
                    for x in [
                        p.rx_packets,
                        p.tx_packets,
                        p.rx_bytes,
                        p.tx_bytes,
                        p.rx_dropped,
                        p.tx_dropped,
                        p.rx_errors,
                        p.tx_errors,
                        p.rx_frame_err,
                        p.rx_over_err,
                        p.rx_crc_err,
                        p.collisions,
                    ] {
                        w.u64(x);
                    }
                    w.u32(p.duration_sec);
                    w.u32(p.duration_nsec);
                }
            }
            MpReply::PortDesc(v) => {
                for p in v {
                    p.encode(w);
                }
            }
            MpReply::Group(v) => {
                for g in v {
                    w.u16((40 + 16 * g.buckets.len()) as u16);
                    w.pad(2);
                    w.u32(g.group_id);
                    w.u32(g.ref_count);
                    w.pad(4);
                    w.u64(g.packet_count);
                    w.u64(g.byte_count);
                    w.u32(g.duration_sec);
                    w.u32(g.duration_nsec);
                    for (p, b) in &g.buckets {
                        w.u64(*p);
                        w.u64(*b);
                    }
                }
            }
            MpReply::GroupDesc(v) => {
                for g in v {
                    let start = w.len();
                    w.u16(0);
                    w.u8(g.group_type);
                    w.pad(1);
                    w.u32(g.group_id);
                    for b in &g.buckets {
                        b.encode(w);
                    }
                    let l = (w.len() - start) as u16;
                    w.set_u16(start, l);
                }
            }
            MpReply::GroupFeatures { types, capabilities, max_groups, actions } => {
                w.u32(*types);
                w.u32(*capabilities);
                for m in max_groups {
                    w.u32(*m);
                }
                for a in actions {
                    w.u32(*a);
                }
            }
            MpReply::Queue => {}
        }
    }
}
