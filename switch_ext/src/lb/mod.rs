//! Load balancing: which bucket of a select group a packet takes.
//!
//! The choice is a [`Balancer`]'s, chosen by name with options like a queue discipline
//! (`NAME[/KEY=VALUE]...`, [`crate::spec`]): for the whole switch (`--select-mode`, or
//! the dcnlab experimenter message for `OFPG_ALL`) or for one group (the same message
//! with its group id). Every select group has its own instance, built on its first packet
//! from the spec then in force and dropped when that spec changes or the group is
//! modified, so per-group state (round-robin counters, flowlet tables) starts afresh
//! exactly when the group's configuration does.
//!
//! A balancer sees, per packet, the group's live buckets of positive weight
//! ([`Candidate`], with the egress port each sends to), the time, the packet's length,
//! its flow hash when it asks for it, read access to those ports' egress queues and
//! transmit rates ([`PortLoads`]) and, where the switch decides the packet's whole path
//! (a CONGA leaf), what the fabric reported of each bucket's path ([`PathMetrics`]). Adding a balancer = one file here plus one line in [`BALANCERS`]
//! (switch_ext/README.md, "How to add a load balancer").

pub mod conga;
pub mod drill;
pub mod flowcell;
pub mod flowlet;
pub mod hash;
pub mod letflow;
pub mod random;
pub mod rr;

use std::fmt::Debug;

use crate::group::Rng;
use crate::qdisc::QueueLen;
use crate::spec::{lookup, NamedSpec};

/// A bucket a packet may take: live, and of positive weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// Position in the group's bucket list.
    pub bucket: usize,
    /// Its weight; 1 for every bucket when the group gives all its live buckets weight 0
    /// (treated as equal rather than selecting nothing).
    pub weight: u64,
    /// The port its first output action sends to, if it has one: whose queue and rate a
    /// congestion-aware balancer reads.
    pub port: Option<u32>,
}

/// What a balancer may read about an egress port when it chooses.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PortLoad {
    /// Frames and bytes waiting in the port's egress buffer.
    pub queue: QueueLen,
    /// Bytes per second admitted to that buffer, from the port's [`RateMeter`].
    pub bytes_per_s: f64,
    /// The port's line rate (its OpenFlow `curr_speed`), if known.
    pub line_rate_bps: Option<u64>,
}

/// Read access to the egress ports' load at a given time.
pub trait PortLoads {
    fn load(&self, port: u32, now_ns: u64) -> Option<PortLoad>;
}

/// No port is known (a datapath driven without queues, as in the conformance tests).
pub struct NoLoads;

impl PortLoads for NoLoads {
    fn load(&self, _port: u32, _now_ns: u64) -> Option<PortLoad> {
        None
    }
}

/// What the fabric has reported back about the paths through this group's buckets
/// towards the packet's destination (CONGA's congestion-to-leaf table), on a switch that
/// learns it and for a packet it makes the path decision for.
pub trait PathMetrics {
    /// The congestion metric (0..=7) of the path through bucket `bucket` now; None when
    /// nothing (fresh) is known.
    fn metric(&self, bucket: usize, now_ns: u64) -> Option<u8>;
}

/// What a group's choice may read of the packet and the switch around it: the time, the
/// frame's length, the ports' loads and, where the switch decides the whole path, the
/// paths' metrics. The datapath builds one per packet; [`crate::group`] passes it to
/// the group's balancer as part of its [`Pick`].
#[derive(Clone, Copy)]
pub struct Context<'a> {
    pub now_ns: u64,
    pub bytes: usize,
    pub ports: &'a dyn PortLoads,
    pub paths: Option<&'a dyn PathMetrics>,
}

impl<'a> Context<'a> {
    /// A packet of `bytes` at `now_ns` on a switch that learns no path metrics.
    pub fn new(now_ns: u64, bytes: usize, ports: &'a dyn PortLoads) -> Context<'a> {
        Context { now_ns, bytes, ports, paths: None }
    }
}

/// One packet's choice.
pub struct Pick<'a> {
    pub now_ns: u64,
    /// The packet's frame length in bytes.
    pub bytes: usize,
    /// The packet's flow hash ([`crate::packet::Key::flow_hash`]: L2 to L4 addresses and
    /// ports) when the balancer asks for it ([`Balancer::needs_flow_hash`]), else 0.
    pub flow_hash: u64,
    /// Live buckets of positive weight, in bucket order; never empty.
    pub candidates: &'a [Candidate],
    /// The candidates' weights summed (> 0).
    pub total_weight: u64,
    /// Buckets in the group, live or not (for state kept per bucket).
    pub n_buckets: usize,
    pub ports: &'a dyn PortLoads,
    /// The paths' metrics, where the switch decides this packet's path end to end (a
    /// CONGA leaf sending a host's packet); None elsewhere.
    pub paths: Option<&'a dyn PathMetrics>,
    pub rng: &'a mut Rng,
}

