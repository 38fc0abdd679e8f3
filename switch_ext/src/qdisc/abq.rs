//! `abq`: Active Buffer Queueing, an ingress discipline that holds pure TCP ACKs while
//! the same port's egress queue (Q_out, toward the receiver whose ACKs come back in on
//! this port) is congested, and releases them as Q_out drains.
//!
//! A **pure ACK** is a TCP segment (IPv4 or IPv6) with ACK set, no payload (lengths from
//! the IP header, so Ethernet padding does not count) and none of SYN, FIN, RST. Every
//! other frame passes untouched and is never held.
//!
//! **State machine** (three states; `K` is the threshold on Q_out, `X` the release level),
//! evaluated on every arrival and every change of Q_out (the port wakes the discipline
//! whenever the egress buffer changed, so no threshold crossing is missed):
//!
//! - Q_out > K: state **CS** (entering it sets X = min(Qmax - K, K); without `qmax`,
//!   X = K). Every pure ACK arriving in CS or LCS is held.
//! - CS or LCS and Q_out <= X: release everything held, X = X / 2, state **LCS**; if then
//!   X < 4 MTU (4 packets when K is in packets, 4 x `mtu` bytes when in bytes), X = 0
//!   and state **US**. If Q_out fell past several levels between two evaluations, the
//!   halvings are applied in turn (the first one releases).
//! - US: nothing is held.
//!
//! **Correction** applied to every released ACK (`mode=`):
//! - `ece` (the paper): set the TCP ECE flag, TCP checksum updated incrementally
//!   (RFC 1624). Released in FIFO order.
//! - `window` (the authors' ns-3 code): at most one held ACK per flow (a newer ACK of the
//!   same flow replaces the held one, which is discarded and counted `superseded`: ACKs
//!   are cumulative); released LIFO; the advertised window is lowered to
//!   w = max(K_bytes / n, MSS) bytes, n = ACKs released together, K_bytes = K (bytes) or
//!   K x `mss` (packets). The window is only ever lowered, never raised above what the
//!   receiver advertised. The field is written in the flow's scaled units: the shift is
//!   the window-scale option of the receiver's SYN-ACK seen on this port (no option: 0).
//!   A flow whose shift is not known for certain (its handshake was not seen here, or the
//!   receiver opened the connection, so the peer's answer is unknown) is released
//!   unmodified and counted `rewrite_unknown`. The table of flows is bounded (`flows=`;
//!   full: the least recently seen flow is forgotten, counted `flow_evictions`); FIN or
//!   RST from the receiver forgets a flow.
//!
//! **Guard rails** the paper does not have:
//! - `cap=N` (default 1024) held ACKs per port. An ACK arriving at a full queue is held
//!   and the oldest held one is released at once (with the correction), counted
//!   `forced_cap`. 1024 ACKs are ~70 KB of frames and more than one per flow for any
//!   incast this lab runs; the cap bounds memory, not behaviour.
//! - `hold=D` (default 2ms): no ACK is held longer. A held ACK delays its sender's clock;
//!   if it is held close to the sender's RTO (RTOmin = 10 ms in the paper's setup, and
//!   Linux's floor is 200 ms) the discipline itself causes a timeout. 2 ms is a fifth of
//!   the 10 ms RTOmin, so hold time plus a data-center RTT stays well under it. Released
//!   with the correction; counted `forced_timeout`.
//!
//! **Counters** (cumulative): `acks_held` is the sum of `released`, `forced_cap`,
//! `forced_timeout`, `superseded` and the ACKs held now (the port's `held`). `ece_marked`, `rewritten`,
//! `rewrite_unknown`, `held_peak`, state (`state`: 0 US, 1 CS, 2 LCS), `x`, transitions
//! `to_cs`, `to_lcs`, `to_us`, `halvings`, and the configuration (`enabled`, `k`,
//! `k_bytes` 0/1, `mode` 0 ece / 1 window).
//!
//! **Options**: `k=20p` or `k=30000b` (default 20p), `mode=ece|window` (default ece),
//! `qmax=80p` (the egress buffer, same unit as k; must exceed k), `cap=`, `hold=`,
//! `mtu=1500`, `mss=1448`, `flows=4096`, `enable=1|0` (default 1).
//!
//! **Run-time control** ([`IngressQdisc::control`], from the OpenFlow experimenter
//! message): the same options; the new configuration is validated whole before it is
//! applied, then everything held is released (with the old mode's correction when it was
//! enabled) and the state returns to US; `enable=0` passes every frame.

use std::collections::{HashMap, VecDeque};

use super::{unknown_option, Arrival, IngressCtx, IngressQdisc, QueueLen};
use crate::packet::{csum_update16, Key, IPPROTO_TCP};
use crate::units::{parse_duration_ns, parse_size};

pub const NAME: &str = "abq";

const FIN: u16 = 0x01;
const SYN: u16 = 0x02;
const RST: u16 = 0x04;
const ACK: u16 = 0x10;
const ECE: u16 = 0x40;

const OPTIONS: &[&str] = &["k", "mode", "qmax", "cap", "hold", "mtu", "mss", "flows", "enable"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ece,
    Window,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Us,
    Cs,
    Lcs,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub enabled: bool,
    pub k: usize,
    /// K, Qmax and X are in bytes (else packets).
    pub bytes: bool,
    pub qmax: Option<usize>,
    pub mode: Mode,
    pub cap: usize,
    pub hold_ns: u64,
    pub mtu: usize,
    pub mss: usize,
    pub flows: usize,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            enabled: true,
            k: 20,
            bytes: false,
            qmax: None,
            mode: Mode::Ece,
            cap: 1024,
            hold_ns: 2_000_000,
            mtu: 1500,
            mss: 1448,
            flows: 4096,
        }
    }
}

