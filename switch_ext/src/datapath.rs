//! The switch's brain, free of I/O: OpenFlow message handling, the multi-table pipeline
//! (with the Nicira extensions' registers, resubmit, output_reg and learn), groups,
//! packet-in/out, stats, and the standalone learning switch.
//!
//! Inputs are decoded controller messages and received frames; outputs accumulate in
//! [`Datapath::out`] (frames to transmit) and [`Datapath::ctrl`] (messages to the
//! controller, in order). The event loop in `switch.rs` drains both. Keeping this pure
//! lets unit tests replay flow mods and packets in memory, Faucet-`fakeoftable` style.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use crate::conga::{self, Label, Overlay};
use crate::flow::{instruction_rank, oxm_field, FlowTable, MField, MatchSpec, Removed, Selector};
use crate::group::{GroupTable, Rng, SelectMode};
use crate::lb::{self, Context, PathMetrics, PortLoad, PortLoads};
use crate::nx;
use crate::ofp::codec::*;
use crate::ofp::consts::*;
use crate::ofp::dcnlab::{self as dcx, DcnlabRequest};
use crate::packet::{self, Field, Key};
use crate::qdisc::QueueLen;
use crate::spec::NamedSpec;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The Nicira extension actions implemented, as OFPMP_DESC's `sw_desc` announces them
/// (`nx=...`): how an app tells this switch executes its Nicira pipeline.
pub const NX_SUBSET: &str =
    "resubmit,resubmit_table,reg_load,reg_move,output_reg,learn,fin_timeout,note,exit";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    Secure,
    Standalone,
}

#[derive(Debug, Clone)]
pub struct DpConfig {
    pub name: String,
    pub dpid: u64,
    pub n_tables: u8,
    /// The select mode the datapath starts with; [`Datapath::set_switch_balancer`]
    /// replaces it with any registered balancer (the command line's `--select-mode`).
    pub select_mode: SelectMode,
    pub fail_mode: FailMode,
    pub seed: u64,
}

/// Per-port counters, updated by the I/O layer (rx/tx) and the egress queue (drops/marks).
#[derive(Debug, Clone, Default)]
pub struct PortCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_dropped: u64,
    pub rx_errors: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Egress drops: queue overflow (drop-tail) plus send failures.
    pub tx_dropped: u64,
    pub tx_errors: u64,
    pub ce_marks: u64,
}

#[derive(Debug, Clone)]
pub struct DpPort {
    pub desc: PortDesc,
    /// Carrier/oper state as last seen from the kernel.
    pub link_up: bool,
    pub counters: PortCounters,
    pub created_ns: u64,
    /// Its egress buffer as the port queues last left it, and the rate of what they
    /// admitted ([`crate::ports::Ports`] keeps both): what a congestion-aware balancer
    /// reads.
    pub egress_queue: QueueLen,
    pub tx_meter: lb::RateMeter,
}

impl DpPort {
    pub fn live(&self) -> bool {
        self.link_up && self.desc.config & OFPPC_PORT_DOWN == 0
    }
}

/// A frame to transmit on `port` (through its egress queue).
#[derive(Debug)]
pub struct Output {
    pub port: u32,
    pub frame: Vec<u8>,
    pub queue: u32,
}

/// Per-packet pipeline context.
#[derive(Clone)]
struct Pkt {
    frame: Vec<u8>,
    /// The parsed headers plus the pipeline fields (in_port, metadata, registers).
    key: Key,
    queue: u32,
    table_id: u8,
    cookie: u64,
    table_miss: bool,
    dead: bool,
    /// The write-actions action set, run when the pipeline ends.
    aset: ActionSet,
    /// NXAST_EXIT ran: no more actions, except the action set.
    halted: bool,
    /// Resubmit nesting now, and resubmits so far (both bounded, as in Open vSwitch).
    depth: u8,
    resubmits: u16,
    /// Dropped for exceeding a resubmit limit.
    overflow: bool,
    /// The flow entry whose instructions run (the address of its instruction list, for
    /// fin_timeout to find it; 0 when none).
    rule: usize,
    /// The CONGA label the packet travels with between switches ([`crate::conga`]):
    /// taken off on arrival, put back on at every egress.
    conga: Option<Label>,
}

impl Pkt {
    fn new(frame: Vec<u8>, key: Key, table_id: u8, cookie: u64) -> Pkt {
        Pkt {
            frame,
            key,
            queue: 0,
            table_id,
            cookie,
            table_miss: false,
            dead: false,
            aset: ActionSet::default(),
            halted: false,
            depth: 0,
            resubmits: 0,
            overflow: false,
            rule: 0,
            conga: None,
        }
    }

    fn reparse(&mut self) {
        let (in_port, md, regs) = (self.key.in_port, self.key.metadata, self.key.regs);
        self.key = Key::parse(&self.frame, in_port);
        self.key.metadata = md;
        self.key.regs = regs;
    }
}

/// The write-actions action set: at most one action of each kind, run in spec order.
#[derive(Debug, Default, Clone)]
struct ActionSet {
    pop_vlan: bool,
    push_vlan: Option<u16>,
    dec_ttl: bool,
    set_ttl: Option<u8>,
    set_fields: Vec<Oxm>,
    queue: Option<u32>,
    group: Option<u32>,
    output: Option<(u32, u16)>,
}

impl ActionSet {
    fn write(&mut self, acts: &[Action]) {
        for a in acts {
            match a {
                Action::PopVlan => self.pop_vlan = true,
                Action::PushVlan(t) => self.push_vlan = Some(*t),
                Action::DecNwTtl => self.dec_ttl = true,
                Action::SetNwTtl(t) => self.set_ttl = Some(*t),
                Action::SetField(o) => {
                    self.set_fields.retain(|x| oxm_field(x) != oxm_field(o));
                    self.set_fields.push(o.clone());
                }
                Action::SetQueue(q) => self.queue = Some(*q),
                Action::Group(g) => self.group = Some(*g),
                Action::Output { port, max_len } => self.output = Some((*port, *max_len)),
                _ => {}
            }
        }
    }

    fn to_list(&self) -> Vec<Action> {
        let mut v = Vec::new();
        if self.pop_vlan {
            v.push(Action::PopVlan);
        }
        if let Some(t) = self.push_vlan {
            v.push(Action::PushVlan(t));
        }
        if self.dec_ttl {
            v.push(Action::DecNwTtl);
        }
        if let Some(t) = self.set_ttl {
            v.push(Action::SetNwTtl(t));
        }
        v.extend(self.set_fields.iter().cloned().map(Action::SetField));
        if let Some(q) = self.queue {
            v.push(Action::SetQueue(q));
        }
        // Output is ignored when a group action is present (spec 5.10).
        if let Some(g) = self.group {
            v.push(Action::Group(g));
        } else if let Some((port, max_len)) = self.output {
            v.push(Action::Output { port, max_len });
        }
        v
    }

    /// Nothing to run (what `to_list` would return empty for, without building it: this
    /// is asked for every packet).
    fn is_empty(&self) -> bool {
        !self.pop_vlan
            && self.push_vlan.is_none()
            && !self.dec_ttl
            && self.set_ttl.is_none()
            && self.set_fields.is_empty()
            && self.queue.is_none()
            && self.group.is_none()
            && self.output.is_none()
    }
}

const MAX_GROUP_DEPTH: u8 = 8;
/// Resubmits nested deeper than this drop the packet (Open vSwitch's MAX_DEPTH).
pub const MAX_RESUBMIT_DEPTH: u8 = 64;
/// Resubmits per packet at most, however nested (Open vSwitch's MAX_RESUBMITS).
pub const MAX_RESUBMITS: u16 = 4096;
const MAC_AGE_NS: u64 = 300_000_000_000;
const MP_BODY_MAX: usize = 0xffff - 16;

