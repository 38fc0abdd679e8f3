//! The sender: a connection-level send buffer, segments with DSNs, a scheduler, N kernel
//! TCP subflows.
//!
//! The application (here: the pattern of [`crate::pattern`]) writes into the send buffer,
//! which holds up to `2 * window` bytes beyond the data-acked point; at most `window`
//! bytes beyond it may be sent (the receiver's reassembly window).  Each round refreshes
//! every subflow's `TCP_INFO`, reinjects data that only dead subflows carried (on the
//! lowest-RTT subflow with room), then asks the scheduler until it answers `Wait`.  A
//! subflow takes a segment only while its kernel queue is shallow (`TCP_NOTSENT_LOWAT`),
//! so scheduling decisions are made when the path can send, as in MPTCP.  The sender
//! learns from DATA_ACKs what the receiver delivered and drops it; when everything is
//! acknowledged it records the flow completion time, sends FIN on every subflow and waits
//! for FIN_ACK (the receiver's verdict).

use crate::net::{self, TcpInfo};
use crate::pattern;
use crate::receiver::json_str;
use crate::sched::{self, ConnView, Decision, Scheduler, Seg, SubflowView};
use crate::wire::{self, Decoder, FinAck, Frame, Hello};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct SendConfig {
    /// One subflow per entry: (source address to bind, destination).
    pub paths: Vec<(Option<SocketAddr>, SocketAddr)>,
    pub size: u64,
    pub scheduler: String,
    /// Largest segment, bytes.
    pub max_segment: u32,
    /// Connection-level send window = the receiver's reassembly window, bytes.
    pub window: u64,
    /// `TCP_NOTSENT_LOWAT` per subflow, bytes.
    pub lowat: u32,
    pub seed: u64,
    pub timeout: Duration,
    /// Test hook: abort subflow `.0` (RST) once `.1` bytes are data-acked.
    pub kill: Option<(usize, u64)>,
    /// A subflow whose retransmission timer fired this many times in a row
    /// (`tcpi_retransmits`) counts as a failed path: it is closed and its data sent again
    /// on the others.
    pub max_rtos: u8,
    /// Connect every subflow (handshake done, HELLO sent) before the flow starts, and
    /// count the FCT from then: a connection kept open between transfers, as a browser's
    /// connection reuse gives, where the scheduler has every path from the first byte.
    pub warm: bool,
}

impl SendConfig {
    pub fn new(paths: Vec<(Option<SocketAddr>, SocketAddr)>, size: u64, scheduler: &str) -> Self {
        SendConfig {
            paths,
            size,
            scheduler: scheduler.to_string(),
            max_segment: 64 * 1024,
            window: 32 << 20,
            lowat: 32 * 1024,
            seed: 1,
            timeout: Duration::from_secs(120),
            kill: None,
            max_rtos: 2,
            warm: false,
        }
    }
}

#[derive(Debug, Default, Clone)]
pub struct SubflowReport {
    pub src: String,
    pub dst: String,
    /// DATA payload bytes written (duplicates included).
    pub bytes: u64,
    /// Of which sent again (CFS tail, redundant copies, reinjection).
    pub dup_bytes: u64,
    pub alive: bool,
    pub srtt_us: u32,
    pub total_retrans: u32,
    pub error: Option<String>,
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    pub scheduler: String,
    pub size: u64,
    pub fct: Duration,
    pub fin: FinAck,
    pub dup_bytes: u64,
    pub reinjected_bytes: u64,
    pub subflows: Vec<SubflowReport>,
    pub cpu_s: f64,
    /// Bytes duplicated before the last new byte was assigned (0 for CFS: only the tail).
    pub dup_before_tail: u64,
    /// With `warm`: how long connecting every subflow took (not part of the FCT).
    pub connect: Option<Duration>,
}

impl Report {
    pub fn intact(&self) -> bool {
        self.fin.intact && self.fin.delivered == self.size
    }

