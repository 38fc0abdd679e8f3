//! Flow tables: OXM match compilation and validation, lookup by priority, the
//! flow-mod add/modify/delete semantics of OpenFlow 1.3, and timeouts.

use std::rc::Rc;

use crate::ofp::codec::{Action, FlowMod, Instruction, Match, OfpErr, Oxm, NXM_CLASS_0, NXM_CLASS_1};
use crate::ofp::consts::*;
use crate::packet::{Field, Key};

/// One compiled match field: packet value `v` matches when `v & mask == value`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MField {
    pub field: Field,
    pub value: u128,
    pub mask: u128,
}

/// A validated, compiled match plus the original OXM list (echoed in stats replies).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MatchSpec {
    pub fields: Vec<MField>,
    pub raw: Match,
}

fn be_u128(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | x as u128)
}

/// Maps an OXM TLV to our field id, or None if we do not support it.
pub fn oxm_field(o: &Oxm) -> Option<Field> {
    match (o.class, o.experimenter) {
        (OFPXMC_OPENFLOW_BASIC, None) => Field::from_basic(o.field),
        (OFPXMC_EXPERIMENTER, Some(ONF_EXPERIMENTER_ID)) if o.field == 42 => Some(Field::TcpFlags),
        // NXM_NX_REG0..7, as Ryu encodes `reg0=` in an OpenFlow 1.3 match.
        (NXM_CLASS_1, None) => Field::reg(o.field),
        _ => None,
    }
}

/// The OXM TLV that matches `field` under `mask` (no mask when it covers the whole
/// field): how a flow the switch built itself (learn) shows in stats and flow-removed.
pub fn oxm_for(field: Field, value: u128, mask: u128) -> Oxm {
    let w = field.width();
    let bytes = |v: u128| v.to_be_bytes()[16 - w..].to_vec();
    let mask = (mask != field.value_bits()).then(|| bytes(mask));
    let (class, number, experimenter) = match field {
        Field::TcpFlags => (OFPXMC_EXPERIMENTER, 42, Some(ONF_EXPERIMENTER_ID)),
        Field::VlanTci => (NXM_CLASS_0, 4, None),
        f => match f.reg_index() {
            Some(n) => (NXM_CLASS_1, n as u8, None),
            None => (OFPXMC_OPENFLOW_BASIC, f as u8, None),
        },
    };
    Oxm { class, field: number, experimenter, value: bytes(value), mask }
}

fn bm(code: u16) -> OfpErr {
    OfpErr::new(OFPET_BAD_MATCH, code)
}

impl MatchSpec {
    /// Compiles and validates a match (BAD_MATCH errors per the spec).
    pub fn compile(m: &Match) -> Result<MatchSpec, OfpErr> {
        let mut fields: Vec<MField> = Vec::with_capacity(m.fields.len());
        for o in &m.fields {
            let f = oxm_field(o).ok_or(bm(OFPBMC_BAD_FIELD))?;
            if o.value.len() != f.width() {
                return Err(bm(OFPBMC_BAD_LEN));
            }
            if fields.iter().any(|x| x.field == f) {
                return Err(bm(OFPBMC_DUP_FIELD));
            }
            let full = f.value_bits();
            let mask = match &o.mask {
                None => full,
                Some(_) if !f.maskable() => return Err(bm(OFPBMC_BAD_MASK)),
                Some(mb) => be_u128(mb) & full,
            };
            let value = be_u128(&o.value);
            if value & !full != 0 {
                return Err(bm(OFPBMC_BAD_VALUE));
            }
            // Spec allows rejecting value bits outside the mask; we mask them instead,
            // as OVS does, so equivalent matches compare equal.
            fields.push(MField { field: f, value: value & mask, mask });
        }
        let spec = MatchSpec { fields, raw: m.clone() };
        spec.check_prereqs()?;
        Ok(spec)
    }

    /// A match the switch builds itself (a learned flow): fields as given, in field
    /// order, value bits outside the mask cleared; `raw` lists them as OXM TLVs.
    pub fn from_fields(mut fields: Vec<MField>) -> MatchSpec {
        fields.sort_by_key(|m| m.field);
        for m in &mut fields {
            m.mask &= m.field.value_bits();
            m.value &= m.mask;
        }
        let raw = Match { fields: fields.iter().map(|m| oxm_for(m.field, m.value, m.mask)).collect() };
        MatchSpec { fields, raw }
    }

    fn exact(&self, f: Field) -> Option<u128> {
        self.fields.iter().find(|x| x.field == f && x.mask == f.value_bits()).map(|x| x.value)
    }

    fn check_prereqs(&self) -> Result<(), OfpErr> {
        for mf in &self.fields {
            if !self.prereqs_ok(mf.field) {
                return Err(bm(OFPBMC_BAD_PREREQ));
            }
        }
        Ok(())
    }

