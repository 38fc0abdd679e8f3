//! `droptail`: the default egress discipline. A frame that would make the buffer exceed
//! `buffer` packets or bytes is dropped; if the queue it finds already holds at least
//! `ecn` packets (or bytes) and the frame is ECT(0)/ECT(1), it is marked CE. Not-ECT
//! frames are never marked (nor dropped early: drop-tail only).
//!
//! Options (`--port N=IF,rate=..,egress=droptail/buffer=20p/ecn=10p`, or the shorthand
//! `buffer=`/`ecn=` port options): `buffer=20p` or bytes (`30000b`, `30kb`, `64KiB`),
//! at most once per unit, so `buffer=20p/buffer=30000b` limits both; `ecn=K` in packets
//! or bytes, likewise. No option: an unbounded FIFO that never marks.

use super::{mark_ce, unknown_option, Admit, EgressQdisc, QueueLen};
use crate::units::parse_size;

pub const NAME: &str = "droptail";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DropTail {
    pub buffer_pkts: Option<usize>,
    pub buffer_bytes: Option<usize>,
    pub ecn_pkts: Option<usize>,
    pub ecn_bytes: Option<usize>,
    pub enqueued: u64,
    pub drops: u64,
    pub ce_marks: u64,
}

impl DropTail {
    pub fn from_options(opts: &[(String, String)]) -> Result<DropTail, String> {
        let mut d = DropTail::default();
        for (k, v) in opts {
            let (p, b) = match k.as_str() {
                "buffer" | "ecn" => parse_size(v).map_err(|e| format!("option {k}={v}: {e}"))?,
                _ => return Err(unknown_option(k, &["buffer", "ecn"])),
            };
            let (slot_p, slot_b) = if k == "buffer" {
                if p == Some(0) || b == Some(0) {
                    return Err(format!("option {k}={v}: buffer must be at least 1"));
                }
                (&mut d.buffer_pkts, &mut d.buffer_bytes)
            } else {
                (&mut d.ecn_pkts, &mut d.ecn_bytes)
            };
            if (p.is_some() && slot_p.is_some()) || (b.is_some() && slot_b.is_some()) {
                return Err(format!("option {k}={v}: {k} given twice in the same unit"));
            }
            *slot_p = p.or(*slot_p);
            *slot_b = b.or(*slot_b);
        }
        Ok(d)
    }
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn EgressQdisc>, String> {
    Ok(Box::new(DropTail::from_options(opts)?))
}

impl EgressQdisc for DropTail {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn admit(&mut self, frame: &mut Vec<u8>, q: QueueLen, _now_ns: u64) -> Admit {
        let len = frame.len();
        if self.buffer_pkts.is_some_and(|b| q.pkts + 1 > b)
            || self.buffer_bytes.is_some_and(|b| q.bytes + len > b)
        {
            self.drops += 1;
            return Admit::Dropped;
        }
        self.enqueued += 1;
        let over_k =
            self.ecn_pkts.is_some_and(|k| q.pkts >= k) || self.ecn_bytes.is_some_and(|k| q.bytes >= k);
        if over_k && mark_ce(frame) {
            self.ce_marks += 1;
            return Admit::Marked;
        }
        Admit::Queued
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![("enqueued", self.enqueued), ("drops", self.drops), ("ce_marks", self.ce_marks)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::testpkt::{checksums_ok, ipv4_udp};

    fn opts(s: &[(&str, &str)]) -> Vec<(String, String)> {
        s.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn pkt(len: usize, tos: u8) -> Vec<u8> {
        ipv4_udp([10, 0, 0, 1], [10, 0, 0, 2], 1, 2, tos, &vec![0u8; len - 42])
    }

    fn q(pkts: usize, bytes: usize) -> QueueLen {
        QueueLen { pkts, bytes }
    }

    #[test]
    fn options() {
        let d =
            DropTail::from_options(&opts(&[("buffer", "20p"), ("buffer", "30kb"), ("ecn", "10p")])).unwrap();
        assert_eq!(
            (d.buffer_pkts, d.buffer_bytes, d.ecn_pkts, d.ecn_bytes),
            (Some(20), Some(30000), Some(10), None)
        );
        let e = |s: &[(&str, &str)]| DropTail::from_options(&opts(s)).unwrap_err();
        assert!(e(&[("buffer", "20p"), ("buffer", "30p")]).contains("given twice"));
        assert!(e(&[("buffer", "0p")]).contains("at least 1"));
        assert!(e(&[("ecn", "lots")]).starts_with("option ecn=lots: size 'lots'"));
        assert_eq!(e(&[("k", "5")]), "unknown option 'k' (known: buffer, ecn)");
    }

    #[test]
    fn drops_at_the_limit_in_packets_or_bytes() {
        let mut d = DropTail::from_options(&opts(&[("buffer", "2p"), ("buffer", "2500b")])).unwrap();
        assert_eq!(d.admit(&mut pkt(1000, 0), q(1, 1000), 0), Admit::Queued);
        assert_eq!(d.admit(&mut pkt(1000, 0), q(2, 2000), 0), Admit::Dropped);
        assert_eq!(d.admit(&mut pkt(1000, 0), q(1, 1600), 0), Admit::Dropped);
        assert_eq!((d.enqueued, d.drops, d.ce_marks), (1, 2, 0));
    }

    #[test]
    fn marks_only_ect_at_or_above_k() {
        let mut d = DropTail::from_options(&opts(&[("ecn", "2p")])).unwrap();
        let mut f = pkt(200, 2);
        assert_eq!(d.admit(&mut f, q(1, 200), 0), Admit::Queued);
        assert_eq!(f[15] & 3, 2);
        assert_eq!(d.admit(&mut f, q(2, 400), 0), Admit::Marked);
        assert_eq!(f[15] & 3, 3);
        assert!(checksums_ok(&f));
        assert_eq!(d.admit(&mut pkt(200, 0), q(5, 1000), 0), Admit::Queued);
        assert_eq!(d.counters(), vec![("enqueued", 3), ("drops", 0), ("ce_marks", 1)]);
    }
}
