//! Flow tables: OXM match compilation and validation, lookup by priority, the
//! flow-mod add/modify/delete semantics of OpenFlow 1.3, and timeouts. Lookups go
//! through a tuple-space index ([`crate::flowindex`]); [`FlowTable::lookup_linear`] is
//! the plain scan it must agree with.

use std::cmp::Reverse;
use std::ops::Deref;
use std::rc::Rc;

use crate::flowindex::{Rank, TupleIndex};
use crate::nx;
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
        // NXM fields (Open vSwitch takes them in an OXM match too): the registers, as Ryu
        // encodes `reg0=`, and the NXM names of header fields (`ipv4_src_nxm=`).
        (NXM_CLASS_0 | NXM_CLASS_1, None) => nx::nxm_field(o.class, o.field).map(|(f, _)| f),
        _ => None,
    }
}

/// The value's width on the wire: the field's, except where an NXM field is narrower
/// (NXM_OF_IN_PORT: 16 bits).
fn wire_width(o: &Oxm, f: Field) -> usize {
    match (o.class, o.experimenter) {
        (NXM_CLASS_0 | NXM_CLASS_1, None) => nx::nxm_field(o.class, o.field).map_or(0, |(_, w)| w as usize),
        _ => f.width(),
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
            let w = wire_width(o, f);
            if o.value.len() != w {
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
            let mut value = be_u128(&o.value);
            if f == Field::InPort && w == 2 {
                value = nx::port_from_u16(value as u16) as u128; // an OpenFlow 1.0 number
            }
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
    /// Insertion number in its table (kept by a replacing entry): orders equal priorities.
    seq: u64,
}

impl FlowEntry {
    /// The entry's place in its table's order: higher priority first, then the earlier
    /// insertion.
    pub fn rank(&self) -> Rank {
        (Reverse(self.priority), self.seq)
    }

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

/// A table's entries, sorted by priority, highest first, equal priorities in insertion
/// order (as a slice: `entries.iter()`, `entries[i]`, `entries.len()`), and the lookup
/// index over them. Only [`FlowTable`]'s methods add or remove entries, so the index
/// always holds exactly the list.
#[derive(Debug, Default)]
pub struct FlowEntries {
    list: Vec<FlowEntry>,
    index: TupleIndex,
    next_seq: u64,
}

impl Deref for FlowEntries {
    type Target = [FlowEntry];
    fn deref(&self) -> &[FlowEntry] {
        &self.list
    }
}

impl FlowEntries {
    /// Removes every entry (no flow-removed messages: the caller's business).
    pub fn clear(&mut self) {
        self.list.clear();
        self.index = TupleIndex::default();
    }

    /// The first entry `pred` accepts, to change in place. The change must leave its
    /// priority and match alone (the index is keyed on them); timeouts, counters and
    /// flags are free to change.
    pub fn find_mut(&mut self, pred: impl Fn(&FlowEntry) -> bool) -> Option<&mut FlowEntry> {
        self.list.iter_mut().find(|e| pred(e))
    }

    /// The lookup index (for tests and benchmarks: its size and shape count).
    pub fn index(&self) -> &TupleIndex {
        &self.index
    }

    fn insert(&mut self, mut e: FlowEntry) {
        e.seq = self.next_seq;
        self.next_seq += 1;
        let pos = self.list.partition_point(|x| x.priority >= e.priority);
        self.index.insert(&e);
        self.list.insert(pos, e);
    }

    /// Puts `e` in the place of the entry at `pos` (same priority), keeping its order;
    /// returns the old entry.
    fn replace(&mut self, pos: usize, mut e: FlowEntry) -> FlowEntry {
        e.seq = self.list[pos].seq;
        self.index.remove(&self.list[pos]);
        self.index.insert(&e);
        std::mem::replace(&mut self.list[pos], e)
    }

    /// Takes out, in table order, every entry `why` gives a reason for.
    fn remove_where(&mut self, mut why: impl FnMut(&FlowEntry) -> Option<u8>, out: &mut Vec<Removed>) {
        let Some(first) = self.list.iter().position(|e| why(e).is_some()) else { return };
        let tail = self.list.split_off(first);
        for entry in tail {
            match why(&entry) {
                Some(reason) => {
                    self.index.remove(&entry);
                    out.push(Removed { entry, reason });
                }
                None => self.list.push(entry),
            }
        }
    }
}

#[derive(Debug, Default)]
pub struct FlowTable {
    /// Sorted by priority, highest first; equal priorities keep insertion order.
    pub entries: FlowEntries,
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
    /// The position of the entry `k` hits: the first in table order whose match
    /// matches, found through the index. Counts nothing.
    pub fn find(&self, k: &Key) -> Option<usize> {
        self.entries.index.lookup(&self.entries.list, k)
    }

    /// What [`FlowTable::find`] computes, by testing every entry in order: the reference
    /// the index is checked against.
    pub fn lookup_linear(&self, k: &Key) -> Option<usize> {
        self.entries.iter().position(|e| e.matches.matches(k))
    }

    /// The position of the entry an OFPFC_ADD of `priority` and `m` replaces, by
    /// scanning every entry: the reference for the index's answer.
    pub fn find_same_linear(&self, priority: u16, m: &MatchSpec) -> Option<usize> {
        self.entries.iter().position(|e| e.priority == priority && e.matches.same(m))
    }

    /// The lookup of a packet: the entry it hits, with its counters updated.
    pub fn lookup(&mut self, k: &Key, bytes: usize, now_ns: u64) -> Option<&FlowEntry> {
        self.lookup_count += 1;
        let idx = self.find(k)?;
        self.matched_count += 1;
        let e = &mut self.entries.list[idx];
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
        if fm.flags & OFPFF_CHECK_OVERLAP != 0 && {
            // Only the entries of this priority can overlap: a run of the sorted list.
            let from = self.entries.partition_point(|e| e.priority > fm.priority);
            let to = self.entries.partition_point(|e| e.priority >= fm.priority);
            self.entries[from..to].iter().any(|e| !e.matches.same(&matches) && e.matches.overlaps(&matches))
        } {
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
            seq: 0,
        };
        let same = self.entries.index.find_same(&self.entries.list, entry.priority, &entry.matches);
        if let Some(pos) = same {
            // Identical match and priority: the new entry replaces the old one. Keep the
            // counters unless asked to reset them (OVS does the same).
            let mut entry = entry;
            if fm.flags & OFPFF_RESET_COUNTS == 0 {
                entry.packet_count = self.entries[pos].packet_count;
                entry.byte_count = self.entries[pos].byte_count;
            }
            let old = self.entries.replace(pos, entry);
            return Ok(Some(old.instructions));
        }
        if self.max_entries.is_some_and(|max| self.entries.len() >= max) {
            return Err(OfpErr::new(OFPET_FLOW_MOD_FAILED, OFPFMFC_TABLE_FULL));
        }
        self.entries.insert(entry);
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
        // Instructions and counters only: the index does not change.
        for e in self.entries.list.iter_mut().filter(|e| sel.selects(e)) {
            old.push(std::mem::replace(&mut e.instructions, instructions.into()));
            if fm.flags & OFPFF_RESET_COUNTS != 0 {
                e.packet_count = 0;
                e.byte_count = 0;
            }
        }
        old
    }

    pub fn delete(&mut self, sel: &Selector, reason: u8, out: &mut Vec<Removed>) {
        self.entries.remove_where(|e| sel.selects(e).then_some(reason), out);
    }

    pub fn delete_where(&mut self, pred: impl Fn(&FlowEntry) -> bool, reason: u8, out: &mut Vec<Removed>) {
        self.entries.remove_where(|e| pred(e).then_some(reason), out);
    }

    pub fn expire(&mut self, now_ns: u64, out: &mut Vec<Removed>) {
        self.entries.remove_where(
            |e| {
                if e.hard_timeout != 0 && now_ns >= e.created_ns + e.hard_timeout as u64 * 1_000_000_000 {
                    Some(OFPRR_HARD_TIMEOUT)
                } else if e.idle_timeout != 0
                    && now_ns >= e.last_used_ns + e.idle_timeout as u64 * 1_000_000_000
                {
                    Some(OFPRR_IDLE_TIMEOUT)
                } else {
                    None
                }
            },
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::testpkt::ipv4_udp;

    fn m(fields: Vec<Oxm>) -> Match {
        Match { fields }
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
        t.add(&FlowMod::add(10), udp(1), vec![], 0).unwrap();
        t.add(&FlowMod::add(10), udp(2), vec![], 0).unwrap();
        let full = t.add(&FlowMod::add(10), udp(3), vec![], 0).unwrap_err();
        assert_eq!(full, OfpErr::new(OFPET_FLOW_MOD_FAILED, OFPFMFC_TABLE_FULL));
        t.add(&FlowMod::add(10), udp(2), vec![], 5).unwrap(); // same match: a replacement
        assert_eq!(t.entries.len(), 2);
    }

    #[test]
    fn nxm_fields_in_a_match_are_their_oxm_counterparts() {
        let nxm = |class, field, v: Vec<u8>| Oxm { class, field, experimenter: None, value: v, mask: None };
        let m = MatchSpec::compile(&m(vec![
            nxm(NXM_CLASS_0, 0, vec![0, 3]), // NXM_OF_IN_PORT, 16 bits
            nxm(NXM_CLASS_0, 3, vec![8, 0]),
            nxm(NXM_CLASS_0, 7, vec![10, 0, 1, 5]),
            nxm(NXM_CLASS_1, 2, vec![0, 0, 0, 9]), // reg2
        ]))
        .unwrap();
        let f = ipv4_udp([10, 0, 1, 5], [10, 0, 2, 6], 1, 2, 0, b"");
        let mut k = Key::parse(&f, 3);
        k.regs[2] = 9;
        assert!(m.matches(&k));
        assert_eq!(m.fields[0], MField { field: Field::InPort, value: 3, mask: 0xffff_ffff });
        // The same field twice, once by each name, is a duplicate; a wrong width a bad length.
        let dup = MatchSpec::compile(&self::m(vec![
            Oxm::basic(5, vec![8, 0], None),
            Oxm::basic(11, vec![10, 0, 1, 5], None),
            nxm(NXM_CLASS_0, 7, vec![10, 0, 1, 5]),
        ]));
        assert_eq!(dup.unwrap_err(), bm(OFPBMC_DUP_FIELD));
        let wide = MatchSpec::compile(&self::m(vec![nxm(NXM_CLASS_0, 0, vec![0, 0, 0, 3])]));
        assert_eq!(wide.unwrap_err(), bm(OFPBMC_BAD_LEN));
        let unknown = MatchSpec::compile(&self::m(vec![nxm(NXM_CLASS_1, 33, vec![0, 0, 0, 1])]));
        assert_eq!(unknown.unwrap_err(), bm(OFPBMC_BAD_FIELD)); // pkt_mark
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
