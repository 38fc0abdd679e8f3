//! Per-port egress link emulation: rate, propagation delay and jitter around a buffer
//! whose admission policy is the port's egress queue discipline ([`crate::qdisc`]). Pure
//! logic on a caller-supplied clock (nanoseconds), so tests drive it with a fake clock.
//!
//! Model (store-and-forward output port):
//! 1. **Buffer** — a FIFO of frames waiting for, or under, serialization. A frame arriving
//!    at `now` finishes serialization at `finish = max(now, previous finish) + bits/rate`
//!    (a work-conserving FIFO, so this can be computed at enqueue). It occupies the
//!    buffer until `finish`. Queue length = frames in the buffer, the arriving one not
//!    counted. The discipline sees that length and admits, marks or drops the frame
//!    (the default, `droptail`, drops at a packet/byte limit and marks CE above K).
//! 2. **Delay line** — after `finish` the frame propagates for `delay + U(-jitter,
//!    +jitter)` (clamped at 0) and is transmitted at that release time. By default a
//!    frame is never released before its predecessor (no reordering: its release is
//!    clamped to the previous release); with `reorder` jitter may reorder, as netem does.
//!
//! Without a rate the buffer is bypassed (frames "serialize" instantly), so a discipline
//! only ever sees an empty queue; the command line therefore insists on a rate.
//!
//! The buffer's occupancy is public ([`Egress::queue`]) and every change to it bumps
//! [`Egress::changes`], so an ingress discipline on the same port can read it and be woken
//! when it moves.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use crate::group::Rng;
pub use crate::qdisc::Admit as Enqueue;
use crate::qdisc::{EgressQdisc, QueueLen};
use crate::qhist::TimeHist;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkParams {
    /// Line rate in bit/s (frame bytes on the wire, no preamble/FCS/IFG).
    pub rate_bps: Option<u64>,
    pub delay_ns: u64,
    pub jitter_ns: u64,
    /// Let jitter reorder packets (default false).
    pub reorder: bool,
}

impl LinkParams {
    /// No emulation at all: frames go straight to the wire.
    pub fn is_passthrough(&self) -> bool {
        self.rate_bps.is_none() && self.delay_ns == 0 && self.jitter_ns == 0
    }
}

/// The port's view of its buffer, whatever the discipline: verdict tallies and peaks.
#[derive(Debug, Clone, Default)]
pub struct EgressStats {
    pub drops: u64,
    pub ce_marks: u64,
    /// Peak buffer occupancy since the last [`Egress::take_peaks`].
    pub peak_pkts: usize,
    pub peak_bytes: usize,
}

struct Queued {
    finish_ns: u64,
    frame: Vec<u8>,
}

struct InFlight {
    release_ns: u64,
    seq: u64,
    frame: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        self.release_ns == o.release_ns && self.seq == o.seq
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    // Reversed: BinaryHeap is a max-heap and we want the earliest release first.
    fn cmp(&self, o: &Self) -> Ordering {
        (o.release_ns, o.seq).cmp(&(self.release_ns, self.seq))
    }
}

pub struct Egress {
    pub params: LinkParams,
    pub qdisc: Box<dyn EgressQdisc>,
    buffer: VecDeque<Queued>,
    buffer_bytes: usize,
    last_finish_ns: u64,
    delay_line: BinaryHeap<InFlight>,
    last_release_ns: u64,
    seq: u64,
    changes: u64,
    pub stats: EgressStats,
    /// Time-weighted histogram of the buffer's length (frames), updated at every change.
    pub qhist: TimeHist,
}

impl Egress {
    pub fn new(params: LinkParams, qdisc: Box<dyn EgressQdisc>) -> Egress {
        Egress {
            params,
            qdisc,
            buffer: VecDeque::new(),
            buffer_bytes: 0,
            last_finish_ns: 0,
            delay_line: BinaryHeap::new(),
            last_release_ns: 0,
            seq: 0,
            changes: 0,
            stats: EgressStats::default(),
            qhist: TimeHist::new(),
        }
    }

