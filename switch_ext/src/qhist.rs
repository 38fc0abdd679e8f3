//! Exact time-weighted histograms of a queue's length (in frames).
//!
//! Every change of the queue is recorded at the time it happens, so the histogram holds,
//! for each length L, the total time the queue held exactly L frames: nothing is sampled.
//! Mean and percentiles are time-weighted ("the queue was at most p95 frames 95% of the
//! time"). The stats file prints the cumulative histogram as sparse `[length, ns]` pairs,
//! so a reader gets any interval's distribution by subtracting two lines.

/// Lengths at or above this share the last bucket (their exact sum still counts in the mean).
pub const MAX_LEN: usize = 1 << 16;

#[derive(Debug, Clone, Default)]
pub struct TimeHist {
    /// Nanoseconds spent at each length (index), grown on demand.
    ns: Vec<u64>,
    len: usize,
    since_ns: u64,
    started: bool,
    sum_len_ns: u128,
    total_ns: u64,
    max_len: usize,
}

/// A summary of a histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub total_ns: u64,
    pub mean: f64,
    pub p5: usize,
    pub p50: usize,
    pub p95: usize,
    pub max: usize,
}

impl TimeHist {
    pub fn new() -> TimeHist {
        TimeHist::default()
    }

    /// Accounts the time up to `now_ns` at the current length. Time never runs backwards:
    /// an earlier `now_ns` accounts nothing.
    pub fn advance(&mut self, now_ns: u64) {
        if !self.started {
            self.started = true;
            self.since_ns = now_ns;
            return;
        }
        if now_ns <= self.since_ns {
            return;
        }
        let d = now_ns - self.since_ns;
        let b = self.len.min(MAX_LEN - 1);
        if self.ns.len() <= b {
            self.ns.resize(b + 1, 0);
        }
        self.ns[b] += d;
        self.sum_len_ns += self.len as u128 * d as u128;
        self.total_ns += d;
        self.since_ns = now_ns;
    }

    /// The queue holds `len` frames from `now_ns` on.
    pub fn set(&mut self, now_ns: u64, len: usize) {
        self.advance(now_ns);
        self.len = len;
        self.max_len = self.max_len.max(len);
    }

    pub fn current(&self) -> usize {
        self.len
    }

    /// Smallest length L such that the queue was at most L for at least `q` of the time.
    fn quantile(&self, q: f64) -> usize {
        let want = (q * self.total_ns as f64).ceil() as u64;
        let mut acc = 0u64;
        for (l, &t) in self.ns.iter().enumerate() {
            acc += t;
            if t > 0 && acc >= want.max(1) {
                return l;
            }
        }
        0
    }

    pub fn summary(&self) -> Summary {
        Summary {
            total_ns: self.total_ns,
            mean: if self.total_ns == 0 { 0.0 } else { self.sum_len_ns as f64 / self.total_ns as f64 },
            p5: self.quantile(0.05),
            p50: self.quantile(0.50),
            p95: self.quantile(0.95),
            max: self.max_len,
        }
    }

    /// `{"ns":T,"mean":m,"p5":..,"p50":..,"p95":..,"max":..,"hist":[[len,ns],...]}`
    /// (cumulative up to the last [`TimeHist::advance`]).
    pub fn json(&self) -> String {
        let s = self.summary();
        let mut out = format!(
            "{{\"ns\":{},\"mean\":{:.4},\"p5\":{},\"p50\":{},\"p95\":{},\"max\":{},\"hist\":[",
            s.total_ns, s.mean, s.p5, s.p50, s.p95, s.max
        );
        let mut first = true;
        for (l, &t) in self.ns.iter().enumerate() {
            if t == 0 {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(&format!("[{l},{t}]"));
        }
        out.push_str("]}");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weights_lengths_by_time() {
        let mut h = TimeHist::new();
        h.set(1000, 0); // starts the clock
        h.set(2000, 4); // 1000 ns at 0
        h.set(2500, 10); // 500 ns at 4
        h.set(10_000, 0); // 7500 ns at 10
        h.advance(11_000); // 1000 ns at 0
        let s = h.summary();
        assert_eq!(s.total_ns, 10_000);
        assert!((s.mean - (4.0 * 500.0 + 10.0 * 7500.0) / 10_000.0).abs() < 1e-9);
        // 20% of the time at 0, 5% at 4, 75% at 10.
        assert_eq!((s.p5, s.p50, s.p95, s.max), (0, 10, 10, 10));
        assert_eq!(h.json(), "{\"ns\":10000,\"mean\":7.7000,\"p5\":0,\"p50\":10,\"p95\":10,\"max\":10,\"hist\":[[0,2000],[4,500],[10,7500]]}");
        // Going back in time accounts nothing.
        h.set(5, 3);
        assert_eq!(h.summary().total_ns, 10_000);
    }

    #[test]
    fn quantile_edges_and_overflow_bucket() {
        let mut h = TimeHist::new();
        assert_eq!(h.summary(), Summary { total_ns: 0, mean: 0.0, p5: 0, p50: 0, p95: 0, max: 0 });
        h.set(0, 1);
        h.set(95, 2); // 95 ns at 1
        h.set(100, 0); // 5 ns at 2
        let s = h.summary();
        assert_eq!((s.p5, s.p50, s.p95), (1, 1, 1));
        h.set(101, MAX_LEN + 5); // 1 ns at 0
        h.advance(201); // 100 ns at the overflow bucket
        let s = h.summary();
        assert_eq!(s.max, MAX_LEN + 5);
        assert_eq!(s.p95, MAX_LEN - 1);
        let exact = (95.0 + 10.0 + 100.0 * (MAX_LEN + 5) as f64) / 201.0;
        assert!((s.mean - exact).abs() < 1e-6, "the mean keeps overflowing lengths exact");
    }
}