    pub fn json(&self) -> String {
        let subs: Vec<String> = self
            .subflows
            .iter()
            .map(|s| {
                let mut o = format!(
                    "{{\"src\":{},\"dst\":{},\"bytes\":{},\"dup_bytes\":{},\"alive\":{},\"srtt_ms\":{:.3},\"retrans\":{}",
                    json_str(&s.src),
                    json_str(&s.dst),
                    s.bytes,
                    s.dup_bytes,
                    s.alive,
                    s.srtt_us as f64 / 1e3,
                    s.total_retrans
                );
                if let Some(e) = &s.error {
                    o.push_str(&format!(",\"error\":{}", json_str(e)));
                }
                o.push('}');
                o
            })
            .collect();
        let secs = self.fct.as_secs_f64();
        let connect = self
            .connect
            .map(|d| format!(",\"warm\":true,\"connect_ms\":{:.3}", d.as_secs_f64() * 1e3))
            .unwrap_or_default();
        format!(
            "{{\"role\":\"sender\",\"scheduler\":{},\"size\":{},\"fct_ms\":{:.3},\"goodput_mbps\":{:.3},\"intact\":{},\"delivered\":{},\"dup_bytes\":{},\"dup_before_tail\":{},\"reinjected_bytes\":{},\"rx_dup_bytes\":{},\"peak_reorder_bytes\":{},\"cpu_s\":{:.4}{},\"subflows\":[{}]}}",
            json_str(&self.scheduler),
            self.size,
            secs * 1e3,
            if secs > 0.0 { self.size as f64 * 8.0 / secs / 1e6 } else { 0.0 },
            self.intact(),
            self.fin.delivered,
            self.dup_bytes,
            self.dup_before_tail,
            self.reinjected_bytes,
            self.fin.dup_bytes,
            self.fin.peak_held,
            self.cpu_s,
            connect,
            subs.join(",")
        )
    }
}

struct Subflow {
    fd: RawFd,
    src: String,
    dst: SocketAddr,
    connected: bool,
    alive: bool,
    out: Vec<u8>,
    dec: Decoder,
    info: TcpInfo,
    bytes: u64,
    dup_bytes: u64,
    error: Option<String>,
    /// closed by the receiver at the end of a complete transfer (not a failure)
    ended: bool,
}

impl Subflow {
    /// Sends a DATA frame: straight from the send buffer when nothing is queued, the
    /// unsent rest is copied to `out`.
    fn send_data(&mut self, dsn: u64, payload: &[u8]) -> std::io::Result<()> {
        let hdr = wire::data_header(dsn, payload.len() as u32);
        let n = if self.out.is_empty() {
            net::write2(self.fd, &hdr, payload)?
        } else {
            0
        };
        if n < hdr.len() {
            self.out.extend_from_slice(&hdr[n..]);
            self.out.extend_from_slice(payload);
        } else {
            self.out.extend_from_slice(&payload[n - hdr.len()..]);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.out.is_empty() {
            let n = net::write(self.fd, &self.out)?;
            self.out.drain(..n);
        }
        Ok(())
    }

    fn refresh(&mut self) {
        if let Ok(i) = net::tcp_info(self.fd) {
            self.info = i;
        }
    }

    fn view(&self, id: usize, lowat: u32) -> SubflowView {
        SubflowView {
            id,
            alive: self.alive && self.connected,
            srtt_us: self.info.rtt.max(1),
            rttvar_us: self.info.rttvar,
            cwnd: self.info.snd_cwnd,
            ssthresh: self.info.snd_ssthresh,
            unacked: self.info.unacked,
            mss: self.info.snd_mss.max(536),
            notsent: self.info.notsent_bytes,
            pacing_rate: self.info.pacing_rate,
            in_recovery: net::in_recovery(self.info.ca_state),
            writable: self.out.is_empty() && (lowat == 0 || self.info.notsent_bytes < lowat),
        }
    }
}

/// The connection-level send state, without sockets.
pub struct SendState {
    /// Bytes from `base` on (base <= acked).
    buf: Vec<u8>,
    base: u64,
    pub acked: u64,
    pub next_new: u64,
    pub written: u64,
    pub size: u64,
    pub window: u64,
    pub segs: VecDeque<Seg>,
    seed: u64,
}

impl SendState {
    pub fn new(size: u64, window: u64, seed: u64) -> Self {
        SendState {
            buf: Vec::new(),
            base: 0,
            acked: 0,
            next_new: 0,
            written: 0,
            size,
            window,
            segs: VecDeque::new(),
            seed,
        }
    }

