//! Top-level message framing: the OpenFlow header, [`Msg`] and its [`Body`] per message
//! type, plus the hello/error helpers of the connection. Each family's body layout lives
//! in its own module; this one dispatches on the header's type.

use super::action::{decode_actions, encode_actions, Action};
use super::consts::*;
use super::flowmod::{FlowMod, FlowRemoved, GroupMod};
use super::multipart::{MpReply, MpRequest};
use super::oxm::Match;
use super::port::PortDesc;
use super::wire::*;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloElem {
    pub typ: u16,
    /// Element body without its 4-byte header, padding stripped.
    pub data: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Hello {
        elements: Vec<HelloElem>,
    },
    Error {
        typ: u16,
        code: u16,
        data: Vec<u8>,
    },
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        data: Vec<u8>,
    },
    FeaturesRequest,
    FeaturesReply {
        datapath_id: u64,
        n_buffers: u32,
        n_tables: u8,
        auxiliary_id: u8,
        capabilities: u32,
    },
    GetConfigRequest,
    GetConfigReply {
        flags: u16,
        miss_send_len: u16,
    },
    SetConfig {
        flags: u16,
        miss_send_len: u16,
    },
    PacketIn {
        buffer_id: u32,
        total_len: u16,
        reason: u8,
        table_id: u8,
        cookie: u64,
        matches: Match,
        data: Vec<u8>,
    },
    FlowRemoved(Box<FlowRemoved>),
    PortStatus {
        reason: u8,
        desc: PortDesc,
    },
    PacketOut {
        buffer_id: u32,
        in_port: u32,
        actions: Vec<Action>,
        data: Vec<u8>,
    },
    FlowMod(Box<FlowMod>),
    GroupMod(GroupMod),
    PortMod {
        port_no: u32,
        hw_addr: [u8; 6],
        config: u32,
        mask: u32,
        advertise: u32,
    },
    TableMod {
        table_id: u8,
        config: u32,
    },
    MultipartRequest {
        flags: u16,
        mp_type: u16,
        req: MpRequest,
    },
    MultipartReply {
        flags: u16,
        reply: MpReply,
    },
    BarrierRequest,
    BarrierReply,
    QueueGetConfigRequest {
        port: u32,
    },
    QueueGetConfigReply {
        port: u32,
    },
    RoleRequest {
        role: u32,
        generation_id: u64,
    },
    RoleReply {
        role: u32,
        generation_id: u64,
    },
    GetAsyncRequest,
    GetAsyncReply {
        masks: [u32; 6],
    },
    SetAsync {
        masks: [u32; 6],
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub xid: u32,
    pub body: Body,
}

impl Body {
    pub fn msg_type(&self) -> u8 {
        match self {
            Body::Hello { .. } => OFPT_HELLO,
            Body::Error { .. } => OFPT_ERROR,
            Body::EchoRequest(_) => OFPT_ECHO_REQUEST,
            Body::EchoReply(_) => OFPT_ECHO_REPLY,
            Body::Experimenter { .. } => OFPT_EXPERIMENTER,
            Body::FeaturesRequest => OFPT_FEATURES_REQUEST,
            Body::FeaturesReply { .. } => OFPT_FEATURES_REPLY,
            Body::GetConfigRequest => OFPT_GET_CONFIG_REQUEST,
            Body::GetConfigReply { .. } => OFPT_GET_CONFIG_REPLY,
            Body::SetConfig { .. } => OFPT_SET_CONFIG,
            Body::PacketIn { .. } => OFPT_PACKET_IN,
            Body::FlowRemoved(_) => OFPT_FLOW_REMOVED,
            Body::PortStatus { .. } => OFPT_PORT_STATUS,
            Body::PacketOut { .. } => OFPT_PACKET_OUT,
            Body::FlowMod(_) => OFPT_FLOW_MOD,
            Body::GroupMod(_) => OFPT_GROUP_MOD,
            Body::PortMod { .. } => OFPT_PORT_MOD,
            Body::TableMod { .. } => OFPT_TABLE_MOD,
            Body::MultipartRequest { .. } => OFPT_MULTIPART_REQUEST,
            Body::MultipartReply { .. } => OFPT_MULTIPART_REPLY,
            Body::BarrierRequest => OFPT_BARRIER_REQUEST,
            Body::BarrierReply => OFPT_BARRIER_REPLY,
            Body::QueueGetConfigRequest { .. } => OFPT_QUEUE_GET_CONFIG_REQUEST,
            Body::QueueGetConfigReply { .. } => OFPT_QUEUE_GET_CONFIG_REPLY,
            Body::RoleRequest { .. } => OFPT_ROLE_REQUEST,
            Body::RoleReply { .. } => OFPT_ROLE_REPLY,
            Body::GetAsyncRequest => OFPT_GET_ASYNC_REQUEST,
            Body::GetAsyncReply { .. } => OFPT_GET_ASYNC_REPLY,
            Body::SetAsync { .. } => OFPT_SET_ASYNC,
        }
    }
}