pub struct Datapath {
    pub cfg: DpConfig,
    pub ports: BTreeMap<u32, DpPort>,
    pub tables: Vec<FlowTable>,
    pub groups: GroupTable,
    pub out: Vec<Output>,
    pub ctrl: Vec<Msg>,
    /// Is a controller connected (handshake done)? Decides packet-in vs. standalone.
    pub connected: bool,
    /// The balancer select groups without one of their own use (experimenter message,
    /// `OFPG_ALL`), and the one the switch was started with, which mode 0 restores.
    pub default_balancer: NamedSpec,
    switch_balancer: NamedSpec,
    /// CONGA's overlay, while the switch default balancer is `conga`.
    pub conga: Option<Overlay>,
    config_flags: u16,
    miss_send_len: u16,
    async_masks: [u32; 6],
    role: u32,
    generation_id: Option<u64>,
    rng: Rng,
    macs: HashMap<[u8; 6], (u32, u64)>,
    pub packet_ins_dropped: u64,
    /// Packets dropped because resubmits nested deeper than [`MAX_RESUBMIT_DEPTH`] or
    /// exceeded [`MAX_RESUBMITS`].
    pub resubmit_drops: u64,
    /// Learn actions whose flow could not be installed (table full).
    pub learn_failures: u64,
    /// Run-time ingress-discipline requests (experimenter SET_PORT_ABQ), validated on the
    /// wire here and applied by the owner of the port queues ([`crate::ports::Ports`]).
    pub ingress_ctl: Vec<IngressControl>,
}

/// A request to reconfigure (or install) the ingress discipline `name` of `port_no`
/// (`OFPP_ALL`: every port that has one of that name) with `options`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngressControl {
    pub xid: u32,
    pub port_no: u32,
    pub name: &'static str,
    pub options: Vec<(String, String)>,
    /// The request as received, echoed in an OFPT_ERROR if applying it fails.
    pub raw: Vec<u8>,
}

fn fmf(code: u16) -> OfpErr {
    OfpErr::new(OFPET_FLOW_MOD_FAILED, code)
}
fn bac(code: u16) -> OfpErr {
    OfpErr::new(OFPET_BAD_ACTION, code)
}
fn bic(code: u16) -> OfpErr {
    OfpErr::new(OFPET_BAD_INSTRUCTION, code)
}
fn brc(code: u16) -> OfpErr {
    OfpErr::new(OFPET_BAD_REQUEST, code)
}

/// A port's line rate from its description (`curr_speed`, kbit/s; 0: unknown).
fn line_rate_bps(desc: &PortDesc) -> Option<u64> {
    (desc.curr_speed > 0).then(|| desc.curr_speed as u64 * 1000)
}

/// The datapath's ports as a balancer reads them.
struct PortView<'a>(&'a BTreeMap<u32, DpPort>);

impl PortLoads for PortView<'_> {
    fn load(&self, port: u32, now_ns: u64) -> Option<PortLoad> {
        let p = self.0.get(&port)?;
        Some(PortLoad {
            queue: p.egress_queue,
            bytes_per_s: p.tx_meter.bytes_per_s(now_ns),
            line_rate_bps: line_rate_bps(&p.desc),
        })
    }
}

/// A CONGA leaf's congestion-to-leaf row for one packet's destination leaf.
struct LeafPaths<'a> {
    overlay: &'a Overlay,
    dst_leaf: Option<u8>,
}

impl PathMetrics for LeafPaths<'_> {
    fn metric(&self, bucket: usize, now_ns: u64) -> Option<u8> {
        self.overlay.to_leaf(self.dst_leaf?, bucket, now_ns)
    }
}

/// CONGA's overlay, for a switch default balancer `conga` (its leaf, if any, and ageing
/// time from the spec).
fn overlay_for(spec: &NamedSpec) -> Option<Overlay> {
    if spec.name != lb::conga::NAME {
        return None;
    }
    let s = lb::conga::settings(&spec.options).ok()?;
    Some(Overlay::new(s.leaf, s.age_ns))
}

fn secs(ns: u64) -> (u32, u32) {
    ((ns / 1_000_000_000) as u32, (ns % 1_000_000_000) as u32)
}

impl Datapath {
    pub fn new(cfg: DpConfig) -> Datapath {
        let n = cfg.n_tables as usize;
        Datapath {
            default_balancer: cfg.select_mode.spec(),
            switch_balancer: cfg.select_mode.spec(),
            conga: overlay_for(&cfg.select_mode.spec()),
            rng: Rng::new(cfg.seed),
            cfg,
            ports: BTreeMap::new(),
            tables: (0..n).map(|_| FlowTable::default()).collect(),
            groups: GroupTable::default(),
            out: Vec::new(),
            ctrl: Vec::new(),
            connected: false,
            config_flags: 0,
            miss_send_len: 128,
            // Master/equal defaults from the spec: all packet-in reasons, all port
            // status reasons, all flow-removed reasons.
            async_masks: [0x7, 0x0, 0x7, 0x7, 0xf, 0x0],
            role: OFPCR_ROLE_EQUAL,
            generation_id: None,
            macs: HashMap::new(),
            packet_ins_dropped: 0,
            resubmit_drops: 0,
            learn_failures: 0,
            ingress_ctl: Vec::new(),
        }
    }

    pub fn add_port(&mut self, desc: PortDesc, link_up: bool, now_ns: u64) {
        let tx_meter = lb::RateMeter::for_rate(line_rate_bps(&desc));
        if let Some(o) = &mut self.conga {
            o.note_rate(line_rate_bps(&desc));
        }
        self.ports.insert(
            desc.port_no,
            DpPort {
                desc,
                link_up,
                counters: PortCounters::default(),
                created_ns: now_ns,
                egress_queue: QueueLen::default(),
                tx_meter,
            },
        );
    }

    fn port_desc(&self, p: &DpPort) -> PortDesc {
        let mut d = p.desc.clone();
        d.state = if p.link_up { OFPPS_LIVE } else { OFPPS_LINK_DOWN };
        d
    }

    /// Records a carrier change and tells the controller (OFPT_PORT_STATUS MODIFY).
    pub fn set_link(&mut self, port_no: u32, up: bool) {
        let Some(p) = self.ports.get_mut(&port_no) else { return };
        if p.link_up == up {
            return;
        }
        p.link_up = up;
        let desc = self.port_desc(&self.ports[&port_no]);
        self.port_status(OFPPR_MODIFY, desc);
    }

    fn port_status(&mut self, reason: u8, desc: PortDesc) {
        if self.connected && self.async_masks[2] & (1 << reason) != 0 {
            self.ctrl.push(Msg::new(0, Body::PortStatus { reason, desc }));
        }
    }

    pub fn sw_desc(&self) -> String {
        format!(
            "dcnlab-switch {VERSION}; select={}; default={}; experimenter=0x{:08x}; nx={}",
            lb::names().join(","),
            self.default_balancer,
            DCNLAB_EXPERIMENTER_ID,
            NX_SUBSET
        )
    }

    // ---------------------------------------------------------------------------------
    // Controller messages

    /// Handles one framed message from the controller (after the hello exchange).
    /// Bounds every flow table to ``max`` entries (``--max-flows``).
    pub fn set_max_flows(&mut self, max: Option<usize>) {
        for t in &mut self.tables {
            t.max_entries = max;
        }
    }

    pub fn handle_raw(&mut self, raw: &[u8], now_ns: u64) {
        let xid = parse_header(raw).map_or(0, |h| h.3);
        match Msg::decode(raw) {
            Ok(m) => {
                if let Err(e) = self.handle(m, raw, now_ns) {
                    self.ctrl.push(error_msg(xid, e, raw));
                }
            }
            Err(e) => self.ctrl.push(error_msg(xid, e, raw)),
        }
    }

    fn reply(&mut self, xid: u32, body: Body) {
        self.ctrl.push(Msg::new(xid, body));
    }

