//! `conga`: congestion-aware flowlets at the source leaf (CONGA, Alizadeh et al.,
//! SIGCOMM 2014). With this balancer as the switch's default, the switch runs CONGA's
//! overlay ([`crate::conga`]): packets between switches carry an MPLS label with the
//! path's congestion, and leaves keep congestion-to-leaf and congestion-from-leaf tables.
//!
//! At a leaf (`leaf=N`, 0..=63, which the controller gives each leaf), a host's packet
//! whose flowlet is new (its flow idle for longer than `timeout`, as in `letflow`, or its
//! bucket gone) takes the bucket whose path is least congested: the larger of the local
//! uplink's metric and congestion-to-leaf[destination's leaf][bucket], the least of
//! those over the candidates; ties keep the flowlet's previous bucket, else one of them
//! at random. The other packets follow their flowlet. A destination whose leaf is not
//! known yet (no label from it seen) is judged on the local metrics alone.
//!
//! Elsewhere (a spine, a fat-tree's aggregation switch, or a packet that already carries
//! a label) the path was decided at the source leaf: the group hashes as ECMP does, and
//! only the label's CE is updated on the way out.
//!
//! Options: `leaf=N`; `timeout=D` (default as `letflow`'s: 500 us at 10 Gbit/s scaled to
//! the slowest bucket port's rate); `table=N` flowlet entries (default 4096); `age=D`,
//! the tables' ageing time (default 10 ms at 10 Gbit/s, scaled the same way).

use super::flowlet::{duration_option, table_option, FlowletTable, DEFAULT_TABLE};
use super::{by_weight, Balancer, Pick};
use crate::conga::{metric, MAX_LBTAGS, MAX_LEAVES};
use crate::spec::unknown_option;

pub const NAME: &str = "conga";
const OPTIONS: &[&str] = &["leaf", "timeout", "table", "age"];

/// The switch-wide settings of a `conga` spec (the datapath's overlay reads them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settings {
    pub leaf: Option<u8>,
    pub timeout_ns: Option<u64>,
    pub table: usize,
    pub age_ns: Option<u64>,
}

#[derive(Debug)]
pub struct Conga {
    /// Flowlets started at this leaf's group, and those that moved.
    pub flowlets: FlowletTable,
    /// Flowlet decisions that had the destination leaf's path metrics to go on.
    pub informed: u64,
}

impl Conga {
    pub fn new(timeout_ns: Option<u64>, table: usize) -> Conga {
        Conga { flowlets: FlowletTable::new(timeout_ns, table), informed: 0 }
    }
}

/// The least congested candidate for a new flowlet whose entry last took `previous`;
/// `informed` counts a decision that had path metrics.
fn least_congested(pick: &mut Pick<'_>, previous: Option<usize>, informed: &mut u64) -> usize {
    let Some(paths) = pick.paths else { unreachable!("only called with path metrics") };
    let mut known = false;
    let cost: Vec<u8> = pick
        .candidates
        .iter()
        .map(|c| {
            let local = c
                .port
                .and_then(|p| pick.ports.load(p, pick.now_ns))
                .map_or(0, |l| metric(l.bytes_per_s, l.line_rate_bps));
            let remote = if c.bucket < MAX_LBTAGS { paths.metric(c.bucket, pick.now_ns) } else { None };
            known |= remote.is_some();
            local.max(remote.unwrap_or(0))
        })
        .collect();
    *informed += known as u64;
    let best = *cost.iter().min().unwrap_or(&0);
    let ties: Vec<usize> = (0..cost.len()).filter(|&i| cost[i] == best).collect();
    match previous.filter(|p| ties.contains(p)) {
        Some(p) => p,
        None => ties[pick.rng.below(ties.len() as u64) as usize],
    }
}

impl Balancer for Conga {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn needs_flow_hash(&self) -> bool {
        true
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("flowlets", self.flowlets.started),
            ("path_changes", self.flowlets.path_changes),
            ("informed", self.informed),
        ]
    }

    fn choose(&mut self, pick: &mut Pick<'_>) -> usize {
        if pick.paths.is_none() {
            // Not where the path is decided: ECMP, as `hash`.
            return by_weight(pick.candidates, pick.flow_hash % pick.total_weight);
        }
        let informed = &mut self.informed;
        self.flowlets.choose(pick, |p, previous| least_congested(p, previous, informed))
    }
}

