//! Schedulers: which subflow carries the next segment, or which segment is sent again.
//!
//! One trait, one module per algorithm.  A scheduler sees a [`ConnView`]: per subflow the
//! kernel's `TCP_INFO` (srtt, rttvar, cwnd, ssthresh, unacked, notsent, pacing rate, loss
//! recovery) and the segments it carries, and for the connection the bytes not yet
//! assigned to any subflow, the segments sent but not yet data-acked and the window.
//! It answers with a [`Decision`].  The connection calls it until it answers `Wait`.
//! Reinjection of a dead subflow's data is the connection's job, not the scheduler's.

pub mod blest;
pub mod cfs;
pub mod ecf;
pub mod minrtt;
pub mod redundant;
pub mod roundrobin;

use std::collections::VecDeque;

/// One subflow as the scheduler sees it.
#[derive(Debug, Clone, Default)]
pub struct SubflowView {
    pub id: usize,
    pub alive: bool,
    /// Smoothed RTT and its variation, microseconds (`tcpi_rtt`, `tcpi_rttvar`).
    pub srtt_us: u32,
    pub rttvar_us: u32,
    /// Congestion window and slow-start threshold, packets.
    pub cwnd: u32,
    pub ssthresh: u32,
    /// Packets sent and not yet acknowledged by TCP.
    pub unacked: u32,
    pub mss: u32,
    /// Bytes written to the socket the kernel has not sent yet.
    pub notsent: u32,
    pub pacing_rate: u64,
    /// In loss recovery (`tcpi_ca_state` Recovery or Loss).
    pub in_recovery: bool,
    /// The local send queue accepts another segment (no partial frame pending and the
    /// kernel's unsent bytes below `TCP_NOTSENT_LOWAT`).
    pub writable: bool,
}

impl SubflowView {
    /// Can take a segment now: alive, writable, not in loss recovery, cwnd not full.
    pub fn has_room(&self) -> bool {
        self.alive && self.writable && !self.in_recovery && self.unacked < self.cwnd
    }

    /// Bytes the congestion window still admits (at least one MSS when it has room).
    pub fn room_bytes(&self) -> u64 {
        (self.cwnd.saturating_sub(self.unacked).max(1) as u64) * self.mss.max(1) as u64
    }
}

/// A segment sent and not yet data-acked: `carriers` has bit `i` set for each subflow
/// `i` that carried it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seg {
    pub dsn: u64,
    pub len: u64,
    pub carriers: u64,
}

impl Seg {
    pub fn carried_by(&self, sf: usize) -> bool {
        self.carriers & (1u64 << sf) != 0
    }
}

/// The connection as the scheduler sees it.
#[derive(Debug, Clone)]
pub struct ConnView<'a> {
    pub subflows: &'a [SubflowView],
    /// Bytes in the connection send buffer not yet given to any subflow.
    pub unassigned: u64,
    /// Size of the next new segment (what a `New` decision sends).
    pub segment: u64,
    /// Sent, not yet data-acked, oldest first.
    pub segs: &'a VecDeque<Seg>,
    /// Connection-level send window (the receiver's reassembly window), bytes.
    pub window: u64,
    /// DSN below which everything is data-acked.
    pub acked: u64,
    /// Microseconds since the connection started.
    pub now_us: u64,
    /// The connection window is full while a subflow has room (head-of-line blocking).
    pub window_blocked: bool,
}

impl ConnView<'_> {
    /// Bytes outstanding (sent, not data-acked) on subflow `sf`.
    pub fn outstanding_on(&self, sf: usize) -> u64 {
        self.segs
            .iter()
            .filter(|s| s.carried_by(sf))
            .map(|s| s.len)
            .sum()
    }

    /// The lowest-srtt alive subflow (the "fastest"), with or without room.
    pub fn fastest(&self) -> Option<&SubflowView> {
        self.subflows
            .iter()
            .filter(|s| s.alive)
            .min_by_key(|s| (s.srtt_us, s.id))
    }

    /// minRTT's pick: lowest srtt among subflows with room.
    pub fn min_rtt_with_room(&self) -> Option<&SubflowView> {
        self.subflows
            .iter()
            .filter(|s| s.has_room())
            .min_by_key(|s| (s.srtt_us, s.id))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Assign the next `segment` bytes of new data to this subflow.
    New(usize),
    /// Send segment `segs[seg]` again, on subflow `on`.
    Dup { on: usize, seg: usize },
    /// Send nothing now.
    Wait,
}

pub trait Scheduler: Send {
    fn name(&self) -> &'static str;
    fn pick(&mut self, view: &ConnView) -> Decision;
}

pub const NAMES: &[&str] = &["minrtt", "roundrobin", "redundant", "ecf", "blest", "cfs"];

/// The scheduler called `name`; an error listing the valid names otherwise.
pub fn by_name(name: &str) -> Result<Box<dyn Scheduler>, String> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "minrtt" | "default" => Box::new(minrtt::MinRtt),
        "roundrobin" | "rr" => Box::new(roundrobin::RoundRobin::default()),
        "redundant" => Box::new(redundant::Redundant),
        "ecf" => Box::new(ecf::Ecf::default()),
        "blest" => Box::new(blest::Blest::default()),
        "cfs" => Box::new(cfs::Cfs),
        _ => {
            return Err(format!(
                "unknown scheduler {name:?}; valid: {}",
                NAMES.join(", ")
            ))
        }
    })
}

#[cfg(test)]
pub(crate) mod testutil {
    use super::*;

    pub fn sf(id: usize, srtt_ms: u32, cwnd: u32, unacked: u32) -> SubflowView {
        SubflowView {
            id,
            alive: true,
            srtt_us: srtt_ms * 1000,
            rttvar_us: srtt_ms * 250,
            cwnd,
            ssthresh: u32::MAX >> 1,
            unacked,
            mss: 1448,
            notsent: 0,
            pacing_rate: 0,
            in_recovery: false,
            writable: true,
        }
    }

    pub fn view<'a>(
        subflows: &'a [SubflowView],
        segs: &'a VecDeque<Seg>,
        unassigned: u64,
    ) -> ConnView<'a> {
        ConnView {
            subflows,
            unassigned,
            segment: 1448.min(unassigned),
            segs,
            window: 4 << 20,
            acked: segs.front().map(|s| s.dsn).unwrap_or(0),
            now_us: 0,
            window_blocked: false,
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn unknown_names_list_the_valid_ones() {
        let e = super::by_name("fastest").err().unwrap();
        for n in super::NAMES {
            assert!(e.contains(n), "{e}");
        }
        for n in super::NAMES {
            assert_eq!(super::by_name(n).unwrap().name(), *n);
        }
    }
}