pub trait Balancer: Debug {
    /// Registry name, printed as `"kind"` in the stats file.
    fn kind(&self) -> &'static str;
    /// Does [`Balancer::choose`] read [`Pick::flow_hash`]? Hashing costs a pass over the
    /// headers, which a per-packet balancer does not need.
    fn needs_flow_hash(&self) -> bool {
        false
    }
    /// The chosen candidate, as an index into `pick.candidates`.
    fn choose(&mut self, pick: &mut Pick<'_>) -> usize;
    /// Cumulative counters, in a stable order, for the stats file (none by default).
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// A balancer's constructor: parses its own options (in the order given).
pub type BalancerCtor = fn(&[(String, String)]) -> Result<Box<dyn Balancer>, String>;

/// Balancers by name. The first is the default.
pub const BALANCERS: &[(&str, BalancerCtor)] = &[
    (hash::NAME, hash::build),
    (rr::NAME, rr::build),
    (random::NAME, random::build),
    (letflow::NAME, letflow::build),
    (drill::NAME, drill::build),
    (flowcell::NAME, flowcell::build),
    (conga::NAME, conga::build),
];

/// Builds a balancer; the error names it and the bad option.
pub fn build(spec: &NamedSpec) -> Result<Box<dyn Balancer>, String> {
    let ctor = lookup(BALANCERS, "load balancer", &spec.name)?;
    ctor(&spec.options).map_err(|e| format!("load balancer '{}': {e}", spec.name))
}

/// The registered names, in registry order (for `--help`, the desc reply and errors).
pub fn names() -> Vec<&'static str> {
    BALANCERS.iter().map(|(n, _)| *n).collect()
}

/// The candidate at cumulative weight `target` (< the candidates' total): with target
/// uniform, each candidate is taken in proportion to its weight.
pub fn by_weight(candidates: &[Candidate], target: u64) -> usize {
    let mut acc = 0;
    for (i, c) in candidates.iter().enumerate() {
        acc += c.weight;
        if target < acc {
            return i;
        }
    }
    candidates.len() - 1
}

/// A time constant given for 10 Gbit/s (LetFlow's flowlet timeout, CONGA's ageing) as
/// the same number of full-size frame times at the line rate of the slowest port the
/// candidates send to; unchanged when no candidate's port has a rate.
pub fn scaled_to_slowest_port(pick: &Pick<'_>, ns_at_10g: f64) -> u64 {
    let slowest = pick
        .candidates
        .iter()
        .filter_map(|c| c.port.and_then(|p| pick.ports.load(p, pick.now_ns)))
        .filter_map(|l| l.line_rate_bps)
        .min();
    (ns_at_10g * 10e9 / slowest.map_or(10e9, |r| r as f64)) as u64
}

/// An exponentially decaying byte counter read as a rate: bytes admitted are added and
/// the sum decays with time constant `tau`, so a steady `r` bytes/s reads `r` (the sum
/// settles at `r * tau`). CONGA's DRE is the same estimator in discrete steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateMeter {
    tau_ns: f64,
    bytes: f64,
    last_ns: u64,
}

/// Frames of 1500 bytes the default time constant spans at the port's line rate.
const METER_FRAMES: f64 = 100.0;

impl RateMeter {
    pub fn new(tau_ns: u64) -> RateMeter {
        RateMeter { tau_ns: tau_ns.max(1) as f64, bytes: 0.0, last_ns: 0 }
    }

    /// The default meter of a port: a time constant of [`METER_FRAMES`] full-size frames
    /// at its line rate (120 ms at 10 Mbit/s, 120 us at 10 Gbit/s), so it smooths over the
    /// same number of packets whatever rate the fabric is scaled to; 10 Gbit/s is assumed
    /// for a port without a rate.
    pub fn for_rate(rate_bps: Option<u64>) -> RateMeter {
        let rate = rate_bps.unwrap_or(10_000_000_000) as f64;
        RateMeter::new((METER_FRAMES * 1500.0 * 8.0 / rate * 1e9) as u64)
    }

    fn decayed(&self, now_ns: u64) -> f64 {
        let dt = now_ns.saturating_sub(self.last_ns) as f64;
        self.bytes * (-dt / self.tau_ns).exp()
    }

    pub fn add(&mut self, bytes: usize, now_ns: u64) {
        self.bytes = self.decayed(now_ns) + bytes as f64;
        self.last_ns = self.last_ns.max(now_ns);
    }

    pub fn bytes_per_s(&self, now_ns: u64) -> f64 {
        self.decayed(now_ns) / self.tau_ns * 1e9
    }
}

