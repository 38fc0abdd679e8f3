//! Group table and bucket selection.
//!
//! Select groups choose a bucket by one of three modes, per switch (`--select-mode`) or
//! per group (dcnlab experimenter message):
//! - `hash`: 5-tuple hash, weighted (ECMP; one flow stays on one path),
//! - `rr`: per-packet smooth weighted round-robin over live buckets (nginx's algorithm:
//!   weights 3:1 give A A B A, interleaved rather than bursty),
//! - `random`: per-packet random choice, probability proportional to weight (RPS).
//!
//! A bucket is live when its watch port is up (and its watch group live); select groups
//! skip dead buckets, fast-failover groups use the first live one.

use std::collections::HashMap;
use std::rc::Rc;

use crate::ofp::codec::{Bucket, GroupMod, OfpErr};
use crate::ofp::consts::*;

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

#[derive(Debug, Clone)]
pub struct Group {
    pub group_id: u32,
    pub group_type: u8,
    pub buckets: Rc<[Bucket]>,
    pub packet_count: u64,
    pub byte_count: u64,
    pub bucket_counts: Vec<(u64, u64)>,
    pub created_ns: u64,
    /// Smooth weighted round-robin state, one per bucket.
    rr_current: Vec<i64>,
}

impl Group {
    /// Picks the bucket for a select group. `live[i]` says whether bucket i is usable.
    pub fn select(&mut self, live: &[bool], mode: SelectMode, hash: u64, rng: &mut Rng) -> Option<usize> {
        let any_weight = self.buckets.iter().zip(live).any(|(b, &l)| l && b.weight > 0);
        // All-zero weights would select nothing; treat them as equal instead of dropping.
        let w = |b: &Bucket| if any_weight { b.weight as u64 } else { 1 };
        let total: u64 = self.buckets.iter().zip(live).filter(|(_, &l)| l).map(|(b, _)| w(b)).sum();
        if total == 0 {
            return None;
        }
        let pick_cumulative = |target: u64| {
            let mut acc = 0;
            for (i, b) in self.buckets.iter().enumerate() {
                if !live[i] {
                    continue;
                }
                acc += w(b);
                if target < acc {
                    return Some(i);
                }
            }
            None
        };
        match mode {
            SelectMode::Hash => pick_cumulative(hash % total),
            SelectMode::Random => pick_cumulative(rng.below(total)),
            SelectMode::Rr => {
                if self.rr_current.len() != self.buckets.len() {
                    self.rr_current = vec![0; self.buckets.len()];
                }
                let mut best: Option<usize> = None;
                for (i, b) in self.buckets.iter().enumerate() {
                    if !live[i] || w(b) == 0 {
                        continue;
                    }
                    self.rr_current[i] += w(b) as i64;
                    if best.is_none_or(|j| self.rr_current[i] > self.rr_current[j]) {
                        best = Some(i);
                    }
                }
                let j = best?;
                self.rr_current[j] -= total as i64;
                Some(j)
            }
        }
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

#[derive(Debug, Default)]
pub struct GroupTable {
    pub groups: HashMap<u32, Group>,
    /// Per-group select mode overrides; kept apart from the groups so an app may set the
    /// mode before or after adding the group, and it survives group modify.
    pub mode_override: HashMap<u32, SelectMode>,
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
            rr_current: vec![0; g.buckets.len()],
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

    pub fn mode_for(&self, group_id: u32, default: SelectMode) -> SelectMode {
        self.mode_override.get(&group_id).copied().unwrap_or(default)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofp::codec::Action;

    fn group(weights: &[u16]) -> Group {
        let buckets: Vec<Bucket> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| Bucket {
                weight: w,
                watch_port: OFPP_ANY,
                watch_group: OFPG_ANY,
                actions: vec![Action::Output { port: i as u32 + 1, max_len: 0 }],
            })
            .collect();
        let mut t = GroupTable::default();
        t.apply(&GroupMod { command: OFPGC_ADD, group_type: OFPGT_SELECT, group_id: 1, buckets }, 0).unwrap();
        t.groups.remove(&1).unwrap()
    }

    #[test]
    fn rr_honours_weights_and_interleaves() {
        let mut g = group(&[3, 1]);
        let mut rng = Rng::new(1);
        let picks: Vec<usize> =
            (0..8).map(|_| g.select(&[true, true], SelectMode::Rr, 0, &mut rng).unwrap()).collect();
        assert_eq!(picks.iter().filter(|&&p| p == 0).count(), 6);
        // Smooth WRR never sends more than weight-many in a row to one bucket per cycle.
        assert_eq!(&picks[..4], &[0, 0, 1, 0]);
    }

    #[test]
    fn rr_skips_dead_buckets() {
        let mut g = group(&[1, 1, 1]);
        let mut rng = Rng::new(1);
        for _ in 0..10 {
            assert_ne!(g.select(&[true, false, true], SelectMode::Rr, 0, &mut rng), Some(1));
        }
        assert_eq!(g.select(&[false, false, false], SelectMode::Rr, 0, &mut rng), None);
    }

    #[test]
    fn random_is_weighted() {
        let mut g = group(&[1, 3]);
        let mut rng = Rng::new(7);
        let n = 40_000;
        let ones =
            (0..n).filter(|_| g.select(&[true, true], SelectMode::Random, 0, &mut rng) == Some(1)).count();
        let frac = ones as f64 / n as f64;
        assert!((frac - 0.75).abs() < 0.02, "{frac}");
    }

    #[test]
    fn hash_is_per_flow() {
        let mut g = group(&[1, 1, 1, 1]);
        let mut rng = Rng::new(1);
        for h in [1u64, 99, 12345, u64::MAX] {
            let a = g.select(&[true; 4], SelectMode::Hash, h, &mut rng);
            for _ in 0..5 {
                assert_eq!(g.select(&[true; 4], SelectMode::Hash, h, &mut rng), a);
            }
        }
        // Different flows spread over buckets.
        let used: std::collections::HashSet<_> =
            (0..64u64).map(|h| g.select(&[true; 4], SelectMode::Hash, h, &mut rng)).collect();
        assert_eq!(used.len(), 4);
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
