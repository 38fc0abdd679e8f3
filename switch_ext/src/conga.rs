//! CONGA's in-band congestion feedback (Alizadeh et al., SIGCOMM 2014): the part of the
//! `conga` load balancer ([`crate::lb::conga`]) that lives in the datapath rather than in
//! one select group.
//!
//! Between switches an IPv4 packet travels with one MPLS label (ethertype 0x8847, bottom
//! of stack, TTL 64) whose 20 bits hold CONGA's overlay fields, most significant first:
//! the source leaf (6 bits), LBTag (4: the uplink the source leaf chose, as the bucket's
//! position in its select group), CE (3: the largest congestion metric along the path so
//! far), FB_LBTag (4) and FB_Metric (3: one entry of the destination leaf's
//! congestion-from-leaf table, carried back to the source leaf); bit 0 of the label's TC
//! says whether the feedback fields hold an entry.
//!
//! - Every switch running the overlay takes a labelled frame's label off on arrival, so
//!   its tables see the IPv4 packet as the host sent it, and keeps it with the packet.
//! - A leaf (`conga/leaf=N`) then reads it: CE into congestion-from-leaf[source leaf]
//!   [LBTag], the feedback into congestion-to-leaf[source leaf][FB_LBTag], and it learns
//!   that the packet's source address sits behind the source leaf. The label ends there.
//! - A leaf that sends a packet from a host through a select group labels it: its own
//!   id, the chosen bucket as LBTag, CE 0, and the next feedback entry for the
//!   destination's leaf (round-robin over the entries, those changed since they were last
//!   sent first).
//! - On every egress a labelled packet's CE becomes the larger of itself and the port's
//!   metric, and the label goes back on: the metric is the rate the port admitted (its
//!   [`crate::lb::RateMeter`], CONGA's discounting rate estimator) over its line rate, in
//!   eighths, 0..=7. A port without a line rate reads 0.
//!
//! A table entry older than the ageing time counts as unknown (0). Default: CONGA's 10 ms
//! at 10 Gbit/s as a number of full-size frame times (8333) at the slowest port's line
//! rate (10 s at 10 Mbit/s), as LetFlow's timeout is scaled; `age=D` sets it.

use std::collections::HashMap;

pub const ETH_TYPE_MPLS: u16 = 0x8847;
const ETH_TYPE_IPV4: u16 = 0x0800;
/// Leaves with an id: 6 bits of the label.
pub const MAX_LEAVES: u8 = 64;
/// Uplinks a leaf can tag: 4 bits.
pub const MAX_LBTAGS: usize = 16;
const MPLS_TTL: u8 = 64;

/// CONGA's ageing time and the rate it was given for.
const PAPER_AGE_NS: f64 = 10e6;
const PAPER_RATE_BPS: f64 = 10e9;

/// The overlay fields of one label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Label {
    pub src_leaf: u8,
    pub lbtag: u8,
    pub ce: u8,
    /// (FB_LBTag, FB_Metric), when the label carries feedback.
    pub feedback: Option<(u8, u8)>,
}

impl Label {
    /// The 4-byte MPLS label stack entry.
    pub fn encode(&self) -> [u8; 4] {
        let (fb_tag, fb_metric) = self.feedback.unwrap_or((0, 0));
        let label: u32 = ((self.src_leaf as u32 & 0x3f) << 14)
            | ((self.lbtag as u32 & 0xf) << 10)
            | ((self.ce as u32 & 0x7) << 7)
            | ((fb_tag as u32 & 0xf) << 3)
            | (fb_metric as u32 & 0x7);
        let tc = self.feedback.is_some() as u32;
        ((label << 12) | (tc << 9) | (1 << 8) | MPLS_TTL as u32).to_be_bytes()
    }

    pub fn decode(entry: [u8; 4]) -> Label {
        let v = u32::from_be_bytes(entry);
        let label = v >> 12;
        let has_fb = (v >> 9) & 1 == 1;
        Label {
            src_leaf: (label >> 14) as u8 & 0x3f,
            lbtag: (label >> 10) as u8 & 0xf,
            ce: (label >> 7) as u8 & 0x7,
            feedback: has_fb.then_some(((label >> 3) as u8 & 0xf, label as u8 & 0x7)),
        }
    }
}