    /// The application writes while the send buffer (2 x window) has room.
    pub fn refill(&mut self) {
        let cap = self.acked + 2 * self.window;
        let upto = self.size.min(cap);
        if upto > self.written {
            if self.acked - self.base > self.window {
                let drop = (self.acked - self.base) as usize;
                self.buf.drain(..drop);
                self.base = self.acked;
            }
            let old = self.buf.len();
            let n = (upto - self.written) as usize;
            self.buf.resize(old + n, 0);
            pattern::fill(self.seed, self.written, &mut self.buf[old..]);
            self.written = upto;
        }
    }

    pub fn unassigned(&self) -> u64 {
        self.written - self.next_new
    }

    /// Bytes the window admits beyond what was sent.
    pub fn window_room(&self) -> u64 {
        (self.acked + self.window).saturating_sub(self.next_new)
    }

    pub fn bytes(&self, dsn: u64, len: u64) -> &[u8] {
        let a = (dsn - self.base) as usize;
        &self.buf[a..a + len as usize]
    }

    /// A new segment of `len` bytes assigned to subflow `sf`.
    pub fn assign(&mut self, sf: usize, len: u64) -> Seg {
        let seg = Seg {
            dsn: self.next_new,
            len,
            carriers: 1 << sf,
        };
        self.next_new += len;
        self.segs.push_back(seg);
        seg
    }

