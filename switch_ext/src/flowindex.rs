//! The lookup index of one flow table: tuple-space search, so finding the entry a packet
//! hits (and the entry a flow mod replaces) costs about one hash probe per match *shape*
//! instead of one match test per entry.
//!
//! A shape is the set of (field, mask) pairs a match tests. Entries of one shape are kept
//! in a hash map from their values to the entries with exactly those values, best first.
//! A packet is looked up in a shape by reading each of its fields with [`Key::get`] (the
//! same reading [`MatchSpec::matches`] does: a field the packet lacks, because its
//! prerequisites do not hold, fails the whole shape), masking, hashing, and testing the
//! bucket's entries with `matches` itself, so a hash collision can never produce a wrong
//! hit and every entry that matches is in the bucket probed. The VLAN "none" value
//! (`vlan_vid=0` matches untagged frames) needs nothing special for the same reason:
//! `Key::get` gives untagged frames vlan_vid 0 and the shape hashes what it gives.
//!
//! Order is OpenFlow's: higher priority wins, equal priorities in insertion order. Each
//! entry has a rank `(Reverse(priority), seq)`, `seq` counting insertions (a replacing
//! entry keeps the seq of the one it replaces); the table's list is sorted by rank, so a
//! rank leads back to its entry by binary search, and the smallest rank among the shapes'
//! hits is exactly the first entry a linear scan would find. Shapes are visited by their
//! highest priority, and the search stops at the first shape whose highest priority is
//! below the best hit so far.
//!
//! Entries whose match names one field twice (which [`MatchSpec::compile`] refuses, but a
//! match built with [`MatchSpec::from_fields`] could hold) do not fit a shape, and are
//! kept in a small list tested one by one.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use crate::flow::{FlowEntry, MatchSpec};
use crate::packet::{Field, Key};

/// An entry's place in its table's order: smaller is matched first.
pub type Rank = (Reverse<u16>, u64);

/// A match's shape: its (field, mask) pairs, sorted by field.
type Shape = Box<[(Field, u128)]>;

/// The buckets are keyed by an already mixed 64-bit hash: the hasher passes it through.
#[derive(Default)]
struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(K1);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

const K1: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;

fn mix(acc: u64, v: u128) -> u64 {
    let (lo, hi) = (v as u64, (v >> 64) as u64);
    (acc.rotate_left(23) ^ lo ^ hi.wrapping_mul(K2)).wrapping_mul(K1)
}

