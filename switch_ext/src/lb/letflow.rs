//! `letflow`: flowlet switching with random path choice (LetFlow, Vanini et al., NSDI
//! 2017). A flowlet table, indexed by the flow hash, remembers per entry the bucket and
//! the time of the last packet; a packet whose entry has been idle longer than the
//! flowlet timeout (or whose bucket is no longer live) starts a new flowlet on a bucket
//! drawn at random, in proportion to weight. Within a flowlet every packet takes the
//! same bucket, so reordering needs a gap longer than the paths' delay difference.
//!
//! The table is direct-mapped and bounded, as in hardware: two flows whose hashes share
//! an entry share its flowlets. Options:
//! - `timeout=D`: the flowlet timeout (e.g. `500us`, `50ms`). Default: the paper's 500 us
//!   at 10 Gbit/s, as a number of full-size frame times (417) at the line rate of the
//!   slowest port the group's buckets send to (500 ms at 10 Mbit/s), fixed on the
//!   group's first packet; 500 us when no bucket's port has a rate. A caller that knows
//!   the fabric's base RTT passes its own.
//! - `table=N`: entries in the flowlet table, 1..=1048576 (default 4096).

use super::flowlet::{duration_option, table_option, FlowletTable, DEFAULT_TABLE};
use super::{by_weight, Balancer, Pick};
use crate::spec::unknown_option;

pub const NAME: &str = "letflow";
const OPTIONS: &[&str] = &["timeout", "table"];

#[derive(Debug)]
pub struct LetFlow {
    pub flowlets: FlowletTable,
}

impl LetFlow {
    pub fn new(timeout_ns: Option<u64>, table: usize) -> LetFlow {
        LetFlow { flowlets: FlowletTable::new(timeout_ns, table) }
    }
}