    pub fn qlen_pkts(&self) -> usize {
        self.buffer.len()
    }

    pub fn qlen_bytes(&self) -> usize {
        self.buffer_bytes
    }

    pub fn queue(&self) -> QueueLen {
        QueueLen { pkts: self.buffer.len(), bytes: self.buffer_bytes }
    }

    /// Counts every frame entering or leaving the buffer: a change since a previous read
    /// means the occupancy moved (even if it is back to the same value).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// Frames in propagation (left the buffer, not yet on the wire).
    pub fn in_flight(&self) -> usize {
        self.delay_line.len()
    }

    pub fn take_peaks(&mut self) -> (usize, usize) {
        let p = (self.stats.peak_pkts, self.stats.peak_bytes);
        self.stats.peak_pkts = self.buffer.len();
        self.stats.peak_bytes = self.buffer_bytes;
        p
    }

    fn tx_time_ns(&self, len: usize) -> u64 {
        match self.params.rate_bps {
            Some(r) if r > 0 => ((len as u128 * 8 * 1_000_000_000).div_ceil(r as u128)) as u64,
            _ => 0,
        }
    }

    /// Offers a frame at time `now`. Call [`Egress::advance`] first (or rely on this
    /// doing it) so the queue length reflects `now`.
    pub fn enqueue(
        &mut self,
        mut frame: Vec<u8>,
        now_ns: u64,
        rng: &mut Rng,
        due: &mut Vec<Vec<u8>>,
    ) -> Enqueue {
        self.advance(now_ns, rng, due);
        let len = frame.len();
        let res = self.qdisc.admit(&mut frame, self.queue(), now_ns);
        match res {
            Enqueue::Dropped => {
                self.stats.drops += 1;
                return res;
            }
            Enqueue::Marked => self.stats.ce_marks += 1,
            Enqueue::Queued => {}
        }
        let finish = self.last_finish_ns.max(now_ns) + self.tx_time_ns(len);
        self.last_finish_ns = finish;
        if self.params.rate_bps.is_none() {
            self.propagate(finish, frame, rng);
        } else {
            self.buffer_bytes += len;
            self.buffer.push_back(Queued { finish_ns: finish, frame });
            self.changes += 1;
            self.qhist.set(now_ns, self.buffer.len());
            self.stats.peak_pkts = self.stats.peak_pkts.max(self.buffer.len());
            self.stats.peak_bytes = self.stats.peak_bytes.max(self.buffer_bytes);
        }
        self.release(now_ns, due);
        res
    }

    fn propagate(&mut self, finish_ns: u64, frame: Vec<u8>, rng: &mut Rng) {
        let p = &self.params;
        let mut delay = p.delay_ns as i128;
        if p.jitter_ns > 0 {
            let j = p.jitter_ns as i128;
            delay += (rng.unit() * (2 * j + 1) as f64) as i128 - j;
        }
        let mut release = finish_ns + delay.max(0) as u64;
        if !p.reorder {
            release = release.max(self.last_release_ns);
        }
        self.last_release_ns = self.last_release_ns.max(release);
        self.seq += 1;
        self.delay_line.push(InFlight { release_ns: release, seq: self.seq, frame });
    }

    fn release(&mut self, now_ns: u64, due: &mut Vec<Vec<u8>>) {
        while self.delay_line.peek().is_some_and(|f| f.release_ns <= now_ns) {
            due.push(self.delay_line.pop().expect("peeked").frame);
        }
    }

    /// Moves time to `now`: serialized frames enter the delay line, and frames whose
    /// release time has come are appended to `due` (in transmission order).
    pub fn advance(&mut self, now_ns: u64, rng: &mut Rng, due: &mut Vec<Vec<u8>>) {
        while self.buffer.front().is_some_and(|q| q.finish_ns <= now_ns) {
            let q = self.buffer.pop_front().expect("front");
            self.buffer_bytes -= q.frame.len();
            self.changes += 1;
            // The frame left when its serialization ended, not when we noticed.
            self.qhist.set(q.finish_ns, self.buffer.len());
            self.propagate(q.finish_ns, q.frame, rng);
        }
        self.release(now_ns, due);
    }