    /// Does this match establish `f`'s prerequisites (OpenFlow 1.3 table 11)? Also how
    /// Nicira actions that read or write `f` are checked against their flow's match.
    pub fn prereqs_ok(&self, f: Field) -> bool {
        use Field::*;
        let et = self.exact(EthType);
        let proto = self.exact(IpProto);
        let is_ip = matches!(et, Some(0x0800) | Some(0x86dd));
        match f {
            VlanPcp => self
                .fields
                .iter()
                .any(|x| x.field == VlanVid && x.value & 0x1000 != 0 && x.mask & 0x1000 != 0),
            IpDscp | IpEcn | IpProto => is_ip,
            Ipv4Src | Ipv4Dst => et == Some(0x0800),
            Ipv6Src | Ipv6Dst | Ipv6Flabel => et == Some(0x86dd),
            ArpOp | ArpSpa | ArpTpa | ArpSha | ArpTha => et == Some(0x0806),
            TcpSrc | TcpDst | TcpFlags => is_ip && proto == Some(6),
            UdpSrc | UdpDst => is_ip && proto == Some(17),
            SctpSrc | SctpDst => is_ip && proto == Some(132),
            Icmpv4Type | Icmpv4Code => et == Some(0x0800) && proto == Some(1),
            Icmpv6Type | Icmpv6Code => et == Some(0x86dd) && proto == Some(58),
            _ => true,
        }
    }

    pub fn matches(&self, k: &Key) -> bool {
        self.fields.iter().all(|mf| k.get(mf.field).is_some_and(|v| v & mf.mask == mf.value))
    }

    /// True if every packet matched by `other` (a more specific entry) is matched by self;
    /// this is the non-strict modify/delete/stats selection rule.
    pub fn covers(&self, other: &MatchSpec) -> bool {
        self.fields.iter().all(|mf| {
            other.fields.iter().any(|o| {
                o.field == mf.field && (o.mask & mf.mask) == mf.mask && (o.value & mf.mask) == mf.value
            })
        })
    }

    /// Identical field set (order-insensitive), for strict operations.
    pub fn same(&self, other: &MatchSpec) -> bool {
        self.fields.len() == other.fields.len() && self.fields.iter().all(|mf| other.fields.contains(mf))
    }

    /// Could one packet match both? (for OFPFF_CHECK_OVERLAP)
    pub fn overlaps(&self, other: &MatchSpec) -> bool {
        self.fields.iter().all(|a| {
            other
                .fields
                .iter()
                .filter(|b| b.field == a.field)
                .all(|b| (a.value & b.mask) & a.mask == (b.value & a.mask) & b.mask)
        })
    }
}

/// A flow entry. Times are monotonic nanoseconds.
#[derive(Debug, Clone)]
pub struct FlowEntry {
    pub table_id: u8,
    pub priority: u16,
    pub matches: MatchSpec,
    /// Validated and sorted into the spec's execution order.
    pub instructions: Rc<[Instruction]>,
    pub cookie: u64,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub packet_count: u64,
    pub byte_count: u64,
    pub created_ns: u64,
    pub last_used_ns: u64,
}

impl FlowEntry {
    pub fn is_table_miss(&self) -> bool {
        self.priority == 0 && self.matches.fields.is_empty()
    }

    /// Whether any instruction outputs to `port` (for out_port filters).
    pub fn outputs_to_port(&self, port: u32) -> bool {
        self.actions().any(|a| matches!(a, Action::Output { port: p, .. } if *p == port))
    }

    pub fn outputs_to_group(&self, group: u32) -> bool {
        self.actions().any(|a| matches!(a, Action::Group(g) if *g == group))
    }

    fn actions(&self) -> impl Iterator<Item = &Action> {
        self.instructions.iter().flat_map(|i| match i {
            Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a.as_slice(),
            _ => &[],
        })
    }
}

/// The order the spec executes instructions in, whatever order they came in.
pub fn instruction_rank(i: &Instruction) -> u8 {
    match i {
        Instruction::Meter(_) => 0,
        Instruction::ApplyActions(_) => 1,
        Instruction::ClearActions => 2,
        Instruction::WriteActions(_) => 3,
        Instruction::WriteMetadata { .. } => 4,
        Instruction::GotoTable(_) => 5,
        Instruction::Experimenter { .. } => 6,
    }
}

#[derive(Debug, Default)]
pub struct FlowTable {
    /// Sorted by priority, highest first; equal priorities keep insertion order.
    pub entries: Vec<FlowEntry>,
    /// At most this many entries (None: unbounded); a new one beyond is TABLE_FULL.
    pub max_entries: Option<usize>,
    pub lookup_count: u64,
    pub matched_count: u64,
}