/// Reads the 8-byte header: (version, type, length, xid).
pub fn parse_header(b: &[u8]) -> Option<(u8, u8, u16, u32)> {
    if b.len() < OFP_HEADER_LEN {
        return None;
    }
    Some((b[0], b[1], u16::from_be_bytes([b[2], b[3]]), u32::from_be_bytes([b[4], b[5], b[6], b[7]])))
}

impl Msg {
    pub fn new(xid: u32, body: Body) -> Self {
        Msg { xid, body }
    }

    /// Serializes the message with a correct length field.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Vec::with_capacity(64);
        w.u8(OFP_VERSION);
        w.u8(self.body.msg_type());
        w.u16(0);
        w.u32(self.xid);
        self.encode_body(&mut w);
        let l = w.len().min(0xffff) as u16;
        w.set_u16(2, l);
        w
    }

    fn encode_body(&self, w: &mut Vec<u8>) {
        match &self.body {
            Body::Hello { elements } => {
                for e in elements {
                    let len = 4 + e.data.len();
                    w.u16(e.typ);
                    w.u16(len as u16);
                    w.extend_from_slice(&e.data);
                    w.pad(pad_to_8(len));
                }
            }
            Body::Error { typ, code, data } => {
                w.u16(*typ);
                w.u16(*code);
                w.extend_from_slice(data);
            }
            Body::EchoRequest(d) | Body::EchoReply(d) => w.extend_from_slice(d),
            Body::Experimenter { experimenter, exp_type, data } => {
                w.u32(*experimenter);
                w.u32(*exp_type);
                w.extend_from_slice(data);
            }
            Body::FeaturesRequest
            | Body::GetConfigRequest
            | Body::BarrierRequest
            | Body::BarrierReply
            | Body::GetAsyncRequest => {}
            Body::FeaturesReply { datapath_id, n_buffers, n_tables, auxiliary_id, capabilities } => {
                w.u64(*datapath_id);
                w.u32(*n_buffers);
                w.u8(*n_tables);
                w.u8(*auxiliary_id);
                w.pad(2);
                w.u32(*capabilities);
                w.u32(0);
            }
            Body::GetConfigReply { flags, miss_send_len } | Body::SetConfig { flags, miss_send_len } => {
                w.u16(*flags);
                w.u16(*miss_send_len);
            }
            Body::PacketIn { buffer_id, total_len, reason, table_id, cookie, matches, data } => {
                w.u32(*buffer_id);
                w.u16(*total_len);
                w.u8(*reason);
                w.u8(*table_id);
                w.u64(*cookie);
                matches.encode(w);
                w.pad(2);
                w.extend_from_slice(data);
            }
            Body::FlowRemoved(f) => f.encode(w),
            Body::PortStatus { reason, desc } => {
                w.u8(*reason);
                w.pad(7);
                desc.encode(w);
            }
            Body::PacketOut { buffer_id, in_port, actions, data } => {
                w.u32(*buffer_id);
                w.u32(*in_port);
                let at = w.len();
                w.u16(0);
                w.pad(6);
                let s = w.len();
                encode_actions(actions, w);
                let l = (w.len() - s) as u16;
                w.set_u16(at, l);
                w.extend_from_slice(data);
            }
            Body::FlowMod(f) => f.encode(w),
            Body::GroupMod(g) => g.encode(w),
            Body::PortMod { port_no, hw_addr, config, mask, advertise } => {
                w.u32(*port_no);
                w.pad(4);
                w.extend_from_slice(hw_addr);
                w.pad(2);
                w.u32(*config);
                w.u32(*mask);
                w.u32(*advertise);
                w.pad(4);
            }
            Body::TableMod { table_id, config } => {
                w.u8(*table_id);
                w.pad(3);
                w.u32(*config);
            }
            Body::MultipartRequest { flags, mp_type, req } => {
                w.u16(*mp_type);
                w.u16(*flags);
                w.pad(4);
                req.encode(w);
            }
            Body::MultipartReply { flags, reply } => {
                w.u16(reply.mp_type());
                w.u16(*flags);
                w.pad(4);
                reply.encode(w);
            }
            Body::QueueGetConfigRequest { port } | Body::QueueGetConfigReply { port } => {
                w.u32(*port);
                w.pad(4);
            }
            Body::RoleRequest { role, generation_id } | Body::RoleReply { role, generation_id } => {
                w.u32(*role);
                w.pad(4);
                w.u64(*generation_id);
            }
            Body::GetAsyncReply { masks } | Body::SetAsync { masks } => {
                for m in masks {
                    w.u32(*m);
                }
            }
        }
    }

    /// Decodes one complete message. The caller has framed it by the header's length, but
    /// the decoder re-checks everything and never trusts a length field.
    pub fn decode(b: &[u8]) -> Res<Msg> {
        let (version, typ, len, xid) = parse_header(b).ok_or(BAD_LEN)?;
        if len as usize != b.len() {
            return Err(BAD_LEN);
        }
        if version != OFP_VERSION && typ != OFPT_HELLO && typ != OFPT_ERROR {
            return Err(OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_BAD_VERSION));
        }
        let mut r = Rd::new(&b[OFP_HEADER_LEN..], BAD_LEN);
        let body = match typ {
            OFPT_HELLO => {
                let mut elements = Vec::new();
                // Elements are advisory: a truncated one ends the list rather than failing
                // the handshake (the spec says to ignore what cannot be understood).
                while r.remaining() >= 4 {
                    let et = r.u16()?;
                    let el = r.u16()? as usize;
                    if el < 4 || r.remaining() < el - 4 {
                        break;
                    }
                    let data = r.bytes(el - 4)?.to_vec();
                    let p = pad_to_8(el).min(r.remaining());
                    r.skip(p)?;
                    elements.push(HelloElem { typ: et, data });
                }
                Body::Hello { elements }
            }
            OFPT_ERROR => Body::Error { typ: r.u16()?, code: r.u16()?, data: r.rest().to_vec() },
            OFPT_ECHO_REQUEST => Body::EchoRequest(r.rest().to_vec()),
            OFPT_ECHO_REPLY => Body::EchoReply(r.rest().to_vec()),
            OFPT_EXPERIMENTER => {
                Body::Experimenter { experimenter: r.u32()?, exp_type: r.u32()?, data: r.rest().to_vec() }
            }
            OFPT_FEATURES_REQUEST => {
                exact(&r, 0)?;
                Body::FeaturesRequest
            }
            OFPT_FEATURES_REPLY => {
                exact(&r, 24)?;
                let datapath_id = r.u64()?;
                let n_buffers = r.u32()?;
                let n_tables = r.u8()?;
                let auxiliary_id = r.u8()?;
                r.skip(2)?;
                let capabilities = r.u32()?;
                Body::FeaturesReply { datapath_id, n_buffers, n_tables, auxiliary_id, capabilities }
            }
            OFPT_GET_CONFIG_REQUEST => {
                exact(&r, 0)?;
                Body::GetConfigRequest
            }
            OFPT_GET_CONFIG_REPLY | OFPT_SET_CONFIG => {
                exact(&r, 4)?;
                let flags = r.u16()?;
                let miss_send_len = r.u16()?;
                if typ == OFPT_SET_CONFIG {
                    Body::SetConfig { flags, miss_send_len }
                } else {
                    Body::GetConfigReply { flags, miss_send_len }
                }
            }
            OFPT_PACKET_IN => {
                let buffer_id = r.u32()?;
                let total_len = r.u16()?;
                let reason = r.u8()?;
                let table_id = r.u8()?;
                let cookie = r.u64()?;
                let matches = Match::decode(&mut r)?;
                r.skip(2)?;
                Body::PacketIn {
                    buffer_id,
                    total_len,
                    reason,
                    table_id,
                    cookie,
                    matches,
                    data: r.rest().to_vec(),
                }
            }
            OFPT_FLOW_REMOVED => {
                let f = FlowRemoved::decode(&mut r)?;
                exact(&r, 0)?;
                Body::FlowRemoved(Box::new(f))
            }
            OFPT_PORT_STATUS => {
                let reason = r.u8()?;
                r.skip(7)?;
                let desc = PortDesc::decode(&mut r)?;
                exact(&r, 0)?;
                Body::PortStatus { reason, desc }
            }
            OFPT_PACKET_OUT => {
                let buffer_id = r.u32()?;
                let in_port = r.u32()?;
                let alen = r.u16()? as usize;
                r.skip(6)?;
                let abytes = r.bytes(alen).map_err(|_| BAD_LEN)?;
                let actions = decode_actions(abytes)?;
                Body::PacketOut { buffer_id, in_port, actions, data: r.rest().to_vec() }
            }
            OFPT_FLOW_MOD => Body::FlowMod(Box::new(FlowMod::decode(&mut r)?)),
            OFPT_GROUP_MOD => Body::GroupMod(GroupMod::decode(&mut r)?),
            OFPT_PORT_MOD => {
                exact(&r, 32)?;
                let port_no = r.u32()?;
                r.skip(4)?;
                let mut hw_addr = [0u8; 6];
                hw_addr.copy_from_slice(r.bytes(6)?);
                r.skip(2)?;
                let config = r.u32()?;
                let mask = r.u32()?;
                let advertise = r.u32()?;
                Body::PortMod { port_no, hw_addr, config, mask, advertise }
            }
            OFPT_TABLE_MOD => {
                exact(&r, 8)?;
                let table_id = r.u8()?;
                r.skip(3)?;
                Body::TableMod { table_id, config: r.u32()? }
            }
            OFPT_MULTIPART_REQUEST => {
                let mp_type = r.u16()?;
                let flags = r.u16()?;
                r.skip(4)?;
                let req = MpRequest::decode(mp_type, &mut r)?;
                Body::MultipartRequest { flags, mp_type, req }
            }
            OFPT_BARRIER_REQUEST => {
                exact(&r, 0)?;
                Body::BarrierRequest
            }
            OFPT_BARRIER_REPLY => {
                exact(&r, 0)?;
                Body::BarrierReply
            }
            OFPT_QUEUE_GET_CONFIG_REQUEST => {
                exact(&r, 8)?;
                Body::QueueGetConfigRequest { port: r.u32()? }
            }
            OFPT_ROLE_REQUEST | OFPT_ROLE_REPLY => {
                exact(&r, 16)?;
                let role = r.u32()?;
                r.skip(4)?;
                let generation_id = r.u64()?;
                if typ == OFPT_ROLE_REQUEST {
                    Body::RoleRequest { role, generation_id }
                } else {
                    Body::RoleReply { role, generation_id }
                }
            }
            OFPT_GET_ASYNC_REQUEST => {
                exact(&r, 0)?;
                Body::GetAsyncRequest
            }
            OFPT_SET_ASYNC | OFPT_GET_ASYNC_REPLY => {
                exact(&r, 24)?;
                let mut masks = [0u32; 6];
                for m in masks.iter_mut() {
                    *m = r.u32()?;
                }
                if typ == OFPT_SET_ASYNC {
                    Body::SetAsync { masks }
                } else {
                    Body::GetAsyncReply { masks }
                }
            }
            _ => return Err(OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_BAD_TYPE)),
        };
        Ok(Msg { xid, body })
    }
}