    /// When `advance` next has something to do.
    pub fn next_deadline(&self) -> Option<u64> {
        let a = self.buffer.front().map(|q| q.finish_ns);
        let b = self.delay_line.peek().map(|f| f.release_ns);
        match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::testpkt::{checksums_ok, ipv4_udp};
    use crate::qdisc::droptail::DropTail;

    const MS: u64 = 1_000_000;

    fn link(params: LinkParams) -> Egress {
        Egress::new(params, Box::new(DropTail::default()))
    }

    fn queued(rate_bps: u64, droptail: &str) -> Egress {
        let spec = crate::qdisc::QdiscSpec::parse(droptail).unwrap();
        let q = DropTail::from_options(&spec.options).unwrap();
        Egress::new(LinkParams { rate_bps: Some(rate_bps), ..Default::default() }, Box::new(q))
    }

    fn pkt(len: usize, tos: u8) -> Vec<u8> {
        ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, tos, &vec![0u8; len - 42])
    }

    /// Runs the queue on a fake clock in 1 µs steps, returning (time, frame) departures.
    fn drain(e: &mut Egress, from: u64, until: u64, rng: &mut Rng) -> Vec<(u64, Vec<u8>)> {
        let mut out = Vec::new();
        let mut t = from;
        while t <= until {
            let mut due = Vec::new();
            e.advance(t, rng, &mut due);
            out.extend(due.into_iter().map(|f| (t, f)));
            t += 1000;
        }
        out
    }

    #[test]
    fn paces_at_line_rate() {
        // 10 Mbit/s, 1250-byte frames: one per millisecond exactly.
        let mut e = link(LinkParams { rate_bps: Some(10_000_000), ..Default::default() });
        let mut rng = Rng::new(1);
        let mut due = Vec::new();
        for _ in 0..10 {
            e.enqueue(pkt(1250, 0), 0, &mut rng, &mut due);
        }
        assert!(due.is_empty());
        assert_eq!(e.qlen_pkts(), 10);
        let out = drain(&mut e, 0, 20 * MS, &mut rng);
        let times: Vec<u64> = out.iter().map(|(t, _)| *t).collect();
        assert_eq!(times, (1..=10).map(|i| i * MS).collect::<Vec<_>>());
    }

    #[test]
    fn delay_adds_latency_without_reordering() {
        let mut e = link(LinkParams { delay_ns: 5 * MS, jitter_ns: 2 * MS, ..Default::default() });
        let mut rng = Rng::new(3);
        let mut due = Vec::new();
        for i in 0..200u64 {
            let mut f = pkt(100, 0);
            f[50..58].copy_from_slice(&i.to_be_bytes());
            e.enqueue(f, i * 10_000, &mut rng, &mut due);
        }
        assert!(due.is_empty());
        let out = drain(&mut e, 0, 100 * MS, &mut rng);
        assert_eq!(out.len(), 200);
        for (i, (t, f)) in out.iter().enumerate() {
            assert_eq!(u64::from_be_bytes(f[50..58].try_into().unwrap()), i as u64, "order");
            let sent = i as u64 * 10_000;
            assert!(*t >= sent + 3 * MS, "never less than delay - jitter");
        }
    }

    #[test]
    fn jitter_may_reorder_when_allowed() {
        let mut e =
            link(LinkParams { delay_ns: 5 * MS, jitter_ns: 4 * MS, reorder: true, ..Default::default() });
        let mut rng = Rng::new(3);
        let mut due = Vec::new();
        for i in 0..200u64 {
            let mut f = pkt(100, 0);
            f[50..58].copy_from_slice(&i.to_be_bytes());
            e.enqueue(f, i * 10_000, &mut rng, &mut due);
        }
        let out = drain(&mut e, 0, 100 * MS, &mut rng);
        let seqs: Vec<u64> =
            out.iter().map(|(_, f)| u64::from_be_bytes(f[50..58].try_into().unwrap())).collect();
        assert!(seqs.windows(2).any(|w| w[1] < w[0]));
    }

