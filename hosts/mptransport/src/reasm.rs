//! Connection-level reassembly at the receiver.
//!
//! Segments arrive by DSN from any subflow, in any order, possibly more than once.  Bytes
//! below `next` were delivered already (a copy of them is a duplicate); bytes beyond it are
//! held out of order until the gap before them fills.  A segment reaching past
//! `next + window` or past the announced total is a protocol error, and so is a copy of
//! held bytes that differs from them: the receiver never delivers bytes it cannot trust.

use std::collections::BTreeMap;
use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReasmError {
    OutOfWindow { dsn: u64, end: u64, limit: u64 },
    BeyondTotal { end: u64, total: u64 },
    Overflow { dsn: u64, len: usize },
    Inconsistent { at: u64 },
}

impl fmt::Display for ReasmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReasmError::OutOfWindow { dsn, end, limit } => write!(
                f,
                "out-of-window data: DSN {dsn}..{end} reaches past the receive window's end {limit}"
            ),
            ReasmError::BeyondTotal { end, total } => write!(
                f,
                "data past the end of the stream: up to DSN {end}, the stream has {total} bytes"
            ),
            ReasmError::Overflow { dsn, len } => {
                write!(f, "malformed data: DSN {dsn} + {len} overflows")
            }
            ReasmError::Inconsistent { at } => write!(
                f,
                "inconsistent copies of the same data at DSN {at}: two subflows disagree"
            ),
        }
    }
}

impl std::error::Error for ReasmError {}

#[derive(Debug)]
pub struct Reassembler {
    next: u64,
    window: u64,
    total: Option<u64>,
    held: BTreeMap<u64, Vec<u8>>,
    held_bytes: u64,
    /// Largest number of bytes held out of order at once.
    pub peak_held: u64,
    /// Bytes received more than once (dropped).
    pub dup_bytes: u64,
}

impl Reassembler {
    pub fn new(window: u64, total: Option<u64>) -> Self {
        Reassembler {
            next: 0,
            window,
            total,
            held: BTreeMap::new(),
            held_bytes: 0,
            peak_held: 0,
            dup_bytes: 0,
        }
    }

    /// Every byte below this DSN was delivered.
    pub fn delivered(&self) -> u64 {
        self.next
    }

    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    pub fn total(&self) -> Option<u64> {
        self.total
    }

    pub fn complete(&self) -> bool {
        self.total == Some(self.next)
    }

    /// Accepts one segment; calls `deliver(dsn, bytes)` for every run of bytes that became
    /// in-order, in DSN order.  On error nothing of this segment is delivered or held.
    pub fn insert(
        &mut self,
        dsn: u64,
        data: &[u8],
        deliver: &mut dyn FnMut(u64, &[u8]),
    ) -> Result<(), ReasmError> {
        let end = dsn
            .checked_add(data.len() as u64)
            .ok_or(ReasmError::Overflow {
                dsn,
                len: data.len(),
            })?;
        let limit = self.next.saturating_add(self.window);
        if end > limit {
            return Err(ReasmError::OutOfWindow { dsn, end, limit });
        }
        if let Some(total) = self.total {
            if end > total {
                return Err(ReasmError::BeyondTotal { end, total });
            }
        }
        // Check overlaps with held bytes before changing anything.
        for (&k, v) in self.held.range(..end).rev() {
            let kend = k + v.len() as u64;
            if kend <= dsn {
                break;
            }
            let lo = k.max(dsn);
            let hi = kend.min(end);
            let a = &v[(lo - k) as usize..(hi - k) as usize];
            let b = &data[(lo - dsn) as usize..(hi - dsn) as usize];
            if a != b {
                let off = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(0);
                return Err(ReasmError::Inconsistent {
                    at: lo + off as u64,
                });
            }
        }
        // Part already delivered.
        let mut start = dsn;
        if start < self.next {
            let skip = (self.next - start).min(data.len() as u64);
            self.dup_bytes += skip;
            start += skip;
        }
        if start >= end {
            return Ok(());
        }
        if start == self.next {
            deliver(start, &data[(start - dsn) as usize..]);
            self.next = end;
            self.drain(deliver);
        } else {
            // Hold the pieces not already held.
            let mut cur = start;
            let overlapping: Vec<(u64, u64)> = self
                .held
                .range(..end)
                .filter(|(k, v)| *k + v.len() as u64 > start)
                .map(|(k, v)| (*k, *k + v.len() as u64))
                .collect();
            for (k, kend) in overlapping {
                if k > cur {
                    let piece = data[(cur - dsn) as usize..(k - dsn) as usize].to_vec();
                    self.hold(cur, piece);
                }
                let dup_hi = kend.min(end);
                let dup_lo = k.max(cur);
                if dup_hi > dup_lo {
                    self.dup_bytes += dup_hi - dup_lo;
                }
                cur = cur.max(kend);
            }
            if cur < end {
                let piece = data[(cur - dsn) as usize..].to_vec();
                self.hold(cur, piece);
            }
        }
        Ok(())
    }

