//! Group table, the built-in select modes, and the seeded RNG.
//!
//! A select group's bucket is chosen by a load balancer ([`crate::lb`]), per switch
//! (`--select-mode`) or per group (dcnlab experimenter message). The three built in since
//! the first release keep their one-byte codes in the SET/GET_GROUP_SELECT_MODE message
//! ([`SelectMode`]):
//! - `hash`: 5-tuple hash, weighted (ECMP; one flow stays on one path),
//! - `rr`: per-packet smooth weighted round-robin over live buckets,
//! - `random`: per-packet random choice, probability proportional to weight (RPS).
//!
//! A bucket is live when its watch port is up (and its watch group live); select groups
//! skip dead buckets, fast-failover groups use the first live one.

use std::collections::HashMap;
use std::rc::Rc;

use crate::lb::{self, Balancer, Candidate, Context, Pick};
use crate::ofp::codec::{Action, Bucket, GroupMod, OfpErr};
use crate::ofp::consts::*;
use crate::spec::NamedSpec;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectMode {
    Hash,
    Rr,
    Random,
}

impl SelectMode {
    pub fn parse(s: &str) -> Option<SelectMode> {
        match s {
            "hash" => Some(SelectMode::Hash),
            "rr" => Some(SelectMode::Rr),
            "random" => Some(SelectMode::Random),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            SelectMode::Hash => "hash",
            SelectMode::Rr => "rr",
            SelectMode::Random => "random",
        }
    }
    /// Wire value in the dcnlab experimenter message (0 means "switch default").
    pub fn wire(self) -> u8 {
        match self {
            SelectMode::Hash => 1,
            SelectMode::Rr => 2,
            SelectMode::Random => 3,
        }
    }
    pub fn from_wire(v: u8) -> Option<Option<SelectMode>> {
        match v {
            0 => Some(None),
            1 => Some(Some(SelectMode::Hash)),
            2 => Some(Some(SelectMode::Rr)),
            3 => Some(Some(SelectMode::Random)),
            _ => None,
        }
    }
    /// The load balancer this mode names.
    pub fn spec(self) -> NamedSpec {
        NamedSpec::named(self.name())
    }
    /// The mode a balancer spec is, if it is one of these without options.
    pub fn of_spec(spec: &NamedSpec) -> Option<SelectMode> {
        if spec.options.is_empty() {
            SelectMode::parse(&spec.name)
        } else {
            None
        }
    }
}

/// xorshift64* — fast, seedable, good enough for spraying and jitter.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // splitmix64 the seed so small seeds (0, 1, 2) still give unrelated streams.
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        Rng(if z == 0 { 1 } else { z })
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in [0, n) without modulo bias worth caring about (Lemire's multiply).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform float in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Debug)]
pub struct Group {
    pub group_id: u32,
    pub group_type: u8,
    pub buckets: Rc<[Bucket]>,
    pub packet_count: u64,
    pub byte_count: u64,
    pub bucket_counts: Vec<(u64, u64)>,
    pub created_ns: u64,
    /// The physical port each bucket's first output action sends to.
    bucket_ports: Vec<Option<u32>>,
    /// A select group's balancer, built on its first packet from the spec then in force;
    /// `None` again when that spec changes (see [`GroupTable`]).
    balancer: Option<Box<dyn Balancer>>,
}

/// The port a bucket outputs to first, if it is a physical one.
fn first_output_port(b: &Bucket) -> Option<u32> {
    b.actions.iter().find_map(|a| match a {
        Action::Output { port, .. } if *port <= OFPP_MAX => Some(*port),
        _ => None,
    })
}

impl Group {
    /// Picks the bucket for a select group with the balancer `spec` names (`spec` must
    /// have been checked with [`lb::build`]; should it fail anyway, the group hashes).
    /// `live[i]` says whether bucket i is usable; `flow_hash` is called only when the
    /// balancer reads the hash; `ctx` is the packet and the switch around it. None when
    /// no bucket is live with positive weight.
    pub fn select(
        &mut self,
        live: &[bool],
        spec: &NamedSpec,
        flow_hash: impl FnOnce() -> u64,
        ctx: &Context<'_>,
        rng: &mut Rng,
    ) -> Option<usize> {
        let any_weight = self.buckets.iter().zip(live).any(|(b, &l)| l && b.weight > 0);
        // All-zero weights would select nothing; treat them as equal instead of dropping.
        let candidates: Vec<Candidate> = self
            .buckets
            .iter()
            .zip(live)
            .enumerate()
            .filter(|(_, (b, &l))| l && (b.weight > 0 || !any_weight))
            .map(|(i, (b, _))| Candidate {
                bucket: i,
                weight: if any_weight { b.weight as u64 } else { 1 },
                port: self.bucket_ports.get(i).copied().flatten(),
            })
            .collect();
        if candidates.is_empty() {
            return None;
        }
        let balancer = self.balancer.get_or_insert_with(|| {
            lb::build(spec).unwrap_or_else(|_| Box::new(lb::hash::Hash) as Box<dyn Balancer>)
        });
        let mut pick = Pick {
            now_ns: ctx.now_ns,
            bytes: ctx.bytes,
            flow_hash: if balancer.needs_flow_hash() { flow_hash() } else { 0 },
            total_weight: candidates.iter().map(|c| c.weight).sum(),
            candidates: &candidates,
            n_buckets: self.buckets.len(),
            ports: ctx.ports,
            paths: ctx.paths,
            rng,
        };
        let i = balancer.choose(&mut pick);
        candidates.get(i).map(|c| c.bucket)
    }

    pub fn count(&mut self, bucket: Option<usize>, bytes: usize) {
        self.packet_count += 1;
        self.byte_count += bytes as u64;
        if let Some(i) = bucket {
            if let Some(c) = self.bucket_counts.get_mut(i) {
                c.0 += 1;
                c.1 += bytes as u64;
            }
        }
    }
}

/// A group's balancer counters for the stats file: `(group_id, kind, counters)`.
pub type BalancerCounters = (u32, &'static str, Vec<(&'static str, u64)>);