    fn handle(&mut self, m: Msg, raw: &[u8], now_ns: u64) -> Result<(), OfpErr> {
        let xid = m.xid;
        match m.body {
            Body::Hello { .. } => {}
            Body::EchoRequest(d) => self.reply(xid, Body::EchoReply(d)),
            Body::EchoReply(_) | Body::Error { .. } => {}
            Body::Experimenter { experimenter, exp_type, data } => {
                self.experimenter(xid, experimenter, exp_type, &data, raw)?
            }
            Body::FeaturesRequest => self.reply(
                xid,
                Body::FeaturesReply {
                    datapath_id: self.cfg.dpid,
                    n_buffers: 0,
                    n_tables: self.cfg.n_tables,
                    auxiliary_id: 0,
                    capabilities: OFPC_FLOW_STATS | OFPC_TABLE_STATS | OFPC_PORT_STATS | OFPC_GROUP_STATS,
                },
            ),
            Body::GetConfigRequest => self.reply(
                xid,
                Body::GetConfigReply { flags: self.config_flags, miss_send_len: self.miss_send_len },
            ),
            Body::SetConfig { flags, miss_send_len } => {
                self.config_flags = flags;
                self.miss_send_len = miss_send_len;
            }
            Body::PacketOut { buffer_id, in_port, actions, data } => {
                self.packet_out(buffer_id, in_port, &actions, data, now_ns)?
            }
            Body::FlowMod(fm) => self.flow_mod(&fm, now_ns)?,
            Body::GroupMod(g) => self.group_mod(&g, now_ns)?,
            Body::PortMod { port_no, hw_addr, config, mask, .. } => {
                let p = self
                    .ports
                    .get_mut(&port_no)
                    .ok_or(OfpErr::new(OFPET_PORT_MOD_FAILED, OFPPMFC_BAD_PORT))?;
                if p.desc.hw_addr != hw_addr {
                    return Err(OfpErr::new(OFPET_PORT_MOD_FAILED, OFPPMFC_BAD_HW_ADDR));
                }
                let supported = OFPPC_PORT_DOWN | OFPPC_NO_RECV | OFPPC_NO_FWD | OFPPC_NO_PACKET_IN;
                if mask & !supported != 0 {
                    return Err(OfpErr::new(OFPET_PORT_MOD_FAILED, OFPPMFC_BAD_CONFIG));
                }
                p.desc.config = (p.desc.config & !mask) | (config & mask);
                let desc = self.port_desc(&self.ports[&port_no]);
                self.port_status(OFPPR_MODIFY, desc);
            }
            Body::TableMod { table_id, .. } => {
                if table_id != OFPTT_ALL && table_id >= self.cfg.n_tables {
                    return Err(OfpErr::new(OFPET_TABLE_MOD_FAILED, OFPTMFC_BAD_TABLE));
                }
            }
            Body::MultipartRequest { mp_type, req, .. } => self.multipart(xid, mp_type, req, now_ns)?,
            Body::BarrierRequest => self.reply(xid, Body::BarrierReply),
            Body::QueueGetConfigRequest { port } => {
                if port != OFPP_ANY && !self.ports.contains_key(&port) {
                    return Err(OfpErr::new(OFPET_QUEUE_OP_FAILED, OFPQOFC_BAD_PORT));
                }
                self.reply(xid, Body::QueueGetConfigReply { port })
            }
            Body::RoleRequest { role, generation_id } => {
                if role > OFPCR_ROLE_SLAVE {
                    return Err(OfpErr::new(OFPET_ROLE_REQUEST_FAILED, OFPRRFC_BAD_ROLE));
                }
                if role != OFPCR_ROLE_NOCHANGE {
                    self.role = role;
                    if role != OFPCR_ROLE_EQUAL {
                        self.generation_id = Some(generation_id);
                    }
                }
                let generation_id = self.generation_id.unwrap_or(0);
                self.reply(xid, Body::RoleReply { role: self.role, generation_id })
            }
            Body::GetAsyncRequest => self.reply(xid, Body::GetAsyncReply { masks: self.async_masks }),
            Body::SetAsync { masks } => self.async_masks = masks,
            // Switch-to-controller types are not requests.
            Body::FeaturesReply { .. }
            | Body::GetConfigReply { .. }
            | Body::PacketIn { .. }
            | Body::FlowRemoved(_)
            | Body::PortStatus { .. }
            | Body::MultipartReply { .. }
            | Body::BarrierReply
            | Body::QueueGetConfigReply { .. }
            | Body::RoleReply { .. }
            | Body::GetAsyncReply { .. } => return Err(brc(OFPBRC_BAD_TYPE)),
        }
        let _ = raw;
        Ok(())
    }

    fn experimenter(
        &mut self,
        xid: u32,
        experimenter: u32,
        exp_type: u32,
        data: &[u8],
        raw: &[u8],
    ) -> Result<(), OfpErr> {
        if experimenter != DCNLAB_EXPERIMENTER_ID {
            return Err(brc(OFPBRC_BAD_EXPERIMENTER));
        }
        match dcx::decode(exp_type, data)? {
            DcnlabRequest::SetGroupSelectMode { group_id, mode } => {
                let mode = SelectMode::from_wire(mode).ok_or(brc(OFPBRC_EPERM))?;
                self.set_group_balancer(group_id, mode.map(SelectMode::spec))
            }
            DcnlabRequest::GetGroupSelectMode { group_id } => {
                let spec = self.group_balancer(group_id);
                let mode = SelectMode::of_spec(spec).map_or(dcx::SELECT_MODE_OTHER, SelectMode::wire);
                self.reply(xid, dcx::select_mode_reply(group_id, mode));
                Ok(())
            }
            DcnlabRequest::SetGroupBalancer { group_id, spec } => {
                let spec = if spec.is_empty() {
                    None
                } else {
                    let s = NamedSpec::parse(&spec).map_err(|_| brc(OFPBRC_EPERM))?;
                    // Refused here, with the request echoed, rather than on the first packet.
                    lb::build(&s).map_err(|_| brc(OFPBRC_EPERM))?;
                    Some(s)
                };
                self.set_group_balancer(group_id, spec)
            }
            DcnlabRequest::GetGroupBalancer { group_id } => {
                let spec = self.group_balancer(group_id).to_string();
                self.reply(xid, dcx::balancer_reply(group_id, &spec));
                Ok(())
            }
            DcnlabRequest::SetPortAbq { port_no, options } => {
                if port_no != OFPP_ALL && !self.ports.contains_key(&port_no) {
                    return Err(OfpErr::new(OFPET_PORT_MOD_FAILED, OFPPMFC_BAD_PORT));
                }
                self.ingress_ctl.push(IngressControl {
                    xid,
                    port_no,
                    name: "abq",
                    options,
                    raw: raw.to_vec(),
                });
                Ok(())
            }
        }
    }

    /// Sets group `group_id`'s balancer (`OFPG_ALL`: the switch default); `None` restores
    /// the switch default (for `OFPG_ALL`: the one it was started with).
    fn set_group_balancer(&mut self, group_id: u32, spec: Option<NamedSpec>) -> Result<(), OfpErr> {
        if group_id == OFPG_ALL {
            self.set_default_balancer(spec.unwrap_or_else(|| self.switch_balancer.clone()));
        } else if group_id > OFPG_MAX {
            return Err(OfpErr::new(OFPET_GROUP_MOD_FAILED, OFPGMFC_INVALID_GROUP));
        } else {
            self.groups.set_override(group_id, spec);
        }
        Ok(())
    }

    /// The balancer group `group_id` uses (`OFPG_ALL`: the switch default).
    fn group_balancer(&self, group_id: u32) -> &NamedSpec {
        if group_id == OFPG_ALL {
            &self.default_balancer
        } else {
            self.groups.balancer_for(group_id, &self.default_balancer)
        }
    }

    /// Makes `spec` the switch's balancer (default and what mode 0 restores). The error
    /// names the balancer or option it refused.
    pub fn set_switch_balancer(&mut self, spec: NamedSpec) -> Result<(), String> {
        lb::build(&spec)?;
        self.switch_balancer = spec.clone();
        self.set_default_balancer(spec);
        Ok(())
    }

    /// The groups without a balancer of their own follow `spec` from now on; CONGA's
    /// overlay starts afresh when the spec changes (the same spec again, as a controller
    /// that reconnects sends it, keeps what it learned).
    fn set_default_balancer(&mut self, spec: NamedSpec) {
        if spec != self.default_balancer {
            self.conga = overlay_for(&spec);
            if let Some(o) = &mut self.conga {
                for p in self.ports.values() {
                    o.note_rate(line_rate_bps(&p.desc));
                }
            }
        }
        self.default_balancer = spec;
        self.groups.default_changed();
    }

