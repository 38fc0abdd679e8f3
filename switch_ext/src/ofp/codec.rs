//! OpenFlow 1.3 message decoder and encoder.
//!
//! The decoder turns one complete message (header included) into a [`Msg`]; it never
//! panics on arbitrary input (see the proptest in this module and `tests/fuzz_decoder.rs`)
//! and reports malformed input as the OFPT_ERROR type/code the spec prescribes. The encoder
//! is the exact inverse for everything the decoder accepts: padding is written as zeros and
//! lengths are recomputed, so a message serialized by Ryu re-encodes byte-identically
//! (checked against vectors from Ryu's own serializer in `tests/vectors.rs`).

use super::consts::*;

/// An OFPT_ERROR (type, code) pair; the decoder's and the switch's error currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfpErr {
    pub typ: u16,
    pub code: u16,
}

impl OfpErr {
    pub const fn new(typ: u16, code: u16) -> Self {
        OfpErr { typ, code }
    }
}

pub type Res<T> = Result<T, OfpErr>;

const BAD_LEN: OfpErr = OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_BAD_LEN);

/// Bounds-checked big-endian reader; every read failure maps to the given error.
struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
    err: OfpErr,
}

impl<'a> Rd<'a> {
    fn new(b: &'a [u8], err: OfpErr) -> Self {
        Rd { b, pos: 0, err }
    }
    fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
    fn bytes(&mut self, n: usize) -> Res<&'a [u8]> {
        if self.remaining() < n {
            return Err(self.err);
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn skip(&mut self, n: usize) -> Res<()> {
        self.bytes(n).map(|_| ())
    }
    fn u8(&mut self) -> Res<u8> {
        Ok(self.bytes(1)?[0])
    }
    fn u16(&mut self) -> Res<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Res<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Res<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.pos..];
        self.pos = self.b.len();
        s
    }
}

/// Big-endian writer helpers on a Vec.
pub(crate) trait Wr {
    fn u8(&mut self, v: u8);
    fn u16(&mut self, v: u16);
    fn u32(&mut self, v: u32);
    fn u64(&mut self, v: u64);
    fn pad(&mut self, n: usize);
    fn set_u16(&mut self, at: usize, v: u16);
}

impl Wr for Vec<u8> {
    fn u8(&mut self, v: u8) {
        self.push(v)
    }
    fn u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn pad(&mut self, n: usize) {
        self.resize(self.len() + n, 0)
    }
    fn set_u16(&mut self, at: usize, v: u16) {
        self[at..at + 2].copy_from_slice(&v.to_be_bytes())
    }
}

fn pad_to_8(n: usize) -> usize {
    (8 - n % 8) % 8
}

fn fixed_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

fn put_str(w: &mut Vec<u8>, s: &str, n: usize) {
    // Leave room for the terminating NUL the spec requires.
    let b = s.as_bytes();
    let k = b.len().min(n - 1);
    w.extend_from_slice(&b[..k]);
    w.pad(n - k);
}

// ---------------------------------------------------------------------------------------
// OXM

/// One OXM TLV, kept raw so it re-encodes exactly; [`crate::flow`] interprets it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Oxm {
    pub class: u16,
    pub field: u8,
    /// Experimenter id for class 0xffff (e.g. ONF's tcp_flags).
    pub experimenter: Option<u32>,
    pub value: Vec<u8>,
    pub mask: Option<Vec<u8>>,
}

impl Oxm {
    pub fn basic(field: u8, value: Vec<u8>, mask: Option<Vec<u8>>) -> Self {
        Oxm { class: OFPXMC_OPENFLOW_BASIC, field, experimenter: None, value, mask }
    }

    fn encoded_len(&self) -> usize {
        4 + self.payload_len()
    }

    fn payload_len(&self) -> usize {
        self.experimenter.map_or(0, |_| 4) + self.value.len() + self.mask.as_ref().map_or(0, |m| m.len())
    }

    pub fn encode(&self, w: &mut Vec<u8>) {
        w.u16(self.class);
        w.u8((self.field << 1) | u8::from(self.mask.is_some()));
        w.u8(self.payload_len() as u8);
        if let Some(e) = self.experimenter {
            w.u32(e);
        }
        w.extend_from_slice(&self.value);
        if let Some(m) = &self.mask {
            w.extend_from_slice(m);
        }
    }