#[derive(Debug, Default)]
pub struct GroupTable {
    pub groups: HashMap<u32, Group>,
    /// Per-group balancer overrides; kept apart from the groups so an app may set one
    /// before or after adding the group, and it survives group modify.
    overrides: HashMap<u32, NamedSpec>,
}

fn gm(code: u16) -> OfpErr {
    OfpErr::new(OFPET_GROUP_MOD_FAILED, code)
}

impl GroupTable {
    /// Structural checks of a group mod (buckets vs type). Action validity is checked by
    /// the caller, which knows ports and groups.
    pub fn check(g: &GroupMod) -> Result<(), OfpErr> {
        if g.group_id > OFPG_MAX && !(g.command == OFPGC_DELETE && g.group_id == OFPG_ALL) {
            return Err(gm(OFPGMFC_INVALID_GROUP));
        }
        if g.command == OFPGC_DELETE {
            return Ok(());
        }
        match g.group_type {
            OFPGT_ALL | OFPGT_SELECT => {}
            OFPGT_INDIRECT if g.buckets.len() != 1 => return Err(gm(OFPGMFC_BAD_BUCKET)),
            OFPGT_INDIRECT => {}
            OFPGT_FF => {
                if g.buckets.iter().any(|b| b.watch_port == OFPP_ANY && b.watch_group == OFPG_ANY) {
                    return Err(gm(OFPGMFC_BAD_WATCH));
                }
            }
            _ => return Err(gm(OFPGMFC_BAD_TYPE)),
        }
        if g.group_type != OFPGT_SELECT && g.buckets.iter().any(|b| b.weight != 0) {
            return Err(gm(OFPGMFC_WEIGHT_UNSUPPORTED));
        }
        Ok(())
    }

    /// Applies add/modify/delete. Returns the ids of deleted groups (their flows must go).
    pub fn apply(&mut self, g: &GroupMod, now_ns: u64) -> Result<Vec<u32>, OfpErr> {
        Self::check(g)?;
        let new = || Group {
            group_id: g.group_id,
            group_type: g.group_type,
            buckets: g.buckets.clone().into(),
            packet_count: 0,
            byte_count: 0,
            bucket_counts: vec![(0, 0); g.buckets.len()],
            created_ns: now_ns,
            bucket_ports: g.buckets.iter().map(first_output_port).collect(),
            balancer: None,
        };
        match g.command {
            OFPGC_ADD => {
                if self.groups.contains_key(&g.group_id) {
                    return Err(gm(OFPGMFC_GROUP_EXISTS));
                }
                self.groups.insert(g.group_id, new());
                Ok(vec![])
            }
            OFPGC_MODIFY => {
                let Some(old) = self.groups.get_mut(&g.group_id) else {
                    return Err(gm(OFPGMFC_UNKNOWN_GROUP));
                };
                // Counters and age describe the group, not its bucket list; keep them.
                let (p, b, c) = (old.packet_count, old.byte_count, old.created_ns);
                *old = new();
                old.packet_count = p;
                old.byte_count = b;
                old.created_ns = c;
                Ok(vec![])
            }
            OFPGC_DELETE => {
                if g.group_id == OFPG_ALL {
                    let ids: Vec<u32> = self.groups.keys().copied().collect();
                    self.groups.clear();
                    Ok(ids)
                } else if self.groups.remove(&g.group_id).is_some() {
                    Ok(vec![g.group_id])
                } else {
                    Ok(vec![])
                }
            }
            _ => Err(gm(OFPGMFC_BAD_COMMAND)),
        }
    }