    fn valid_port_ref(&self, port: u32, packet_out: bool) -> bool {
        match port {
            0 | OFPP_ANY => false,
            OFPP_TABLE => packet_out,
            OFPP_IN_PORT | OFPP_NORMAL | OFPP_FLOOD | OFPP_ALL | OFPP_CONTROLLER | OFPP_LOCAL => true,
            // Like OVS we accept any physical port number, present or not: Mininet adds
            // flows before every link exists; such outputs are dropped until it does.
            p => p <= OFPP_MAX,
        }
    }

    /// `m`: the flow's match, for a flow mod (the NX actions' field prerequisites).
    fn validate_actions(
        &self,
        acts: &[Action],
        packet_out: bool,
        own_group: Option<u32>,
        m: Option<&MatchSpec>,
    ) -> Result<(), OfpErr> {
        for a in acts {
            match a {
                Action::Output { port, .. } => {
                    if !self.valid_port_ref(*port, packet_out) {
                        return Err(bac(OFPBAC_BAD_OUT_PORT));
                    }
                }
                Action::Group(g) => {
                    if Some(*g) == own_group {
                        return Err(OfpErr::new(OFPET_GROUP_MOD_FAILED, OFPGMFC_LOOP));
                    }
                    if !self.groups.groups.contains_key(g) {
                        return Err(bac(OFPBAC_BAD_OUT_GROUP));
                    }
                }
                Action::SetField(o) => {
                    let f = oxm_field(o).ok_or(bac(OFPBAC_BAD_SET_TYPE))?;
                    // Registers too, as Open vSwitch allows (Ryu: OFPActionSetField(reg0=..)).
                    if !nx::settable(f) && f.reg_index().is_none() {
                        return Err(bac(OFPBAC_BAD_SET_TYPE));
                    }
                    if o.mask.is_some() || o.value.len() != f.width() {
                        return Err(bac(OFPBAC_BAD_SET_LEN));
                    }
                    let v = o.value.iter().fold(0u128, |a, &x| (a << 8) | x as u128);
                    if v & !f.value_bits() != 0 {
                        return Err(bac(OFPBAC_BAD_SET_ARGUMENT));
                    }
                }
                Action::PushVlan(t) => {
                    if *t != packet::ETH_TYPE_VLAN && *t != packet::ETH_TYPE_QINQ {
                        return Err(bac(OFPBAC_BAD_ARGUMENT));
                    }
                }
                Action::PopVlan | Action::SetQueue(_) | Action::SetNwTtl(_) | Action::DecNwTtl => {}
                Action::Nx(a) => nx::validate(a, self.cfg.n_tables, m)?,
                Action::Experimenter { .. } => return Err(bac(OFPBAC_BAD_EXPERIMENTER)),
                _ => return Err(bac(OFPBAC_BAD_TYPE)),
            }
        }
        Ok(())
    }

    fn validate_instructions(
        &self,
        instrs: &[Instruction],
        table_id: u8,
        m: &MatchSpec,
    ) -> Result<Vec<Instruction>, OfpErr> {
        let mut seen = 0u32;
        for i in instrs {
            let rank = instruction_rank(i);
            if seen & (1 << rank) != 0 {
                // Two instructions of one type are undefined; reject rather than guess.
                return Err(bic(OFPBIC_UNSUP_INST));
            }
            seen |= 1 << rank;
            match i {
                Instruction::GotoTable(t) => {
                    if *t <= table_id || *t >= self.cfg.n_tables {
                        return Err(bic(OFPBIC_BAD_TABLE_ID));
                    }
                }
                Instruction::ApplyActions(a) => self.validate_actions(a, false, None, Some(m))?,
                Instruction::WriteActions(a) => {
                    self.validate_actions(a, false, None, Some(m))?;
                    // The action set has no slot for an extension action (OVS refuses too).
                    if a.iter().any(|x| matches!(x, Action::Nx(_))) {
                        return Err(bac(OFPBAC_BAD_TYPE));
                    }
                }
                Instruction::WriteMetadata { .. } | Instruction::ClearActions => {}
                Instruction::Meter(_) => return Err(bic(OFPBIC_UNSUP_INST)),
                Instruction::Experimenter { .. } => return Err(bic(OFPBIC_BAD_EXPERIMENTER)),
            }
        }
        let mut v = instrs.to_vec();
        v.sort_by_key(instruction_rank);
        Ok(v)
    }

    fn flow_mod(&mut self, fm: &FlowMod, now_ns: u64) -> Result<(), OfpErr> {
        let matches = MatchSpec::compile(&fm.matches)?;
        let all_tables = fm.table_id == OFPTT_ALL;
        let is_delete = matches!(fm.command, OFPFC_DELETE | OFPFC_DELETE_STRICT);
        if fm.command > OFPFC_DELETE_STRICT {
            return Err(fmf(OFPFMFC_BAD_COMMAND));
        }
        if (all_tables && !is_delete) || (!all_tables && fm.table_id >= self.cfg.n_tables) {
            return Err(fmf(OFPFMFC_BAD_TABLE_ID));
        }
        if fm.flags & !0x1f != 0 {
            return Err(fmf(OFPFMFC_BAD_FLAGS));
        }
        let strict = matches!(fm.command, OFPFC_MODIFY_STRICT | OFPFC_DELETE_STRICT);
        match fm.command {
            OFPFC_ADD | OFPFC_MODIFY | OFPFC_MODIFY_STRICT => {
                let instrs = self.validate_instructions(&fm.instructions, fm.table_id, &matches)?;
                let t = &mut self.tables[fm.table_id as usize];
                let replaced = if fm.command == OFPFC_ADD {
                    t.add(fm, matches, instrs, now_ns)?.into_iter().collect()
                } else {
                    let sel = Selector {
                        matches: &matches,
                        priority: fm.priority,
                        strict,
                        cookie: fm.cookie,
                        cookie_mask: fm.cookie_mask,
                        out_port: OFPP_ANY,
                        out_group: OFPG_ANY,
                    };
                    t.modify(&sel, fm, &instrs)
                };
                self.replaced(&replaced, now_ns);
            }
            _ => {
                let sel = Selector {
                    matches: &matches,
                    priority: fm.priority,
                    strict,
                    cookie: fm.cookie,
                    cookie_mask: fm.cookie_mask,
                    out_port: fm.out_port,
                    out_group: fm.out_group,
                };
                let mut removed = Vec::new();
                for (i, t) in self.tables.iter_mut().enumerate() {
                    if all_tables || i == fm.table_id as usize {
                        t.delete(&sel, OFPRR_DELETE, &mut removed);
                    }
                }
                self.flows_removed(removed, now_ns);
            }
        }
        if fm.buffer_id != OFP_NO_BUFFER && !is_delete {
            // We never buffer (n_buffers = 0); the flow is in place but there is no
            // buffered packet to release.
            return Err(brc(OFPBRC_BUFFER_UNKNOWN));
        }
        Ok(())
    }

    /// Instruction lists a flow mod or learn replaced: their delete_learned learn actions
    /// may have been the last ones.
    fn replaced(&mut self, old: &[Rc<[Instruction]>], now_ns: u64) {
        let mut keys = Vec::new();
        for i in old {
            nx::delete_learned_keys(i, &mut keys);
        }
        self.flush_learned(keys, now_ns);
    }

    /// NX_LEARN_F_DELETE_LEARNED, as Open vSwitch's learned cookies: for each (cookie,
    /// table) no remaining flow holds a delete_learned learn action for any more, the
    /// flows in that table with that cookie are deleted (reason DELETE).
    fn flush_learned(&mut self, keys: Vec<(u64, u8)>, now_ns: u64) {
        if keys.is_empty() {
            return;
        }
        let mut held = Vec::new();
        for e in self.tables.iter().flat_map(|t| t.entries.iter()) {
            nx::delete_learned_keys(&e.instructions, &mut held);
        }
        let mut removed = Vec::new();
        for (cookie, table) in keys {
            if held.contains(&(cookie, table)) {
                continue;
            }
            if let Some(t) = self.tables.get_mut(table as usize) {
                t.delete_where(|e| e.cookie == cookie, OFPRR_DELETE, &mut removed);
            }
        }
        self.flows_removed(removed, now_ns);
    }

    fn flows_removed(&mut self, removed: Vec<Removed>, now_ns: u64) {
        let mut keys = Vec::new();
        for r in &removed {
            nx::delete_learned_keys(&r.entry.instructions, &mut keys);
        }
        self.flows_removed_msgs(removed, now_ns);
        self.flush_learned(keys, now_ns);
    }