#[cfg(test)]
pub(crate) mod testing {
    //! Candidate lists and a port view for the balancers' own tests.
    use super::*;
    use std::collections::HashMap;

    /// Buckets 0.. with these weights, bucket i sending to port i + 1.
    pub fn candidates(weights: &[u64]) -> Vec<Candidate> {
        weights
            .iter()
            .enumerate()
            .map(|(i, &weight)| Candidate { bucket: i, weight, port: Some(i as u32 + 1) })
            .collect()
    }

    /// Port loads set by hand.
    #[derive(Default)]
    pub struct Loads(pub HashMap<u32, PortLoad>);

    impl PortLoads for Loads {
        fn load(&self, port: u32, _now_ns: u64) -> Option<PortLoad> {
            self.0.get(&port).copied()
        }
    }

    /// Runs one choice over `cands` at `now_ns` for a full-size frame; returns the
    /// chosen bucket.
    pub fn choose(
        b: &mut dyn Balancer,
        cands: &[Candidate],
        flow_hash: u64,
        now_ns: u64,
        ports: &dyn PortLoads,
        rng: &mut Rng,
    ) -> usize {
        choose_sized(b, cands, flow_hash, now_ns, 1500, ports, rng)
    }

    /// [`choose`] for a frame of `bytes`.
    pub fn choose_sized(
        b: &mut dyn Balancer,
        cands: &[Candidate],
        flow_hash: u64,
        now_ns: u64,
        bytes: usize,
        ports: &dyn PortLoads,
        rng: &mut Rng,
    ) -> usize {
        run(b, cands, flow_hash, now_ns, bytes, ports, None, rng)
    }

    /// [`choose`] at a switch that knows the paths' metrics.
    pub fn choose_with_paths(
        b: &mut dyn Balancer,
        cands: &[Candidate],
        flow_hash: u64,
        now_ns: u64,
        ports: &dyn PortLoads,
        paths: &dyn PathMetrics,
        rng: &mut Rng,
    ) -> usize {
        run(b, cands, flow_hash, now_ns, 1500, ports, Some(paths), rng)
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        b: &mut dyn Balancer,
        cands: &[Candidate],
        flow_hash: u64,
        now_ns: u64,
        bytes: usize,
        ports: &dyn PortLoads,
        paths: Option<&dyn PathMetrics>,
        rng: &mut Rng,
    ) -> usize {
        let total_weight = cands.iter().map(|c| c.weight).sum();
        let n_buckets = cands.iter().map(|c| c.bucket + 1).max().unwrap_or(0);
        let mut p =
            Pick { now_ns, bytes, flow_hash, candidates: cands, total_weight, n_buckets, ports, paths, rng };
        cands[b.choose(&mut p)].bucket
    }

    /// Path metrics set by hand, by bucket.
    #[derive(Default)]
    pub struct Paths(pub HashMap<usize, u8>);

    impl PathMetrics for Paths {
        fn metric(&self, bucket: usize, _now_ns: u64) -> Option<u8> {
            self.0.get(&bucket).copied()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_refuses_unknown_names_and_options() {
        let e = |s: &str| build(&NamedSpec::parse(s).unwrap()).expect_err("refused");
        assert_eq!(
            e("spray"),
            "unknown load balancer 'spray' (known: hash, rr, random, letflow, drill, flowcell, conga)"
        );
        assert_eq!(e("hash/fields=l3"), "load balancer 'hash': unknown option 'fields' (known: none)");
        for name in names() {
            assert!(build(&NamedSpec::named(name)).is_ok(), "{name}");
        }
        assert_eq!(names()[0], "hash", "the default comes first");
    }

    #[test]
    fn by_weight_walks_the_cumulative_weights() {
        let c = testing::candidates(&[1, 3, 2]);
        let picks: Vec<usize> = (0..6).map(|t| by_weight(&c, t)).collect();
        assert_eq!(picks, vec![0, 1, 1, 1, 2, 2]);
    }

    #[test]
    fn the_meter_reads_a_steady_rate_and_decays_when_idle() {
        let mut m = RateMeter::new(10_000_000); // 10 ms
                                                // 1000 bytes every 100 us = 10 MB/s, for 20 time constants.
        for i in 0..2000u64 {
            m.add(1000, i * 100_000);
        }
        let now = 1999 * 100_000;
        let r = m.bytes_per_s(now);
        assert!((r - 10e6).abs() / 10e6 < 0.01, "{r}");
        // One time constant of silence leaves 1/e of it.
        let later = m.bytes_per_s(now + 10_000_000);
        assert!((later / r - (-1f64).exp()).abs() < 0.001, "{later}");
        assert_eq!(RateMeter::for_rate(Some(10_000_000)).tau_ns as u64, 120_000_000);
        assert_eq!(RateMeter::for_rate(None).tau_ns as u64, 120_000);
    }
}
