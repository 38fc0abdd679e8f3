//! `random`: per-packet spraying (RPS). Each packet takes a candidate at random with
//! probability proportional to its weight. No options.

use super::{by_weight, Balancer, Pick};
use crate::spec::unknown_option;

pub const NAME: &str = "random";

#[derive(Debug, Default)]
pub struct Random;

impl Balancer for Random {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn choose(&mut self, pick: &mut Pick<'_>) -> usize {
        let target = pick.rng.below(pick.total_weight);
        by_weight(pick.candidates, target)
    }
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn Balancer>, String> {
    if let Some((k, _)) = opts.first() {
        return Err(unknown_option(k, &[]));
    }
    Ok(Box::new(Random))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Rng;
    use crate::lb::testing::{candidates, choose};
    use crate::lb::NoLoads;

    #[test]
    fn random_is_weighted() {
        let c = candidates(&[1, 3]);
        let mut rng = Rng::new(7);
        let mut b = Random;
        let n = 40_000;
        let ones = (0..n).filter(|_| choose(&mut b, &c, 0, 0, &NoLoads, &mut rng) == 1).count();
        let frac = ones as f64 / n as f64;
        assert!((frac - 0.75).abs() < 0.02, "{frac}");
    }
}