    fn flows_removed_msgs(&mut self, removed: Vec<Removed>, now_ns: u64) {
        for r in removed {
            let e = r.entry;
            if e.flags & OFPFF_SEND_FLOW_REM == 0
                || !self.connected
                || self.async_masks[4] & (1 << r.reason) == 0
            {
                continue;
            }
            let (duration_sec, duration_nsec) = secs(now_ns.saturating_sub(e.created_ns));
            self.ctrl.push(Msg::new(
                0,
                Body::FlowRemoved(Box::new(FlowRemoved {
                    cookie: e.cookie,
                    priority: e.priority,
                    reason: r.reason,
                    table_id: e.table_id,
                    duration_sec,
                    duration_nsec,
                    idle_timeout: e.idle_timeout,
                    hard_timeout: e.hard_timeout,
                    packet_count: e.packet_count,
                    byte_count: e.byte_count,
                    matches: e.matches.raw.clone(),
                })),
            ));
        }
    }

    fn group_mod(&mut self, g: &GroupMod, now_ns: u64) -> Result<(), OfpErr> {
        if g.command != OFPGC_DELETE {
            for b in &g.buckets {
                self.validate_actions(&b.actions, false, Some(g.group_id), None)?;
                if b.watch_group != OFPG_ANY && !self.groups.groups.contains_key(&b.watch_group) {
                    return Err(OfpErr::new(OFPET_GROUP_MOD_FAILED, OFPGMFC_BAD_WATCH));
                }
            }
        }
        let deleted = self.groups.apply(g, now_ns)?;
        if !deleted.is_empty() {
            let mut removed = Vec::new();
            for t in self.tables.iter_mut() {
                t.delete_where(
                    |e| deleted.iter().any(|&gid| e.outputs_to_group(gid)),
                    OFPRR_GROUP_DELETE,
                    &mut removed,
                );
            }
            self.flows_removed(removed, now_ns);
        }
        Ok(())
    }

    /// Periodic work: flow timeouts.
    pub fn tick(&mut self, now_ns: u64) {
        let mut removed = Vec::new();
        for t in self.tables.iter_mut() {
            t.expire(now_ns, &mut removed);
        }
        self.flows_removed(removed, now_ns);
    }

    fn multipart(&mut self, xid: u32, mp_type: u16, req: MpRequest, now_ns: u64) -> Result<(), OfpErr> {
        let replies: Vec<MpReply> = match req {
            MpRequest::Desc => vec![MpReply::Desc(SwitchDesc {
                mfr_desc: "dcnlab".into(),
                hw_desc: "switch_ext".into(),
                sw_desc: self.sw_desc(),
                serial_num: format!("{:016x}", self.cfg.dpid),
                dp_desc: self.cfg.name.clone(),
            })],
            MpRequest::Flow(r) => {
                let stats = self.flow_stats(&r, now_ns)?;
                chunk(stats, MpReply::Flow)
            }
            MpRequest::Aggregate(r) => {
                let stats = self.flow_stats(&r, now_ns)?;
                vec![MpReply::Aggregate {
                    packet_count: stats.iter().map(|s| s.packet_count).sum(),
                    byte_count: stats.iter().map(|s| s.byte_count).sum(),
                    flow_count: stats.len() as u32,
                }]
            }
            MpRequest::Table => vec![MpReply::Table(
                self.tables
                    .iter()
                    .enumerate()
                    .map(|(i, t)| TableStats {
                        table_id: i as u8,
                        active_count: t.entries.len() as u32,
                        lookup_count: t.lookup_count,
                        matched_count: t.matched_count,
                    })
                    .collect(),
            )],
            MpRequest::PortStats { port_no } => {
                if port_no != OFPP_ANY && !self.ports.contains_key(&port_no) {
                    return Err(brc(OFPBRC_BAD_PORT));
                }
                let v: Vec<PortStats> = self
                    .ports
                    .values()
                    .filter(|p| port_no == OFPP_ANY || p.desc.port_no == port_no)
                    .map(|p| {
                        let c = &p.counters;
                        let (duration_sec, duration_nsec) = secs(now_ns.saturating_sub(p.created_ns));
                        PortStats {
                            port_no: p.desc.port_no,
                            rx_packets: c.rx_packets,
                            tx_packets: c.tx_packets,
                            rx_bytes: c.rx_bytes,
                            tx_bytes: c.tx_bytes,
                            rx_dropped: c.rx_dropped,
                            tx_dropped: c.tx_dropped,
                            rx_errors: c.rx_errors,
                            tx_errors: c.tx_errors,
                            duration_sec,
                            duration_nsec,
                            ..Default::default()
                        }
                    })
                    .collect();
                chunk(v, MpReply::PortStats)
            }
            MpRequest::PortDesc => {
                let v: Vec<PortDesc> = self.ports.values().map(|p| self.port_desc(p)).collect();
                chunk(v, MpReply::PortDesc)
            }
            MpRequest::Queue { port_no, .. } => {
                if port_no != OFPP_ANY && !self.ports.contains_key(&port_no) {
                    return Err(OfpErr::new(OFPET_QUEUE_OP_FAILED, OFPQOFC_BAD_PORT));
                }
                vec![MpReply::Queue]
            }
            MpRequest::Group { group_id } => {
                let mut ids: Vec<u32> = self
                    .groups
                    .groups
                    .keys()
                    .copied()
                    .filter(|&g| group_id == OFPG_ALL || g == group_id)
                    .collect();
                ids.sort_unstable();
                let v: Vec<GroupStats> = ids
                    .iter()
                    .map(|id| {
                        let g = &self.groups.groups[id];
                        let ref_count = self
                            .tables
                            .iter()
                            .flat_map(|t| t.entries.iter())
                            .filter(|e| e.outputs_to_group(*id))
                            .count() as u32;
                        let (duration_sec, duration_nsec) = secs(now_ns.saturating_sub(g.created_ns));
                        GroupStats {
                            group_id: *id,
                            ref_count,
                            packet_count: g.packet_count,
                            byte_count: g.byte_count,
                            duration_sec,
                            duration_nsec,
                            buckets: g.bucket_counts.clone(),
                        }
                    })
                    .collect();
                chunk(v, MpReply::Group)
            }
            MpRequest::GroupDesc => {
                let mut ids: Vec<u32> = self.groups.groups.keys().copied().collect();
                ids.sort_unstable();
                let v: Vec<GroupDesc> = ids
                    .iter()
                    .map(|id| {
                        let g = &self.groups.groups[id];
                        GroupDesc { group_type: g.group_type, group_id: *id, buckets: g.buckets.to_vec() }
                    })
                    .collect();
                chunk(v, MpReply::GroupDesc)
            }
            MpRequest::GroupFeatures => {
                let acts: u32 = [
                    OFPAT_OUTPUT,
                    OFPAT_PUSH_VLAN,
                    OFPAT_POP_VLAN,
                    OFPAT_SET_QUEUE,
                    OFPAT_GROUP,
                    OFPAT_SET_NW_TTL,
                    OFPAT_DEC_NW_TTL,
                    OFPAT_SET_FIELD,
                ]
                .iter()
                .fold(0, |a, &t| a | (1 << t));
                vec![MpReply::GroupFeatures {
                    types: 0xf,
                    // select weight | select liveness | chaining
                    capabilities: 0x7,
                    max_groups: [OFPG_MAX; 4],
                    actions: [acts; 4],
                }]
            }
            MpRequest::Other { .. } => {
                let _ = mp_type;
                return Err(brc(OFPBRC_BAD_MULTIPART));
            }
        };
        let n = replies.len();
        for (i, r) in replies.into_iter().enumerate() {
            let flags = if i + 1 < n { OFPMPF_REPLY_MORE } else { 0 };
            self.reply(xid, Body::MultipartReply { flags, reply: r });
        }
        Ok(())
    }