fn num(k: &str, v: &str, min: usize) -> Result<usize, String> {
    let n: usize = v.parse().map_err(|_| format!("option {k}={v}: not a whole number"))?;
    if n < min {
        return Err(format!("option {k}={v}: must be at least {min}"));
    }
    Ok(n)
}

impl Config {
    /// `base` with `opts` applied in order; the result is checked as a whole.
    pub fn with_options(base: &Config, opts: &[(String, String)]) -> Result<Config, String> {
        let mut c = base.clone();
        let mut qmax: Option<(Option<usize>, Option<usize>, String)> = None;
        let mut k_given = false;
        for (k, v) in opts {
            match k.as_str() {
                "k" => {
                    let (p, b) = parse_size(v).map_err(|e| format!("option k={v}: {e}"))?;
                    c.bytes = b.is_some();
                    c.k = p.or(b).unwrap_or(0);
                    if c.k == 0 {
                        return Err(format!("option k={v}: must be at least 1"));
                    }
                    k_given = true;
                }
                "qmax" => {
                    let (p, b) = parse_size(v).map_err(|e| format!("option qmax={v}: {e}"))?;
                    qmax = Some((p, b, v.clone()));
                }
                "mode" => {
                    c.mode = match v.as_str() {
                        "ece" => Mode::Ece,
                        "window" => Mode::Window,
                        _ => return Err(format!("option mode={v}: expected ece or window")),
                    }
                }
                "cap" => c.cap = num(k, v, 1)?,
                "hold" => {
                    c.hold_ns = parse_duration_ns(v).map_err(|e| format!("option hold={v}: {e}"))?;
                    if c.hold_ns == 0 {
                        return Err(format!("option hold={v}: must be more than 0"));
                    }
                }
                "mtu" => c.mtu = num(k, v, 68)?,
                "mss" => c.mss = num(k, v, 1)?,
                "flows" => c.flows = num(k, v, 1)?,
                "enable" => {
                    c.enabled = match v.as_str() {
                        "1" | "on" | "yes" | "true" => true,
                        "0" | "off" | "no" | "false" => false,
                        _ => return Err(format!("option enable={v}: expected 1 or 0")),
                    }
                }
                _ => return Err(unknown_option(k, OPTIONS)),
            }
        }
        if let Some((p, b, v)) = qmax {
            if p.is_some() == c.bytes {
                return Err(format!("option qmax={v}: must be in the unit of k ({})", c.unit()));
            }
            c.qmax = p.or(b);
        } else if k_given && base.bytes != c.bytes {
            // A qmax in the old unit means nothing in the new one.
            c.qmax = None;
        }
        if let Some(q) = c.qmax {
            if q <= c.k {
                return Err(format!("option qmax: {q}{} must exceed k ({}{})", c.unit(), c.k, c.unit()));
            }
        }
        if c.mss >= c.mtu {
            return Err(format!("option mss={}: must be less than mtu ({})", c.mss, c.mtu));
        }
        Ok(c)
    }

    fn unit(&self) -> &'static str {
        if self.bytes {
            "b"
        } else {
            "p"
        }
    }

    /// X on entering CS: min(Qmax - K, K).
    fn x_entry(&self) -> usize {
        self.qmax.map_or(self.k, |q| (q - self.k).min(self.k))
    }

    /// Below this X the port is uncongested: 4 MTU.
    fn x_floor(&self) -> usize {
        if self.bytes {
            4 * self.mtu
        } else {
            4
        }
    }

    fn k_bytes(&self) -> usize {
        if self.bytes {
            self.k
        } else {
            self.k * self.mss
        }
    }
}

/// A flow in the direction of the ACKs (receiver -> sender).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct FlowKey {
    src: u128,
    dst: u128,
    sport: u16,
    dport: u16,
}

struct FlowInfo {
    /// The receiver's window shift when known for certain.
    shift: Option<u8>,
    last_ns: u64,
}

struct Held {
    frame: Vec<u8>,
    due_ns: u64,
    flow: FlowKey,
}

/// What a TCP segment is, as far as ABQ cares.
struct Tcp {
    flow: FlowKey,
    l4: usize,
    flags: u16,
    payload: usize,
    /// Window-scale option (SYN segments only).
    wscale: Option<u8>,
}

fn tcp_of(f: &[u8]) -> Option<Tcp> {
    let k = Key::parse(f, 0);
    if k.ip_proto != Some(IPPROTO_TCP) {
        return None;
    }
    let l4 = k.l4?;
    let doff = (f[l4 + 12] >> 4) as usize * 4;
    if doff < 20 || f.len() < l4 + doff {
        return None;
    }
    let l3 = k.l3;
    let ip_end = if k.is_ipv4 {
        l3 + u16::from_be_bytes([f[l3 + 2], f[l3 + 3]]) as usize
    } else {
        l3 + 40 + u16::from_be_bytes([f[l3 + 4], f[l3 + 5]]) as usize
    };
    let payload = ip_end.checked_sub(l4 + doff)?;
    let (src, dst) =
        if k.is_ipv4 { (k.ipv4_src as u128, k.ipv4_dst as u128) } else { (k.ipv6_src, k.ipv6_dst) };
    let flags = k.tcp_flags;
    let mut wscale = None;
    if flags & SYN != 0 {
        let mut o = l4 + 20;
        while o < l4 + doff {
            match f[o] {
                0 => break,
                1 => o += 1,
                kind => {
                    let Some(&len) = f.get(o + 1) else { break };
                    if len < 2 {
                        break;
                    }
                    if kind == 3 && len == 3 && o + 2 < l4 + doff {
                        wscale = Some(f[o + 2].min(14));
                    }
                    o += len as usize;
                }
            }
        }
    }
    Some(Tcp { flow: FlowKey { src, dst, sport: k.tp_src, dport: k.tp_dst }, l4, flags, payload, wscale })
}

