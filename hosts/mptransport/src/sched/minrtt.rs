//! minRTT, the Linux MPTCP default scheduler (Paasch et al., "Experimental evaluation of
//! multipath TCP schedulers", CSWS 2014; `mptcp_sched.c` in multipath-tcp.org v0.89):
//! the next segment goes to the subflow with the lowest smoothed RTT among those not in
//! loss recovery whose congestion window has room; when none has room, wait.

use super::{ConnView, Decision, Scheduler};

pub struct MinRtt;

impl Scheduler for MinRtt {
    fn name(&self) -> &'static str {
        "minrtt"
    }

    fn pick(&mut self, view: &ConnView) -> Decision {
        if view.unassigned == 0 {
            return Decision::Wait;
        }
        match view.min_rtt_with_room() {
            Some(s) => Decision::New(s.id),
            None => Decision::Wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn lowest_srtt_with_room_wins() {
        let segs = VecDeque::new();
        let mut sfs = vec![sf(0, 20, 10, 0), sf(1, 200, 10, 0)];
        assert_eq!(MinRtt.pick(&view(&sfs, &segs, 5000)), Decision::New(0));
        sfs[0].unacked = 10; // cwnd full
        assert_eq!(MinRtt.pick(&view(&sfs, &segs, 5000)), Decision::New(1));
        sfs[1].in_recovery = true;
        assert_eq!(MinRtt.pick(&view(&sfs, &segs, 5000)), Decision::Wait);
        sfs[0].unacked = 0;
        assert_eq!(MinRtt.pick(&view(&sfs, &segs, 0)), Decision::Wait);
    }
}
