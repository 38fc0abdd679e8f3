//! BLEST, blocking estimation (Ferlin, Alay, Mehani and Boreli, "BLEST: Blocking
//! estimation-based MPTCP scheduler for heterogeneous networks", IFIP Networking 2016;
//! `mptcp_blest.c`).  f = the fastest subflow, s = minRTT's pick.  When s is not f,
//! estimate what f could send while one segment is in flight on s: n = srtt_s/srtt_f + 1
//! rounds; in slow start cwnd_f*(2^n - 1) packets, else
//! (max(cwnd_f, ssthresh_f + 1) + (n - 1)/2)*n.  If lambda*packets*mss exceeds the
//! connection send window left after the segment and s's outstanding bytes, sending on s
//! would block f: send nothing.  lambda starts at 1.2 and stays in [1.0, 1.3]; at most once
//! per min RTT it rises by 0.04 after a blocking event and falls by 0.01 otherwise.  This
//! transport has no penalisation/opportunistic reinjection, so the blocking event is the
//! one those react to: the connection window full while a subflow has room.

use super::{ConnView, Decision, Scheduler};

pub struct Blest {
    pub lambda: f64,
    last_adjust_us: Option<u64>,
}

impl Default for Blest {
    fn default() -> Self {
        Blest {
            lambda: 1.2,
            last_adjust_us: None,
        }
    }
}

impl Blest {
    fn adapt(&mut self, view: &ConnView, min_rtt_us: u64) {
        match self.last_adjust_us {
            Some(t) if view.now_us < t + min_rtt_us.max(1) => {}
            _ => {
                self.lambda += if view.window_blocked { 0.04 } else { -0.01 };
                self.lambda = self.lambda.clamp(1.0, 1.3);
                self.last_adjust_us = Some(view.now_us);
            }
        }
    }
}

impl Scheduler for Blest {
    fn name(&self) -> &'static str {
        "blest"
    }

    fn pick(&mut self, view: &ConnView) -> Decision {
        let Some(f) = view.fastest() else {
            return Decision::Wait;
        };
        self.adapt(view, f.srtt_us as u64);
        if view.unassigned == 0 {
            return Decision::Wait;
        }
        let Some(s) = view.min_rtt_with_room() else {
            return Decision::Wait;
        };
        if s.id == f.id {
            return Decision::New(s.id);
        }
        let n = (s.srtt_us / f.srtt_us.max(1)) as u64 + 1;
        let cwnd_f = f.cwnd.max(1) as f64;
        let packets = if f.cwnd < f.ssthresh {
            cwnd_f * ((1u64 << n.min(40)) - 1) as f64
        } else {
            (cwnd_f.max(f.ssthresh as f64 + 1.0) + ((n - 1) / 2) as f64) * n as f64
        };
        let used = view.segment + view.outstanding_on(s.id);
        let space = view.window.saturating_sub(used) as f64;
        if self.lambda * packets * f.mss.max(1) as f64 > space {
            Decision::Wait
        } else {
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
    fn waits_when_the_slow_path_would_block_the_fast_one() {
        let segs = VecDeque::new();
        // fast in slow start: 10*(2^11-1) packets in 11 rounds >> 4 MB window
        let sfs = vec![sf(0, 20, 10, 10), sf(1, 200, 10, 0)];
        let mut b = Blest::default();
        assert_eq!(b.pick(&view(&sfs, &segs, 1 << 20)), Decision::Wait);
    }

    #[test]
    fn sends_on_the_slow_path_when_the_window_is_large_enough() {
        let segs = VecDeque::new();
        // congestion avoidance: (max(10, 6) + 5) * 11 = 165 packets, ~290 KB < 4 MB
        let mut sfs = vec![sf(0, 20, 10, 10), sf(1, 200, 10, 0)];
        sfs[0].ssthresh = 5;
        let mut b = Blest::default();
        assert_eq!(b.pick(&view(&sfs, &segs, 1 << 20)), Decision::New(1));
        // a small window makes the same state wait
        let segs2 = VecDeque::new();
        let mut v = view(&sfs, &segs2, 1 << 20);
        v.window = 200_000;
        assert_eq!(b.pick(&v), Decision::Wait);
    }

    #[test]
    fn lambda_adapts_at_most_once_per_min_rtt_within_bounds() {
        let segs = VecDeque::new();
        let sfs = vec![sf(0, 20, 10, 0), sf(1, 200, 10, 0)];
        let mut b = Blest::default();
        let mut v = view(&sfs, &segs, 1448);
        v.window_blocked = true;
        b.pick(&v);
        assert!((b.lambda - 1.24).abs() < 1e-9);
        v.now_us = 10_000; // < 20 ms later: no change
        b.pick(&v);
        assert!((b.lambda - 1.24).abs() < 1e-9);
        for i in 1..10 {
            v.now_us = i * 20_000;
            b.pick(&v);
        }
        assert!((b.lambda - 1.3).abs() < 1e-9);
        v.window_blocked = false;
        for i in 10..100 {
            v.now_us = i * 20_000;
            b.pick(&v);
        }
        assert!((b.lambda - 1.0).abs() < 1e-9);
    }
}