    /// Sets the stream's total length (from HELLO or FIN); an error if bytes past it were
    /// already accepted or it contradicts an earlier one.
    pub fn set_total(&mut self, total: u64) -> Result<(), ReasmError> {
        if let Some(t) = self.total {
            if t != total {
                return Err(ReasmError::BeyondTotal {
                    end: total,
                    total: t,
                });
            }
        }
        let top = self
            .held
            .iter()
            .next_back()
            .map(|(k, v)| k + v.len() as u64)
            .unwrap_or(0)
            .max(self.next);
        if top > total {
            return Err(ReasmError::BeyondTotal { end: top, total });
        }
        self.total = Some(total);
        Ok(())
    }

    fn hold(&mut self, at: u64, piece: Vec<u8>) {
        self.held_bytes += piece.len() as u64;
        self.peak_held = self.peak_held.max(self.held_bytes);
        self.held.insert(at, piece);
    }

    fn drain(&mut self, deliver: &mut dyn FnMut(u64, &[u8])) {
        while let Some(entry) = self.held.first_entry() {
            let k = *entry.key();
            if k > self.next {
                break;
            }
            let v = entry.remove();
            self.held_bytes -= v.len() as u64;
            let kend = k + v.len() as u64;
            if kend <= self.next {
                self.dup_bytes += v.len() as u64;
                continue;
            }
            let skip = (self.next - k) as usize;
            self.dup_bytes += skip as u64;
            deliver(self.next, &v[skip..]);
            self.next = kend;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(
        r: &mut Reassembler,
        dsn: u64,
        data: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), ReasmError> {
        r.insert(dsn, data, &mut |at, b| {
            assert_eq!(at, out.len() as u64);
            out.extend_from_slice(b)
        })
    }

    #[test]
    fn reorders_fills_gaps_and_drops_duplicates() {
        let src: Vec<u8> = (0..100u8).collect();
        let mut r = Reassembler::new(1000, Some(100));
        let mut out = Vec::new();
        run(&mut r, 50, &src[50..70], &mut out).unwrap();
        run(&mut r, 80, &src[80..100], &mut out).unwrap();
        assert!(out.is_empty());
        assert_eq!(r.held_bytes(), 40);
        run(&mut r, 60, &src[60..90], &mut out).unwrap(); // overlaps both held pieces
        assert_eq!(r.dup_bytes, 20);
        run(&mut r, 0, &src[0..30], &mut out).unwrap();
        assert_eq!(out, &src[0..30]);
        run(&mut r, 20, &src[20..55], &mut out).unwrap(); // covers delivered, gap, held
        assert_eq!(out, src);
        assert!(r.complete());
        assert_eq!(r.held_bytes(), 0);
        assert_eq!(r.peak_held, 50);
        run(&mut r, 0, &src[0..10], &mut out).unwrap();
        assert_eq!(out, src);
    }

    #[test]
    fn out_of_window_and_past_total_are_errors_and_change_nothing() {
        let mut r = Reassembler::new(100, None);
        let mut out = Vec::new();
        let e = run(&mut r, 90, &[0; 20], &mut out).unwrap_err();
        assert!(e.to_string().contains("out-of-window"), "{e}");
        run(&mut r, 0, &[1; 10], &mut out).unwrap();
        r.set_total(15).unwrap();
        let e = run(&mut r, 10, &[0; 6], &mut out).unwrap_err();
        assert!(e.to_string().contains("past the end"), "{e}");
        assert_eq!(r.held_bytes(), 0);
        assert_eq!(out.len(), 10);
        assert!(r.set_total(16).is_err());
        let e = run(&mut r, u64::MAX - 1, &[0; 6], &mut out).unwrap_err();
        assert!(matches!(e, ReasmError::Overflow { .. }));
    }

    #[test]
    fn disagreeing_copies_are_refused() {
        let mut r = Reassembler::new(100, None);
        let mut out = Vec::new();
        run(&mut r, 10, &[5; 10], &mut out).unwrap();
        let mut bad = vec![5u8; 10];
        bad[7] = 6;
        let e = run(&mut r, 5, &bad, &mut out).unwrap_err();
        assert_eq!(e, ReasmError::Inconsistent { at: 12 });
        assert!(out.is_empty());
        assert_eq!(r.held_bytes(), 10);
    }
}