    fn flow_stats(&self, r: &FlowStatsRequest, now_ns: u64) -> Result<Vec<FlowStats>, OfpErr> {
        if r.table_id != OFPTT_ALL && r.table_id >= self.cfg.n_tables {
            return Err(brc(OFPBRC_BAD_TABLE_ID));
        }
        let matches = MatchSpec::compile(&r.matches)?;
        let sel = Selector {
            matches: &matches,
            priority: 0,
            strict: false,
            cookie: r.cookie,
            cookie_mask: r.cookie_mask,
            out_port: r.out_port,
            out_group: r.out_group,
        };
        let mut v = Vec::new();
        for (i, t) in self.tables.iter().enumerate() {
            if r.table_id != OFPTT_ALL && i != r.table_id as usize {
                continue;
            }
            for e in t.entries.iter().filter(|e| sel.selects(e)) {
                let (duration_sec, duration_nsec) = secs(now_ns.saturating_sub(e.created_ns));
                v.push(FlowStats {
                    table_id: i as u8,
                    duration_sec,
                    duration_nsec,
                    priority: e.priority,
                    idle_timeout: e.idle_timeout,
                    hard_timeout: e.hard_timeout,
                    flags: e.flags,
                    cookie: e.cookie,
                    packet_count: e.packet_count,
                    byte_count: e.byte_count,
                    matches: e.matches.raw.clone(),
                    instructions: e.instructions.to_vec(),
                });
            }
        }
        Ok(v)
    }

    fn packet_out(
        &mut self,
        buffer_id: u32,
        in_port: u32,
        actions: &[Action],
        data: Vec<u8>,
        now_ns: u64,
    ) -> Result<(), OfpErr> {
        if buffer_id != OFP_NO_BUFFER {
            return Err(brc(OFPBRC_BUFFER_UNKNOWN));
        }
        let in_ok =
            in_port == OFPP_CONTROLLER || in_port == OFPP_LOCAL || in_port == OFPP_ANY || in_port <= OFPP_MAX;
        if !in_ok || in_port == 0 {
            return Err(brc(OFPBRC_BAD_PORT));
        }
        let key = Key::parse(&data, in_port);
        // As Open vSwitch: the fields Nicira actions name need their prerequisites in the
        // packet itself (its ethertype and IP protocol stand for a flow's match).
        let mut present = vec![MField { field: Field::EthType, value: key.eth_type as u128, mask: 0xffff }];
        if let Some(p) = key.ip_proto.filter(|_| key.is_ipv4 || key.is_ipv6) {
            present.push(MField { field: Field::IpProto, value: p as u128, mask: 0xff });
        }
        self.validate_actions(actions, true, None, Some(&MatchSpec::from_fields(present)))?;
        let mut pkt = Pkt::new(data, key, 0, u64::MAX);
        let mark = self.out.len();
        self.apply_list(actions, &mut pkt, 0, now_ns);
        self.finish(&mut pkt, mark, now_ns);
        Ok(())
    }

    // ---------------------------------------------------------------------------------
    // Packets

    /// Processes a frame received on `in_port`.
    pub fn process_packet(&mut self, in_port: u32, frame: Vec<u8>, now_ns: u64) {
        let Some(p) = self.ports.get(&in_port) else { return };
        if p.desc.config & (OFPPC_NO_RECV | OFPPC_PORT_DOWN) != 0 {
            return;
        }
        if !self.connected && self.cfg.fail_mode == FailMode::Standalone {
            self.learning_switch(in_port, frame, now_ns);
            return;
        }
        let mut frame = frame;
        let label = self.conga_arrival(&mut frame, now_ns);
        self.pipeline(in_port, frame, 0, label, now_ns);
    }

    /// A CONGA switch takes the label off an arriving frame; a leaf reads it and ends it
    /// there, any other switch keeps it with the packet.
    fn conga_arrival(&mut self, frame: &mut Vec<u8>, now_ns: u64) -> Option<Label> {
        let overlay = self.conga.as_mut()?;
        let label = conga::pop(frame)?;
        if overlay.leaf.is_none() {
            return Some(label);
        }
        let src_ip = u32::from_be_bytes([frame[26], frame[27], frame[28], frame[29]]);
        overlay.arrive(&label, src_ip, now_ns);
        None
    }

    fn pipeline(&mut self, in_port: u32, frame: Vec<u8>, start_table: u8, label: Option<Label>, now_ns: u64) {
        let key = Key::parse(&frame, in_port);
        let mut pkt = Pkt::new(frame, key, start_table, 0);
        pkt.conga = label;
        let mark = self.out.len();
        self.run_tables(start_table, &mut pkt, now_ns);
        self.finish(&mut pkt, mark, now_ns);
    }

    /// The end of a packet's pipeline: the action set runs, unless the packet was
    /// dropped. A packet dropped by the resubmit limits takes back what it already sent
    /// (Open vSwitch discards the whole translation).
    fn finish(&mut self, pkt: &mut Pkt, mark: usize, now_ns: u64) {
        if pkt.dead {
            if pkt.overflow {
                self.out.truncate(mark);
            }
            return;
        }
        if !pkt.aset.is_empty() {
            let list = pkt.aset.to_list();
            pkt.halted = false;
            self.apply_list(&list, pkt, 0, now_ns);
        }
    }

    /// Looks the packet up in `table` and runs the entry's instructions, following
    /// goto-table; a miss without a table-miss entry ends it (OpenFlow 1.3 drops).
    fn run_tables(&mut self, mut table: u8, pkt: &mut Pkt, now_ns: u64) {
        loop {
            let len = pkt.frame.len();
            let Some(t) = self.tables.get_mut(table as usize) else { return };
            let Some(e) = t.lookup(&pkt.key, len, now_ns) else {
                return;
            };
            let instrs = Rc::clone(&e.instructions);
            pkt.table_id = table;
            pkt.cookie = e.cookie;
            pkt.table_miss = e.is_table_miss();
            pkt.rule = Rc::as_ptr(&instrs) as *const Instruction as usize;
            let mut goto = None;
            for ins in instrs.iter() {
                match ins {
                    Instruction::ApplyActions(acts) => self.apply_list(acts, pkt, 0, now_ns),
                    Instruction::ClearActions => pkt.aset = ActionSet::default(),
                    Instruction::WriteActions(acts) => pkt.aset.write(acts),
                    Instruction::WriteMetadata { metadata, mask } => {
                        pkt.key.metadata = (pkt.key.metadata & !mask) | (metadata & mask)
                    }
                    Instruction::GotoTable(t) => goto = Some(*t),
                    _ => {}
                }
                if pkt.dead || pkt.halted {
                    return;
                }
            }
            match goto {
                Some(t) => table = t,
                None => return,
            }
        }
    }

    fn apply_list(&mut self, acts: &[Action], pkt: &mut Pkt, depth: u8, now_ns: u64) {
        for a in acts {
            if pkt.dead || pkt.halted {
                return;
            }
            match a {
                Action::Output { port, max_len } => self.output(*port, *max_len, pkt, now_ns),
                Action::Group(g) => self.exec_group(*g, pkt, depth, now_ns),
                Action::SetField(o) => {
                    if let Some(f) = oxm_field(o) {
                        if let (Some(r), Ok(v)) = (f.reg_index(), <[u8; 4]>::try_from(&o.value[..])) {
                            pkt.key.regs[r] = u32::from_be_bytes(v);
                        } else if o.value.len() == f.width()
                            && packet::set_field(&mut pkt.frame, &pkt.key, f, &o.value)
                        {
                            pkt.reparse();
                        }
                    }
                }
                Action::PushVlan(t) => {
                    packet::push_vlan(&mut pkt.frame, &pkt.key, *t);
                    pkt.reparse();
                }
                Action::PopVlan => {
                    packet::pop_vlan(&mut pkt.frame, &pkt.key);
                    pkt.reparse();
                }
                Action::SetQueue(q) => pkt.queue = *q,
                Action::DecNwTtl => {
                    if !packet::dec_ttl(&mut pkt.frame, &pkt.key) {
                        // OFPC_INVALID_TTL_TO_CONTROLLER (bit 2) asks for a packet-in.
                        if self.config_flags & 4 != 0 {
                            self.packet_in(OFPR_INVALID_TTL, OFPCML_NO_BUFFER, pkt);
                        }
                        pkt.dead = true;
                    } else {
                        pkt.reparse();
                    }
                }
                Action::SetNwTtl(t) => {
                    packet::set_ttl(&mut pkt.frame, &pkt.key, *t);
                    pkt.reparse();
                }
                Action::Nx(a) => self.nx_action(a, pkt, now_ns),
                _ => {}
            }
        }
    }

