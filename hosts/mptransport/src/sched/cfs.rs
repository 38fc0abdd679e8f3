//! CFS, "choose fastest subflow" (Heo and Yoo, "Reducing the Flow Completion Time for
//! Multipath TCP", KSII TIIS 13(8), 2019): schedule like minRTT while the connection
//! send buffer holds unassigned data; once it holds none and the fastest subflow (lowest
//! srtt) has congestion-window room, send again on it the data still unacknowledged
//! (at the connection level) on the slower subflows, oldest first, so the flow's tail
//! does not wait for the slow path.  No prediction: only the RTT order is used.

use super::{minrtt::MinRtt, ConnView, Decision, Scheduler};

pub struct Cfs;

impl Scheduler for Cfs {
    fn name(&self) -> &'static str {
        "cfs"
    }

    fn pick(&mut self, view: &ConnView) -> Decision {
        if view.unassigned > 0 {
            return MinRtt.pick(view);
        }
        let Some(fast) = view.fastest() else {
            return Decision::Wait;
        };
        if !fast.has_room() {
            return Decision::Wait;
        }
        let slow_only = !(1u64 << fast.id);
        match view
            .segs
            .iter()
            .position(|g| !g.carried_by(fast.id) && g.carriers & slow_only != 0)
        {
            Some(i) => Decision::Dup {
                on: fast.id,
                seg: i,
            },
            None => Decision::Wait,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::Seg;
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn schedules_like_minrtt_while_data_is_unassigned() {
        let segs = VecDeque::new();
        let mut sfs = vec![sf(0, 20, 10, 10), sf(1, 200, 10, 0)];
        assert_eq!(Cfs.pick(&view(&sfs, &segs, 5000)), Decision::New(1));
        sfs[0].unacked = 3;
        assert_eq!(Cfs.pick(&view(&sfs, &segs, 5000)), Decision::New(0));
    }

    #[test]
    fn duplicates_the_slow_subflows_tail_on_the_fast_one() {
        let segs: VecDeque<Seg> = [
            Seg {
                dsn: 0,
                len: 1448,
                carriers: 0b01,
            }, // fast
            Seg {
                dsn: 1448,
                len: 1448,
                carriers: 0b10,
            }, // slow
            Seg {
                dsn: 2896,
                len: 1448,
                carriers: 0b10,
            }, // slow
        ]
        .into();
        let mut sfs = vec![sf(0, 20, 10, 1), sf(1, 200, 10, 2)];
        // nothing left unassigned, fast has room: the oldest slow-only segment again
        assert_eq!(
            Cfs.pick(&view(&sfs, &segs, 0)),
            Decision::Dup { on: 0, seg: 1 }
        );
        let mut segs2 = segs.clone();
        segs2[1].carriers = 0b11;
        assert_eq!(
            Cfs.pick(&view(&sfs, &segs2, 0)),
            Decision::Dup { on: 0, seg: 2 }
        );
        segs2[2].carriers = 0b11;
        assert_eq!(Cfs.pick(&view(&sfs, &segs2, 0)), Decision::Wait);
        // fast has no room: wait (the slow subflow never takes the fast one's data)
        sfs[0].unacked = 10;
        assert_eq!(Cfs.pick(&view(&sfs, &segs, 0)), Decision::Wait);
    }
}