/// Parses a `conga` spec's options (shared by [`build`] and the datapath's overlay).
pub fn settings(opts: &[(String, String)]) -> Result<Settings, String> {
    let mut s = Settings { table: DEFAULT_TABLE, ..Settings::default() };
    for (k, v) in opts {
        match k.as_str() {
            "leaf" => {
                s.leaf = match v.parse::<u8>() {
                    Ok(n) if n < MAX_LEAVES => Some(n),
                    _ => return Err(format!("option leaf={v}: expected a leaf id 0..={}", MAX_LEAVES - 1)),
                }
            }
            "timeout" => s.timeout_ns = Some(duration_option(k, v)?),
            "age" => s.age_ns = Some(duration_option(k, v)?),
            "table" => s.table = table_option(v)?,
            _ => return Err(unknown_option(k, OPTIONS)),
        }
    }
    Ok(s)
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn Balancer>, String> {
    let s = settings(opts)?;
    Ok(Box::new(Conga::new(s.timeout_ns, s.table)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Rng;
    use crate::lb::testing::{candidates, choose, choose_with_paths, Loads, Paths};
    use crate::lb::{NoLoads, PortLoad};

    const MS: u64 = 1_000_000;

    /// Two uplinks (ports 1, 2) at 10 Mbit/s admitting these byte rates.
    fn uplinks(rates: [f64; 2]) -> Loads {
        let mut l = Loads::default();
        for (i, r) in rates.iter().enumerate() {
            l.0.insert(
                i as u32 + 1,
                PortLoad { bytes_per_s: *r, line_rate_bps: Some(10_000_000), ..Default::default() },
            );
        }
        l
    }

    fn paths(metrics: &[(usize, u8)]) -> Paths {
        Paths(metrics.iter().copied().collect())
    }

    #[test]
    fn a_new_flowlet_takes_the_least_congested_path_end_to_end() {
        // The paper's Fig. 4 in small: the local uplinks look alike (metric 2 each), but
        // the destination leaf reported the path through bucket 0 at 6 and through 1 at 3.
        let c = candidates(&[1, 1]);
        let mut rng = Rng::new(1);
        let mut b = Conga::new(Some(MS), 64);
        let local = uplinks([1.25e6 * 0.3, 1.25e6 * 0.3]);
        let remote = paths(&[(0, 6), (1, 3)]);
        assert_eq!(choose_with_paths(&mut b, &c, 7, 0, &local, &remote, &mut rng), 1);
        // A busy local uplink counts as much as a congested remote path: max(7, 3) > 6.
        let busy1 = uplinks([0.0, 1.25e6]);
        assert_eq!(choose_with_paths(&mut b, &c, 8, 0, &busy1, &remote, &mut rng), 0);
        assert_eq!((b.flowlets.started, b.informed), (2, 2));
    }

    #[test]
    fn packets_follow_their_flowlet_until_an_idle_gap() {
        let c = candidates(&[1, 1]);
        let mut rng = Rng::new(1);
        let mut b = Conga::new(Some(MS), 64);
        let local = uplinks([0.0, 0.0]);
        let first = choose_with_paths(&mut b, &c, 7, 0, &local, &paths(&[(0, 1), (1, 5)]), &mut rng);
        assert_eq!(first, 0);
        // The metrics turn, but within the flowlet the packets stay.
        let turned = paths(&[(0, 5), (1, 1)]);
        for t in 1..10 {
            assert_eq!(choose_with_paths(&mut b, &c, 7, t * MS / 2, &local, &turned, &mut rng), 0);
        }
        // After a gap longer than the timeout the next flowlet moves.
        assert_eq!(choose_with_paths(&mut b, &c, 7, 10 * MS, &local, &turned, &mut rng), 1);
        assert_eq!((b.flowlets.started, b.flowlets.path_changes), (2, 1));
    }

    #[test]
    fn ties_keep_the_previous_bucket_and_unknown_paths_read_zero() {
        let c = candidates(&[1, 1, 1]);
        let mut rng = Rng::new(3);
        let mut b = Conga::new(Some(MS), 64);
        let local = uplinks([0.0, 0.0]); // port 3 unknown: metric 0
        let first = choose_with_paths(&mut b, &c, 1, 0, &local, &paths(&[]), &mut rng);
        // equal everywhere: each new flowlet keeps the bucket it had
        for k in 1..20 {
            assert_eq!(choose_with_paths(&mut b, &c, 1, k * 2 * MS, &local, &paths(&[]), &mut rng), first);
        }
        assert_eq!((b.flowlets.started, b.flowlets.path_changes, b.informed), (20, 0, 0));
        // Random among ties for flows without history: every bucket gets some.
        let mut seen = std::collections::HashSet::new();
        for f in 100..160 {
            seen.insert(choose_with_paths(&mut b, &c, f, 0, &local, &paths(&[]), &mut rng));
        }
        assert_eq!(seen.len(), 3);
    }

    #[test]
    fn where_the_path_is_not_decided_it_hashes_as_ecmp() {
        let c = candidates(&[1, 1, 1, 1]);
        let mut rng = Rng::new(1);
        let mut b = Conga::new(Some(MS), 64);
        let mut h = crate::lb::hash::Hash;
        for flow in 0..50u64 {
            let ours = choose(&mut b, &c, flow, flow, &NoLoads, &mut rng);
            assert_eq!(ours, choose(&mut h, &c, flow, flow, &NoLoads, &mut rng));
        }
        assert_eq!(b.flowlets.started, 0);
    }

    #[test]
    fn options_are_checked() {
        let s = |o: &[(&str, &str)]| {
            settings(&o.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>())
        };
        assert_eq!(
            s(&[("leaf", "3"), ("age", "5ms")]),
            Ok(Settings { leaf: Some(3), timeout_ns: None, table: 4096, age_ns: Some(5 * MS) })
        );
        assert_eq!(s(&[("leaf", "64")]).unwrap_err(), "option leaf=64: expected a leaf id 0..=63");
        assert_eq!(s(&[("timeout", "0")]).unwrap_err(), "option timeout=0: must be positive");
        assert_eq!(
            s(&[("dre", "1")]).unwrap_err(),
            "unknown option 'dre' (known: leaf, timeout, table, age)"
        );
    }
}
