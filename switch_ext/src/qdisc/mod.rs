//! Queue disciplines: per-port policies that decide what happens to a frame at a queue,
//! separate from the link model ([`crate::linkem`], which only serializes and delays).
//!
//! A port has exactly one **egress** discipline (default [`droptail`]) and at most one
//! **ingress** discipline:
//!
//! - [`EgressQdisc`] sees each frame offered to the port's output buffer together with
//!   the occupancy it finds, and admits it, admits it modified (e.g. CE-marked) or drops
//!   it. The buffer itself (FIFO, serialization at the line rate, delay line) stays in
//!   [`crate::linkem::Egress`].
//! - [`IngressQdisc`] sees each frame received on the port *before* the OpenFlow
//!   pipeline. It may pass it on, drop it, or hold it and release it later (modified or
//!   not), in any order it likes. It reads the same port's egress occupancy through
//!   [`IngressCtx`] and is woken ([`IngressQdisc::wake`]) when its own deadline passes
//!   or when that egress queue changes (a frame enters or leaves the buffer): what an
//!   input-queue discipline such as ABQ needs.
//!
//! Disciplines are chosen by name with `key=value` options (`droptail/buffer=20p/ecn=10p`,
//! see [`QdiscSpec`]); [`build_egress`]/[`build_ingress`] look the name up in
//! [`EGRESS`]/[`INGRESS`] and hand the options to the discipline's own constructor, which
//! refuses what it does not understand. Each discipline keeps its own counters
//! ([`EgressQdisc::counters`], [`IngressQdisc::counters`]); the stats file prints them per
//! port and direction. Adding a discipline = one file here plus one registry line
//! (switch_ext/README.md, "How to add a queue discipline").

pub mod abq;
pub mod droptail;

use crate::packet::{self, Key};
use crate::spec::lookup;
pub use crate::spec::{unknown_option, NamedSpec as QdiscSpec};

/// Occupancy of a queue: frames and bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueLen {
    pub pkts: usize,
    pub bytes: usize,
}

/// An egress discipline's verdict on one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Into the buffer unchanged.
    Queued,
    /// Into the buffer, modified by the discipline (CE set).
    Marked,
    Dropped,
}

pub trait EgressQdisc {
    /// Registry name, printed as `"kind"` in the stats file.
    fn kind(&self) -> &'static str;
    /// Decides the fate of `frame`, offered at `now_ns` to a buffer that holds `queue`
    /// (the frame itself not counted). May rewrite the frame; then returns `Marked`.
    fn admit(&mut self, frame: &mut Vec<u8>, queue: QueueLen, now_ns: u64) -> Admit;
    /// Cumulative counters, in a stable order, for the stats file.
    fn counters(&self) -> Vec<(&'static str, u64)>;
}

/// What an ingress discipline does with an arriving frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival {
    /// Into the pipeline now (possibly modified).
    Pass(Vec<u8>),
    /// Kept by the discipline; it comes out of a later [`IngressQdisc::wake`] (or never).
    Held,
    Dropped,
}

/// What an ingress discipline may look at when called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressCtx {
    pub now_ns: u64,
    /// The egress buffer of the port this discipline sits on (its reverse direction).
    pub egress: QueueLen,
}