/// Why a flow left the table, for flow-removed messages.
pub struct Removed {
    pub entry: FlowEntry,
    pub reason: u8,
}

/// Selection criteria shared by non-strict/strict modify, delete and flow stats.
pub struct Selector<'a> {
    pub matches: &'a MatchSpec,
    pub priority: u16,
    pub strict: bool,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub out_port: u32,
    pub out_group: u32,
}

impl Selector<'_> {
    pub fn selects(&self, e: &FlowEntry) -> bool {
        if self.cookie_mask != 0 && (e.cookie & self.cookie_mask) != (self.cookie & self.cookie_mask) {
            return false;
        }
        if self.out_port != OFPP_ANY && !e.outputs_to_port(self.out_port) {
            return false;
        }
        if self.out_group != OFPG_ANY && !e.outputs_to_group(self.out_group) {
            return false;
        }
        if self.strict {
            e.priority == self.priority && e.matches.same(self.matches)
        } else {
            self.matches.covers(&e.matches)
        }
    }
}

impl FlowTable {
    pub fn lookup(&mut self, k: &Key, bytes: usize, now_ns: u64) -> Option<&FlowEntry> {
        self.lookup_count += 1;
        let idx = self.entries.iter().position(|e| e.matches.matches(k))?;
        self.matched_count += 1;
        let e = &mut self.entries[idx];
        e.packet_count += 1;
        e.byte_count += bytes as u64;
        e.last_used_ns = now_ns;
        Some(&self.entries[idx])
    }

    /// OFPFC_ADD. An entry with the same priority and match is replaced; its instructions
    /// are returned (the caller may have to act on what they held, e.g. delete_learned).
    pub fn add(
        &mut self,
        fm: &FlowMod,
        matches: MatchSpec,
        instructions: Vec<Instruction>,
        now_ns: u64,
    ) -> Result<Option<Rc<[Instruction]>>, OfpErr> {
        if fm.flags & OFPFF_CHECK_OVERLAP != 0
            && self.entries.iter().any(|e| {
                e.priority == fm.priority && !e.matches.same(&matches) && e.matches.overlaps(&matches)
            })
        {
            return Err(OfpErr::new(OFPET_FLOW_MOD_FAILED, OFPFMFC_OVERLAP));
        }
        let entry = FlowEntry {
            table_id: fm.table_id,
            priority: fm.priority,
            matches,
            instructions: instructions.into(),
            cookie: fm.cookie,
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            flags: fm.flags,
            packet_count: 0,
            byte_count: 0,
            created_ns: now_ns,
            last_used_ns: now_ns,
        };
        if let Some(e) =
            self.entries.iter_mut().find(|e| e.priority == entry.priority && e.matches.same(&entry.matches))
        {
            // Identical match and priority: the new entry replaces the old one. Keep the
            // counters unless asked to reset them (OVS does the same).
            let (p, b) = (e.packet_count, e.byte_count);
            let old = std::mem::replace(e, entry);
            if fm.flags & OFPFF_RESET_COUNTS == 0 {
                e.packet_count = p;
                e.byte_count = b;
            }
            return Ok(Some(old.instructions));
        }
        if self.max_entries.is_some_and(|max| self.entries.len() >= max) {
            return Err(OfpErr::new(OFPET_FLOW_MOD_FAILED, OFPFMFC_TABLE_FULL));
        }
        let pos = self.entries.partition_point(|e| e.priority >= entry.priority);
        self.entries.insert(pos, entry);
        Ok(None)
    }

    /// OFPFC_MODIFY(_STRICT): replaces instructions of selected entries (In 1.3 a modify
    /// that selects nothing is a no-op); returns the instruction lists it replaced.
    pub fn modify(
        &mut self,
        sel: &Selector,
        fm: &FlowMod,
        instructions: &[Instruction],
    ) -> Vec<Rc<[Instruction]>> {
        let mut old = Vec::new();
        for e in self.entries.iter_mut().filter(|e| sel.selects(e)) {
            old.push(std::mem::replace(&mut e.instructions, instructions.into()));
            if fm.flags & OFPFF_RESET_COUNTS != 0 {
                e.packet_count = 0;
                e.byte_count = 0;
            }
        }
        old
    }

    pub fn delete(&mut self, sel: &Selector, reason: u8, out: &mut Vec<Removed>) {
        let mut i = 0;
        while i < self.entries.len() {
            if sel.selects(&self.entries[i]) {
                let entry = self.entries.remove(i);
                out.push(Removed { entry, reason });
            } else {
                i += 1;
            }
        }
    }

    pub fn delete_where(&mut self, pred: impl Fn(&FlowEntry) -> bool, reason: u8, out: &mut Vec<Removed>) {
        let mut i = 0;
        while i < self.entries.len() {
            if pred(&self.entries[i]) {
                out.push(Removed { entry: self.entries.remove(i), reason });
            } else {
                i += 1;
            }
        }
    }