    // ---------------------------------------------------------------------------------
    // Nicira extension actions

    fn nx_action(&mut self, a: &NxAction, pkt: &mut Pkt, now_ns: u64) {
        match a {
            NxAction::Resubmit { in_port } => self.resubmit(*in_port, NX_RESUBMIT_CURRENT_TABLE, pkt, now_ns),
            NxAction::ResubmitTable { in_port, table_id } => self.resubmit(*in_port, *table_id, pkt, now_ns),
            NxAction::RegLoad { dst, value } => {
                if let Ok(f) = nx::nx_field(dst.field) {
                    self.write_bits(pkt, f, dst.ofs, dst.n_bits, *value as u128);
                }
            }
            NxAction::RegMove { n_bits, src_ofs, dst_ofs, src, dst } => {
                if let (Ok(s), Ok(d)) = (nx::nx_field(*src), nx::nx_field(*dst)) {
                    let v = nx::extract(nx::read(&pkt.key, s), *src_ofs, *n_bits);
                    self.write_bits(pkt, d, *dst_ofs, *n_bits, v);
                }
            }
            NxAction::OutputReg { src, max_len } => {
                if let Ok(f) = nx::nx_field(src.field) {
                    let v = nx::extract(nx::read(&pkt.key, f), src.ofs, src.n_bits);
                    self.output(nx::port_from_bits(v, src.n_bits), *max_len, pkt, now_ns);
                }
            }
            NxAction::Learn(l) => self.learn(l, pkt, now_ns),
            NxAction::FinTimeout { fin_idle_timeout, fin_hard_timeout } => {
                // TCP FIN or RST.
                if pkt.key.get(Field::TcpFlags).is_some_and(|f| f & 0x5 != 0) {
                    self.reduce_timeouts(pkt, *fin_idle_timeout, *fin_hard_timeout);
                }
            }
            NxAction::Exit => pkt.halted = true,
            NxAction::Note(_) => {}
        }
    }

    /// Writes the low `n` bits of `v` into `f[ofs..]`: a register or metadata directly,
    /// a header field by rewriting the frame (checksums kept); a field the packet lacks
    /// is left alone.
    fn write_bits(&mut self, pkt: &mut Pkt, f: nx::NxField, ofs: u16, n: u16, v: u128) {
        if let Some(r) = f.field.reg_index() {
            pkt.key.regs[r] = nx::deposit(pkt.key.regs[r] as u128, ofs, n, v) as u32;
            return;
        }
        match f.field {
            Field::Metadata => pkt.key.metadata = nx::deposit(pkt.key.metadata as u128, ofs, n, v) as u64,
            Field::InPort => pkt.key.in_port = nx::deposit(pkt.key.in_port as u128, ofs, n, v) as u32,
            Field::VlanTci => {
                // As Open vSwitch: the CFI bit says whether there is a tag; a write that
                // sets it on an untagged frame pushes an 802.1Q tag, one that clears it pops.
                let old = pkt.key.get(Field::VlanTci).unwrap_or(0);
                let new = nx::deposit(old, ofs, n, v) as u16;
                if new & 0x1000 == 0 {
                    if pkt.key.vlan_tci.is_some() {
                        packet::pop_vlan(&mut pkt.frame, &pkt.key);
                        pkt.reparse();
                    }
                    return;
                }
                if pkt.key.vlan_tci.is_none() {
                    packet::push_vlan(&mut pkt.frame, &pkt.key, packet::ETH_TYPE_VLAN);
                }
                if pkt.frame.len() >= 18 {
                    pkt.frame[14..16].copy_from_slice(&(new & !0x1000).to_be_bytes());
                    pkt.reparse();
                }
            }
            field => {
                let Some(old) = pkt.key.get(field) else { return };
                let new = nx::deposit(old, ofs, n, v) & field.value_bits();
                let w = field.width();
                if new != old
                    && packet::set_field(&mut pkt.frame, &pkt.key, field, &new.to_be_bytes()[16 - w..])
                {
                    pkt.reparse();
                }
            }
        }
    }

    /// NXAST_RESUBMIT(_TABLE): the packet (with `in_port` replaced unless 0xfff8) is looked
    /// up in `table` (0xff: the current one); the matched entry's instructions run now
    /// (apply-actions, the action set, metadata, goto-table); then the caller's actions go on.
    fn resubmit(&mut self, in_port: u16, table: u8, pkt: &mut Pkt, now_ns: u64) {
        if pkt.depth >= MAX_RESUBMIT_DEPTH || pkt.resubmits >= MAX_RESUBMITS {
            self.resubmit_drops += 1;
            pkt.overflow = true;
            pkt.dead = true;
            return;
        }
        let table = if table == NX_RESUBMIT_CURRENT_TABLE { pkt.table_id } else { table };
        let saved = (pkt.key.in_port, pkt.table_id, pkt.cookie, pkt.table_miss, pkt.rule);
        if in_port != NX_RESUBMIT_IN_PORT {
            pkt.key.in_port = nx::port_from_u16(in_port);
        }
        pkt.depth += 1;
        pkt.resubmits += 1;
        self.run_tables(table, pkt, now_ns);
        if pkt.dead {
            return;
        }
        pkt.depth -= 1;
        (pkt.key.in_port, pkt.table_id, pkt.cookie, pkt.table_miss, pkt.rule) = saved;
    }

    /// NXAST_LEARN: adds the flow built from this packet, or refreshes the one with the
    /// same table, priority and match (actions replaced, timeouts restarted, counters kept).
    fn learn(&mut self, l: &Learn, pkt: &Pkt, now_ns: u64) {
        let (matches, actions) = nx::learn_flow(l, &pkt.key);
        let fm = FlowMod {
            cookie: l.cookie,
            table_id: l.table_id,
            idle_timeout: l.idle_timeout,
            hard_timeout: l.hard_timeout,
            flags: if l.flags & NX_LEARN_F_SEND_FLOW_REM != 0 { OFPFF_SEND_FLOW_REM } else { 0 },
            ..FlowMod::add(l.priority)
        };
        let instrs = if actions.is_empty() { vec![] } else { vec![Instruction::ApplyActions(actions)] };
        let Some(t) = self.tables.get_mut(l.table_id as usize) else { return };
        match t.add(&fm, matches, instrs, now_ns) {
            Ok(replaced) => self.replaced(&replaced.into_iter().collect::<Vec<_>>(), now_ns),
            Err(_) => self.learn_failures += 1,
        }
    }

    /// NXAST_FIN_TIMEOUT on a FIN or RST: the running entry's idle and hard timeouts drop
    /// to the given ones if those are shorter (0 leaves a timeout alone), as in Open vSwitch.
    fn reduce_timeouts(&mut self, pkt: &Pkt, idle: u16, hard: u16) {
        let reduce = |max: u16, t: &mut u16| {
            if max != 0 && (*t == 0 || *t > max) {
                *t = max;
            }
        };
        let Some(t) = self.tables.get_mut(pkt.table_id as usize) else { return };
        if let Some(e) =
            t.entries.find_mut(|e| Rc::as_ptr(&e.instructions) as *const Instruction as usize == pkt.rule)
        {
            reduce(idle, &mut e.idle_timeout);
            reduce(hard, &mut e.hard_timeout);
        }
    }

    fn emit(&mut self, port: u32, pkt: &Pkt, now_ns: u64) {
        let Some(p) = self.ports.get(&port) else { return };
        if p.desc.config & (OFPPC_NO_FWD | OFPPC_PORT_DOWN) != 0 {
            return;
        }
        let mut frame = pkt.frame.clone();
        if let Some(label) = pkt.conga {
            // CE: the most congested port on the path so far, this one included.
            let here = conga::metric(p.tx_meter.bytes_per_s(now_ns), line_rate_bps(&p.desc));
            conga::push(&mut frame, &Label { ce: label.ce.max(here), ..label });
        }
        self.out.push(Output { port, frame, queue: pkt.queue });
    }