/// What a quick look at fixed offsets says about a frame (untagged IPv4/IPv6 only).
enum Quick {
    NotTcp,
    Flags(u16),
    /// Tagged, IPv6 extension headers, too short...: parse it properly.
    Unknown,
}

fn quick(f: &[u8]) -> Quick {
    if f.len() < 14 {
        return Quick::NotTcp;
    }
    match (f[12], f[13]) {
        (0x08, 0x00) if f.len() >= 34 => {
            let ihl = (f[14] & 0x0f) as usize * 4;
            let frag = u16::from_be_bytes([f[20], f[21]]) & 0x1fff;
            if f[23] != IPPROTO_TCP || frag != 0 {
                Quick::NotTcp
            } else if f.len() >= 14 + ihl + 14 {
                Quick::Flags(u16::from_be_bytes([f[14 + ihl + 12], f[14 + ihl + 13]]) & 0x0fff)
            } else {
                Quick::Unknown
            }
        }
        (0x86, 0xdd) if f.len() >= 54 + 14 && f[20] == IPPROTO_TCP => {
            Quick::Flags(u16::from_be_bytes([f[54 + 12], f[54 + 13]]) & 0x0fff)
        }
        (0x81, 0x00) | (0x88, 0xa8) | (0x86, 0xdd) | (0x08, 0x00) => Quick::Unknown,
        _ => Quick::NotTcp,
    }
}

fn is_pure_ack(t: &Tcp) -> bool {
    t.flags & ACK != 0 && t.flags & (SYN | FIN | RST) == 0 && t.payload == 0
}

fn rd16(f: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([f[o], f[o + 1]])
}

/// Replaces the 16-bit word at `o` of a TCP segment at `l4`, fixing the TCP checksum.
fn tcp_replace16(f: &mut [u8], l4: usize, o: usize, new: u16) {
    let old = rd16(f, o);
    if old == new {
        return;
    }
    f[o..o + 2].copy_from_slice(&new.to_be_bytes());
    let cs = rd16(f, l4 + 16);
    f[l4 + 16..l4 + 18].copy_from_slice(&csum_update16(cs, old, new).to_be_bytes());
}

/// Sets ECE on a TCP segment; false when it was already set.
pub fn set_ece(f: &mut [u8], l4: usize) -> bool {
    let w = rd16(f, l4 + 12);
    if w & ECE != 0 {
        return false;
    }
    tcp_replace16(f, l4, l4 + 12, w | ECE);
    true
}