    /// The balancer group `group_id` uses: its override, else the switch's `default`.
    pub fn balancer_for<'a>(&'a self, group_id: u32, default: &'a NamedSpec) -> &'a NamedSpec {
        self.overrides.get(&group_id).unwrap_or(default)
    }

    /// Sets (`Some`) or clears (`None`: back to the switch default) a group's balancer.
    /// Its instance is rebuilt on the next packet, so state starts afresh.
    pub fn set_override(&mut self, group_id: u32, spec: Option<NamedSpec>) {
        match spec {
            Some(s) => self.overrides.insert(group_id, s),
            None => self.overrides.remove(&group_id),
        };
        if let Some(g) = self.groups.get_mut(&group_id) {
            g.balancer = None;
        }
    }

    /// The switch default changed: groups that follow it rebuild their balancers.
    pub fn default_changed(&mut self) {
        for (id, g) in self.groups.iter_mut() {
            if !self.overrides.contains_key(id) {
                g.balancer = None;
            }
        }
    }

    /// Counters of every group whose balancer has any, by group id.
    pub fn balancer_counters(&self) -> Vec<BalancerCounters> {
        let mut v: Vec<_> = self
            .groups
            .iter()
            .filter_map(|(&id, g)| g.balancer.as_ref().map(|b| (id, b.kind(), b.counters())))
            .filter(|(_, _, c)| !c.is_empty())
            .collect();
        v.sort_by_key(|&(id, _, _)| id);
        v
    }