/// Builds an OFPT_ERROR answering `offending` (the spec asks for at least its first 64
/// bytes so the controller can match the error to its request).
pub fn error_msg(xid: u32, err: OfpErr, offending: &[u8]) -> Msg {
    let n = offending.len().min(64);
    Msg::new(xid, Body::Error { typ: err.typ, code: err.code, data: offending[..n].to_vec() })
}

/// The hello we send: version 4 plus a version bitmap containing only 1.3.
pub fn our_hello(xid: u32) -> Msg {
    Msg::new(
        xid,
        Body::Hello {
            elements: vec![HelloElem {
                typ: OFPHET_VERSIONBITMAP,
                data: (1u32 << OFP_VERSION).to_be_bytes().to_vec(),
            }],
        },
    )
}

/// Does the peer's hello allow OpenFlow 1.3? With a bitmap, bit 4 must be set; without
/// one, the peer's highest version must be at least 1.3 (we then talk 1.3).
pub fn hello_accepts_v13(header_version: u8, elements: &[HelloElem]) -> bool {
    for e in elements {
        if e.typ == OFPHET_VERSIONBITMAP && e.data.len() >= 4 {
            let w0 = u32::from_be_bytes([e.data[0], e.data[1], e.data[2], e.data[3]]);
            return w0 & (1 << OFP_VERSION) != 0;
        }
    }
    header_version >= OFP_VERSION
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn unknown_type_is_bad_type() {
        let b = [4u8, 99, 0, 8, 0, 0, 0, 1];
        assert_eq!(Msg::decode(&b).unwrap_err(), OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_BAD_TYPE));
    }

    #[test]
    fn hello_bitmap() {
        let h = our_hello(1);
        let d = Msg::decode(&h.encode()).unwrap();
        match d.body {
            Body::Hello { elements } => assert!(hello_accepts_v13(4, &elements)),
            _ => panic!(),
        }
        assert!(!hello_accepts_v13(1, &[]));
        assert!(hello_accepts_v13(5, &[]));
    }

    proptest! {
        #[test]
        fn decoder_never_panics(mut b in proptest::collection::vec(any::<u8>(), 0..512), t in 0u8..32) {
            if b.len() >= 8 {
                b[0] = 4;
                b[1] = t;
                let l = b.len() as u16;
                b[2..4].copy_from_slice(&l.to_be_bytes());
            }
            if let Ok(m) = Msg::decode(&b) {
                // Whatever decodes must encode without panicking too.
                let _ = m.encode();
            }
        }
    }
}
