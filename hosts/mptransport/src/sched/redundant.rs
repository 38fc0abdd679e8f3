//! Redundant (the `redundant` scheduler of multipath-tcp.org's Linux MPTCP, Frömmgen et
//! al., "ReMP TCP", 2016): every segment is sent on every subflow.  A subflow with room
//! first catches up on the outstanding segments it has not carried, oldest first, then
//! takes new data; the receiver keeps the first copy.

use super::{ConnView, Decision, Scheduler};

pub struct Redundant;

impl Scheduler for Redundant {
    fn name(&self) -> &'static str {
        "redundant"
    }

    fn pick(&mut self, view: &ConnView) -> Decision {
        let mut with_room: Vec<_> = view.subflows.iter().filter(|s| s.has_room()).collect();
        with_room.sort_by_key(|s| (s.srtt_us, s.id));
        for s in with_room {
            if let Some(i) = view.segs.iter().position(|g| !g.carried_by(s.id)) {
                return Decision::Dup { on: s.id, seg: i };
            }
            if view.unassigned > 0 {
                return Decision::New(s.id);
            }
        }
        Decision::Wait
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::Seg;
    use super::*;
    use std::collections::VecDeque;

    #[test]
    fn every_subflow_carries_every_segment() {
        let mut segs = VecDeque::new();
        let sfs = vec![sf(0, 20, 10, 0), sf(1, 200, 10, 0)];
        assert_eq!(Redundant.pick(&view(&sfs, &segs, 5000)), Decision::New(0));
        segs.push_back(Seg {
            dsn: 0,
            len: 1448,
            carriers: 0b01,
        });
        // subflow 0 carried it; it takes new data, and subflow 1 catches up
        let mut only1 = sfs.clone();
        only1[0].unacked = 10;
        assert_eq!(
            Redundant.pick(&view(&only1, &segs, 5000)),
            Decision::Dup { on: 1, seg: 0 }
        );
        assert_eq!(Redundant.pick(&view(&sfs, &segs, 5000)), Decision::New(0));
        segs[0].carriers = 0b11;
        assert_eq!(Redundant.pick(&view(&sfs, &segs, 0)), Decision::Wait);
    }
}