/// Lowers the advertised window to `bytes` (in units of `1 << shift`, at least 1);
/// false when the advertised window was already no larger.
pub fn lower_window(f: &mut [u8], l4: usize, bytes: usize, shift: u8) -> bool {
    let old = rd16(f, l4 + 14);
    let units = bytes.div_ceil(1usize << shift).clamp(1, 0xffff) as u16;
    if units >= old {
        return false;
    }
    tcp_replace16(f, l4, l4 + 14, units);
    true
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Counters {
    pub acks_held: u64,
    pub released: u64,
    pub ece_marked: u64,
    pub rewritten: u64,
    pub rewrite_unknown: u64,
    pub superseded: u64,
    pub forced_cap: u64,
    pub forced_timeout: u64,
    pub held_peak: u64,
    pub to_cs: u64,
    pub to_lcs: u64,
    pub to_us: u64,
    pub halvings: u64,
    pub flow_evictions: u64,
}

pub struct Abq {
    pub cfg: Config,
    pub state: State,
    pub x: usize,
    held: VecDeque<Held>,
    held_bytes: usize,
    /// Forced out by the cap: released at the next wake (due at once).
    forced: Vec<Vec<u8>>,
    flows: HashMap<FlowKey, FlowInfo>,
    pub c: Counters,
}

pub fn build(opts: &[(String, String)]) -> Result<Box<dyn IngressQdisc>, String> {
    Ok(Box::new(Abq::new(Config::with_options(&Config::default(), opts)?)))
}

impl Abq {
    pub fn new(cfg: Config) -> Abq {
        Abq {
            cfg,
            state: State::Us,
            x: 0,
            held: VecDeque::new(),
            held_bytes: 0,
            forced: Vec::new(),
            flows: HashMap::new(),
            c: Counters::default(),
        }
    }

    fn qlen(&self, q: QueueLen) -> usize {
        if self.cfg.bytes {
            q.bytes
        } else {
            q.pkts
        }
    }

    fn set_state(&mut self, s: State) {
        if s != self.state {
            match s {
                State::Us => self.c.to_us += 1,
                State::Cs => self.c.to_cs += 1,
                State::Lcs => self.c.to_lcs += 1,
            }
            self.state = s;
        }
    }

    /// Entry into CS (needs no release, so arrivals can do it too).
    fn check_entry(&mut self, q: usize) {
        if q > self.cfg.k && self.state != State::Cs {
            self.set_state(State::Cs);
            self.x = self.cfg.x_entry();
        }
    }

    /// The whole state machine at Q_out = `q`.
    fn evaluate(&mut self, q: usize, release: &mut Vec<Vec<u8>>) {
        self.check_entry(q);
        let mut first = true;
        while self.state != State::Us && q <= self.x {
            if first {
                self.release_all(release);
                first = false;
            }
            self.x /= 2;
            self.c.halvings += 1;
            self.set_state(State::Lcs);
            if self.x < self.cfg.x_floor() {
                self.x = 0;
                self.set_state(State::Us);
            }
        }
    }

    fn take(&mut self, i: usize) -> Held {
        let h = self.held.remove(i).expect("index");
        self.held_bytes -= h.frame.len();
        h
    }

    /// Applies the mode's correction to a released ACK; `n` ACKs are released together.
    fn correct(&mut self, frame: &mut [u8], flow: &FlowKey, n: usize) {
        let Some(t) = tcp_of(frame) else { return };
        match self.cfg.mode {
            Mode::Ece => {
                if set_ece(frame, t.l4) {
                    self.c.ece_marked += 1;
                }
            }
            Mode::Window => match self.flows.get(flow).and_then(|f| f.shift) {
                Some(shift) => {
                    let w = (self.cfg.k_bytes() / n.max(1)).max(self.cfg.mss);
                    if lower_window(frame, t.l4, w, shift) {
                        self.c.rewritten += 1;
                    }
                }
                None => self.c.rewrite_unknown += 1,
            },
        }
    }

    fn release_all(&mut self, release: &mut Vec<Vec<u8>>) {
        let n = self.held.len();
        while !self.held.is_empty() {
            let i = if self.cfg.mode == Mode::Window { self.held.len() - 1 } else { 0 };
            let mut h = self.take(i);
            self.correct(&mut h.frame, &h.flow, n);
            self.c.released += 1;
            release.push(h.frame);
        }
    }

    /// Everything held out, unmodified (the discipline is being switched off).
    fn release_plain(&mut self, release: &mut Vec<Vec<u8>>) {
        release.append(&mut self.forced);
        while !self.held.is_empty() {
            let h = self.take(0);
            self.c.released += 1;
            release.push(h.frame);
        }
    }

    fn note_handshake(&mut self, t: &Tcp, now_ns: u64) {
        if t.flags & (FIN | RST) != 0 {
            self.flows.remove(&t.flow);
            return;
        }
        if t.flags & SYN == 0 {
            return;
        }
        // SYN-ACK from the receiver: its shift is in effect iff it sent the option (it may
        // only when the peer's SYN had one). A bare SYN from the receiver: without the
        // option, no scaling for sure; with it, it depends on the peer's SYN-ACK, unseen.
        let shift = if t.flags & ACK != 0 {
            Some(t.wscale.unwrap_or(0))
        } else if t.wscale.is_none() {
            Some(0)
        } else {
            None
        };
        if !self.flows.contains_key(&t.flow) && self.flows.len() >= self.cfg.flows {
            if let Some(old) = self.flows.iter().min_by_key(|(_, f)| f.last_ns).map(|(k, _)| *k) {
                self.flows.remove(&old);
                self.c.flow_evictions += 1;
            }
        }
        self.flows.insert(t.flow, FlowInfo { shift, last_ns: now_ns });
    }

    /// Held ACKs whose hold time is up, oldest first.
    fn expire(&mut self, now_ns: u64, release: &mut Vec<Vec<u8>>) {
        while self.held.front().is_some_and(|h| h.due_ns <= now_ns) {
            let n = self.held.len();
            let mut h = self.take(0);
            self.correct(&mut h.frame, &h.flow, n);
            self.c.forced_timeout += 1;
            release.push(h.frame);
        }
    }

    pub fn counters_struct(&self) -> &Counters {
        &self.c
    }
}

impl IngressQdisc for Abq {
    fn kind(&self) -> &'static str {
        NAME
    }

    fn arrive(&mut self, frame: Vec<u8>, ctx: &IngressCtx) -> Arrival {
        if !self.cfg.enabled {
            return Arrival::Pass(frame);
        }
        let q = self.qlen(ctx.egress);
        self.check_entry(q);
        if self.state == State::Us {
            // Uncongested: ece mode needs no parsing at all; window mode only follows
            // handshakes and teardowns (a glance at fixed offsets for the common case).
            if self.cfg.mode == Mode::Ece {
                return Arrival::Pass(frame);
            }
            match quick(&frame) {
                Quick::NotTcp => return Arrival::Pass(frame),
                Quick::Flags(fl) if fl & (SYN | FIN | RST) == 0 => return Arrival::Pass(frame),
                _ => {}
            }
        }
        let Some(t) = tcp_of(&frame) else { return Arrival::Pass(frame) };
        if self.cfg.mode == Mode::Window {
            self.note_handshake(&t, ctx.now_ns);
        }
        if self.state == State::Us || !is_pure_ack(&t) {
            return Arrival::Pass(frame);
        }
        if self.cfg.mode == Mode::Window {
            if let Some(f) = self.flows.get_mut(&t.flow) {
                f.last_ns = ctx.now_ns; // recently seen: the last to be forgotten
            }
            if let Some(i) = self.held.iter().position(|h| h.flow == t.flow) {
                self.take(i);
                self.c.superseded += 1;
            }
        }
        if self.held.len() >= self.cfg.cap {
            let n = self.held.len();
            let mut h = self.take(0);
            self.correct(&mut h.frame, &h.flow, n);
            self.c.forced_cap += 1;
            self.forced.push(h.frame);
        }
        self.held_bytes += frame.len();
        self.held.push_back(Held {
            frame,
            due_ns: ctx.now_ns.saturating_add(self.cfg.hold_ns),
            flow: t.flow,
        });
        self.c.acks_held += 1;
        self.c.held_peak = self.c.held_peak.max(self.held.len() as u64);
        Arrival::Held
    }

    fn wake(&mut self, ctx: &IngressCtx, release: &mut Vec<Vec<u8>>) {
        release.append(&mut self.forced);
        if !self.cfg.enabled {
            return;
        }
        self.expire(ctx.now_ns, release);
        let q = self.qlen(ctx.egress);
        self.evaluate(q, release);
    }

    fn next_deadline(&self) -> Option<u64> {
        if !self.forced.is_empty() {
            return Some(0);
        }
        self.held.front().map(|h| h.due_ns)
    }

    fn held(&self) -> QueueLen {
        QueueLen { pkts: self.held.len(), bytes: self.held_bytes }
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.c;
        vec![
            ("enabled", self.cfg.enabled as u64),
            ("mode", (self.cfg.mode == Mode::Window) as u64),
            ("k", self.cfg.k as u64),
            ("k_bytes", self.cfg.bytes as u64),
            ("state", self.state as u64),
            ("x", self.x as u64),
            ("acks_held", c.acks_held),
            ("released", c.released),
            ("ece_marked", c.ece_marked),
            ("rewritten", c.rewritten),
            ("rewrite_unknown", c.rewrite_unknown),
            ("superseded", c.superseded),
            ("forced_cap", c.forced_cap),
            ("forced_timeout", c.forced_timeout),
            ("held_peak", c.held_peak),
            ("to_cs", c.to_cs),
            ("to_lcs", c.to_lcs),
            ("to_us", c.to_us),
            ("halvings", c.halvings),
            ("flows_tracked", self.flows.len() as u64),
            ("flow_evictions", c.flow_evictions),
        ]
    }

    fn control(
        &mut self,
        opts: &[(String, String)],
        _ctx: &IngressCtx,
        release: &mut Vec<Vec<u8>>,
    ) -> Result<(), String> {
        let cfg = Config::with_options(&self.cfg, opts)?;
        if self.cfg.enabled {
            release.append(&mut self.forced);
            self.release_all(release);
        } else {
            self.release_plain(release);
        }
        if cfg.mode != self.cfg.mode {
            self.flows.clear();
        }
        self.cfg = cfg;
        self.x = 0;
        self.set_state(State::Us);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::packet::inet_csum;

    fn opts(s: &str) -> Vec<(String, String)> {
        s.split('/')
            .filter(|x| !x.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (k.to_string(), v.to_string())
            })
            .collect()
    }

    fn abq(s: &str) -> Abq {
        Abq::new(Config::with_options(&Config::default(), &opts(s)).unwrap())
    }

    /// An Ethernet/IPv4/TCP frame from the receiver 10.0.0.2:5001 to the sender
    /// 10.0.0.1:`sport`, padded to the 60-byte Ethernet minimum like a real pure ACK.
    pub(crate) fn tcp(
        sport: u16,
        flags: u16,
        ack: u32,
        win: u16,
        tcp_opts: &[u8],
        payload: &[u8],
    ) -> Vec<u8> {
        let (src, dst) = ([10, 0, 0, 2], [10, 0, 0, 1]);
        let mut f = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x08, 0x00];
        let thl = 20 + tcp_opts.len();
        let tot = 20 + thl + payload.len();
        let mut ip = vec![0x45, 0x02];
        ip.extend_from_slice(&(tot as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 1, 0x40, 0, 64, IPPROTO_TCP, 0, 0]);
        ip.extend_from_slice(&src);
        ip.extend_from_slice(&dst);
        let c = inet_csum(&ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut t = Vec::new();
        t.extend_from_slice(&5001u16.to_be_bytes());
        t.extend_from_slice(&sport.to_be_bytes());
        t.extend_from_slice(&7u32.to_be_bytes());
        t.extend_from_slice(&ack.to_be_bytes());
        t.extend_from_slice(&((((thl / 4) as u16) << 12) | flags).to_be_bytes());
        t.extend_from_slice(&win.to_be_bytes());
        t.extend_from_slice(&[0, 0, 0, 0]);
        t.extend_from_slice(tcp_opts);
        t.extend_from_slice(payload);
        let c = tcp_csum_scratch(&src, &dst, &t);
        t[16..18].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&t);
        while f.len() < 60 {
            f.push(0);
        }
        f
    }

    /// The TCP checksum computed from scratch over the pseudo-header and segment (with
    /// its checksum field zeroed).
    fn tcp_csum_scratch(src: &[u8], dst: &[u8], seg: &[u8]) -> u16 {
        let mut p = Vec::new();
        p.extend_from_slice(src);
        p.extend_from_slice(dst);
        p.extend_from_slice(&[0, IPPROTO_TCP]);
        p.extend_from_slice(&(seg.len() as u16).to_be_bytes());
        let mut s = seg.to_vec();
        s[16] = 0;
        s[17] = 0;
        p.extend_from_slice(&s);
        inet_csum(&p)
    }

    /// (flags, window, checksum stored, checksum from scratch) of a frame built by `tcp`.
    pub(crate) fn inspect(f: &[u8]) -> (u16, u16, u16, u16) {
        let tot = u16::from_be_bytes([f[16], f[17]]) as usize;
        let seg = &f[34..14 + tot];
        let stored = u16::from_be_bytes([seg[16], seg[17]]);
        (
            u16::from_be_bytes([seg[12], seg[13]]) & 0x0fff,
            u16::from_be_bytes([seg[14], seg[15]]),
            stored,
            tcp_csum_scratch(&f[26..30], &f[30..34], seg),
        )
    }

    fn ack(sport: u16, ackno: u32) -> Vec<u8> {
        tcp(sport, ACK, ackno, 1000, &[], &[])
    }

    fn ctx(now_ns: u64, pkts: usize) -> IngressCtx {
        IngressCtx { now_ns, egress: QueueLen { pkts, bytes: pkts * 1500 } }
    }

    fn ack_no(f: &[u8]) -> u32 {
        u32::from_be_bytes([f[42], f[43], f[44], f[45]])
    }

    /// Feeds a Q_out trace (one wake per value, 1 us apart); returns the states seen after
    /// each step and everything released.
    fn run(a: &mut Abq, trace: &[usize]) -> (Vec<State>, Vec<Vec<u8>>) {
        let mut states = Vec::new();
        let mut out = Vec::new();
        for (i, &q) in trace.iter().enumerate() {
            a.wake(&ctx(i as u64 * 1000, q), &mut out);
            states.push(a.state);
        }
        (states, out)
    }

    #[test]
    fn options_and_errors() {
        let a = abq("k=30000b/mode=window/qmax=120000b/cap=8/hold=500us/flows=2");
        assert_eq!(
            (a.cfg.k, a.cfg.bytes, a.cfg.qmax, a.cfg.mode, a.cfg.cap, a.cfg.hold_ns, a.cfg.flows),
            (30000, true, Some(120000), Mode::Window, 8, 500_000, 2)
        );
        assert_eq!(abq("").cfg, Config::default());
        let e = |s: &str| Config::with_options(&Config::default(), &opts(s)).unwrap_err();
        assert_eq!(
            e("k=lots"),
            "option k=lots: size 'lots': expected packets like 20p or bytes like 30000b, 30kb, 64KiB"
        );
        assert_eq!(e("k=0p"), "option k=0p: must be at least 1");
        assert_eq!(e("mode=fast"), "option mode=fast: expected ece or window");
        assert!(e("qmax=80000b").contains("must be in the unit of k (p)"));
        assert!(e("k=20p/qmax=20p").contains("must exceed k"));
        assert_eq!(e("cap=0"), "option cap=0: must be at least 1");
        assert_eq!(e("hold=0"), "option hold=0: must be more than 0");
        assert!(e("hold=5").starts_with("option hold=5: duration"));
        assert!(e("mss=1500").contains("less than mtu"));
        assert!(e("enable=maybe").contains("expected 1 or 0"));
        assert!(e("q=1").starts_with("unknown option 'q' (known: k, mode, qmax"));
        // Through the registry, as the command line builds it.
        let msg =
            super::super::build_ingress(&super::super::QdiscSpec::parse("abq/k=x").unwrap()).err().unwrap();
        assert!(msg.starts_with("ingress discipline 'abq': option k=x"), "{msg}");
    }

    #[test]
    fn state_machine_entry_halving_and_return_to_us() {
        // K = 20, Qmax = 80: X = min(60, 20) = 20 on entry.
        let mut a = abq("k=20p/qmax=80p");
        let (s, _) = run(&mut a, &[0, 10, 20, 21]);
        assert_eq!(s, [State::Us, State::Us, State::Us, State::Cs]);
        assert_eq!(a.x, 20);
        // Q_out = K is not above K: stays; at X = 20 it releases and halves to 10.
        let (s, _) = run(&mut a, &[25, 30, 21, 20]);
        assert_eq!(s, [State::Cs, State::Cs, State::Cs, State::Lcs]);
        assert_eq!(a.x, 10);
        let (s, _) = run(&mut a, &[15, 11, 10]);
        assert_eq!(s, [State::Lcs, State::Lcs, State::Lcs]);
        assert_eq!(a.x, 5);
        // 5 -> 2 < 4 packets: X = 0 and US.
        let (s, _) = run(&mut a, &[6, 5]);
        assert_eq!(s, [State::Lcs, State::Us]);
        assert_eq!(a.x, 0);
        // Re-entry from LCS resets X.
        run(&mut a, &[21, 20, 21]);
        assert_eq!((a.state, a.x), (State::Cs, 20));
        assert_eq!((a.c.to_cs, a.c.to_lcs, a.c.to_us, a.c.halvings), (3, 2, 1, 4));
        // A Qmax close to K: X = Qmax - K.
        let mut b = abq("k=20p/qmax=26p");
        run(&mut b, &[21]);
        assert_eq!(b.x, 6);
        // Falling past several levels at once: every halving applies, one release.
        let mut c = abq("k=20p");
        run(&mut c, &[21]);
        c.arrive(ack(1, 1), &ctx(0, 21));
        let (s, out) = run(&mut c, &[3]);
        assert_eq!((s[0], c.c.halvings, out.len()), (State::Us, 3, 1));
    }

    #[test]
    fn bytes_threshold_uses_4_mtu() {
        let mut a = abq("k=30000b/mtu=1500");
        let q = |b: usize| IngressCtx { now_ns: 0, egress: QueueLen { pkts: b / 1500, bytes: b } };
        let mut out = Vec::new();
        a.wake(&q(30001), &mut out);
        assert_eq!((a.state, a.x), (State::Cs, 30000));
        a.wake(&q(30000), &mut out);
        assert_eq!((a.state, a.x), (State::Lcs, 15000));
        a.wake(&q(15000), &mut out);
        assert_eq!((a.state, a.x), (State::Lcs, 7500));
        a.wake(&q(7000), &mut out);
        assert_eq!((a.state, a.x), (State::Us, 0)); // 3750 < 6000
    }

    #[test]
    fn holds_only_pure_acks_while_congested_and_marks_ece_on_release() {
        let mut a = abq("k=2p");
        // Uncongested: a pure ACK passes untouched.
        let f = ack(1, 100);
        assert_eq!(a.arrive(f.clone(), &ctx(0, 2)), Arrival::Pass(f));
        // Q_out > K: congested at arrival already (no wake needed).
        let held = ack(1, 200);
        assert_eq!(a.arrive(held.clone(), &ctx(1, 3)), Arrival::Held);
        assert_eq!(a.state, State::Cs);
        // Never held: data, SYN, FIN, RST, SYN-ACK, UDP, ARP-ish junk, a truncated frame.
        let others = [
            tcp(1, ACK, 300, 1000, &[], b"data"),
            tcp(1, SYN, 0, 1000, &[], &[]),
            tcp(1, ACK | FIN, 300, 1000, &[], &[]),
            tcp(1, RST, 0, 0, &[], &[]),
            tcp(1, SYN | ACK, 1, 1000, &[3, 3, 7, 0], &[]),
            tcp(1, 0, 0, 1000, &[], &[]),
            crate::packet::testpkt::ipv4_udp([10, 0, 0, 2], [10, 0, 0, 1], 1, 2, 0, b"x"),
            vec![0xff; 20],
            ack(1, 5)[..40].to_vec(),
        ];
        for f in others {
            assert_eq!(a.arrive(f.clone(), &ctx(2, 30)), Arrival::Pass(f));
        }
        assert_eq!(a.held().pkts, 1);
        let mut out = Vec::new();
        a.wake(&ctx(3, 2), &mut out);
        assert_eq!(out.len(), 1);
        let (flags, win, stored, scratch) = inspect(&out[0]);
        assert_eq!((flags, win), (ACK | ECE, 1000));
        assert_eq!(stored, scratch, "incremental checksum equals the one computed from scratch");
        assert_ne!(stored, inspect(&held).2);
        assert_eq!(out[0].len(), held.len());
        assert_eq!((a.c.acks_held, a.c.released, a.c.ece_marked), (1, 1, 1));
        // An ACK that already has ECE is released as is.
        let mut b = abq("k=2p");
        let e = tcp(1, ACK | ECE, 9, 1000, &[], &[]);
        assert_eq!(b.arrive(e.clone(), &ctx(0, 3)), Arrival::Held);
        let mut out = Vec::new();
        b.wake(&ctx(1, 0), &mut out);
        assert_eq!((out, b.c.ece_marked), (vec![e], 0));
    }

    #[test]
    fn ece_mode_releases_fifo_and_keeps_every_ack() {
        let mut a = abq("k=2p");
        for (i, f) in [ack(1, 10), ack(2, 10), ack(1, 20)].into_iter().enumerate() {
            assert_eq!(a.arrive(f, &ctx(i as u64, 5)), Arrival::Held);
        }
        let mut out = Vec::new();
        a.wake(&ctx(9, 5), &mut out);
        assert!(out.is_empty());
        a.wake(&ctx(10, 2), &mut out);
        let acks: Vec<u32> = out.iter().map(|f| ack_no(f)).collect();
        assert_eq!(acks, [10, 10, 20]);
        assert!(out.iter().all(|f| inspect(f).2 == inspect(f).3));
    }

    fn synack(sport: u16, wscale: Option<u8>) -> Vec<u8> {
        match wscale {
            Some(s) => tcp(sport, SYN | ACK, 1, 65535, &[1, 3, 3, s], &[]),
            None => tcp(sport, SYN | ACK, 1, 65535, &[], &[]),
        }
    }

    #[test]
    fn window_mode_rewrites_in_scaled_units_keeps_newest_per_flow_and_is_lifo() {
        // K = 20 packets x MSS 1000 = 20000 bytes.
        let mut a = abq("k=20p/mode=window/mss=1000");
        assert_eq!(a.arrive(synack(1, Some(7)), &ctx(0, 0)), Arrival::Pass(synack(1, Some(7))));
        a.arrive(synack(2, None), &ctx(0, 0));
        // Flow 3's handshake was never seen.
        let flow2 = tcp(2, ACK, 10, 60000, &[], &[]);
        for (i, f) in [ack(1, 10), flow2, ack(1, 20), ack(3, 5)].into_iter().enumerate() {
            assert_eq!(a.arrive(f, &ctx(1 + i as u64, 21)), Arrival::Held);
        }
        assert_eq!((a.held().pkts, a.c.superseded), (3, 1));
        let mut out = Vec::new();
        a.wake(&ctx(10, 20), &mut out);
        // LIFO: flow 3, then flow 1's newest (20), then flow 2.
        let order: Vec<(u16, u32)> =
            out.iter().map(|f| (u16::from_be_bytes([f[36], f[37]]), ack_no(f))).collect();
        assert_eq!(order, [(3, 5), (1, 20), (2, 10)]);
        // n = 3: w = max(20000 / 3, 1000) = 6666 bytes.
        // Shift 7: ceil(6666 / 128) = 53 units; no scaling: 6666; unknown: untouched.
        let wins: Vec<u16> = out.iter().map(|f| inspect(f).1).collect();
        assert_eq!(wins, [1000, 53, 6666]);
        assert!(out.iter().all(|f| inspect(f).2 == inspect(f).3), "checksums");
        assert_eq!(inspect(&out[0]).0, ACK, "window mode sets no ECE");
        assert_eq!((a.c.rewritten, a.c.rewrite_unknown, a.c.released), (2, 1, 3));
        assert_eq!(a.c.acks_held, a.c.released + a.c.superseded);
        // Never raised: 1000 advertised unscaled stays 1000 when w = 6666.
        let mut f = ack(1, 1);
        assert!(!lower_window(&mut f, 34, 6666, 0));
        assert_eq!(f, ack(1, 1));
    }

    #[test]
    fn window_floor_is_one_mss_and_receiver_syn_with_scale_is_unknown() {
        let mut a = abq("k=4p/mode=window/mss=1000");
        a.arrive(synack(1, Some(0)), &ctx(0, 0));
        // Receiver-initiated with a scale option: the peer's answer is unseen.
        a.arrive(tcp(2, SYN, 0, 65535, &[3, 3, 2, 0], &[]), &ctx(0, 0));
        // Receiver-initiated without one: no scaling for certain.
        a.arrive(tcp(3, SYN, 0, 65535, &[], &[]), &ctx(0, 0));
        for p in 1..=3u16 {
            a.arrive(tcp(p, ACK, 9, 60000, &[], &[]), &ctx(1, 5));
        }
        let mut out = Vec::new();
        a.wake(&ctx(2, 4), &mut out);
        // n = 3: 4000 / 3 = 1333 bytes.
        let wins: Vec<u16> = out.iter().map(|f| inspect(f).1).collect();
        assert_eq!(wins, [1333, 60000, 1333]);
        // Eight flows: 4000 / 8 = 500 < MSS -> 1000.
        let mut b = abq("k=4p/mode=window/mss=1000");
        for p in 1..=8u16 {
            b.arrive(synack(p, None), &ctx(0, 0));
            b.arrive(tcp(p, ACK, 9, 60000, &[], &[]), &ctx(1, 5));
        }
        let mut out = Vec::new();
        b.wake(&ctx(2, 4), &mut out);
        assert!(out.iter().all(|f| inspect(f).1 == 1000 && inspect(f).2 == inspect(f).3));
        // FIN from the receiver forgets the flow; the table is bounded.
        b.arrive(tcp(1, ACK | FIN, 9, 60000, &[], &[]), &ctx(3, 0));
        assert_eq!(b.flows.len(), 7);
        let mut c = abq("mode=window/flows=2");
        for p in 1..=3u16 {
            c.arrive(synack(p, None), &ctx(p as u64, 0));
        }
        assert_eq!((c.flows.len(), c.c.flow_evictions), (2, 1));
        assert!(!c.flows.keys().any(|k| k.dport == 1), "the least recently seen flow went");
    }

    #[test]
    fn the_quick_look_agrees_with_the_full_parse() {
        let frames = [
            ack(1, 1),
            tcp(1, SYN | ACK, 1, 9, &[1, 3, 3, 7], &[]),
            tcp(1, ACK | FIN, 1, 9, &[], b"xy"),
            crate::packet::testpkt::ipv4_udp([1, 1, 1, 1], [2, 2, 2, 2], 1, 2, 0, b"x"),
        ];
        for f in &frames {
            match (quick(f), tcp_of(f)) {
                (Quick::Flags(fl), Some(t)) => assert_eq!(fl, t.flags),
                (Quick::NotTcp, None) => {}
                _ => panic!("quick and full parse disagree on {f:02x?}"),
            }
        }
        // A VLAN tag: left to the full parse.
        let mut tagged = ack(1, 1);
        tagged.splice(12..12, [0x81, 0x00, 0x00, 0x05]);
        assert!(matches!(quick(&tagged), Quick::Unknown));
        // Window mode still learns the scale of a SYN-ACK arriving while uncongested.
        let mut a = abq("mode=window");
        a.arrive(synack(1, Some(3)), &ctx(0, 0));
        assert_eq!(a.flows.values().next().unwrap().shift, Some(3));
    }

    #[test]
    fn cap_releases_the_oldest_at_once() {
        let mut a = abq("k=2p/cap=2");
        for i in 0..3u32 {
            assert_eq!(a.arrive(ack(1, i), &ctx(i as u64, 5)), Arrival::Held);
        }
        assert_eq!(a.held().pkts, 2);
        assert_eq!(a.next_deadline(), Some(0), "the forced-out ACK is due at once");
        let mut out = Vec::new();
        a.wake(&ctx(3, 5), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((ack_no(&out[0]), inspect(&out[0]).0), (0, ACK | ECE));
        assert_eq!((a.c.forced_cap, a.c.acks_held, a.c.held_peak), (1, 3, 2));
        assert_eq!(a.next_deadline(), Some(1 + 2_000_000));
    }

    #[test]
    fn hold_time_limit_releases_each_ack_when_due() {
        let mut a = abq("k=2p/hold=1ms");
        a.arrive(ack(1, 1), &ctx(0, 5));
        a.arrive(ack(2, 1), &ctx(400_000, 5));
        assert_eq!(a.next_deadline(), Some(1_000_000));
        let mut out = Vec::new();
        a.wake(&ctx(999_999, 5), &mut out);
        assert!(out.is_empty());
        a.wake(&ctx(1_000_000, 5), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(a.next_deadline(), Some(1_400_000));
        a.wake(&ctx(1_400_000, 5), &mut out);
        assert_eq!((out.len(), a.c.forced_timeout, a.held().pkts), (2, 2, 0));
        assert!(out.iter().all(|f| inspect(f).0 == ACK | ECE && inspect(f).2 == inspect(f).3));
        assert_eq!(a.next_deadline(), None);
        // Still congested: the state machine carries on.
        assert_eq!(a.state, State::Cs);
    }

    #[test]
    fn counters_add_up_on_a_random_trace() {
        let mut a = abq("k=5p/mode=window/cap=4/hold=50us");
        let mut rng = crate::group::Rng::new(7);
        let mut released = 0;
        for i in 0..5000u64 {
            let q = (rng.unit() * 12.0) as usize;
            let sport = 1 + (rng.unit() * 6.0) as u16;
            if rng.unit() < 0.5 {
                a.arrive(ack(sport, i as u32), &ctx(i * 1000, q));
            } else {
                let mut out = Vec::new();
                a.wake(&ctx(i * 1000, q), &mut out);
                released += out.len() as u64;
            }
        }
        let c = &a.c;
        assert!(c.acks_held > 100 && c.forced_cap + c.forced_timeout > 0 && c.superseded > 0);
        assert_eq!(
            c.acks_held,
            c.released + c.forced_cap + c.forced_timeout + c.superseded + a.held().pkts as u64
        );
        let pending = a.forced.len() as u64;
        assert_eq!(released + pending, c.released + c.forced_cap + c.forced_timeout);
    }

    #[test]
    fn control_reconfigures_and_switches_off() {
        let mut a = abq("k=2p");
        a.arrive(ack(1, 1), &ctx(0, 5));
        let mut out = Vec::new();
        // Invalid: refused whole, nothing changes.
        assert!(a.control(&opts("k=9p/mode=nope"), &ctx(1, 5), &mut out).is_err());
        assert_eq!((a.cfg.k, a.held().pkts, out.len()), (2, 1, 0));
        a.control(&opts("k=9p/mode=window"), &ctx(1, 5), &mut out).unwrap();
        assert_eq!((a.cfg.k, a.cfg.mode, a.state, a.held().pkts), (9, Mode::Window, State::Us, 0));
        assert_eq!(inspect(&out[0]).0, ACK | ECE, "released with the old mode's correction");
        // Q_out 5 is under the new K = 9: not congested.
        assert_eq!(a.arrive(ack(1, 2), &ctx(2, 5)), Arrival::Pass(ack(1, 2)));
        a.control(&opts("enable=0"), &ctx(3, 50), &mut out).unwrap();
        assert_eq!(a.arrive(ack(1, 3), &ctx(4, 50)), Arrival::Pass(ack(1, 3)));
        let mut out = Vec::new();
        a.wake(&ctx(5, 50), &mut out);
        assert_eq!((a.state, out.len()), (State::Us, 0));
    }
}