/// Takes a CONGA label off an Ethernet frame carrying one over IPv4 (the ethertype goes
/// back to IPv4); None, and the frame untouched, for any other frame.
pub fn pop(frame: &mut Vec<u8>) -> Option<Label> {
    if frame.len() < 18 + 20 || frame[12..14] != ETH_TYPE_MPLS.to_be_bytes() {
        return None;
    }
    // bottom of stack, and an IPv4 header behind it: the only frames the overlay labels
    if frame[16] & 1 == 0 || frame[18] >> 4 != 4 {
        return None;
    }
    let label = Label::decode([frame[14], frame[15], frame[16], frame[17]]);
    frame.drain(14..18);
    frame[12..14].copy_from_slice(&ETH_TYPE_IPV4.to_be_bytes());
    Some(label)
}

/// Puts `label` on an untagged IPv4 frame (nothing happens to any other frame).
pub fn push(frame: &mut Vec<u8>, label: &Label) -> bool {
    if frame.len() < 14 || frame[12..14] != ETH_TYPE_IPV4.to_be_bytes() {
        return false;
    }
    frame[12..14].copy_from_slice(&ETH_TYPE_MPLS.to_be_bytes());
    frame.splice(14..14, label.encode());
    true
}

/// A port's congestion metric: its admitted rate over its line rate, in eighths.
pub fn metric(bytes_per_s: f64, line_rate_bps: Option<u64>) -> u8 {
    match line_rate_bps {
        Some(r) if r > 0 => (bytes_per_s * 8.0 / r as f64 * 8.0).clamp(0.0, 7.0) as u8,
        _ => 0,
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    metric: u8,
    at_ns: u64,
    /// Changed since it was last sent back as feedback (congestion-from-leaf only).
    changed: bool,
    known: bool,
}

/// A leaf's two tables: one row per leaf, one entry per LBTag.
#[derive(Debug)]
struct Tables {
    to_leaf: Vec<[Entry; MAX_LBTAGS]>,
    from_leaf: Vec<[Entry; MAX_LBTAGS]>,
    /// Next feedback entry per destination leaf (round-robin position).
    cursor: Vec<u8>,
}

/// The overlay's state in one switch.
#[derive(Debug)]
pub struct Overlay {
    /// This switch's leaf id; None: a switch between leaves (it only updates CE).
    pub leaf: Option<u8>,
    /// None: scaled from `slowest_rate_bps` (see the module doc).
    age_ns: Option<u64>,
    slowest_rate_bps: Option<u64>,
    tables: Tables,
    /// Which leaf an IPv4 address sits behind, learned from labels' source leaves.
    leaf_of: HashMap<u32, u8>,
    /// Labels read, feedback entries received and sent back.
    pub labels_in: u64,
    pub feedback_in: u64,
    pub feedback_out: u64,
}

impl Overlay {
    /// `age_ns` None: scaled from the slowest port's rate (see [`Overlay::note_rate`]).
    pub fn new(leaf: Option<u8>, age_ns: Option<u64>) -> Overlay {
        let n = MAX_LEAVES as usize;
        Overlay {
            leaf,
            age_ns,
            slowest_rate_bps: None,
            tables: Tables {
                to_leaf: vec![[Entry::default(); MAX_LBTAGS]; n],
                from_leaf: vec![[Entry::default(); MAX_LBTAGS]; n],
                cursor: vec![0; n],
            },
            leaf_of: HashMap::new(),
            labels_in: 0,
            feedback_in: 0,
            feedback_out: 0,
        }
    }

    /// A port of the switch has this line rate (None: unknown): the default ageing time
    /// follows the slowest.
    pub fn note_rate(&mut self, rate_bps: Option<u64>) {
        if let Some(r) = rate_bps {
            self.slowest_rate_bps = Some(self.slowest_rate_bps.map_or(r, |s| s.min(r)));
        }
    }

    /// The ageing time.
    pub fn age(&self) -> u64 {
        self.age_ns.unwrap_or_else(|| {
            let rate = self.slowest_rate_bps.map_or(PAPER_RATE_BPS, |r| r as f64);
            (PAPER_AGE_NS * PAPER_RATE_BPS / rate) as u64
        })
    }

    /// A leaf reads the label of a packet from `src_ip` that arrived at `now_ns`.
    pub fn arrive(&mut self, label: &Label, src_ip: u32, now_ns: u64) {
        if self.leaf.is_none() || label.src_leaf >= MAX_LEAVES {
            return;
        }
        self.labels_in += 1;
        let src = label.src_leaf as usize;
        self.leaf_of.insert(src_ip, label.src_leaf);
        let e = &mut self.tables.from_leaf[src][label.lbtag as usize];
        if !e.known || e.metric != label.ce {
            e.changed = true;
        }
        *e = Entry { metric: label.ce, at_ns: now_ns, changed: e.changed, known: true };
        if let Some((tag, m)) = label.feedback {
            self.feedback_in += 1;
            self.tables.to_leaf[src][tag as usize] =
                Entry { metric: m, at_ns: now_ns, changed: false, known: true };
        }
    }

    /// The leaf `ip` sits behind, if a label from it has been seen.
    pub fn leaf_of(&self, ip: u32) -> Option<u8> {
        self.leaf_of.get(&ip).copied()
    }

    /// Congestion-to-leaf[`dst_leaf`][`lbtag`] now (None when unknown or aged out).
    pub fn to_leaf(&self, dst_leaf: u8, lbtag: usize, now_ns: u64) -> Option<u8> {
        match self.tables.to_leaf.get(dst_leaf as usize).and_then(|row| row.get(lbtag)) {
            Some(e) if e.known && now_ns.saturating_sub(e.at_ns) <= self.age() => Some(e.metric),
            _ => None,
        }
    }

    /// The label a leaf gives a packet it sends towards `dst_leaf` (if known) through
    /// bucket `lbtag`, with the next feedback entry for that leaf.
    pub fn label(&mut self, dst_leaf: Option<u8>, lbtag: usize, now_ns: u64) -> Option<Label> {
        let leaf = self.leaf?;
        let feedback = dst_leaf.and_then(|d| self.next_feedback(d, now_ns));
        Some(Label { src_leaf: leaf, lbtag: (lbtag % MAX_LBTAGS) as u8, ce: 0, feedback })
    }

    /// One entry of congestion-from-leaf[`leaf`] to send back: the first changed one from
    /// the cursor on, else the next known one; aged entries are not sent.
    fn next_feedback(&mut self, leaf: u8, now_ns: u64) -> Option<(u8, u8)> {
        let age = self.age();
        let row = self.tables.from_leaf.get_mut(leaf as usize)?;
        let start = self.tables.cursor[leaf as usize] as usize;
        let fresh = |e: &Entry| e.known && now_ns.saturating_sub(e.at_ns) <= age;
        let order = (0..MAX_LBTAGS).map(|k| (start + k) % MAX_LBTAGS);
        let pick = order
            .clone()
            .find(|&t| row[t].changed && fresh(&row[t]))
            .or_else(|| order.clone().find(|&t| fresh(&row[t])))?;
        row[pick].changed = false;
        self.tables.cursor[leaf as usize] = ((pick + 1) % MAX_LBTAGS) as u8;
        self.feedback_out += 1;
        Some((pick as u8, row[pick].metric))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::testpkt::ipv4_udp;

    #[test]
    fn a_label_round_trips_and_sits_where_mpls_puts_it() {
        let l = Label { src_leaf: 45, lbtag: 11, ce: 5, feedback: Some((9, 6)) };
        assert_eq!(Label::decode(l.encode()), l);
        let plain = Label { feedback: None, ..l };
        assert_eq!(Label::decode(plain.encode()), plain);
        // label 45<<14 | 11<<10 | 5<<7 | 9<<3 | 6, TC 1, S 1, TTL 64
        let v = (((45u32 << 14) | (11 << 10) | (5 << 7) | (9 << 3) | 6) << 12) | (1 << 9) | (1 << 8) | 64;
        assert_eq!(l.encode(), v.to_be_bytes());

        let original = ipv4_udp([10, 0, 0, 1], [10, 1, 0, 1], 1, 2, 0, &[7; 30]);
        let mut f = original.clone();
        assert!(push(&mut f, &l));
        assert_eq!(f.len(), original.len() + 4);
        assert_eq!(&f[12..14], &[0x88, 0x47]);
        assert_eq!(&f[18..], &original[14..], "the IPv4 packet follows the label");
        assert_eq!(pop(&mut f), Some(l));
        assert_eq!(f, original);
        assert_eq!(pop(&mut f), None, "an unlabelled frame stays as it is");
        assert_eq!(f, original);
    }

    #[test]
    fn every_label_round_trips() {
        for src_leaf in 0..MAX_LEAVES {
            for lbtag in 0..MAX_LBTAGS as u8 {
                for ce in 0..8 {
                    let fbs = (0..16).flat_map(|t| (0..8).map(move |m| Some((t, m))));
                    for feedback in std::iter::once(None).chain(fbs) {
                        let l = Label { src_leaf, lbtag, ce, feedback };
                        assert_eq!(Label::decode(l.encode()), l);
                    }
                }
            }
        }
    }

    #[test]
    fn only_ipv4_is_labelled_and_only_labelled_ipv4_is_popped() {
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!push(&mut arp, &Label::default()));
        // An MPLS frame that is not the overlay's (not bottom of stack) is left alone.
        let mut f = ipv4_udp([10, 0, 0, 1], [10, 1, 0, 1], 1, 2, 0, &[7; 30]);
        push(&mut f, &Label::default());
        f[16] &= !1;
        let before = f.clone();
        assert_eq!(pop(&mut f), None);
        assert_eq!(f, before);
    }

    #[test]
    fn the_metric_is_the_admitted_rate_in_eighths_of_the_line_rate() {
        let rate = Some(10_000_000); // 10 Mbit/s = 1.25 MB/s
        assert_eq!(metric(0.0, rate), 0);
        assert_eq!(metric(1.25e6 * 0.49, rate), 3);
        assert_eq!(metric(1.25e6 * 0.5, rate), 4);
        assert_eq!(metric(1.25e6 * 2.0, rate), 7);
        assert_eq!(metric(1e9, None), 0);
    }

    #[test]
    fn a_leaf_learns_both_tables_and_the_sources_leaf_from_labels() {
        let mut leaf2 = Overlay::new(Some(2), Some(1_000_000));
        let from_leaf1 = Label { src_leaf: 1, lbtag: 3, ce: 6, feedback: Some((2, 5)) };
        leaf2.arrive(&from_leaf1, 0x0a00_0001, 100);
        assert_eq!(leaf2.leaf_of(0x0a00_0001), Some(1));
        // Leaf 1 told leaf 2 that leaf 2's uplink 2 towards it has metric 5.
        assert_eq!(leaf2.to_leaf(1, 2, 200), Some(5));
        assert_eq!(leaf2.to_leaf(1, 1, 200), None, "unknown");
        assert_eq!(leaf2.to_leaf(1, 2, 100 + 1_000_001), None, "aged out");
        // Its labels to leaf 1 carry back what it measured: uplink 3 of leaf 1 at 6.
        let l = leaf2.label(Some(1), 0, 300).unwrap();
        assert_eq!((l.src_leaf, l.lbtag, l.ce, l.feedback), (2, 0, 0, Some((3, 6))));
        assert_eq!((leaf2.labels_in, leaf2.feedback_in, leaf2.feedback_out), (1, 1, 1));
        // A switch between leaves reads nothing and labels nothing.
        let mut spine = Overlay::new(None, None);
        spine.arrive(&from_leaf1, 0x0a00_0001, 100);
        assert_eq!((spine.labels_in, spine.leaf_of(0x0a00_0001)), (0, None));
        assert_eq!(spine.label(Some(1), 0, 0), None);
    }

    #[test]
    fn feedback_goes_round_robin_with_changed_entries_first() {
        let mut leaf = Overlay::new(Some(0), Some(u64::MAX / 2));
        for (tag, ce) in [(0, 1), (1, 2), (2, 3)] {
            leaf.arrive(&Label { src_leaf: 5, lbtag: tag, ce, feedback: None }, 1, 0);
        }
        let sent: Vec<_> = (0..5).map(|_| leaf.label(Some(5), 0, 1).unwrap().feedback).collect();
        // the three changed ones once each, then round-robin over the known ones
        assert_eq!(sent, vec![Some((0, 1)), Some((1, 2)), Some((2, 3)), Some((0, 1)), Some((1, 2))]);
        // Entry 2 changes: it is sent next, out of turn.
        leaf.arrive(&Label { src_leaf: 5, lbtag: 2, ce: 7, feedback: None }, 1, 2);
        assert_eq!(leaf.label(Some(5), 0, 3).unwrap().feedback, Some((2, 7)));
        // The same value again is no change.
        leaf.arrive(&Label { src_leaf: 5, lbtag: 0, ce: 1, feedback: None }, 1, 4);
        assert_eq!(leaf.label(Some(5), 0, 5).unwrap().feedback, Some((0, 1)), "its turn anyway");
        assert_eq!(leaf.label(Some(9), 0, 5).unwrap().feedback, None, "nothing known of leaf 9");
    }

    #[test]
    fn the_default_ageing_time_scales_congas_with_the_slowest_rate() {
        let mut o = Overlay::new(Some(0), None);
        assert_eq!(o.age(), 10_000_000, "no rate known: CONGA's 10 ms");
        o.note_rate(Some(100_000_000));
        o.note_rate(None);
        o.note_rate(Some(10_000_000));
        o.note_rate(Some(1_000_000_000));
        assert_eq!(o.age(), 10_000_000_000, "10 ms at 10 Gbit/s is 10 s at 10 Mbit/s");
        assert_eq!(Overlay::new(None, Some(5)).age(), 5);
    }
}
