//! The flowlet table `letflow` and `conga` share: per entry (indexed by the flow hash,
//! direct-mapped and bounded, as in hardware: flows whose hashes share an entry share its
//! flowlets) the bucket of the current flowlet and the time of its last packet. A packet
//! whose entry has been idle longer than the timeout, or whose bucket is no longer a
//! candidate, starts a new flowlet on the bucket its balancer picks; the others follow
//! their flowlet. Also the options both parse the same way.

use super::{scaled_to_slowest_port, Pick};
use crate::units::parse_duration_ns;

/// LetFlow's flowlet timeout, at 10 Gbit/s.
pub const PAPER_TIMEOUT_NS: f64 = 500_000.0;
pub const DEFAULT_TABLE: usize = 4096;
const MAX_TABLE: usize = 1 << 20;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    last_ns: u64,
    /// u32 keeps an entry at 16 bytes: a table of 4096 takes 64 KiB per group.
    bucket: u32,
    used: bool,
}

#[derive(Debug)]
pub struct FlowletTable {
    /// None: LetFlow's 500 us at 10 Gbit/s, scaled to the slowest bucket port's rate on
    /// the first packet ([`scaled_to_slowest_port`]).
    pub timeout_ns: Option<u64>,
    table: Vec<Entry>,
    /// Flowlets started (a first packet, or one after an idle gap or a dead bucket).
    pub started: u64,
    /// Flowlets that took another bucket than their entry's previous one.
    pub path_changes: u64,
}

impl FlowletTable {
    pub fn new(timeout_ns: Option<u64>, entries: usize) -> FlowletTable {
        FlowletTable { timeout_ns, table: vec![Entry::default(); entries], started: 0, path_changes: 0 }
    }

    /// The candidate for `pick`: its flowlet's while the flowlet lasts, else what
    /// `new_flowlet` picks, given the candidate the entry's previous bucket is now (if it
    /// still is one).
    pub fn choose(
        &mut self,
        pick: &mut Pick<'_>,
        new_flowlet: impl FnOnce(&mut Pick<'_>, Option<usize>) -> usize,
    ) -> usize {
        let timeout = *self.timeout_ns.get_or_insert_with(|| scaled_to_slowest_port(pick, PAPER_TIMEOUT_NS));
        let slot = (pick.flow_hash % self.table.len() as u64) as usize;
        let e = self.table[slot];
        let live =
            if e.used { pick.candidates.iter().position(|c| c.bucket == e.bucket as usize) } else { None };
        let idle = pick.now_ns.saturating_sub(e.last_ns) > timeout;
        let i = match live {
            Some(i) if !idle => i,
            _ => {
                self.started += 1;
                let i = new_flowlet(pick, live);
                if e.used && pick.candidates[i].bucket != e.bucket as usize {
                    self.path_changes += 1;
                }
                i
            }
        };
        self.table[slot] =
            Entry { last_ns: pick.now_ns, bucket: pick.candidates[i].bucket as u32, used: true };
        i
    }
}

/// A `timeout=`/`age=` value: a positive duration.
pub fn duration_option(key: &str, v: &str) -> Result<u64, String> {
    match parse_duration_ns(v) {
        Ok(0) => Err(format!("option {key}={v}: must be positive")),
        Ok(ns) => Ok(ns),
        Err(e) => Err(format!("option {key}={v}: {e}")),
    }
}

/// A `table=` value: entries of a per-flow table, 1..=1048576.
pub fn table_option(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(n) if (1..=MAX_TABLE).contains(&n) => Ok(n),
        _ => Err(format!("option table={v}: expected 1..={MAX_TABLE} entries")),
    }
}
