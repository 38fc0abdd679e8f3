//! `hash`: ECMP. The flow hash, modulo the candidates' total weight, walks the cumulative
//! weights, so one flow keeps one bucket while the live set is unchanged and flows spread
//! in proportion to weight. No options.

use super::{by_weight, Balancer, Pick};
use crate::spec::unknown_option;

pub const NAME: &str = "hash";

#[derive(Debug, Default)]
pub struct Hash;

impl Balancer for Hash {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn needs_flow_hash(&self) -> bool {
        true
    }

    fn choose(&mut self, pick: &mut Pick<'_>) -> usize {
        by_weight(pick.candidates, pick.flow_hash % pick.total_weight)
    }
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn Balancer>, String> {
    if let Some((k, _)) = opts.first() {
        return Err(unknown_option(k, &[]));
    }
    Ok(Box::new(Hash))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Rng;
    use crate::lb::testing::{candidates, choose};
    use crate::lb::NoLoads;

    #[test]
    fn hash_is_per_flow() {
        let c = candidates(&[1, 1, 1, 1]);
        let mut rng = Rng::new(1);
        let mut b = Hash;
        for h in [1u64, 99, 12345, u64::MAX] {
            let a = choose(&mut b, &c, h, 0, &NoLoads, &mut rng);
            for _ in 0..5 {
                assert_eq!(choose(&mut b, &c, h, 0, &NoLoads, &mut rng), a);
            }
        }
        // Different flows spread over buckets.
        let used: std::collections::HashSet<_> =
            (0..64u64).map(|h| choose(&mut b, &c, h, 0, &NoLoads, &mut rng)).collect();
        assert_eq!(used.len(), 4);
    }
}