    /// Decodes one TLV; `err_len` is reported for truncated or inconsistent lengths.
    fn decode(r: &mut Rd, err_len: OfpErr) -> Res<Oxm> {
        let class = r.u16()?;
        let fh = r.u8()?;
        let len = r.u8()? as usize;
        let payload = r.bytes(len).map_err(|_| err_len)?;
        let hasmask = fh & 1 == 1;
        let field = fh >> 1;
        let (experimenter, body) = if class == OFPXMC_EXPERIMENTER {
            if payload.len() < 4 {
                return Err(err_len);
            }
            (Some(u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])), &payload[4..])
        } else {
            (None, payload)
        };
        if hasmask {
            if body.len() % 2 != 0 || body.is_empty() {
                return Err(err_len);
            }
            let h = body.len() / 2;
            Ok(Oxm { class, field, experimenter, value: body[..h].to_vec(), mask: Some(body[h..].to_vec()) })
        } else {
            Ok(Oxm { class, field, experimenter, value: body.to_vec(), mask: None })
        }
    }
}

/// ofp_match of type OXM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    pub fields: Vec<Oxm>,
}

impl Match {
    pub fn encode(&self, w: &mut Vec<u8>) {
        let len = 4 + self.fields.iter().map(Oxm::encoded_len).sum::<usize>();
        w.u16(OFPMT_OXM);
        w.u16(len as u16);
        for f in &self.fields {
            f.encode(w);
        }
        w.pad(pad_to_8(len));
    }

    fn decode(r: &mut Rd) -> Res<Match> {
        let bad_len = OfpErr::new(OFPET_BAD_MATCH, OFPBMC_BAD_LEN);
        let typ = r.u16().map_err(|_| bad_len)?;
        let len = r.u16().map_err(|_| bad_len)? as usize;
        if typ != OFPMT_OXM {
            return Err(OfpErr::new(OFPET_BAD_MATCH, OFPBMC_BAD_TYPE));
        }
        if len < 4 {
            return Err(bad_len);
        }
        let body = r.bytes(len - 4).map_err(|_| bad_len)?;
        r.skip(pad_to_8(len)).map_err(|_| bad_len)?;
        let mut br = Rd::new(body, bad_len);
        let mut fields = Vec::new();
        while br.remaining() > 0 {
            fields.push(Oxm::decode(&mut br, bad_len)?);
        }
        Ok(Match { fields })
    }
}

