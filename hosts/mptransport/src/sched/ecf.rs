//! ECF, "earliest completion first" (Lim, Nahum, Towsley and Gibbens, "ECF: An MPTCP Path
//! Scheduler to Manage Heterogeneous Paths", CoNEXT 2017; the authors' Linux code).
//! f = the fastest subflow (lowest srtt), s = minRTT's pick.  When s is not f, ECF asks
//! whether waiting for f to free its window finishes the remaining data sooner than using
//! s.  With x_f = max(sndbuf, cwnd_f*mss), d = max(rttvar_f, rttvar_s), r = 1/beta = 4 and
//! a hysteresis flag `waiting` in {0, 1}:
//! if r*srtt_f*(x_f + cwnd_f*mss) < (r + waiting)*cwnd_f*mss*(srtt_s + d), then with
//! x_s = max(sndbuf, cwnd_s*mss): if srtt_s*x_s >= cwnd_s*mss*(2*srtt_f + d), send nothing
//! (wait for f) and set waiting = 1, else send on s; otherwise set waiting = 0 and send on
//! s.  `sndbuf` is the data in the connection send buffer not yet given to a subflow.

use super::{ConnView, Decision, Scheduler};

#[derive(Default)]
pub struct Ecf {
    pub waiting: bool,
}

const R: u128 = 4; // 1 / beta, beta = 0.25

impl Scheduler for Ecf {
    fn name(&self) -> &'static str {
        "ecf"
    }

    fn pick(&mut self, view: &ConnView) -> Decision {
        if view.unassigned == 0 {
            return Decision::Wait;
        }
        let (Some(s), Some(f)) = (view.min_rtt_with_room(), view.fastest()) else {
            return Decision::Wait;
        };
        if s.id == f.id {
            return Decision::New(s.id);
        }
        let mss = f.mss.max(1) as u128;
        let sndbuf = view.unassigned as u128;
        let cwnd_f = f.cwnd.max(1) as u128 * mss;
        let cwnd_s = s.cwnd.max(1) as u128 * mss;
        let (srtt_f, srtt_s) = (f.srtt_us as u128, s.srtt_us as u128);
        let d = f.rttvar_us.max(s.rttvar_us) as u128;
        let x_f = sndbuf.max(cwnd_f);
        let waiting = self.waiting as u128;
        if R * srtt_f * (x_f + cwnd_f) < (R + waiting) * cwnd_f * (srtt_s + d) {
            let x_s = sndbuf.max(cwnd_s);
            if srtt_s * x_s >= cwnd_s * (2 * srtt_f + d) {
                self.waiting = true;
                return Decision::Wait;
            }
            Decision::New(s.id)
        } else {
            self.waiting = false;
            Decision::New(s.id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn waits_for_the_fast_path_when_little_data_is_left() {
        let segs = VecDeque::new();
        // fast: 20 ms, cwnd full; slow: 200 ms with room; 10 packets left
        let sfs = vec![sf(0, 20, 10, 10), sf(1, 200, 10, 0)];
        let mut e = Ecf::default();
        assert_eq!(e.pick(&view(&sfs, &segs, 14_480)), Decision::Wait);
        assert!(e.waiting);
    }

    #[test]
    fn uses_the_slow_path_when_much_data_is_left() {
        let segs = VecDeque::new();
        let sfs = vec![sf(0, 20, 10, 10), sf(1, 200, 10, 0)];
        let mut e = Ecf { waiting: true };
        assert_eq!(e.pick(&view(&sfs, &segs, 100 << 20)), Decision::New(1));
        assert!(!e.waiting);
    }

    #[test]
    fn sends_on_the_slow_path_when_it_would_finish_in_time() {
        let segs = VecDeque::new();
        // similar RTTs: the first inequality holds but the slow path is quick enough
        let mut sfs = vec![sf(0, 20, 10, 10), sf(1, 25, 40, 0)];
        sfs[0].rttvar_us = 1000;
        sfs[1].rttvar_us = 1000;
        let mut e = Ecf::default();
        assert_eq!(e.pick(&view(&sfs, &segs, 14_480)), Decision::New(1));
    }

    #[test]
    fn the_fastest_with_room_is_always_taken() {
        let segs = VecDeque::new();
        let sfs = vec![sf(0, 20, 10, 0), sf(1, 200, 10, 0)];
        assert_eq!(
            Ecf::default().pick(&view(&sfs, &segs, 1448)),
            Decision::New(0)
        );
    }
}