impl Balancer for LetFlow {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("flowlets", self.flowlets.started), ("path_changes", self.flowlets.path_changes)]
    }

    fn needs_flow_hash(&self) -> bool {
        true
    }

    fn choose(&mut self, pick: &mut Pick<'_>) -> usize {
        // a new flowlet: a bucket at random, in proportion to weight
        self.flowlets.choose(pick, |p, _| by_weight(p.candidates, p.rng.below(p.total_weight)))
    }
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn Balancer>, String> {
    let mut timeout = None;
    let mut table = DEFAULT_TABLE;
    for (k, v) in opts {
        match k.as_str() {
            "timeout" => timeout = Some(duration_option(k, v)?),
            "table" => table = table_option(v)?,
            _ => return Err(unknown_option(k, OPTIONS)),
        }
    }
    Ok(Box::new(LetFlow::new(timeout, table)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Rng;
    use crate::lb::testing::{candidates, choose, Loads};
    use crate::lb::{Candidate, NoLoads, PortLoad};

    const US: u64 = 1_000;

    /// The buckets one flow's packets take, sent `gap_ns` apart.
    fn path(
        b: &mut LetFlow,
        c: &[Candidate],
        flow: u64,
        packets: u64,
        gap_ns: u64,
        rng: &mut Rng,
    ) -> Vec<usize> {
        (0..packets).map(|i| choose(b, c, flow, 1 + i * gap_ns, &NoLoads, rng)).collect()
    }

    #[test]
    fn a_flow_without_idle_gaps_keeps_its_bucket() {
        let c = candidates(&[1, 1, 1, 1]);
        let mut rng = Rng::new(3);
        let mut b = LetFlow::new(Some(500 * US), 64);
        let p = path(&mut b, &c, 42, 1000, 499 * US, &mut rng);
        assert!(p.iter().all(|&x| x == p[0]), "{p:?}");
        assert_eq!((b.flowlets.started, b.flowlets.path_changes), (1, 0));
    }

    #[test]
    fn each_gap_longer_than_the_timeout_starts_a_flowlet_on_a_random_bucket() {
        let c = candidates(&[1, 1, 1, 1]);
        let mut rng = Rng::new(3);
        let mut b = LetFlow::new(Some(500 * US), 64);
        let p = path(&mut b, &c, 42, 400, 501 * US, &mut rng);
        assert_eq!(b.flowlets.started, 400);
        let used: std::collections::HashSet<_> = p.iter().collect();
        assert_eq!(used.len(), 4, "random choice reaches every bucket");
        // A new flowlet keeps its bucket with probability 1/4: about 300 of 399 change.
        assert!((250..=350).contains(&b.flowlets.path_changes), "{}", b.flowlets.path_changes);
    }

    #[test]
    fn a_dead_bucket_moves_the_flow_at_once_and_flows_are_kept_apart() {
        let mut c = candidates(&[1, 1]);
        let mut rng = Rng::new(5);
        let mut b = LetFlow::new(Some(500 * US), 64);
        let first = choose(&mut b, &c, 7, 0, &NoLoads, &mut rng);
        c.retain(|x| x.bucket != first);
        let other = choose(&mut b, &c, 7, US, &NoLoads, &mut rng);
        assert_ne!(other, first);
        assert_eq!((b.flowlets.started, b.flowlets.path_changes), (2, 1));
        // Another flow (another table entry) starts its own flowlet.
        choose(&mut b, &c, 8, 2 * US, &NoLoads, &mut rng);
        assert_eq!(b.flowlets.started, 3);
        // Flows whose hashes share an entry share it (a 1-entry table): no new flowlet.
        let mut one = LetFlow::new(Some(500 * US), 1);
        let a = choose(&mut one, &c, 1, 0, &NoLoads, &mut rng);
        assert_eq!(choose(&mut one, &c, 2, US, &NoLoads, &mut rng), a);
        assert_eq!(one.flowlets.started, 1);
    }

    #[test]
    fn weights_bias_the_new_flowlets() {
        let c = candidates(&[1, 3]);
        let mut rng = Rng::new(11);
        let mut b = LetFlow::new(Some(US), 16);
        let p = path(&mut b, &c, 1, 20_000, 2 * US, &mut rng);
        let ones = p.iter().filter(|&&x| x == 1).count() as f64 / p.len() as f64;
        assert!((ones - 0.75).abs() < 0.02, "{ones}");
    }

    #[test]
    fn the_default_timeout_scales_the_papers_with_the_slowest_ports_rate() {
        let c = candidates(&[1, 1]);
        let mut rng = Rng::new(1);
        let mut loads = Loads::default();
        for (port, rate) in [(1, 10_000_000), (2, 100_000_000)] {
            loads.0.insert(port, PortLoad { line_rate_bps: Some(rate), ..Default::default() });
        }
        let mut b = LetFlow::new(None, 16);
        choose(&mut b, &c, 1, 0, &loads, &mut rng);
        assert_eq!(b.flowlets.timeout_ns, Some(500_000_000), "500 us at 10 Gbit/s is 500 ms at 10 Mbit/s");
        let mut unshaped = LetFlow::new(None, 16);
        choose(&mut unshaped, &c, 1, 0, &NoLoads, &mut rng);
        assert_eq!(unshaped.flowlets.timeout_ns, Some(500 * US));
    }

    #[test]
    fn options_are_checked() {
        let b = |s: &str| crate::lb::build(&crate::spec::NamedSpec::parse(s).unwrap()).map(|_| ());
        assert!(b("letflow/timeout=50ms/table=128").is_ok());
        let e = b("letflow/timeout=0").unwrap_err();
        assert_eq!(e, "load balancer 'letflow': option timeout=0: must be positive");
        assert!(b("letflow/timeout=5").unwrap_err().contains("option timeout=5: duration '5'"));
        assert!(b("letflow/table=0").unwrap_err().contains("expected 1..=1048576 entries"));
        assert_eq!(
            b("letflow/gap=1ms").unwrap_err(),
            "load balancer 'letflow': unknown option 'gap' (known: timeout, table)"
        );
    }
}
