//! Round-robin (the `roundrobin` scheduler of multipath-tcp.org's Linux MPTCP): subflows
//! with room take new segments in turn, regardless of their RTT.

use super::{ConnView, Decision, Scheduler};

#[derive(Default)]
pub struct RoundRobin {
    next: usize,
}

impl Scheduler for RoundRobin {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn pick(&mut self, view: &ConnView) -> Decision {
        let n = view.subflows.len();
        if view.unassigned == 0 || n == 0 {
            return Decision::Wait;
        }
        for i in 0..n {
            let s = &view.subflows[(self.next + i) % n];
            if s.has_room() {
                self.next = (self.next + i + 1) % n;
                return Decision::New(s.id);
            }
        }
        Decision::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn takes_turns_and_skips_full_subflows() {
        let segs = VecDeque::new();
        let mut sfs = vec![sf(0, 20, 10, 0), sf(1, 200, 10, 0), sf(2, 50, 10, 0)];
        let mut rr = RoundRobin::default();
        let picks: Vec<_> = (0..4).map(|_| rr.pick(&view(&sfs, &segs, 9000))).collect();
        assert_eq!(
            picks,
            vec![
                Decision::New(0),
                Decision::New(1),
                Decision::New(2),
                Decision::New(0)
            ]
        );
        sfs[1].unacked = 10;
        assert_eq!(rr.pick(&view(&sfs, &segs, 9000)), Decision::New(2));
    }
}
