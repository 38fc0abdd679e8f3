//! `drill`: per-packet choice by local queue length (DRILL, Ghorbani et al., SIGCOMM
//! 2017). For every packet the switch samples `d` candidates at random, adds the `m`
//! least loaded of its previous choice, and sends the packet to the one whose egress
//! queue holds the fewest bytes now; the `m` least loaded of those compared are
//! remembered for the next packet. Remembered candidates win ties, so an empty port
//! keeps its traffic rather than flapping. Weights other than zero are not used: DRILL
//! balances over equal paths (a zero-weight bucket is no candidate at all); a bucket
//! that sends to no port of this switch counts as an empty queue.
//!
//! Options: `d=N` (1..=16, default 2) and `m=N` (0..=16, default 1), the paper's defaults.

use super::{Balancer, Pick};
use crate::spec::unknown_option;

pub const NAME: &str = "drill";
const OPTIONS: &[&str] = &["d", "m"];
const MAX: usize = 16;

#[derive(Debug)]
pub struct Drill {
    d: usize,
    m: usize,
    /// Buckets remembered from the previous choice, least loaded first.
    memory: Vec<usize>,
    /// The previous packet's bucket.
    last: Option<usize>,
    /// Packets that took another bucket than the group's previous packet.
    pub path_changes: u64,
}

impl Drill {
    pub fn new(d: usize, m: usize) -> Drill {
        Drill { d, m, memory: Vec::with_capacity(m), last: None, path_changes: 0 }
    }
}