    #[test]
    fn drop_tail_in_packets_and_bytes() {
        let mut e = queued(1_000_000, "droptail/buffer=20p");
        let mut rng = Rng::new(1);
        let mut due = Vec::new();
        let res: Vec<Enqueue> = (0..30).map(|_| e.enqueue(pkt(1000, 0), 0, &mut rng, &mut due)).collect();
        assert_eq!(res.iter().filter(|r| **r == Enqueue::Dropped).count(), 10);
        assert_eq!(e.qlen_pkts(), 20);
        assert_eq!(e.take_peaks().0, 20);

        let mut e = queued(1_000_000, "droptail/buffer=3000b");
        for _ in 0..5 {
            e.enqueue(pkt(1000, 0), 0, &mut rng, &mut due);
        }
        assert_eq!(e.qlen_pkts(), 3);
        assert_eq!(e.stats.drops, 2);
        assert_eq!(e.qdisc.counters(), vec![("enqueued", 3), ("drops", 2), ("ce_marks", 0)]);
    }

    #[test]
    fn ecn_marks_only_ect_above_threshold() {
        let mut e = queued(1_000_000, "droptail/ecn=2p");
        let mut rng = Rng::new(1);
        let mut due = Vec::new();
        let r: Vec<Enqueue> =
            [2u8, 2, 2, 0, 1, 3].iter().map(|&tos| e.enqueue(pkt(200, tos), 0, &mut rng, &mut due)).collect();
        assert_eq!(
            r,
            vec![
                Enqueue::Queued,
                Enqueue::Queued,
                Enqueue::Marked,
                Enqueue::Queued,
                Enqueue::Marked,
                Enqueue::Queued
            ]
        );
        assert_eq!(e.stats.ce_marks, 2);
        let out = drain(&mut e, 0, 100 * MS, &mut rng);
        for (i, (_, f)) in out.iter().enumerate() {
            assert!(checksums_ok(f), "frame {i} checksum");
        }
        let ecn: Vec<u8> = out.iter().map(|(_, f)| f[15] & 3).collect();
        assert_eq!(ecn, vec![2, 2, 3, 0, 3, 3]);
    }

    #[test]
    fn queue_drains_and_refills() {
        let mut e = link(LinkParams { rate_bps: Some(8_000_000), ..Default::default() });
        let mut rng = Rng::new(1);
        let mut due = Vec::new();
        // 1000 B at 8 Mbit/s = 1 ms each. Arrive every 2 ms: never queue.
        for i in 0..5 {
            e.enqueue(pkt(1000, 0), i * 2 * MS, &mut rng, &mut due);
            assert_eq!(e.qlen_pkts(), 1);
        }
        assert_eq!(e.next_deadline(), Some(9 * MS));
    }

    #[test]
    fn every_buffer_change_is_counted() {
        let mut e = link(LinkParams { rate_bps: Some(8_000_000), ..Default::default() });
        let mut rng = Rng::new(1);
        let mut due = Vec::new();
        e.enqueue(pkt(1000, 0), 0, &mut rng, &mut due);
        e.enqueue(pkt(1000, 0), 0, &mut rng, &mut due);
        assert_eq!((e.changes(), e.queue()), (2, QueueLen { pkts: 2, bytes: 2000 }));
        e.advance(MS, &mut rng, &mut due);
        assert_eq!((e.changes(), e.queue()), (3, QueueLen { pkts: 1, bytes: 1000 }));
        // Without a rate nothing is buffered, so nothing changes.
        let mut e = link(LinkParams { delay_ns: MS, ..Default::default() });
        e.enqueue(pkt(1000, 0), 0, &mut rng, &mut due);
        assert_eq!(e.changes(), 0);
    }
}