    /// The receiver delivered everything below `ack`; an error if it claims more than
    /// was sent.
    pub fn on_ack(&mut self, ack: u64) -> Result<(), String> {
        if ack > self.next_new {
            return Err(format!(
                "DATA_ACK {ack} beyond the {} bytes sent",
                self.next_new
            ));
        }
        if ack > self.acked {
            self.acked = ack;
            while let Some(s) = self.segs.front() {
                if s.dsn + s.len <= ack {
                    self.segs.pop_front();
                } else {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The oldest segment only dead subflows carried (it must be sent again).
    pub fn orphan(&self, alive_mask: u64) -> Option<usize> {
        self.segs.iter().position(|s| s.carriers & alive_mask == 0)
    }
}

fn now_us(start: Instant) -> u64 {
    start.elapsed().as_micros() as u64
}

/// Runs one transfer; the error says why it failed.
pub fn send(cfg: &SendConfig) -> Result<Report, String> {
    let mut sched: Box<dyn Scheduler> = sched::by_name(&cfg.scheduler)?;
    if cfg.paths.is_empty() || cfg.paths.len() > 64 {
        return Err("1..=64 subflows (paths) are needed".into());
    }
    if cfg.window == 0 || cfg.window > crate::receiver::MAX_WINDOW {
        return Err(format!(
            "window must be 1..={} bytes",
            crate::receiver::MAX_WINDOW
        ));
    }
    let cpu0 = net::cpu_seconds();
    let conn_id = {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        t ^ ((std::process::id() as u64) << 32)
    };
    let mut start = Instant::now();
    let mut subs: Vec<Subflow> = Vec::new();
    for (i, (src, dst)) in cfg.paths.iter().enumerate() {
        let fd = match net::connect_from(*src, *dst, cfg.lowat) {
            Ok(fd) => fd,
            Err(e) => {
                for s in &subs {
                    net::close(s.fd);
                }
                return Err(format!("subflow {i}: {e}"));
            }
        };
        let mut out = Vec::new();
        wire::encode_hello(
            &Hello {
                conn_id,
                subflow: i as u8,
                seed: cfg.seed,
                total: cfg.size,
                window: cfg.window,
            },
            &mut out,
        );
        subs.push(Subflow {
            fd,
            src: src.map(|s| s.ip().to_string()).unwrap_or_default(),
            dst: *dst,
            connected: false,
            alive: true,
            out,
            dec: Decoder::new(),
            info: TcpInfo::default(),
            bytes: 0,
            dup_bytes: 0,
            error: None,
            ended: false,
        });
    }
    let mut connect = None;
    let result = if cfg.warm {
        warm_up(&mut subs, start + cfg.timeout).and_then(|took| {
            connect = Some(took);
            start = Instant::now();
            run(cfg, &mut *sched, &mut subs, start)
        })
    } else {
        run(cfg, &mut *sched, &mut subs, start)
    };
    for s in &subs {
        if s.alive {
            net::close(s.fd);
        }
    }
    let mut rep = result?;
    rep.connect = connect;
    rep.cpu_s = net::cpu_seconds() - cpu0;
    rep.subflows = subs
        .iter()
        .map(|s| SubflowReport {
            src: s.src.clone(),
            dst: s.dst.to_string(),
            bytes: s.bytes,
            dup_bytes: s.dup_bytes,
            alive: s.alive || s.ended,
            srtt_us: s.info.rtt,
            total_retrans: s.info.total_retrans,
            error: s.error.clone(),
        })
        .collect();
    Ok(rep)
}

/// `warm`: waits until every subflow's handshake completed or failed, sending each one's
/// HELLO as it connects; the subflows that failed are closed with their error, as in a
/// transfer.  Returns how long it took; an error when none connected.
fn warm_up(subs: &mut [Subflow], deadline: Instant) -> Result<Duration, String> {
    let began = Instant::now();
    let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(subs.len());
    while subs.iter().any(|s| s.alive && !s.connected) {
        if Instant::now() > deadline {
            return Err("timed out connecting the subflows (--warm)".into());
        }
        pfds.clear();
        pfds.extend(subs.iter().map(|s| libc::pollfd {
            fd: if s.alive && !s.connected { s.fd } else { -1 },
            events: libc::POLLOUT,
            revents: 0,
        }));
        net::poll_us(&mut pfds, 20_000).map_err(|e| format!("poll: {e}"))?;
        for (s, p) in subs.iter_mut().zip(&pfds) {
            if p.revents & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) == 0 {
                continue;
            }
            match net::so_error(s.fd) {
                Ok(()) => {
                    s.connected = true;
                    s.refresh(); // the handshake's RTT: the scheduler's first estimate
                    if let Err(e) = s.flush() {
                        kill(s, format!("write: {e}"));
                    }
                }
                Err(e) => kill(s, format!("connect {}: {e}", s.dst)),
            }
        }
    }
    if subs.iter().all(|s| !s.alive) {
        let why: Vec<String> = subs.iter().filter_map(|s| s.error.clone()).collect();
        return Err(format!(
            "every subflow failed to connect: {}",
            why.join("; ")
        ));
    }
    Ok(began.elapsed())
}

/// A subflow the receiver closed after the whole transfer was acknowledged.
fn end(s: &mut Subflow) {
    if s.alive {
        s.alive = false;
        s.ended = true;
        net::close(s.fd);
    }
}

fn kill(s: &mut Subflow, why: String) {
    if s.alive {
        s.alive = false;
        s.error = Some(why);
        net::abort(s.fd);
    }
}

fn run(
    cfg: &SendConfig,
    sched: &mut dyn Scheduler,
    subs: &mut [Subflow],
    start: Instant,
) -> Result<Report, String> {
    let mut st = SendState::new(cfg.size, cfg.window, cfg.seed);
    let mut rep = Report {
        scheduler: sched.name().to_string(),
        size: cfg.size,
        ..Report::default()
    };
    let mut fct: Option<Duration> = None;
    let mut fin: Option<FinAck> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut pfds: Vec<libc::pollfd> = Vec::with_capacity(subs.len());
    let mut views: Vec<SubflowView> = Vec::with_capacity(subs.len());
    let mut killed = false;
    let deadline = start + cfg.timeout;
    let fin_deadline_after = Duration::from_secs(10);
    let mut fin_sent_at: Option<Instant> = None;
    while fin.is_none() {
        let now = Instant::now();
        if now > deadline {
            return Err(format!(
                "timed out after {:?}: {} of {} bytes data-acked",
                cfg.timeout, st.acked, cfg.size
            ));
        }
        if let Some(t) = fin_sent_at {
            if now.duration_since(t) > fin_deadline_after {
                return Err("no FIN_ACK from the receiver".into());
            }
        }
        if subs.iter().all(|s| !s.alive) {
            let why: Vec<String> = subs
                .iter()
                .filter_map(|s| {
                    s.error.clone().or_else(|| {
                        s.ended
                            .then(|| "closed by the receiver after FIN, no FIN_ACK".to_string())
                    })
                })
                .collect();
            return Err(format!(
                "every subflow failed ({} of {} bytes data-acked): {}",
                st.acked,
                cfg.size,
                why.join("; ")
            ));
        }
        // -- schedule
        st.refill();
        let mut cwnd_wait_us: Option<u64> = None;
        if fct.is_none() {
            for s in subs.iter_mut().filter(|s| s.alive && s.connected) {
                s.refresh();
                if cfg.max_rtos > 0 && s.info.retransmits >= cfg.max_rtos {
                    let why = format!(
                        "path failed: {} retransmission timeouts in a row",
                        s.info.retransmits
                    );
                    kill(s, why);
                }
            }
            for _ in 0..1024 {
                views.clear();
                views.extend(subs.iter().enumerate().map(|(i, s)| s.view(i, cfg.lowat)));
                let alive_mask: u64 = views
                    .iter()
                    .filter(|v| v.alive)
                    .fold(0, |m, v| m | (1 << v.id));
                // reinjection first: data only dead subflows carried
                let decision = if let Some(i) = st.orphan(alive_mask) {
                    let pick = views
                        .iter()
                        .filter(|v| v.has_room())
                        .min_by_key(|v| (v.srtt_us, v.id));
                    match pick {
                        Some(v) => {
                            let d = Decision::Dup { on: v.id, seg: i };
                            rep.reinjected_bytes += st.segs[i].len;
                            d
                        }
                        None => Decision::Wait,
                    }
                } else {
                    let room = st.window_room();
                    let any_room = views.iter().any(|v| v.has_room());
                    let view = ConnView {
                        subflows: &views,
                        unassigned: st.unassigned(),
                        segment: st.unassigned().min(cfg.max_segment as u64).min(room),
                        segs: &st.segs,
                        window: cfg.window,
                        acked: st.acked,
                        now_us: now_us(start),
                        window_blocked: room == 0 && any_room && st.unassigned() > 0,
                    };
                    sched.pick(&view)
                };
                match decision {
                    Decision::Wait => break,
                    Decision::New(i) => {
                        let v = &views[i];
                        let room = st.window_room();
                        let len = st
                            .unassigned()
                            .min(cfg.max_segment as u64)
                            .min(room)
                            .min(v.room_bytes());
                        if len == 0 || !v.has_room() {
                            break;
                        }
                        let seg = st.assign(i, len);
                        let s = &mut subs[i];
                        s.bytes += len;
                        if let Err(e) = s.send_data(seg.dsn, st.bytes(seg.dsn, len)) {
                            kill(s, format!("write: {e}"));
                        }
                        s.refresh();
                    }
                    Decision::Dup { on, seg } => {
                        if !views[on].has_room() || seg >= st.segs.len() {
                            break;
                        }
                        let g = st.segs[seg];
                        if g.carried_by(on) {
                            break; // a scheduler bug must not loop forever
                        }
                        st.segs[seg].carriers |= 1 << on;
                        // only the part not yet data-acked
                        let from = g.dsn.max(st.acked);
                        let len = g.dsn + g.len - from;
                        if st.next_new < st.written {
                            rep.dup_before_tail += len;
                        }
                        rep.dup_bytes += len;
                        let s = &mut subs[on];
                        s.bytes += len;
                        s.dup_bytes += len;
                        if let Err(e) = s.send_data(from, st.bytes(from, len)) {
                            kill(s, format!("write: {e}"));
                        }
                        s.refresh();
                    }
                }
            }
            // cwnd room opens on TCP ACKs, which poll cannot wait for: look again after
            // an eighth of the smallest srtt among the subflows waiting only for it
            cwnd_wait_us = subs
                .iter()
                .enumerate()
                .filter(|(i, s)| {
                    let v = s.view(*i, cfg.lowat);
                    v.alive && v.writable && !v.has_room()
                })
                .map(|(_, s)| (s.info.rtt as u64 / 8).clamp(20, 1000))
                .min();
        }
        // -- wait for acks, writability, cwnd room
        pfds.clear();
        for s in subs.iter() {
            let mut ev = libc::POLLIN;
            if s.alive && (!s.connected || !s.out.is_empty() || s.info.notsent_bytes >= cfg.lowat) {
                ev |= libc::POLLOUT;
            }
            pfds.push(libc::pollfd {
                fd: if s.alive { s.fd } else { -1 },
                events: ev,
                revents: 0,
            });
        }
        let timeout_us = cwnd_wait_us.unwrap_or(20_000);
        net::poll_us(&mut pfds, timeout_us).map_err(|e| format!("poll: {e}"))?;
        for (i, s) in subs.iter_mut().enumerate() {
            let rev = pfds[i].revents;
            if rev == 0 || !s.alive {
                continue;
            }
            if !s.connected {
                if rev & (libc::POLLOUT | libc::POLLERR | libc::POLLHUP) != 0 {
                    match net::so_error(s.fd) {
                        Ok(()) => {
                            s.connected = true;
                            s.refresh();
                        }
                        Err(e) => {
                            kill(s, format!("connect {}: {e}", s.dst));
                            continue;
                        }
                    }
                } else {
                    continue;
                }
            }
            if rev & libc::POLLOUT != 0 {
                if let Err(e) = s.flush() {
                    kill(s, format!("write: {e}"));
                    continue;
                }
            }
            if rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                let mut eof = None;
                loop {
                    match net::read(s.fd, &mut buf) {
                        Ok(Some(0)) => {
                            eof = Some("closed by the receiver".to_string());
                            break;
                        }
                        Ok(Some(n)) => s.dec.push(&buf[..n]),
                        Ok(None) => break,
                        Err(e) => {
                            eof = Some(format!("read: {e}"));
                            break;
                        }
                    }
                }
                loop {
                    match s.dec.next_frame() {
                        Ok(Some(Frame::DataAck(a))) => {
                            st.on_ack(a)?;
                        }
                        Ok(Some(Frame::FinAck(a))) => {
                            fin = Some(a);
                            break;
                        }
                        Ok(Some(other)) => {
                            return Err(format!(
                                "unexpected frame from the receiver on subflow {i}: {other:?}"
                            ))
                        }
                        Ok(None) => break,
                        Err(e) => return Err(format!("subflow {i}: {e}")),
                    }
                }
                if let Some(why) = eof {
                    if fin.is_none() && fin_sent_at.is_some() && why.starts_with("closed") {
                        // everything was data-acked and FIN sent: the receiver closes
                        // every subflow once it answered on one of them (the FIN_ACK may
                        // be on its way on another): the normal end, not a failure
                        end(s);
                    } else if fin.is_none() {
                        kill(s, why);
                    }
                }
            }
        }
        if let Some((k, at)) = cfg.kill {
            if !killed && st.acked >= at && k < subs.len() {
                killed = true;
                kill(&mut subs[k], "killed by --kill".into());
            }
        }
        if fct.is_none() && st.acked == cfg.size {
            fct = Some(start.elapsed());
            for s in subs.iter_mut().filter(|s| s.alive) {
                wire::encode_u64(b'F', cfg.size, &mut s.out);
                if let Err(e) = s.flush() {
                    kill(s, format!("write: {e}"));
                }
            }
            fin_sent_at = Some(Instant::now());
        }
    }
    for s in subs.iter_mut().filter(|s| s.alive) {
        s.refresh();
        net::shutdown_write(s.fd);
    }
    rep.fct = fct.unwrap_or_default();
    rep.fin = fin.unwrap_or_default();
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acks_free_the_buffer_and_orphans_are_found() {
        let mut st = SendState::new(10_000, 4000, 7);
        st.refill();
        assert_eq!(st.written, 8000);
        st.assign(0, 1000);
        st.assign(1, 1000);
        st.assign(0, 1000);
        assert_eq!(st.window_room(), 1000);
        assert_eq!(st.orphan(0b11), None);
        assert_eq!(st.orphan(0b01), Some(1)); // subflow 1 died: its segment is orphaned
        st.segs[1].carriers |= 0b01;
        assert_eq!(st.orphan(0b01), None);
        st.on_ack(1500).unwrap();
        assert_eq!(st.segs.len(), 2);
        let mut expect = vec![0u8; 500];
        pattern::fill(7, 1500, &mut expect);
        assert_eq!(st.bytes(1500, 500), &expect[..]);
        assert!(st.on_ack(3001).unwrap_err().contains("beyond"));
        st.on_ack(3000).unwrap();
        st.refill();
        assert_eq!(st.written, 10_000);
        assert!(st.segs.is_empty());
    }
}