    fn output(&mut self, port: u32, max_len: u16, pkt: &mut Pkt, now_ns: u64) {
        let in_port = pkt.key.in_port;
        match port {
            OFPP_CONTROLLER => {
                let reason = if pkt.table_miss { OFPR_NO_MATCH } else { OFPR_ACTION };
                self.packet_in(reason, max_len, pkt);
            }
            OFPP_FLOOD | OFPP_ALL => {
                let targets: Vec<u32> = self.ports.keys().copied().filter(|&p| p != in_port).collect();
                for p in targets {
                    self.emit(p, pkt, now_ns);
                }
            }
            OFPP_IN_PORT => self.emit(in_port, pkt, now_ns),
            OFPP_TABLE => self.pipeline(in_port, pkt.frame.clone(), 0, pkt.conga, now_ns),
            OFPP_NORMAL => self.learning_switch(in_port, pkt.frame.clone(), now_ns),
            OFPP_LOCAL | OFPP_ANY => {}
            p if p == in_port => {} // only OFPP_IN_PORT may send back out the input port
            p => self.emit(p, pkt, now_ns),
        }
    }

    fn packet_in(&mut self, reason: u8, max_len: u16, pkt: &Pkt) {
        if !self.connected {
            self.packet_ins_dropped += 1;
            return;
        }
        if let Some(p) = self.ports.get(&pkt.key.in_port) {
            if p.desc.config & OFPPC_NO_PACKET_IN != 0 {
                return;
            }
        }
        if self.async_masks[0] & (1 << reason) == 0 {
            return;
        }
        let n =
            if max_len == OFPCML_NO_BUFFER { pkt.frame.len() } else { pkt.frame.len().min(max_len as usize) };
        let mut fields = vec![Oxm::basic(0, pkt.key.in_port.to_be_bytes().to_vec(), None)];
        if pkt.key.metadata != 0 {
            fields.push(Oxm::basic(2, pkt.key.metadata.to_be_bytes().to_vec(), None));
        }
        self.ctrl.push(Msg::new(
            0,
            Body::PacketIn {
                buffer_id: OFP_NO_BUFFER,
                total_len: pkt.frame.len().min(0xffff) as u16,
                reason,
                table_id: pkt.table_id,
                cookie: pkt.cookie,
                matches: Match { fields },
                data: pkt.frame[..n].to_vec(),
            },
        ));
    }

    fn bucket_live(&self, b: &Bucket, depth: u8) -> bool {
        let port_ok = b.watch_port == OFPP_ANY || self.ports.get(&b.watch_port).is_some_and(|p| p.live());
        let group_ok = b.watch_group == OFPG_ANY
            || (depth < MAX_GROUP_DEPTH
                && self
                    .groups
                    .groups
                    .get(&b.watch_group)
                    .is_some_and(|g| g.buckets.iter().any(|x| self.bucket_live(x, depth + 1))));
        port_ok && group_ok
    }

    fn exec_group(&mut self, gid: u32, pkt: &mut Pkt, depth: u8, now_ns: u64) {
        if depth >= MAX_GROUP_DEPTH {
            return;
        }
        let Some(g) = self.groups.groups.get(&gid) else { return };
        let buckets = Rc::clone(&g.buckets);
        let gtype = g.group_type;
        let bytes = pkt.frame.len();
        let chosen: Vec<usize> = match gtype {
            OFPGT_ALL => (0..buckets.len()).collect(),
            OFPGT_INDIRECT => vec![0],
            OFPGT_FF => buckets.iter().position(|b| self.bucket_live(b, depth)).into_iter().collect(),
            _ => {
                let live: Vec<bool> = buckets.iter().map(|b| self.bucket_live(b, depth)).collect();
                let key = &pkt.key;
                let ports = PortView(&self.ports);
                // A CONGA leaf decides the path of a host's packet (one without a label).
                let leaf =
                    self.conga.as_ref().filter(|o| o.leaf.is_some() && pkt.conga.is_none() && key.is_ipv4);
                let dst_leaf = leaf.and_then(|o| o.leaf_of(key.ipv4_dst));
                let paths = leaf.map(|o| LeafPaths { overlay: o, dst_leaf });
                let ctx = Context {
                    now_ns,
                    bytes,
                    ports: &ports,
                    paths: paths.as_ref().map(|p| p as &dyn PathMetrics),
                };
                let chosen = self.groups.select(
                    gid,
                    &live,
                    &self.default_balancer,
                    || key.flow_hash(),
                    &ctx,
                    &mut self.rng,
                );
                if let (Some(bucket), true) = (chosen, paths.is_some()) {
                    pkt.conga = self.conga.as_mut().and_then(|o| o.label(dst_leaf, bucket, now_ns));
                }
                chosen.into_iter().collect()
            }
        };
        if let Some(g) = self.groups.groups.get_mut(&gid) {
            if chosen.is_empty() {
                g.count(None, bytes);
            }
            for &i in &chosen {
                g.count(Some(i), bytes);
            }
        }
        let n = chosen.len();
        for (k, i) in chosen.into_iter().enumerate() {
            let Some(b) = buckets.get(i) else { continue };
            if k + 1 == n {
                // Last (or only) bucket works on the packet itself: no copy.
                self.apply_list(&b.actions, pkt, depth + 1, now_ns);
            } else {
                let mut copy = pkt.clone();
                self.apply_list(&b.actions, &mut copy, depth + 1, now_ns);
            }
        }
    }

    /// MAC learning (fail-standalone mode and OFPP_NORMAL).
    fn learning_switch(&mut self, in_port: u32, frame: Vec<u8>, now_ns: u64) {
        if frame.len() < 14 {
            return;
        }
        let key = Key::parse(&frame, in_port);
        if key.eth_src[0] & 1 == 0 {
            self.macs.insert(key.eth_src, (in_port, now_ns));
        }
        let pkt = Pkt::new(frame, key, 0, 0);
        let known = if pkt.key.eth_dst[0] & 1 == 0 {
            self.macs
                .get(&pkt.key.eth_dst)
                .filter(|(_, t)| now_ns.saturating_sub(*t) < MAC_AGE_NS)
                .map(|(p, _)| *p)
        } else {
            None
        };
        match known {
            Some(p) if p == in_port => {}
            Some(p) => self.emit(p, &pkt, now_ns),
            None => {
                let targets: Vec<u32> = self.ports.keys().copied().filter(|&p| p != in_port).collect();
                for p in targets {
                    self.emit(p, &pkt, now_ns);
                }
            }
        }
    }
}

/// Splits reply entries into multipart messages that each fit in 64 KiB.
fn chunk<T: Clone>(items: Vec<T>, wrap: fn(Vec<T>) -> MpReply) -> Vec<MpReply> {
    if items.is_empty() {
        return vec![wrap(items)];
    }
    let mut out = Vec::new();
    let mut cur: Vec<T> = Vec::new();
    let mut cur_len = 0;
    for it in items {
        let one =
            Msg::new(0, Body::MultipartReply { flags: 0, reply: wrap(vec![it.clone()]) }).encode().len() - 16;
        if !cur.is_empty() && cur_len + one > MP_BODY_MAX {
            out.push(wrap(std::mem::take(&mut cur)));
            cur_len = 0;
        }
        cur.push(it);
        cur_len += one;
    }
    out.push(wrap(cur));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_action_set_is_empty_exactly_when_it_has_nothing_to_run() {
        let empty = ActionSet::default();
        assert!(empty.is_empty() && empty.to_list().is_empty());
        let one_each = [
            Action::PopVlan,
            Action::PushVlan(0x8100),
            Action::DecNwTtl,
            Action::SetNwTtl(3),
            Action::SetField(Oxm::basic(Field::IpDscp as u8, vec![1], None)),
            Action::SetQueue(1),
            Action::Group(1),
            Action::Output { port: 1, max_len: 0 },
        ];
        for a in one_each {
            let mut s = ActionSet::default();
            s.write(std::slice::from_ref(&a));
            assert!(!s.is_empty() && !s.to_list().is_empty(), "{a:?}");
        }
        // Actions the set has no slot for leave it empty.
        let mut s = ActionSet::default();
        s.write(&[Action::Nx(NxAction::Exit)]);
        assert!(s.is_empty() && s.to_list().is_empty());
    }
}