impl Balancer for Drill {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("path_changes", self.path_changes)]
    }

    fn choose(&mut self, pick: &mut Pick<'_>) -> usize {
        let (cands, ports, now) = (pick.candidates, pick.ports, pick.now_ns);
        let n = cands.len();
        let queued = |i: usize| cands[i].port.and_then(|p| ports.load(p, now)).map_or(0, |l| l.queue.bytes);
        // (queue bytes, candidate index): the remembered ones first, so they win ties.
        let mut compared: Vec<(usize, usize)> = Vec::with_capacity(self.d + self.m);
        for &b in &self.memory {
            if let Some(i) = cands.iter().position(|c| c.bucket == b) {
                compared.push((queued(i), i));
            }
        }
        let add = |i: usize, compared: &mut Vec<(usize, usize)>| {
            if !compared.iter().any(|&(_, j)| j == i) {
                compared.push((queued(i), i));
            }
        };
        if self.d >= n {
            (0..n).for_each(|i| add(i, &mut compared));
        } else {
            // Floyd's sampling: d distinct indices of 0..n, each set equally likely.
            let mut sample: Vec<usize> = Vec::with_capacity(self.d);
            for j in n - self.d..n {
                let t = pick.rng.below(j as u64 + 1) as usize;
                sample.push(if sample.contains(&t) { j } else { t });
            }
            sample.into_iter().for_each(|i| add(i, &mut compared));
        }
        // Stable: among equal queues the earlier (remembered, then sampled) stays first.
        compared.sort_by_key(|&(q, _)| q);
        self.memory.clear();
        self.memory.extend(compared.iter().take(self.m).map(|&(_, i)| cands[i].bucket));
        let chosen = compared[0].1;
        if self.last.is_some_and(|b| b != cands[chosen].bucket) {
            self.path_changes += 1;
        }
        self.last = Some(cands[chosen].bucket);
        chosen
    }
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn Balancer>, String> {
    let (mut d, mut m) = (2, 1);
    for (k, v) in opts {
        let (slot, min) = match k.as_str() {
            "d" => (&mut d, 1),
            "m" => (&mut m, 0),
            _ => return Err(unknown_option(k, OPTIONS)),
        };
        *slot = match v.parse::<usize>() {
            Ok(n) if (min..=MAX).contains(&n) => n,
            _ => return Err(format!("option {k}={v}: expected {min}..={MAX}")),
        };
    }
    Ok(Box::new(Drill::new(d, m)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Rng;
    use crate::lb::testing::{candidates, choose, Loads};
    use crate::lb::PortLoad;
    use crate::qdisc::QueueLen;

    /// Port i + 1 (bucket i) holding `bytes[i]`.
    fn loads(bytes: &[usize]) -> Loads {
        let mut l = Loads::default();
        for (i, &b) in bytes.iter().enumerate() {
            let queue = QueueLen { pkts: b.div_ceil(1500), bytes: b };
            l.0.insert(i as u32 + 1, PortLoad { queue, ..Default::default() });
        }
        l
    }

    #[test]
    fn sampling_every_port_always_takes_the_shortest_queue() {
        let c = candidates(&[1, 1, 1, 1]);
        let mut rng = Rng::new(1);
        let mut b = Drill::new(4, 1);
        assert_eq!(choose(&mut b, &c, 0, 0, &loads(&[3000, 1500, 4500, 6000]), &mut rng), 1);
        assert_eq!(choose(&mut b, &c, 0, 0, &loads(&[3000, 9000, 0, 6000]), &mut rng), 2);
    }

    #[test]
    fn the_paper_default_two_samples_plus_one_remembered() {
        // Worked by hand: queues 4 : 1 : 3 : 2 (in 1500-byte frames). With m = 1 the port
        // with one frame, once sampled, is remembered and kept while it stays the least
        // loaded; d = 2 random samples find it within a few packets.
        let c = candidates(&[1, 1, 1, 1]);
        let q = loads(&[6000, 1500, 4500, 3000]);
        let mut rng = Rng::new(9);
        let mut b = Drill::new(2, 1);
        let picks: Vec<usize> = (0..50).map(|_| choose(&mut b, &c, 0, 0, &q, &mut rng)).collect();
        let first = picks.iter().position(|&p| p == 1).expect("port 2 found");
        assert!(first < 10, "{picks:?}");
        assert!(picks[first..].iter().all(|&p| p == 1), "{picks:?}");
        let changes = picks.windows(2).filter(|w| w[0] != w[1]).count() as u64;
        assert_eq!(b.path_changes, changes);
        // Every choice is the least loaded of what was compared: never the longest queue
        // (it loses against whatever it is compared with).
        assert!(!picks.contains(&0), "{picks:?}");
        // When the remembered port fills up, the next sample that is shorter wins.
        let q2 = loads(&[6000, 9000, 4500, 3000]);
        let later: Vec<usize> = (0..50).map(|_| choose(&mut b, &c, 0, 0, &q2, &mut rng)).collect();
        assert_ne!(later[0], 1, "any sample is shorter than the remembered 9000 bytes: {later:?}");
        assert!(later[10..].iter().all(|&p| p == 3), "{later:?}");
    }

    #[test]
    fn without_memory_it_is_the_power_of_two_choices() {
        // m = 0, d = 2 over queues 0 < 1 < 2 < 3 frames: bucket k wins when it is the
        // smaller of two distinct samples: P = (3 - k) / 6, i.e. 1/2, 1/3, 1/6, 0.
        let c = candidates(&[1, 1, 1, 1]);
        let q = loads(&[0, 1500, 3000, 4500]);
        let mut rng = Rng::new(4);
        let mut b = Drill::new(2, 0);
        let n = 30_000;
        let mut hits = [0usize; 4];
        for _ in 0..n {
            hits[choose(&mut b, &c, 0, 0, &q, &mut rng)] += 1;
        }
        for (k, want) in [0.5, 1.0 / 3.0, 1.0 / 6.0, 0.0].into_iter().enumerate() {
            let got = hits[k] as f64 / n as f64;
            assert!((got - want).abs() < 0.015, "bucket {k}: {got} vs {want}");
        }
    }

    #[test]
    fn equal_queues_keep_the_remembered_port() {
        let c = candidates(&[1, 1, 1, 1]);
        let q = loads(&[0, 0, 0, 0]);
        let mut rng = Rng::new(2);
        let mut b = Drill::new(2, 1);
        let first = choose(&mut b, &c, 0, 0, &q, &mut rng);
        assert!((0..20).all(|_| choose(&mut b, &c, 0, 0, &q, &mut rng) == first));
        // A remembered bucket that is no longer a candidate is forgotten.
        let rest: Vec<_> = c.iter().copied().filter(|x| x.bucket != first).collect();
        assert_ne!(choose(&mut b, &rest, 0, 0, &q, &mut rng), first);
    }

    #[test]
    fn options_are_checked() {
        let b = |s: &str| crate::lb::build(&crate::spec::NamedSpec::parse(s).unwrap()).map(|_| ());
        assert!(b("drill/d=3/m=2").is_ok() && b("drill/m=0").is_ok());
        assert_eq!(b("drill/d=0").unwrap_err(), "load balancer 'drill': option d=0: expected 1..=16");
        assert_eq!(b("drill/m=17").unwrap_err(), "load balancer 'drill': option m=17: expected 0..=16");
        assert_eq!(b("drill/k=1").unwrap_err(), "load balancer 'drill': unknown option 'k' (known: d, m)");
    }
}
