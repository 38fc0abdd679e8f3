//! `rr`: per-packet smooth weighted round-robin over the candidates (nginx's algorithm:
//! weights 3:1 give A A B A, interleaved rather than bursty). Its counters are per bucket
//! of the group; a bucket that is not a candidate (dead, weight 0) neither gains nor
//! spends. No options.

use super::{Balancer, Pick};
use crate::spec::unknown_option;

pub const NAME: &str = "rr";

#[derive(Debug, Default)]
pub struct RoundRobin {
    current: Vec<i64>,
}

impl Balancer for RoundRobin {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn choose(&mut self, pick: &mut Pick<'_>) -> usize {
        if self.current.len() != pick.n_buckets {
            self.current = vec![0; pick.n_buckets];
        }
        let mut best = 0;
        for (i, c) in pick.candidates.iter().enumerate() {
            self.current[c.bucket] += c.weight as i64;
            if self.current[c.bucket] > self.current[pick.candidates[best].bucket] {
                best = i;
            }
        }
        self.current[pick.candidates[best].bucket] -= pick.total_weight as i64;
        best
    }
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn Balancer>, String> {
    if let Some((k, _)) = opts.first() {
        return Err(unknown_option(k, &[]));
    }
    Ok(Box::new(RoundRobin::default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Rng;
    use crate::lb::testing::{candidates, choose};
    use crate::lb::NoLoads;

    #[test]
    fn rr_honours_weights_and_interleaves() {
        let c = candidates(&[3, 1]);
        let mut rng = Rng::new(1);
        let mut b = RoundRobin::default();
        let picks: Vec<usize> = (0..8).map(|_| choose(&mut b, &c, 0, 0, &NoLoads, &mut rng)).collect();
        assert_eq!(picks.iter().filter(|&&p| p == 0).count(), 6);
        // Smooth WRR never sends more than weight-many in a row to one bucket per cycle.
        assert_eq!(&picks[..4], &[0, 0, 1, 0]);
    }

    #[test]
    fn rr_skips_buckets_that_are_not_candidates() {
        let mut c = candidates(&[1, 1, 1]);
        c.remove(1); // bucket 1 dead
        let mut rng = Rng::new(1);
        let mut b = RoundRobin::default();
        let picks: Vec<usize> = (0..10).map(|_| choose(&mut b, &c, 0, 0, &NoLoads, &mut rng)).collect();
        assert!(!picks.contains(&1), "{picks:?}");
        assert_eq!(picks.iter().filter(|&&p| p == 0).count(), 5, "{picks:?}");
    }
}