    pub fn expire(&mut self, now_ns: u64, out: &mut Vec<Removed>) {
        let mut i = 0;
        while i < self.entries.len() {
            let e = &self.entries[i];
            let reason = if e.hard_timeout != 0
                && now_ns >= e.created_ns + e.hard_timeout as u64 * 1_000_000_000
            {
                Some(OFPRR_HARD_TIMEOUT)
            } else if e.idle_timeout != 0 && now_ns >= e.last_used_ns + e.idle_timeout as u64 * 1_000_000_000
            {
                Some(OFPRR_IDLE_TIMEOUT)
            } else {
                None
            };
            match reason {
                Some(r) => out.push(Removed { entry: self.entries.remove(i), reason: r }),
                None => i += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::testpkt::ipv4_udp;

    fn m(fields: Vec<Oxm>) -> Match {
        Match { fields }
    }

    fn flow_mod(priority: u16) -> FlowMod {
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

    #[test]
    fn a_full_table_refuses_new_entries_but_replaces_existing_ones() {
        let mut t = FlowTable { max_entries: Some(2), ..FlowTable::default() };
        let udp = |port: u8| {
            MatchSpec::compile(&m(vec![
                Oxm::basic(5, vec![8, 0], None),
                Oxm::basic(10, vec![17], None),
                Oxm::basic(16, vec![0, port], None),
            ]))
            .unwrap()
        };
        t.add(&flow_mod(10), udp(1), vec![], 0).unwrap();
        t.add(&flow_mod(10), udp(2), vec![], 0).unwrap();
        let full = t.add(&flow_mod(10), udp(3), vec![], 0).unwrap_err();
        assert_eq!(full, OfpErr::new(OFPET_FLOW_MOD_FAILED, OFPFMFC_TABLE_FULL));
        t.add(&flow_mod(10), udp(2), vec![], 5).unwrap(); // same match: a replacement
        assert_eq!(t.entries.len(), 2);
    }

    #[test]
    fn prereqs_enforced() {
        let bad = m(vec![Oxm::basic(11, vec![10, 0, 0, 1], None)]);
        assert_eq!(MatchSpec::compile(&bad).unwrap_err(), bm(OFPBMC_BAD_PREREQ));
        let good = m(vec![Oxm::basic(5, vec![8, 0], None), Oxm::basic(11, vec![10, 0, 0, 1], None)]);
        assert!(MatchSpec::compile(&good).is_ok());
        let dup = m(vec![Oxm::basic(0, vec![0, 0, 0, 1], None), Oxm::basic(0, vec![0, 0, 0, 2], None)]);
        assert_eq!(MatchSpec::compile(&dup).unwrap_err(), bm(OFPBMC_DUP_FIELD));
        let badlen = m(vec![Oxm::basic(0, vec![0, 1], None)]);
        assert_eq!(MatchSpec::compile(&badlen).unwrap_err(), bm(OFPBMC_BAD_LEN));
        let badmask = m(vec![Oxm::basic(0, vec![0, 0, 0, 1], Some(vec![0, 0, 0, 1]))]);
        assert_eq!(MatchSpec::compile(&badmask).unwrap_err(), bm(OFPBMC_BAD_MASK));
    }

    #[test]
    fn masked_match_and_cover() {
        let f = ipv4_udp([10, 0, 1, 5], [10, 0, 2, 6], 1, 2, 0, b"");
        let k = Key::parse(&f, 1);
        let net = MatchSpec::compile(&m(vec![
            Oxm::basic(5, vec![8, 0], None),
            Oxm::basic(11, vec![10, 0, 1, 0], Some(vec![255, 255, 255, 0])),
        ]))
        .unwrap();
        assert!(net.matches(&k));
        let host = MatchSpec::compile(&m(vec![
            Oxm::basic(5, vec![8, 0], None),
            Oxm::basic(11, vec![10, 0, 1, 5], None),
        ]))
        .unwrap();
        assert!(net.covers(&host));
        assert!(!host.covers(&net));
        assert!(MatchSpec::default().covers(&host));
        assert!(net.overlaps(&host));
    }

    #[test]
    fn vlan_none_matches_untagged() {
        let f = ipv4_udp([10, 0, 1, 5], [10, 0, 2, 6], 1, 2, 0, b"");
        let k = Key::parse(&f, 1);
        let none = MatchSpec::compile(&m(vec![Oxm::basic(6, vec![0, 0], None)])).unwrap();
        assert!(none.matches(&k));
        let present =
            MatchSpec::compile(&m(vec![Oxm::basic(6, vec![0x10, 0], Some(vec![0x10, 0]))])).unwrap();
        assert!(!present.matches(&k));
    }
}