pub trait IngressQdisc {
    /// Registry name, printed as `"kind"` in the stats file.
    fn kind(&self) -> &'static str;
    /// A frame arrived on the port.
    fn arrive(&mut self, frame: Vec<u8>, ctx: &IngressCtx) -> Arrival;
    /// Called when [`IngressQdisc::next_deadline`] has passed or the port's egress queue
    /// changed since the previous call. Appends the frames to release now, in the order
    /// they should enter the pipeline.
    fn wake(&mut self, ctx: &IngressCtx, release: &mut Vec<Vec<u8>>);
    /// When the discipline next wants [`IngressQdisc::wake`] regardless of the egress queue.
    fn next_deadline(&self) -> Option<u64>;
    /// Frames and bytes currently held.
    fn held(&self) -> QueueLen;
    /// Cumulative counters, in a stable order, for the stats file.
    fn counters(&self) -> Vec<(&'static str, u64)>;
    /// Reconfigures the discipline at run time (the OpenFlow experimenter message) with
    /// options in the syntax of its constructor. Must validate everything before changing
    /// anything; may release held frames into `release`. Default: not supported.
    fn control(
        &mut self,
        _opts: &[(String, String)],
        _ctx: &IngressCtx,
        _release: &mut Vec<Vec<u8>>,
    ) -> Result<(), String> {
        Err(format!("ingress discipline '{}' has no run-time control", self.kind()))
    }
}

/// A discipline's constructor: parses its own options (in the order given).
pub type Ctor<T> = fn(&[(String, String)]) -> Result<Box<T>, String>;
pub type EgressCtor = Ctor<dyn EgressQdisc>;
pub type IngressCtor = Ctor<dyn IngressQdisc>;

/// Egress disciplines by name. The first is the default.
pub const EGRESS: &[(&str, EgressCtor)] = &[(droptail::NAME, droptail::build)];

/// Ingress disciplines by name (a port has no ingress discipline unless `ingress=` names
/// one).
pub const INGRESS: &[(&str, IngressCtor)] = &[(abq::NAME, abq::build)];

/// Builds an egress discipline; the error names the discipline and the bad option.
pub fn build_egress(spec: &QdiscSpec) -> Result<Box<dyn EgressQdisc>, String> {
    build_with(EGRESS, "egress", spec)
}

/// Builds an ingress discipline; the error names the discipline and the bad option.
pub fn build_ingress(spec: &QdiscSpec) -> Result<Box<dyn IngressQdisc>, String> {
    build_with(INGRESS, "ingress", spec)
}

fn build_with<T: ?Sized>(table: &[(&str, Ctor<T>)], dir: &str, spec: &QdiscSpec) -> Result<Box<T>, String> {
    let ctor = lookup(table, &format!("{dir} discipline"), &spec.name)?;
    ctor(&spec.options).map_err(|e| format!("{dir} discipline '{}': {e}", spec.name))
}

/// Sets CE on an ECT(0)/ECT(1) IP packet (IPv4 header checksum fixed incrementally; IPv6
/// has none). Returns false, leaving the frame untouched, for not-ECT, already-CE and
/// non-IP frames.
pub fn mark_ce(frame: &mut [u8]) -> bool {
    let k = Key::parse(frame, 0);
    if !(k.is_ipv4 || k.is_ipv6) {
        return false;
    }
    match k.ip_tos & 3 {
        1 | 2 => {
            packet::set_ecn(frame, &k, 3);
            true
        }
        _ => false,
    }
}

/// The counters of a discipline as a JSON object: `{"kind":"NAME","key":n,...}`.
pub fn counters_json(kind: &str, counters: &[(&'static str, u64)]) -> String {
    let mut s = format!("{{\"kind\":\"{kind}\"");
    for (k, v) in counters {
        s.push_str(&format!(",\"{k}\":{v}"));
    }
    s.push('}');
    s
}

#[cfg(test)]
pub(crate) mod testing {
    //! A small ingress discipline for tests of the ingress path: it holds every frame
    //! while the port's egress queue holds at least `gate` frames, and releases held
    //! frames in arrival order, with their last payload byte set to 0xee (to show that a
    //! released frame may be modified), once the queue is below `gate` again or
    //! `max_hold_ns` after arrival, whichever comes first. At most `limit` frames are
    //! held; more are dropped.
    use super::*;
    use std::collections::VecDeque;

    pub struct Gate {
        pub gate: usize,
        pub max_hold_ns: u64,
        pub limit: usize,
        held: VecDeque<(u64, Vec<u8>)>,
        held_bytes: usize,
        pub passed: u64,
        pub released: u64,
        pub drops: u64,
    }

    impl Gate {
        pub fn new(gate: usize, max_hold_ns: u64, limit: usize) -> Gate {
            Gate {
                gate,
                max_hold_ns,
                limit,
                held: VecDeque::new(),
                held_bytes: 0,
                passed: 0,
                released: 0,
                drops: 0,
            }
        }
    }

    impl IngressQdisc for Gate {
        fn kind(&self) -> &'static str {
            "gate"
        }

        fn arrive(&mut self, frame: Vec<u8>, ctx: &IngressCtx) -> Arrival {
            // Frames already held go first: never overtake them.
            if self.held.is_empty() && ctx.egress.pkts < self.gate {
                self.passed += 1;
                return Arrival::Pass(frame);
            }
            if self.held.len() >= self.limit {
                self.drops += 1;
                return Arrival::Dropped;
            }
            self.held_bytes += frame.len();
            self.held.push_back((ctx.now_ns + self.max_hold_ns, frame));
            Arrival::Held
        }

        fn wake(&mut self, ctx: &IngressCtx, release: &mut Vec<Vec<u8>>) {
            let open = ctx.egress.pkts < self.gate;
            while let Some((due, _)) = self.held.front() {
                if !open && *due > ctx.now_ns {
                    break;
                }
                let (_, mut f) = self.held.pop_front().expect("front");
                self.held_bytes -= f.len();
                if let Some(b) = f.last_mut() {
                    *b = 0xee;
                }
                self.released += 1;
                release.push(f);
            }
        }

        fn next_deadline(&self) -> Option<u64> {
            self.held.front().map(|(due, _)| *due)
        }

        fn held(&self) -> QueueLen {
            QueueLen { pkts: self.held.len(), bytes: self.held_bytes }
        }

        fn counters(&self) -> Vec<(&'static str, u64)> {
            vec![("passed", self.passed), ("released", self.released), ("drops", self.drops)]
        }
    }

    pub fn build(opts: &[(String, String)]) -> Result<Box<dyn IngressQdisc>, String> {
        let mut gate = 1;
        for (k, v) in opts {
            match k.as_str() {
                "gate" => gate = v.parse().map_err(|_| format!("option gate={v}: not a number"))?,
                _ => return Err(unknown_option(k, &["gate"])),
            }
        }
        Ok(Box::new(Gate::new(gate, u64::MAX / 2, usize::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_refuses_unknown_names_and_options() {
        let e = |r: Result<Box<dyn EgressQdisc>, String>| r.err().expect("refused");
        let msg = e(build_egress(&QdiscSpec::parse("red/min=5").unwrap()));
        assert!(msg.contains("unknown egress discipline 'red'") && msg.contains("droptail"), "{msg}");
        let msg = e(build_egress(&QdiscSpec::parse("droptail/k=5p").unwrap()));
        assert!(msg.contains("egress discipline 'droptail'") && msg.contains("unknown option 'k'"), "{msg}");
        let msg = build_ingress(&QdiscSpec::parse("red/k=20p").unwrap()).err().expect("refused");
        assert!(msg.contains("unknown ingress discipline 'red' (known: abq)"), "{msg}");
        assert_eq!(build_ingress(&QdiscSpec::parse("abq/k=20p").unwrap()).unwrap().kind(), "abq");
        assert_eq!(build_egress(&QdiscSpec::parse("droptail").unwrap()).unwrap().kind(), "droptail");
    }

    #[test]
    fn a_registered_ingress_discipline_gets_its_options() {
        let table: &[(&str, IngressCtor)] = &[("gate", testing::build)];
        let q = build_with(table, "ingress", &QdiscSpec::parse("gate/gate=3").unwrap()).unwrap();
        assert_eq!(q.kind(), "gate");
        let msg = build_with(table, "ingress", &QdiscSpec::parse("gate/gate=x").unwrap()).err().unwrap();
        assert_eq!(msg, "ingress discipline 'gate': option gate=x: not a number");
    }

    #[test]
    fn counters_render_as_json() {
        assert_eq!(
            counters_json("droptail", &[("drops", 3), ("ce_marks", 1)]),
            "{\"kind\":\"droptail\",\"drops\":3,\"ce_marks\":1}"
        );
    }
}