    /// Picks a bucket of select group `group_id` (see [`Group::select`]) with the balancer
    /// configured for it.
    pub fn select(
        &mut self,
        group_id: u32,
        live: &[bool],
        default: &NamedSpec,
        flow_hash: impl FnOnce() -> u64,
        ctx: &Context<'_>,
        rng: &mut Rng,
    ) -> Option<usize> {
        let spec = self.overrides.get(&group_id).unwrap_or(default);
        self.groups.get_mut(&group_id)?.select(live, spec, flow_hash, ctx, rng)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lb::NoLoads;

    fn buckets(weights: &[u16]) -> Vec<Bucket> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Bucket {
                weight: w,
                watch_port: OFPP_ANY,
                watch_group: OFPG_ANY,
                actions: vec![Action::Output { port: i as u32 + 1, max_len: 0 }],
            })
            .collect()
    }

    fn group(weights: &[u16]) -> Group {
        let buckets = buckets(weights);
        let mut t = GroupTable::default();
        t.apply(&GroupMod { command: OFPGC_ADD, group_type: OFPGT_SELECT, group_id: 1, buckets }, 0).unwrap();
        t.groups.remove(&1).unwrap()
    }

    fn pick(g: &mut Group, live: &[bool], spec: &str, hash: u64, rng: &mut Rng) -> Option<usize> {
        g.select(live, &NamedSpec::parse(spec).unwrap(), || hash, &Context::new(0, 1500, &NoLoads), rng)
    }

    #[test]
    fn no_live_bucket_selects_nothing_and_zero_weights_count_as_equal() {
        let mut rng = Rng::new(1);
        for mode in ["hash", "rr", "random"] {
            let mut g = group(&[1, 1, 1]);
            assert_eq!(pick(&mut g, &[false; 3], mode, 5, &mut rng), None, "{mode}");
            let mut z = group(&[0, 0]);
            let used: std::collections::HashSet<_> =
                (0..64u64).map(|h| pick(&mut z, &[true, true], mode, h, &mut rng)).collect();
            assert_eq!(used.len(), 2, "{mode}: all-zero weights must use both buckets");
            // A zero-weight bucket among weighted ones is never taken.
            let mut w = group(&[0, 1]);
            assert!((0..64u64).all(|h| pick(&mut w, &[true, true], mode, h, &mut rng) == Some(1)), "{mode}");
        }
    }

    #[test]
    fn the_flow_hash_is_computed_only_for_balancers_that_read_it() {
        let mut rng = Rng::new(1);
        let mut g = group(&[1, 1]);
        let spec = NamedSpec::named("random");
        let hashed = std::cell::Cell::new(0);
        let h = || {
            hashed.set(hashed.get() + 1);
            3
        };
        g.select(&[true, true], &spec, h, &Context::new(0, 1500, &NoLoads), &mut rng);
        assert_eq!(hashed.get(), 0);
        let mut g = group(&[1, 1]);
        g.select(&[true, true], &NamedSpec::named("hash"), h, &Context::new(0, 1500, &NoLoads), &mut rng);
        assert_eq!(hashed.get(), 1);
    }

    #[test]
    fn an_override_or_a_new_default_restarts_the_groups_balancer() {
        let mut t = GroupTable::default();
        let add =
            GroupMod { command: OFPGC_ADD, group_type: OFPGT_SELECT, group_id: 1, buckets: buckets(&[3, 1]) };
        t.apply(&add, 0).unwrap();
        t.apply(&GroupMod { group_id: 2, ..add.clone() }, 0).unwrap();
        let rr = NamedSpec::named("rr");
        let mut rng = Rng::new(1);
        let mut sel = |t: &mut GroupTable, id| {
            t.select(id, &[true, true], &rr, || 0, &Context::new(0, 1500, &NoLoads), &mut rng).unwrap()
        };
        // Smooth round-robin over 3:1 goes 0 0 1 0; a restarted one begins at 0 0 again.
        assert_eq!([sel(&mut t, 1), sel(&mut t, 1), sel(&mut t, 1)], [0, 0, 1]);
        assert_eq!(sel(&mut t, 2), 0);
        t.set_override(1, Some(NamedSpec::named("rr")));
        assert_eq!([sel(&mut t, 1), sel(&mut t, 1), sel(&mut t, 1)], [0, 0, 1]);
        // A new default restarts group 2 (which follows it), not group 1 (overridden).
        t.default_changed();
        assert_eq!(sel(&mut t, 1), 0); // 4th of 0 0 1 0
        assert_eq!([sel(&mut t, 2), sel(&mut t, 2)], [0, 0]);
        assert_eq!(t.balancer_for(1, &NamedSpec::named("hash")).name, "rr");
        assert_eq!(t.balancer_for(2, &NamedSpec::named("hash")).name, "hash");
    }

    #[test]
    fn the_stats_file_gets_the_counters_of_balancers_that_keep_any() {
        let mut t = GroupTable::default();
        let add =
            GroupMod { command: OFPGC_ADD, group_type: OFPGT_SELECT, group_id: 1, buckets: buckets(&[1, 1]) };
        t.apply(&add, 0).unwrap();
        t.apply(&GroupMod { group_id: 2, ..add.clone() }, 0).unwrap();
        t.set_override(2, Some(NamedSpec::parse("letflow/timeout=1ms").unwrap()));
        let mut rng = Rng::new(1);
        let rr = NamedSpec::named("rr");
        assert_eq!(t.balancer_counters(), vec![], "nothing built yet");
        for now in [0, 10, 20] {
            for id in [1, 2] {
                t.select(id, &[true, true], &rr, || 9, &Context::new(now, 1500, &NoLoads), &mut rng).unwrap();
            }
        }
        assert_eq!(t.balancer_counters(), vec![(2, "letflow", vec![("flowlets", 1), ("path_changes", 0)])]);
    }

    #[test]
    fn candidates_carry_the_buckets_output_ports() {
        let g = group(&[1, 1]);
        assert_eq!(g.bucket_ports, vec![Some(1), Some(2)]);
        let b = Bucket {
            weight: 1,
            watch_port: OFPP_ANY,
            watch_group: OFPG_ANY,
            actions: vec![Action::Group(3)],
        };
        assert_eq!(first_output_port(&b), None);
    }

    #[test]
    fn group_mod_errors() {
        let mut t = GroupTable::default();
        let g = GroupMod { command: OFPGC_ADD, group_type: OFPGT_ALL, group_id: 2, buckets: vec![] };
        t.apply(&g, 0).unwrap();
        assert_eq!(t.apply(&g, 0).unwrap_err(), gm(OFPGMFC_GROUP_EXISTS));
        let m = GroupMod { command: OFPGC_MODIFY, group_id: 3, ..g.clone() };
        assert_eq!(t.apply(&m, 0).unwrap_err(), gm(OFPGMFC_UNKNOWN_GROUP));
        let bad = GroupMod { group_type: 9, group_id: 4, ..g.clone() };
        assert_eq!(t.apply(&bad, 0).unwrap_err(), gm(OFPGMFC_BAD_TYPE));
        let d = GroupMod { command: OFPGC_DELETE, group_id: OFPG_ALL, ..g };
        assert_eq!(t.apply(&d, 0).unwrap(), vec![2]);
    }
}