/// Murmur3's finalizer: every input bit reaches the low bits (bucket index) and the top
/// ones (the hash table's control bytes).
fn finish(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// A signature of a match's shape, the same whatever order the match lists its fields
/// in, or None if it names a field twice. Allocates nothing: an OFPFC_ADD that replaces
/// an entry (a learn action, per packet) finds its shape with this alone.
fn shape_sig(m: &MatchSpec) -> Option<u64> {
    let f = &m.fields;
    let mut sum = f.len() as u64;
    for (i, x) in f.iter().enumerate() {
        if f[..i].iter().any(|y| y.field == x.field) {
            return None;
        }
        sum = sum.wrapping_add(mix(x.field as u64 + 1, x.mask));
    }
    Some(finish(sum))
}

/// The shape of a match that names no field twice.
fn shape_of(m: &MatchSpec) -> Shape {
    let mut s: Vec<(Field, u128)> = m.fields.iter().map(|f| (f.field, f.mask)).collect();
    s.sort_unstable_by_key(|&(f, _)| f);
    s.into_boxed_slice()
}

/// Whether a match that names no field twice has exactly this shape.
fn has_shape(m: &MatchSpec, shape: &[(Field, u128)]) -> bool {
    m.fields.len() == shape.len()
        && m.fields
            .iter()
            .all(|x| shape.binary_search_by_key(&x.field, |&(f, _)| f).is_ok_and(|i| shape[i].1 == x.mask))
}

/// The hash of a match's values, in its shape's field order.
fn value_hash(shape: &[(Field, u128)], m: &MatchSpec) -> u64 {
    let mut h = 0;
    for &(f, _) in shape {
        let v = m.fields.iter().find(|x| x.field == f).map_or(0, |x| x.value);
        h = mix(h, v);
    }
    finish(h)
}

/// The hash a packet has in a shape, or None if it lacks one of the shape's fields (then
/// no entry of the shape matches it).
fn key_hash(shape: &[(Field, u128)], k: &Key) -> Option<u64> {
    let mut h = 0;
    for &(f, mask) in shape {
        h = mix(h, k.get(f)? & mask);
    }
    Some(finish(h))
}

type Buckets = HashMap<u64, Vec<Rank>, BuildHasherDefault<PreHashed>>;

#[derive(Debug, Default)]
struct Group {
    shape: Shape,
    sig: u64,
    /// Value hash -> the ranks of the entries with that hash, sorted (best first).
    buckets: Buckets,
    /// How many entries of the group have each priority.
    prios: BTreeMap<u16, usize>,
    /// The highest priority in the group.
    top: u16,
}

/// Where to find, in a table's list (sorted by rank), the entry with rank `r`.
fn position(list: &[FlowEntry], r: Rank) -> usize {
    list.binary_search_by(|e| e.rank().cmp(&r))
        .unwrap_or_else(|_| panic!("flow index out of step with its table: no entry of rank {r:?}"))
}

fn insert_sorted(v: &mut Vec<Rank>, r: Rank) {
    let i = v.partition_point(|&x| x < r);
    v.insert(i, r);
}

fn remove_sorted(v: &mut Vec<Rank>, r: Rank) -> bool {
    match v.binary_search(&r) {
        Ok(i) => {
            v.remove(i);
            true
        }
        Err(_) => false,
    }
}

/// The tuple-space index of one table's entries (see the module documentation).
#[derive(Debug, Default)]
pub struct TupleIndex {
    groups: Vec<Group>,
    /// Shape signature -> the groups with it (more than one only on a collision).
    by_sig: HashMap<u64, Vec<usize>, BuildHasherDefault<PreHashed>>,
    /// Indices into `groups`, highest `top` first.
    order: Vec<usize>,
    /// Ranks of the entries that have no shape (a field named twice), sorted.
    unshaped: Vec<Rank>,
    len: usize,
}

impl TupleIndex {
    /// How many entries the index holds.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many shapes the entries form.
    pub fn shapes(&self) -> usize {
        self.groups.len()
    }

    /// The group of the shape of `m` (which has signature `sig`), if there is one.
    fn group_of(&self, sig: u64, m: &MatchSpec) -> Option<usize> {
        let candidates = self.by_sig.get(&sig)?;
        candidates.iter().copied().find(|&gi| has_shape(m, &self.groups[gi].shape))
    }

    fn reorder(&mut self) {
        self.order = (0..self.groups.len()).collect();
        let groups = &self.groups;
        self.order.sort_by_key(|&i| Reverse(groups[i].top));
    }

    pub fn insert(&mut self, e: &FlowEntry) {
        self.len += 1;
        let Some(sig) = shape_sig(&e.matches) else {
            insert_sorted(&mut self.unshaped, e.rank());
            return;
        };
        let gi = match self.group_of(sig, &e.matches) {
            Some(gi) => gi,
            None => {
                self.groups.push(Group { shape: shape_of(&e.matches), sig, ..Group::default() });
                self.by_sig.entry(sig).or_default().push(self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        let g = &mut self.groups[gi];
        let h = value_hash(&g.shape, &e.matches);
        let fresh = g.prios.is_empty();
        insert_sorted(g.buckets.entry(h).or_default(), e.rank());
        *g.prios.entry(e.priority).or_default() += 1;
        if fresh || e.priority > g.top {
            g.top = e.priority;
            self.reorder();
        }
    }

    /// Removes `e` (as it was inserted: same rank and match).
    pub fn remove(&mut self, e: &FlowEntry) {
        let r = e.rank();
        let Some(sig) = shape_sig(&e.matches) else {
            assert!(remove_sorted(&mut self.unshaped, r), "flow index: removing an entry it does not hold");
            self.len -= 1;
            return;
        };
        let gi = self.group_of(sig, &e.matches).expect("flow index: removing an entry of an unknown shape");
        let g = &mut self.groups[gi];
        let h = value_hash(&g.shape, &e.matches);
        let bucket = g.buckets.get_mut(&h).expect("flow index: removing an entry it does not hold");
        assert!(remove_sorted(bucket, r), "flow index: removing an entry it does not hold");
        if bucket.is_empty() {
            g.buckets.remove(&h);
        }
        self.len -= 1;
        let n = g.prios.get_mut(&e.priority).expect("flow index: priority count");
        *n -= 1;
        if *n > 0 {
            return;
        }
        g.prios.remove(&e.priority);
        match g.prios.last_key_value() {
            Some((&top, _)) => {
                if top != g.top {
                    g.top = top;
                    self.reorder();
                }
            }
            None => {
                // The shape is gone: move the last group into its slot.
                let same_sig = self.by_sig.get_mut(&sig).expect("flow index: shape signature");
                same_sig.retain(|&x| x != gi);
                if same_sig.is_empty() {
                    self.by_sig.remove(&sig);
                }
                let last = self.groups.len() - 1;
                self.groups.swap_remove(gi);
                if gi < last {
                    let moved = self.groups[gi].sig;
                    for x in self.by_sig.get_mut(&moved).expect("flow index: shape signature") {
                        if *x == last {
                            *x = gi;
                        }
                    }
                }
                self.reorder();
            }
        }
    }

    /// The position in `list` (the table's entries, sorted by rank, the ones this index
    /// holds) of the first entry that matches `k`: what a linear scan finds.
    pub fn lookup(&self, list: &[FlowEntry], k: &Key) -> Option<usize> {
        let mut best: Option<(Rank, usize)> = None;
        for &r in &self.unshaped {
            let pos = position(list, r);
            if list[pos].matches.matches(k) {
                best = Some((r, pos));
                break;
            }
        }
        for &gi in &self.order {
            let g = &self.groups[gi];
            if let Some((r, _)) = best {
                if g.top < r.0 .0 {
                    break; // neither this shape nor any after it can beat the hit
                }
            }
            let Some(h) = key_hash(&g.shape, k) else { continue };
            let Some(bucket) = g.buckets.get(&h) else { continue };
            for &r in bucket {
                if best.is_some_and(|(b, _)| b < r) {
                    break;
                }
                let pos = position(list, r);
                if list[pos].matches.matches(k) {
                    best = Some((r, pos));
                    break;
                }
            }
        }
        best.map(|(_, pos)| pos)
    }

    /// The position of the first entry with `priority` and a match `same` as `m`
    /// (`e.matches.same(m)`): the entry an OFPFC_ADD of (`priority`, `m`) replaces.
    pub fn find_same(&self, list: &[FlowEntry], priority: u16, m: &MatchSpec) -> Option<usize> {
        let mut best: Option<(Rank, usize)> = None;
        let consider = |r: Rank, best: &mut Option<(Rank, usize)>| {
            if r.0 .0 != priority || best.is_some_and(|(b, _)| b < r) {
                return;
            }
            let pos = position(list, r);
            if list[pos].matches.same(m) {
                *best = Some((r, pos));
            }
        };
        // An entry that names a field twice may be `same` as a match of another shape.
        for &r in &self.unshaped {
            consider(r, &mut best);
        }
        // An entry with a shape is `same` as `m` only if `m` has its shape and values
        // (and `m` then has a shape too: it names as many distinct fields).
        if let Some(g) = shape_sig(m).and_then(|sig| self.group_of(sig, m)).map(|gi| &self.groups[gi]) {
            for &r in g.buckets.get(&value_hash(&g.shape, m)).into_iter().flatten() {
                consider(r, &mut best);
            }
        }
        best.map(|(_, pos)| pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{FlowTable, MField, Removed, Selector};
    use crate::ofp::codec::{FlowMod, Match};
    use crate::ofp::consts::*;

    /// splitmix64: a small seeded generator, so every run tests the same tables.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.below(100) < percent
        }
        fn pick<T: Copy>(&mut self, v: &[T]) -> T {
            v[self.below(v.len() as u64) as usize]
        }
    }

    /// The fields the random matches use, each with the masks it may carry and the small
    /// value domain packets and matches draw from (so that they collide often).
    fn field_pool() -> Vec<(Field, Vec<u128>, Vec<u128>)> {
        use Field::*;
        let full = |f: Field| f.value_bits();
        vec![
            (InPort, vec![full(InPort)], vec![1, 2, 3, 4]),
            (EthSrc, vec![full(EthSrc), 0x0100_0000_0000], vec![0x0a, 0x0b, 0x0100_0000_000c]),
            (EthDst, vec![full(EthDst)], vec![0x0a, 0x0b, 0x0c]),
            (EthType, vec![full(EthType)], vec![0x0800, 0x0806, 0x86dd]),
            // 0: no tag (OFPVID_NONE); 0x1000: any tag (with the 0x1000 mask).
            (VlanVid, vec![full(VlanVid), 0x1000], vec![0, 0x1000, 0x1001, 0x1002]),
            (VlanPcp, vec![full(VlanPcp)], vec![0, 3]),
            (VlanTci, vec![0xffff, 0x1fff, 0x1000], vec![0, 0x1001, 0x3002]),
            (IpProto, vec![full(IpProto)], vec![6, 17]),
            (Ipv4Src, vec![full(Ipv4Src), 0xffff_ff00], vec![0x0a00_0105, 0x0a00_0106, 0x0a00_0205]),
            (TcpSrc, vec![full(TcpSrc)], vec![80, 40000, 40001]),
            (TcpDst, vec![full(TcpDst)], vec![80, 40000, 40001]),
            (UdpDst, vec![full(UdpDst)], vec![53, 80]),
            (TcpFlags, vec![full(TcpFlags), 0x002], vec![0x002, 0x012, 0x010]),
            (Reg1, vec![full(Reg1), 0xff], vec![0, 1, 0x101]),
            (Reg2, vec![full(Reg2)], vec![0, 1]),
            (Metadata, vec![full(Metadata), 0xf], vec![0, 5, 0x15]),
            (ArpOp, vec![full(ArpOp)], vec![1, 2]),
        ]
    }

    type ShapeSpec = Vec<(Field, u128)>;

    fn random_shapes(r: &mut Rng, pool: &[(Field, Vec<u128>, Vec<u128>)]) -> Vec<ShapeSpec> {
        let mut shapes = vec![vec![]]; // the table-miss shape
        for _ in 0..(3 + r.below(10)) {
            let mut s = Vec::new();
            for (f, masks, _) in pool {
                if r.chance(25) {
                    s.push((*f, r.pick(masks)));
                }
            }
            shapes.push(s);
        }
        shapes
    }

    fn random_match(r: &mut Rng, shapes: &[ShapeSpec], pool: &[(Field, Vec<u128>, Vec<u128>)]) -> MatchSpec {
        let shape = &shapes[r.below(shapes.len() as u64) as usize];
        let value = |r: &mut Rng, f: Field| {
            let vals = &pool.iter().find(|p| p.0 == f).unwrap().2;
            if r.chance(5) {
                r.next() as u128 & f.value_bits() // a value no packet has
            } else {
                r.pick(vals)
            }
        };
        let mut fields: Vec<MField> =
            shape.iter().map(|&(f, mask)| MField { field: f, value: value(r, f), mask }).collect();
        if !fields.is_empty() && r.chance(3) {
            // A field named twice: only from_fields lets that through.
            let mut twice = fields[r.below(fields.len() as u64) as usize];
            twice.value = value(r, twice.field) & twice.mask;
            fields.push(twice);
        }
        MatchSpec::from_fields(fields)
    }

    fn random_key(r: &mut Rng, pool: &[(Field, Vec<u128>, Vec<u128>)]) -> Key {
        let v = |r: &mut Rng, f: Field| r.pick(&pool.iter().find(|p| p.0 == f).unwrap().2);
        let eth_type = v(r, Field::EthType) as u16;
        let mut k = Key {
            in_port: v(r, Field::InPort) as u32,
            metadata: v(r, Field::Metadata) as u64,
            eth_src: mac(v(r, Field::EthSrc)),
            eth_dst: mac(v(r, Field::EthDst)),
            vlan_tci: r.chance(50).then(|| r.pick(&[0x0001u16, 0x0002, 0x6002, 0x0000])),
            eth_type,
            is_ipv4: eth_type == 0x0800 || r.chance(5),
            is_ipv6: eth_type == 0x86dd,
            ip_proto: r.chance(90).then(|| r.pick(&[6u8, 17, 1])),
            ipv4_src: v(r, Field::Ipv4Src) as u32,
            l4: r.chance(90).then_some(34),
            tp_src: r.pick(&[80u16, 40000, 40001, 53]),
            tp_dst: r.pick(&[80u16, 40000, 40001, 53]),
            tcp_flags: v(r, Field::TcpFlags) as u16,
            arp: (eth_type == 0x0806)
                .then(|| crate::packet::ArpFields { op: r.pick(&[1u16, 2]), ..Default::default() }),
            ..Key::default()
        };
        k.regs[1] = v(r, Field::Reg1) as u32;
        k.regs[2] = v(r, Field::Reg2) as u32;
        k
    }

    fn mac(v: u128) -> [u8; 6] {
        let b = v.to_be_bytes();
        b[10..16].try_into().unwrap()
    }

    fn flow_mod(priority: u16, cookie: u64, flags: u16, idle: u16, hard: u16) -> FlowMod {
        FlowMod { cookie, flags, idle_timeout: idle, hard_timeout: hard, ..FlowMod::add(priority) }
    }

    /// One entry of the reference table.
    #[derive(Debug, Clone, PartialEq)]
    struct RefEntry {
        priority: u16,
        fields: Vec<MField>,
        cookie: u64,
        idle: u16,
        hard: u16,
        packets: u64,
        bytes: u64,
        created: u64,
        used: u64,
    }

    impl RefEntry {
        fn of(e: &FlowEntry) -> RefEntry {
            RefEntry {
                priority: e.priority,
                fields: e.matches.fields.clone(),
                cookie: e.cookie,
                idle: e.idle_timeout,
                hard: e.hard_timeout,
                packets: e.packet_count,
                bytes: e.byte_count,
                created: e.created_ns,
                used: e.last_used_ns,
            }
        }
        fn spec(&self) -> MatchSpec {
            MatchSpec { fields: self.fields.clone(), raw: Match::default() }
        }
    }

    /// The flow table as it was before the index, one linear scan per operation: the
    /// reference the indexed table must agree with, operation by operation.
    #[derive(Default)]
    struct RefTable {
        entries: Vec<RefEntry>,
        max: Option<usize>,
    }

    impl RefTable {
        fn lookup(&mut self, k: &Key, bytes: usize, now: u64) -> Option<u64> {
            let e = self.entries.iter_mut().find(|e| e.spec().matches(k))?;
            e.packets += 1;
            e.bytes += bytes as u64;
            e.used = now;
            Some(e.cookie)
        }

        fn add(&mut self, fm: &FlowMod, m: &MatchSpec, now: u64) -> Result<bool, ()> {
            if fm.flags & OFPFF_CHECK_OVERLAP != 0
                && self
                    .entries
                    .iter()
                    .any(|e| e.priority == fm.priority && !e.spec().same(m) && e.spec().overlaps(m))
            {
                return Err(());
            }
            let new = RefEntry {
                priority: fm.priority,
                fields: m.fields.clone(),
                cookie: fm.cookie,
                idle: fm.idle_timeout,
                hard: fm.hard_timeout,
                packets: 0,
                bytes: 0,
                created: now,
                used: now,
            };
            if let Some(e) = self.entries.iter_mut().find(|e| e.priority == fm.priority && e.spec().same(m)) {
                let (p, b) = (e.packets, e.bytes);
                *e = new;
                if fm.flags & OFPFF_RESET_COUNTS == 0 {
                    e.packets = p;
                    e.bytes = b;
                }
                return Ok(true);
            }
            if self.max.is_some_and(|max| self.entries.len() >= max) {
                return Err(());
            }
            let pos = self.entries.partition_point(|e| e.priority >= fm.priority);
            self.entries.insert(pos, new);
            Ok(false)
        }

        fn remove(&mut self, why: impl Fn(&RefEntry) -> Option<u8>) -> Vec<(u64, u8)> {
            let mut out = Vec::new();
            let mut i = 0;
            while i < self.entries.len() {
                match why(&self.entries[i]) {
                    Some(r) => out.push((self.entries.remove(i).cookie, r)),
                    None => i += 1,
                }
            }
            out
        }

        fn delete(
            &mut self,
            m: &MatchSpec,
            priority: u16,
            strict: bool,
            cookie: u64,
            mask: u64,
        ) -> Vec<(u64, u8)> {
            self.remove(|e| {
                let cookie_ok = mask == 0 || e.cookie & mask == cookie & mask;
                let sel =
                    if strict { e.priority == priority && e.spec().same(m) } else { m.covers(&e.spec()) };
                (cookie_ok && sel).then_some(OFPRR_DELETE)
            })
        }

        fn expire(&mut self, now: u64) -> Vec<(u64, u8)> {
            self.remove(|e| {
                if e.hard != 0 && now >= e.created + e.hard as u64 * 1_000_000_000 {
                    Some(OFPRR_HARD_TIMEOUT)
                } else if e.idle != 0 && now >= e.used + e.idle as u64 * 1_000_000_000 {
                    Some(OFPRR_IDLE_TIMEOUT)
                } else {
                    None
                }
            })
        }
    }

    fn removed(out: Vec<Removed>) -> Vec<(u64, u8)> {
        out.into_iter().map(|r| (r.entry.cookie, r.reason)).collect()
    }

    fn check_same_table(t: &FlowTable, reference: &RefTable) {
        let got: Vec<RefEntry> = t.entries.iter().map(RefEntry::of).collect();
        assert_eq!(got, reference.entries);
        assert_eq!(t.entries.index().len(), t.entries.len());
    }

    /// Random tables (random shapes, priorities with many ties, overlapping and
    /// duplicate matches, fields named twice) under random adds, replacements, deletes,
    /// expiries and lookups: the indexed table does what the linear one did, operation by
    /// operation, and its index finds, for many random packets and flow mods, exactly the
    /// entry the linear scans find.
    #[test]
    fn index_agrees_with_the_linear_scan() {
        let pool = field_pool();
        let mut hits = 0usize;
        let mut probes = 0usize;
        for seed in 0..40u64 {
            let mut r = Rng(seed);
            let shapes = random_shapes(&mut r, &pool);
            let max = r.chance(20).then(|| 20 + r.below(40) as usize);
            // Odd seeds grow big tables: adds and lookups only, a rare expiry.
            let grow = seed % 2 == 1;
            let mut t = FlowTable { max_entries: max, ..FlowTable::default() };
            let mut reference = RefTable { max, ..RefTable::default() };
            let mut now = 0u64;
            let mut cookie = 0u64;
            let priorities = [0u16, 5, 10, 10, 10, 50, 100, 800, 800, 65535];
            for _ in 0..800 {
                now += r.below(100_000_000);
                let op = r.below(100);
                let op = if grow && op >= 80 && !r.chance(5) { op % 80 } else { op };
                match op {
                    0..=54 => {
                        // Add: a fresh match, or one already in the table (a replacement).
                        let (priority, m) = if !reference.entries.is_empty() && r.chance(25) {
                            let e = &reference.entries[r.below(reference.entries.len() as u64) as usize];
                            (e.priority, MatchSpec::from_fields(e.fields.clone()))
                        } else {
                            (r.pick(&priorities), random_match(&mut r, &shapes, &pool))
                        };
                        cookie += 1;
                        let flags = r.pick(&[0, 0, OFPFF_RESET_COUNTS, OFPFF_CHECK_OVERLAP]);
                        let idle = r.pick(&[0u16, 0, 0, 0, 1, 3]);
                        let hard = r.pick(&[0u16, 0, 0, 0, 0, 2, 5]);
                        let fm = flow_mod(priority, cookie, flags, idle, hard);
                        assert_eq!(
                            t.entries.index().find_same(&t.entries, priority, &m),
                            t.find_same_linear(priority, &m)
                        );
                        let want = reference.add(&fm, &m, now);
                        let got = t.add(&fm, m, vec![], now);
                        assert_eq!(got.map(|o| o.is_some()).map_err(|_| ()), want);
                    }
                    55..=79 => {
                        // Packets through the table (counters, last_used for idle timeouts).
                        for _ in 0..8 {
                            let k = random_key(&mut r, &pool);
                            let bytes = 60 + r.below(1400) as usize;
                            let want = reference.lookup(&k, bytes, now);
                            let got = t.lookup(&k, bytes, now).map(|e| e.cookie);
                            assert_eq!(got, want);
                        }
                    }
                    80..=86 => {
                        // Strict or non-strict delete, of an entry's match or a random one,
                        // sometimes under a cookie mask.
                        let strict = r.chance(50);
                        let (priority, m) = if !reference.entries.is_empty() && r.chance(60) {
                            let e = &reference.entries[r.below(reference.entries.len() as u64) as usize];
                            (e.priority, MatchSpec::from_fields(e.fields.clone()))
                        } else {
                            (r.pick(&priorities), random_match(&mut r, &shapes, &pool))
                        };
                        let (c, mask) = if r.chance(30) { (r.below(cookie + 1), 1) } else { (0, 0) };
                        let sel = Selector {
                            matches: &m,
                            priority,
                            strict,
                            cookie: c,
                            cookie_mask: mask,
                            out_port: OFPP_ANY,
                            out_group: OFPG_ANY,
                        };
                        let mut out = Vec::new();
                        t.delete(&sel, OFPRR_DELETE, &mut out);
                        assert_eq!(removed(out), reference.delete(&m, priority, strict, c, mask));
                    }
                    87..=89 => {
                        let c = r.below(cookie + 1);
                        let mut out = Vec::new();
                        t.delete_where(|e| e.cookie % 7 == c % 7, OFPRR_GROUP_DELETE, &mut out);
                        let want =
                            reference.remove(|e| (e.cookie % 7 == c % 7).then_some(OFPRR_GROUP_DELETE));
                        assert_eq!(removed(out), want);
                    }
                    90..=98 => {
                        let mut out = Vec::new();
                        t.expire(now, &mut out);
                        assert_eq!(removed(out), reference.expire(now));
                    }
                    _ if r.chance(20) => {
                        t.entries.clear();
                        reference.entries.clear();
                    }
                    _ => {}
                }
                check_same_table(&t, &reference);
                for _ in 0..20 {
                    let k = random_key(&mut r, &pool);
                    let want = t.lookup_linear(&k);
                    assert_eq!(t.find(&k), want, "seed {seed}: key {k:?}");
                    probes += 1;
                    hits += want.is_some() as usize;
                }
                let (priority, m) = (r.pick(&priorities), random_match(&mut r, &shapes, &pool));
                assert_eq!(
                    t.entries.index().find_same(&t.entries, priority, &m),
                    t.find_same_linear(priority, &m)
                );
            }
        }
        // The random tables were not degenerate: some packets hit, some missed.
        assert!(hits > probes / 10 && hits < probes, "{hits} hits of {probes} lookups");
    }

    fn exact(fields: &[(Field, u128)]) -> MatchSpec {
        MatchSpec::from_fields(
            fields.iter().map(|&(field, value)| MField { field, value, mask: field.value_bits() }).collect(),
        )
    }

    #[test]
    fn equal_priorities_hit_in_insertion_order_across_shapes() {
        let mut t = FlowTable::default();
        let k = Key { in_port: 1, eth_type: 0x0800, ..Key::default() };
        t.add(&flow_mod(10, 1, 0, 0, 0), exact(&[(Field::InPort, 1)]), vec![], 0).unwrap();
        t.add(&flow_mod(10, 2, 0, 0, 0), exact(&[(Field::EthType, 0x0800)]), vec![], 0).unwrap();
        t.add(&flow_mod(5, 3, 0, 0, 0), exact(&[(Field::InPort, 1), (Field::EthType, 0x0800)]), vec![], 0)
            .unwrap();
        assert_eq!(t.lookup(&k, 60, 0).unwrap().cookie, 1);
        // Replacing the first keeps its place before the second.
        t.add(&flow_mod(10, 4, 0, 0, 0), exact(&[(Field::InPort, 1)]), vec![], 0).unwrap();
        assert_eq!(t.lookup(&k, 60, 0).unwrap().cookie, 4);
        let mut out = Vec::new();
        t.delete_where(|e| e.cookie == 4, OFPRR_DELETE, &mut out);
        assert_eq!(t.lookup(&k, 60, 0).unwrap().cookie, 2);
        t.delete_where(|e| e.cookie == 2, OFPRR_DELETE, &mut out);
        assert_eq!(t.lookup(&k, 60, 0).unwrap().cookie, 3);
        assert_eq!(t.entries.index().shapes(), 1);
    }

    #[test]
    fn a_packet_without_a_field_misses_every_entry_of_its_shapes() {
        // tcp_src on a UDP packet, vlan_pcp on an untagged one: Key::get has no value.
        let mut t = FlowTable::default();
        t.add(&flow_mod(10, 1, 0, 0, 0), exact(&[(Field::TcpSrc, 0)]), vec![], 0).unwrap();
        t.add(&flow_mod(10, 2, 0, 0, 0), exact(&[(Field::VlanPcp, 0)]), vec![], 0).unwrap();
        t.add(&flow_mod(1, 3, 0, 0, 0), exact(&[(Field::VlanVid, 0)]), vec![], 0).unwrap();
        let udp = Key { is_ipv4: true, ip_proto: Some(17), l4: Some(34), ..Key::default() };
        assert_eq!(t.lookup(&udp, 60, 0).unwrap().cookie, 3); // vlan_vid=0: untagged
        let tagged = Key { vlan_tci: Some(0), ..udp.clone() };
        assert_eq!(t.lookup(&tagged, 60, 0).unwrap().cookie, 2);
        assert!(t.lookup(&Key { vlan_tci: Some(0x2000), ..udp }, 60, 0).is_none());
    }

    #[test]
    fn empty_shapes_leave_the_index() {
        let mut t = FlowTable::default();
        for port in 0..50 {
            t.add(&flow_mod(800, port, 0, 1, 0), exact(&[(Field::InPort, port as u128)]), vec![], 0).unwrap();
        }
        t.add(&flow_mod(0, 99, 0, 0, 0), MatchSpec::default(), vec![], 0).unwrap();
        assert_eq!((t.entries.index().len(), t.entries.index().shapes()), (51, 2));
        let mut out = Vec::new();
        t.expire(2_000_000_000, &mut out);
        assert_eq!(out.len(), 50);
        assert_eq!((t.entries.index().len(), t.entries.index().shapes()), (1, 1));
        assert_eq!(t.lookup(&Key { in_port: 7, ..Key::default() }, 60, 0).unwrap().cookie, 99);
    }
}