// ---------------------------------------------------------------------------------------
// Actions and instructions

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Output { port: u32, max_len: u16 },
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
    Experimenter { experimenter: u32, data: Vec<u8> },
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

    fn decode(r: &mut Rd) -> Res<Action> {
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
                Action::Experimenter { experimenter, data: b.rest().to_vec() }
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

fn decode_actions(body: &[u8]) -> Res<Vec<Action>> {
    let mut r = Rd::new(body, OfpErr::new(OFPET_BAD_ACTION, OFPBAC_BAD_LEN));
    let mut v = Vec::new();
    while r.remaining() > 0 {
        v.push(Action::decode(&mut r)?);
    }
    Ok(v)
}

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

    fn decode(r: &mut Rd) -> Res<Instruction> {
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

fn decode_instructions(body: &[u8]) -> Res<Vec<Instruction>> {
    let mut r = Rd::new(body, OfpErr::new(OFPET_BAD_INSTRUCTION, OFPBIC_BAD_LEN));
    let mut v = Vec::new();
    while r.remaining() > 0 {
        v.push(Instruction::decode(&mut r)?);
    }
    Ok(v)
}

// ---------------------------------------------------------------------------------------
// Message bodies

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HelloElem {
    pub typ: u16,
    /// Element body without its 4-byte header, padding stripped.
    pub data: Vec<u8>,
}

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

impl Bucket {
    fn encode(&self, w: &mut Vec<u8>) {
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

    fn decode(r: &mut Rd) -> Res<Bucket> {
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

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortDesc {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    pub curr_speed: u32,
    pub max_speed: u32,
}

impl PortDesc {
    fn encode(&self, w: &mut Vec<u8>) {
        w.u32(self.port_no);
        w.pad(4);
        w.extend_from_slice(&self.hw_addr);
        w.pad(2);
        put_str(w, &self.name, 16);
        for v in [
            self.config,
            self.state,
            self.curr,
            self.advertised,
            self.supported,
            self.peer,
            self.curr_speed,
            self.max_speed,
        ] {
            w.u32(v);
        }
    }

    fn decode(r: &mut Rd) -> Res<PortDesc> {
        let port_no = r.u32()?;
        r.skip(4)?;
        let mut hw_addr = [0u8; 6];
        hw_addr.copy_from_slice(r.bytes(6)?);
        r.skip(2)?;
        let name = fixed_str(r.bytes(16)?);
        Ok(PortDesc {
            port_no,
            hw_addr,
            name,
            config: r.u32()?,
            state: r.u32()?,
            curr: r.u32()?,
            advertised: r.u32()?,
            supported: r.u32()?,
            peer: r.u32()?,
            curr_speed: r.u32()?,
            max_speed: r.u32()?,
        })
    }
}

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

    fn encode(&self, w: &mut Vec<u8>) {
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
            Body::FlowRemoved(f) => {
                w.u64(f.cookie);
                w.u16(f.priority);
                w.u8(f.reason);
                w.u8(f.table_id);
                w.u32(f.duration_sec);
                w.u32(f.duration_nsec);
                w.u16(f.idle_timeout);
                w.u16(f.hard_timeout);
                w.u64(f.packet_count);
                w.u64(f.byte_count);
                f.matches.encode(w);
            }
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
            Body::FlowMod(f) => {
                w.u64(f.cookie);
                w.u64(f.cookie_mask);
                w.u8(f.table_id);
                w.u8(f.command);
                w.u16(f.idle_timeout);
                w.u16(f.hard_timeout);
                w.u16(f.priority);
                w.u32(f.buffer_id);
                w.u32(f.out_port);
                w.u32(f.out_group);
                w.u16(f.flags);
                w.pad(2);
                f.matches.encode(w);
                for i in &f.instructions {
                    i.encode(w);
                }
            }
            Body::GroupMod(g) => {
                w.u16(g.command);
                w.u8(g.group_type);
                w.pad(1);
                w.u32(g.group_id);
                for b in &g.buckets {
                    b.encode(w);
                }
            }
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
                match req {
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
        let exact = |r: &Rd, n: usize| if r.remaining() == n { Ok(()) } else { Err(BAD_LEN) };
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
                let f = FlowRemoved {
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
                    matches: Match::decode(&mut r)?,
                };
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
            OFPT_FLOW_MOD => {
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
                let matches = Match::decode(&mut r)?;
                let instructions = decode_instructions(r.rest())?;
                Body::FlowMod(Box::new(FlowMod {
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
                }))
            }
            OFPT_GROUP_MOD => {
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
                Body::GroupMod(GroupMod { command, group_type, group_id, buckets })
            }
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
                let req = match mp_type {
                    OFPMP_DESC | OFPMP_TABLE | OFPMP_GROUP_DESC | OFPMP_GROUP_FEATURES | OFPMP_PORT_DESC => {
                        exact(&r, 0)?;
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
                        let matches = Match::decode(&mut r)?;
                        exact(&r, 0)?;
                        let f =
                            FlowStatsRequest { table_id, out_port, out_group, cookie, cookie_mask, matches };
                        if mp_type == OFPMP_FLOW {
                            MpRequest::Flow(f)
                        } else {
                            MpRequest::Aggregate(f)
                        }
                    }
                    OFPMP_PORT_STATS => {
                        exact(&r, 8)?;
                        MpRequest::PortStats { port_no: r.u32()? }
                    }
                    OFPMP_QUEUE => {
                        exact(&r, 8)?;
                        MpRequest::Queue { port_no: r.u32()?, queue_id: r.u32()? }
                    }
                    OFPMP_GROUP => {
                        exact(&r, 8)?;
                        MpRequest::Group { group_id: r.u32()? }
                    }
                    _ => MpRequest::Other { body: r.rest().to_vec() },
                };
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

    #[test]
    fn truncated_match_is_bad_match() {
        let mut b = Msg::new(
            1,
            Body::MultipartRequest {
                flags: 0,
                mp_type: OFPMP_FLOW,
                req: MpRequest::Flow(FlowStatsRequest {
                    table_id: 0xff,
                    out_port: OFPP_ANY,
                    out_group: OFPG_ANY,
                    cookie: 0,
                    cookie_mask: 0,
                    matches: Match { fields: vec![Oxm::basic(0, vec![0, 0, 0, 1], None)] },
                }),
            },
        )
        .encode();
        // Claim a longer match than present.
        b[8 + 8 + 32 + 3] = 0x40;
        assert_eq!(Msg::decode(&b).unwrap_err(), OfpErr::new(OFPET_BAD_MATCH, OFPBMC_BAD_LEN));
    }

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
