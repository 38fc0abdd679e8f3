//! The agent's steady state, as `agent.py` runs it: serve controllers, report the
//! cgroup's flows every interval, apply alloc/clear/keepalive to the clamps map with
//! leases, fail open after the controller's silence, write the state file at most once a
//! second.  One thread, one epoll set (listener, connections, a signalfd), nonblocking
//! sockets; it sleeps until the next report, an auth deadline or a socket event.

use crate::bpf::{self, Entries, FlowSample, Map as BpfMap, Scratch, FLOW_VALUE_LEN, KEY_LEN};
use crate::proto::{self, ControllerMessage, FrameReader, Keys, Kind, SeqCheck, Tuple4};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;

pub const READ_CHUNK: usize = 65536;
/// At most this much unsent output per connection (a controller that stops reading);
/// past it the connection is closed (asyncio's would buffer without a bound).
pub const MAX_OUTPUT: usize = 64 << 20;
/// The state file is rewritten at most this often, when it changed (and at start and stop).
pub const STATE_PERIOD_S: f64 = 1.0;

const TOKEN_LISTENER: u64 = 0;
const TOKEN_SIGNAL: u64 = 1;

// ---------------------------------------------------------------------------
// Logging: the format of agent.py's logging.basicConfig, logger "dcnlab.agent"

pub fn log(level: &str, msg: &str) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointers.
    let tm = unsafe {
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts);
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&ts.tv_sec, &mut tm);
        tm
    };
    eprintln!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02},{:03} dcnlab.agent {level} {msg}",
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        ts.tv_nsec / 1_000_000
    );
}

/// `os.strerror(code) (errno code)`, as bpf.py words a failed map operation.
fn errno_text(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(code) => {
            // SAFETY: strerror returns a valid C string for any code.
            let text = unsafe { std::ffi::CStr::from_ptr(libc::strerror(code)) };
            format!("{} (errno {code})", text.to_string_lossy())
        }
        None => e.to_string(),
    }
}

/// time.monotonic(), in seconds.
fn monotonic() -> f64 {
    bpf::monotonic_ns() as f64 / 1e9
}

// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
pub struct Config {
    pub secret: Vec<u8>,
    pub listen: String,
    pub port: u16,
    pub interval_s: f64,
    pub timeout_s: f64,
    pub auth_timeout_s: f64,
    pub max_connections: usize,
    pub name: String,
    pub cgroup: String,
    pub pins: Option<String>,
    pub state_file: Option<PathBuf>,
}

pub struct Maps {
    pub clamps: BpfMap,
    pub flows: BpfMap,
    pub stats: BpfMap,
}

/// Throughput of each flow between two samples (flows.py's FlowSampler).
#[derive(Default)]
pub struct FlowSampler {
    last: HashMap<Tuple4, (u64, f64)>,
    seen: HashMap<Tuple4, (u64, f64)>,
}

impl FlowSampler {
    /// The report's `flows` as JSON text: one object per sample, as FlowStats.to_dict
    /// with sorted keys (written by hand: a report is the loop's most frequent work).
    pub fn sample(&mut self, flows: &[FlowSample], clamps: &Clamps, now: f64) -> String {
        self.seen.clear();
        let mut out = String::with_capacity(64 + 256 * flows.len());
        out.push('[');
        for (i, f) in flows.iter().enumerate() {
            let mut tput = 0.0;
            if let Some(&(acked, at)) = self.last.get(&f.flow) {
                if now > at && f.bytes_acked >= acked {
                    tput = (f.bytes_acked - acked) as f64 * 8.0 / (now - at);
                }
            }
            self.seen.insert(f.flow, (f.bytes_acked, now));
            if i > 0 {
                out.push(',');
            }
            let _ = write!(
                out,
                "{{\"bytes_acked\":{},\"clamp\":{},\"cwnd\":{},\"delivery_bps\":",
                f.bytes_acked,
                clamps.get(&f.flow).unwrap_or(0),
                f.cwnd
            );
            proto::write_float(&mut out, f.delivery_bps);
            let _ = write!(
                out,
                ",\"flow\":{{\"local\":\"{}\",\"lport\":{},\"remote\":\"{}\",\"rport\":{}}},\
                 \"mss\":{},\"rtt_us\":",
                proto::py_ip(&f.flow.local),
                f.flow.lport,
                proto::py_ip(&f.flow.remote),
                f.flow.rport,
                f.mss.max(1)
            );
            proto::write_float(&mut out, f.rtt_us);
            out.push_str(",\"throughput_bps\":");
            proto::write_float(&mut out, tput);
            out.push('}');
        }
        out.push(']');
        std::mem::swap(&mut self.last, &mut self.seen);
        out
    }
}

/// The windows the controller asked for, in insertion order (a Python dict).
#[derive(Default, Debug, Clone, PartialEq)]
pub struct Clamps {
    order: Vec<(Tuple4, u32)>,
    index: HashMap<Tuple4, usize>,
}

impl Clamps {
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    pub fn get(&self, flow: &Tuple4) -> Option<u32> {
        self.index.get(flow).map(|&i| self.order[i].1)
    }

    pub fn iter(&self) -> impl Iterator<Item = &(Tuple4, u32)> {
        self.order.iter()
    }

    /// `d[flow] = window`: an existing flow keeps its place.
    pub fn set(&mut self, flow: Tuple4, window: u32) {
        match self.index.get(&flow) {
            Some(&i) => self.order[i].1 = window,
            None => {
                self.index.insert(flow, self.order.len());
                self.order.push((flow, window));
            }
        }
    }

    pub fn remove(&mut self, flow: &Tuple4) {
        if self.index.remove(flow).is_some() {
            self.order.retain(|(f, _)| f != flow);
            for (i, (f, _)) in self.order.iter().enumerate() {
                self.index.insert(*f, i);
            }
        }
    }

    pub fn clear(&mut self) {
        self.order.clear();
        self.index.clear();
    }
}

struct Conn {
    stream: TcpStream,
    sign: proto::HmacKey, // keys.a2c, prepared
    reader: FrameReader,
    context: Vec<u8>, // bound into the MACs we send: nonce_c, then the session
    seq_in: SeqCheck,
    seq_out: u64,
    authenticated: bool,
    peer: String,
    deadline: f64, // monotonic: hello by then (unauthenticated), or flushed by then (closing)
    out: Vec<u8>,
    sent: usize, // of out
    closing: bool,
    events: u32, // registered with epoll
}

/// Python's str() of a peername tuple.
fn peer_text(addr: &SocketAddr) -> String {
    match addr {
        SocketAddr::V4(a) => format!("('{}', {})", a.ip(), a.port()),
        SocketAddr::V6(a) => format!(
            "('{}', {}, {}, {})",
            proto::py_ip(&(*a.ip()).into()),
            a.port(),
            a.flowinfo(),
            a.scope_id()
        ),
    }
}

pub struct Agent {
    cfg: Config,
    maps: Maps,
    pub clamps: Clamps,
    last_controller: f64,
    pub rejected: u64,
    pub refused: u64,
    pub over_cap: u64,
    conns: HashMap<u64, Conn>,
    next_token: u64,
    sampler: FlowSampler,
    scratch: Scratch<KEY_LEN, FLOW_VALUE_LEN>,
    entries: Entries<KEY_LEN, FLOW_VALUE_LEN>,
    state_written: f64,
    state_text: String, // as last written
    read_buf: Vec<u8>,
    epoll: OwnedFd,
    listener: TcpListener,
    signals: OwnedFd,
}

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn epoll_ctl(epoll: RawFd, op: libc::c_int, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: token };
    // SAFETY: valid epoll and fd; ev lives across the call.
    cvt(unsafe { libc::epoll_ctl(epoll, op, fd, &mut ev) }).map(|_| ())
}

/// SIGTERM and SIGINT as readable events (blocked for normal delivery).
fn signal_fd() -> io::Result<OwnedFd> {
    // SAFETY: plain sigset manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        cvt(libc::pthread_sigmask(
            libc::SIG_BLOCK,
            &set,
            std::ptr::null_mut(),
        ))?;
        let fd = cvt(libc::signalfd(
            -1,
            &set,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC,
        ))?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

impl Agent {
    pub fn new(cfg: Config, maps: Maps) -> io::Result<Agent> {
        proto::check_secret(&cfg.secret)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.msg))?;
        let signals = signal_fd()?;
        let listener = TcpListener::bind((cfg.listen.as_str(), cfg.port)).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("listening on {}:{}: {e}", cfg.listen, cfg.port),
            )
        })?;
        listener.set_nonblocking(true)?;
        // SAFETY: creates a new fd.
        let epoll = unsafe { OwnedFd::from_raw_fd(cvt(libc::epoll_create1(libc::EPOLL_CLOEXEC))?) };
        epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            listener.as_raw_fd(),
            libc::EPOLLIN as u32,
            TOKEN_LISTENER,
        )?;
        epoll_ctl(
            epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            signals.as_raw_fd(),
            libc::EPOLLIN as u32,
            TOKEN_SIGNAL,
        )?;
        Ok(Agent {
            cfg,
            maps,
            clamps: Clamps::default(),
            last_controller: 0.0,
            rejected: 0,
            refused: 0,
            over_cap: 0,
            conns: HashMap::new(),
            next_token: 2,
            sampler: FlowSampler::default(),
            scratch: Scratch::default(),
            entries: Vec::new(),
            state_written: f64::NEG_INFINITY,
            state_text: String::new(),
            read_buf: vec![0; READ_CHUNK],
            epoll,
            listener,
            signals,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serve until SIGTERM or SIGINT.  The set-up and tear-down (program, cgroup, pins,
    /// lifting the clamps) are the Python side's.
    pub fn run(&mut self) -> io::Result<()> {
        log(
            "INFO",
            &format!(
                "agent {} listening on {}:{}, cgroup {} (native engine)",
                self.cfg.name, self.cfg.listen, self.cfg.port, self.cfg.cgroup
            ),
        );
        self.write_state();
        let mut next_tick = monotonic();
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            let now = monotonic();
            if now >= next_tick {
                self.tick();
                next_tick += self.cfg.interval_s;
                if next_tick <= now {
                    next_tick = now + self.cfg.interval_s; // fell behind: no burst of ticks
                }
            }
            let wake = self
                .conns
                .values()
                .filter(|c| !c.authenticated || c.closing)
                .map(|c| c.deadline)
                .fold(next_tick, f64::min);
            let wait_ms = ((wake - monotonic()) * 1000.0).ceil().clamp(0.0, 60_000.0) as i32;
            // SAFETY: events has room for its length.
            let n = unsafe {
                libc::epoll_wait(
                    self.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    wait_ms,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let mut stop = false;
            for ev in &events[..n as usize] {
                let (token, flags) = (ev.u64, ev.events);
                match token {
                    TOKEN_LISTENER => self.accept_all(),
                    TOKEN_SIGNAL => stop = true,
                    _ => self.conn_event(token, flags),
                }
            }
            self.expire(monotonic());
            if stop {
                break;
            }
        }
        let mut info = [0u8; 128]; // drain the signal (signalfd_siginfo)
                                   // SAFETY: reads at most info.len() bytes into info.
        let got = unsafe {
            libc::read(
                self.signals.as_raw_fd(),
                info.as_mut_ptr().cast(),
                info.len(),
            )
        };
        let signo = if got >= 4 {
            u32::from_ne_bytes(info[..4].try_into().unwrap())
        } else {
            0
        };
        log("INFO", &format!("stopping on signal {signo}"));
        for (_, conn) in self.conns.drain() {
            let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        }
        self.write_state();
        Ok(())
    }

    // -- ticks ---------------------------------------------------------------

    pub fn tick(&mut self) {
        let now = monotonic();
        if !self.clamps.is_empty() && now - self.last_controller > self.cfg.timeout_s {
            log(
                "WARNING",
                &format!(
                    "controller silent for {:.1} s: removing {} clamp(s) (fail open)",
                    now - self.last_controller,
                    self.clamps.len()
                ),
            );
            self.clear();
        }
        // The program keeps every flow of our cgroup in a map (and only those).
        let flows: Vec<FlowSample> = self
            .flow_samples()
            .into_iter()
            .filter(|f| f.flow.lport != self.cfg.port)
            .collect();
        let stats = self.sampler.sample(&flows, &self.clamps, now);
        let tokens: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.authenticated && !c.closing)
            .map(|(t, _)| *t)
            .collect();
        if !tokens.is_empty() {
            let head = format!("{{\"flows\":{stats},\"seq\":");
            for token in tokens {
                self.send_text(token, &head, ",\"type\":\"report\"}");
            }
        }
        if now - self.state_written >= STATE_PERIOD_S {
            self.write_state();
        }
    }

    /// Every established flow of the cgroup, as the program last saw it: one batched
    /// read of the flows map (or a walk, two syscalls per flow, where batching is not
    /// supported).
    pub fn flow_samples(&mut self) -> Vec<FlowSample> {
        let mut entries = std::mem::take(&mut self.entries);
        let read = self
            .maps
            .flows
            .entries(bpf::FLOWS_MAX, &mut self.scratch, &mut entries);
        match read {
            Ok(true) => {}
            Ok(false) => entries = self.walk_flows(),
            Err(e) => {
                log("WARNING", &format!("reading the flows map: {e}"));
                entries.clear();
            }
        }
        let out = entries
            .iter()
            .filter_map(|(key, val)| bpf::flow_from_key(key).map(|f| bpf::flow_sample(f, val)))
            .collect();
        self.entries = entries;
        out
    }

    fn walk_flows(&self) -> Vec<([u8; KEY_LEN], [u8; FLOW_VALUE_LEN])> {
        let keys = self.maps.flows.keys(bpf::FLOWS_MAX).unwrap_or_default();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let mut val = [0u8; FLOW_VALUE_LEN];
            if let Ok(true) = self.maps.flows.lookup(&key, &mut val) {
                out.push((key, val));
            }
        }
        out
    }

    fn bpf_stats(&self) -> Map<String, Value> {
        let mut out = Map::new();
        for (idx, name) in bpf::STAT_NAMES.iter().enumerate() {
            let mut val = [0u8; 8];
            if let Ok(true) = self
                .maps
                .stats
                .lookup(&(idx as u32).to_ne_bytes(), &mut val)
            {
                out.insert(name.to_string(), Value::from(u64::from_ne_bytes(val)));
            }
        }
        out
    }

    /// The state file, when its content changed (at most once a second from `tick`):
    /// a rename costs ~0.1 ms here, more than the rest of a report.
    fn write_state(&mut self) {
        let Some(path) = self.cfg.state_file.clone() else {
            return;
        };
        let state = json!({
            "agent": self.cfg.name, "pid": std::process::id(), "stopped": false,
            "cgroup": self.cfg.cgroup, "pins": self.cfg.pins, "port": self.cfg.port,
            "clamps": self.clamps.len(), "rejected": self.rejected, "refused": self.refused,
            "over_cap": self.over_cap, "bpf": self.bpf_stats(),
        })
        .to_string();
        self.state_written = monotonic();
        if state == self.state_text {
            return;
        }
        let tmp = path.with_extension("tmp");
        let result = std::fs::write(&tmp, &state).and_then(|_| std::fs::rename(&tmp, &path));
        match result {
            Ok(()) => self.state_text = state,
            Err(e) => log(
                "ERROR",
                &format!("writing the state file {}: {e}", path.display()),
            ),
        }
    }

    // -- clamps --------------------------------------------------------------

    fn apply(&mut self, msg: &ControllerMessage) -> Result<(), String> {
        let mut wanted = Clamps::default();
        for (flow, window) in &msg.clamps {
            wanted.set(*flow, *window);
        }
        if msg.replace {
            let gone: Vec<Tuple4> = self
                .clamps
                .iter()
                .filter(|(f, _)| wanted.get(f).is_none())
                .map(|(f, _)| *f)
                .collect();
            for flow in gone {
                self.maps
                    .clamps
                    .delete(&bpf::key_bytes(&flow))
                    .map_err(|e| format!("map delete for {flow}: {}", errno_text(&e)))?;
                self.clamps.remove(&flow);
            }
        }
        for (flow, window) in wanted.iter() {
            self.clamps.set(*flow, *window);
        }
        self.refresh_leases()
    }

    fn refresh_leases(&mut self) -> Result<(), String> {
        let expires = bpf::monotonic_ns() + (self.cfg.timeout_s * 1e9) as u64;
        for (flow, window) in self.clamps.iter() {
            self.maps
                .clamps
                .update(&bpf::key_bytes(flow), &bpf::clamp_value(*window, expires))
                .map_err(|e| format!("map update for {flow}: {}", errno_text(&e)))?;
        }
        Ok(())
    }

    /// Delete every entry of the map; the program lifts each clamp at the flow's next ACK.
    fn clear(&mut self) {
        if let Ok(keys) = self.maps.clamps.keys(bpf::CLAMPS_MAX) {
            for key in keys {
                let _ = self.maps.clamps.delete(&key);
            }
        }
        self.clamps.clear();
    }

    // -- connections ---------------------------------------------------------

    fn open_connections(&self) -> usize {
        self.conns.values().filter(|c| !c.closing).count()
    }

    fn accept_all(&mut self) {
        loop {
            let (stream, peer) = match self.listener.accept() {
                Ok(pair) => pair,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log("WARNING", &format!("accept failed: {e}"));
                    return;
                }
            };
            let open = self.open_connections();
            if open >= self.cfg.max_connections {
                self.over_cap += 1;
                log(
                    "WARNING",
                    &format!(
                        "refused a connection from {}: {open} already open",
                        peer_text(&peer)
                    ),
                );
                continue; // dropped: closed
            }
            if let Err(e) = self.add_conn(stream, &peer) {
                log(
                    "WARNING",
                    &format!("connection from {}: {e}", peer_text(&peer)),
                );
            }
        }
    }

    fn add_conn(&mut self, stream: TcpStream, peer: &SocketAddr) -> io::Result<()> {
        stream.set_nonblocking(true)?;
        // The address the controller dialled names the keys.
        let local = stream.local_addr()?;
        let keys = Keys::derive(&self.cfg.secret, &proto::identity(&local))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.msg))?;
        let token = self.next_token;
        self.next_token += 1;
        epoll_ctl(
            self.epoll.as_raw_fd(),
            libc::EPOLL_CTL_ADD,
            stream.as_raw_fd(),
            (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            token,
        )?;
        let peer = peer_text(peer);
        log("INFO", &format!("connection from {peer}"));
        self.conns.insert(
            token,
            Conn {
                stream,
                reader: FrameReader::new(keys.c2a, Vec::new()),
                sign: proto::hmac_key(&keys.a2c),
                context: Vec::new(),
                seq_in: SeqCheck::default(),
                seq_out: 0,
                authenticated: false,
                peer,
                deadline: monotonic() + self.cfg.auth_timeout_s,
                out: Vec::new(),
                sent: 0,
                closing: false,
                events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            },
        );
        Ok(())
    }

    /// Close now (nothing left to send, or an unauthenticated peer: not a word).
    fn drop_conn(&mut self, token: u64) {
        if let Some(conn) = self.conns.remove(&token) {
            let _ = epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                conn.stream.as_raw_fd(),
                0,
                token,
            );
            if conn.authenticated && !conn.closing {
                log("INFO", &format!("controller {} disconnected", conn.peer));
            }
        }
    }

    /// Close after what is queued has been sent (asyncio's writer.close()).
    fn close_conn(&mut self, token: u64) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        if conn.authenticated {
            log("INFO", &format!("controller {} disconnected", conn.peer));
        }
        conn.closing = true;
        conn.deadline = monotonic() + self.cfg.auth_timeout_s;
        if conn.sent >= conn.out.len() {
            self.drop_conn(token);
        } else {
            let _ = conn.stream.shutdown(std::net::Shutdown::Read);
            self.flush(token);
        }
    }

    fn expire(&mut self, now: f64) {
        let due: Vec<(u64, bool)> = self
            .conns
            .iter()
            .filter(|(_, c)| (!c.authenticated || c.closing) && c.deadline <= now)
            .map(|(t, c)| (*t, c.closing))
            .collect();
        for (token, closing) in due {
            if !closing {
                let reason = format!("no hello within {} s", py_float_g(self.cfg.auth_timeout_s));
                self.refuse(token, &reason);
            }
            self.drop_conn(token);
        }
    }

    fn refuse(&mut self, token: u64, reason: &str) {
        self.refused += 1;
        if let Some(conn) = self.conns.get(&token) {
            log(
                "WARNING",
                &format!(
                    "closed unauthenticated connection from {}: {reason}",
                    conn.peer
                ),
            );
        }
    }

    fn conn_event(&mut self, token: u64, flags: u32) {
        if flags & libc::EPOLLOUT as u32 != 0 {
            self.flush(token);
        }
        let Some(conn) = self.conns.get(&token) else {
            return;
        };
        if conn.closing {
            return;
        }
        if flags & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0
        {
            self.read(token);
        }
    }

    fn read(&mut self, token: u64) {
        // Reused: zeroing 64 KiB per read was a visible share of a message's cost.
        let mut buf = std::mem::take(&mut self.read_buf);
        self.read_into(token, &mut buf);
        self.read_buf = buf;
    }

    fn read_into(&mut self, token: u64, buf: &mut [u8]) {
        loop {
            let Some(conn) = self.conns.get_mut(&token) else {
                return;
            };
            if conn.closing {
                return;
            }
            match conn.stream.read(buf) {
                Ok(0) => return self.drop_conn(token),
                Ok(n) => {
                    if !self.received(token, &buf[..n]) {
                        return;
                    }
                    if n < buf.len() {
                        return; // level-triggered: more, if any, on the next wake-up
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    log("INFO", &format!("connection {} ended: {e}", conn.peer));
                    return self.drop_conn(token);
                }
            }
        }
    }

    /// Bytes from a peer; false when the connection is closed (or closing).
    fn received(&mut self, token: u64, data: &[u8]) -> bool {
        let conn = self.conns.get_mut(&token).expect("live connection");
        if !conn.authenticated {
            let hello = conn.reader.push(data).and_then(|_| conn.reader.pop());
            let hello = match hello {
                Ok(None) => return true, // more to come
                Ok(Some(raw)) => proto::parse_controller(&raw).and_then(|m| {
                    if m.kind != Kind::Hello || m.seq != 1 {
                        Err(proto::ProtocolError::new(format!(
                            "expected hello (seq 1), got {}",
                            m.kind.name()
                        )))
                    } else {
                        Ok(m)
                    }
                }),
                Err(e) => Err(e),
            };
            match hello {
                Ok(hello) => self.authenticate(token, &hello),
                Err(e) => {
                    self.refuse(token, &e.msg);
                    self.drop_conn(token);
                    return false;
                }
            }
        } else if let Err(e) = conn.reader.push(data) {
            self.reject(token, &e.msg);
            self.close_conn(token);
            return false;
        }
        loop {
            // Gone when a reply to the last frame could not be sent (the peer reset).
            let Some(conn) = self.conns.get_mut(&token) else {
                return false;
            };
            match conn.reader.pop() {
                Ok(Some(raw)) => self.handle(token, &raw),
                Ok(None) => return true,
                Err(e) => {
                    // framing or MAC: cannot go on
                    self.reject(token, &e.msg);
                    self.close_conn(token);
                    return false;
                }
            }
        }
    }

    /// Answer a verified hello and bind the session.
    fn authenticate(&mut self, token: u64, hello: &ControllerMessage) {
        let nonce = proto::new_nonce();
        let conn = self.conns.get_mut(&token).expect("live connection");
        conn.seq_in = SeqCheck { last: hello.seq };
        conn.context = proto::unhex(&hello.nonce).expect("checked nonce");
        let msg = json!({"type": "hello", "agent": self.cfg.name, "nonce": nonce,
                         "cgroup": self.cfg.cgroup});
        self.send(token, msg);
        let Some(conn) = self.conns.get_mut(&token) else {
            return; // the hello could not be sent: the peer is gone
        };
        let session = proto::session_context(&hello.nonce, &nonce).expect("checked nonces");
        conn.context = session.clone();
        conn.reader.context = session;
        conn.authenticated = true;
        log("INFO", &format!("controller {} authenticated", conn.peer));
    }

    fn handle(&mut self, token: u64, raw: &Map<String, Value>) {
        let conn = self.conns.get_mut(&token).expect("live connection");
        let msg = proto::parse_controller(raw).and_then(|m| {
            conn.seq_in.check(m.seq)?;
            if m.kind == Kind::Hello {
                return Err(proto::ProtocolError::new("hello on an established session"));
            }
            Ok(m)
        });
        let msg = match msg {
            Ok(m) => m,
            Err(e) => return self.reject(token, &e.msg),
        };
        self.last_controller = monotonic();
        let done = match msg.kind {
            Kind::Alloc => self.apply(&msg),
            Kind::Clear => {
                self.clear();
                Ok(())
            }
            _ => self.refresh_leases(), // keepalive
        };
        match done {
            Err(e) => self.reject(token, &format!("{} failed: {e}", msg.kind.name())),
            Ok(()) => {
                let head = format!(
                    "{{\"ack_seq\":{},\"clamps\":{},\"seq\":",
                    msg.seq,
                    self.clamps.len()
                );
                self.send_text(token, &head, ",\"type\":\"ack\"}");
            }
        }
    }

    fn reject(&mut self, token: u64, reason: &str) {
        self.rejected += 1;
        let peer = self.conns.get(&token).map_or("?", |c| c.peer.as_str());
        log("ERROR", &format!("rejected message from {peer}: {reason}"));
        let reason: String = reason.chars().take(proto::MAX_STRING).collect();
        self.send(token, json!({"type": "error", "reason": reason}));
    }

    /// Send a message built with serde_json (the rare ones: hello, error).
    fn send(&mut self, token: u64, message: Value) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        conn.seq_out += 1;
        let Value::Object(mut message) = message else {
            unreachable!("messages are objects")
        };
        message.insert("seq".into(), Value::from(conn.seq_out));
        let frame = serde_json::to_vec(&message)
            .map_err(|e| proto::ProtocolError::new(format!("cannot encode: {e}")))
            .and_then(|payload| proto::encode_prepared(&payload, &conn.sign, &conn.context));
        self.queue(token, frame);
    }

    /// Send `head` + seq + `tail`: a payload written by hand, keys in sorted order with
    /// "seq" between `head` and `tail` (reports and acks).
    fn send_text(&mut self, token: u64, head: &str, tail: &str) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        conn.seq_out += 1;
        let mut payload = String::with_capacity(head.len() + tail.len() + 20);
        let _ = write!(payload, "{head}{}{tail}", conn.seq_out);
        let frame = proto::encode_prepared(payload.as_bytes(), &conn.sign, &conn.context);
        self.queue(token, frame);
    }

    fn queue(&mut self, token: u64, frame: proto::Result<Vec<u8>>) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        match frame {
            Ok(frame) => {
                if conn.out.len() - conn.sent + frame.len() > MAX_OUTPUT {
                    log(
                        "WARNING",
                        &format!(
                            "controller {} reads nothing: {} bytes unsent, closing",
                            conn.peer,
                            conn.out.len() - conn.sent
                        ),
                    );
                    return self.drop_conn(token);
                }
                conn.out.extend_from_slice(&frame);
                self.flush(token);
            }
            Err(e) => log("WARNING", &format!("sending to {} failed: {e}", conn.peer)),
        }
    }

    fn flush(&mut self, token: u64) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        while conn.sent < conn.out.len() {
            match conn.stream.write(&conn.out[conn.sent..]) {
                Ok(n) => conn.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if !conn.closing {
                        log("INFO", &format!("connection {} ended: {e}", conn.peer));
                    }
                    return self.drop_conn(token);
                }
            }
        }
        if conn.sent == conn.out.len() {
            conn.out.clear();
            conn.sent = 0;
            if conn.closing {
                return self.drop_conn(token);
            }
        } else if conn.sent > (1 << 20) {
            conn.out.drain(..conn.sent);
            conn.sent = 0;
        }
        // A closing connection waits for writability only: its read side is shut, and
        // level-triggered EPOLLIN would wake the loop without pause until it is flushed.
        let events = if conn.closing {
            libc::EPOLLOUT as u32
        } else if conn.out.is_empty() {
            (libc::EPOLLIN | libc::EPOLLRDHUP) as u32
        } else {
            (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLOUT) as u32
        };
        if events != conn.events
            && epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_MOD,
                conn.stream.as_raw_fd(),
                events,
                token,
            )
            .is_ok()
        {
            conn.events = events;
        }
    }
}

/// Python's `f"{x:g}"` for the few values an auth timeout takes (5.0 -> "5", 0.5 -> "0.5").
pub fn py_float_g(x: f64) -> String {
    let text = format!("{x}");
    text.strip_suffix(".0").map_or(text.clone(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(lport: u16) -> Tuple4 {
        Tuple4 {
            local: "10.0.0.1".parse().unwrap(),
            lport,
            remote: "10.0.1.1".parse().unwrap(),
            rport: 5201,
        }
    }

    #[test]
    fn clamps_keep_dict_order_and_values() {
        let mut c = Clamps::default();
        c.set(flow(1), 10);
        c.set(flow(2), 20);
        c.set(flow(1), 11); // keeps its place
        c.set(flow(3), 30);
        assert_eq!(
            c.iter().map(|(f, w)| (f.lport, *w)).collect::<Vec<_>>(),
            [(1, 11), (2, 20), (3, 30)]
        );
        c.remove(&flow(2));
        assert_eq!(c.get(&flow(3)), Some(30));
        assert_eq!(c.get(&flow(2)), None);
        assert_eq!(c.len(), 2);
        c.set(flow(2), 5);
        assert_eq!(c.iter().last().unwrap().0, flow(2));
        c.clear();
        assert!(c.is_empty() && c.get(&flow(1)).is_none());
    }

    #[test]
    fn sampler_computes_throughput_between_samples() {
        let sample = |acked: u64| FlowSample {
            flow: flow(1),
            rtt_us: 100.0,
            mss: 0,
            cwnd: 10,
            delivery_bps: 5.0,
            bytes_acked: acked,
        };
        let mut clamps = Clamps::default();
        clamps.set(flow(1), 7);
        let mut s = FlowSampler::default();
        let parse = |text: String| -> Vec<Value> { serde_json::from_str(&text).unwrap() };
        let first = parse(s.sample(&[sample(1000)], &clamps, 10.0));
        assert_eq!(first[0]["throughput_bps"].as_f64(), Some(0.0));
        assert_eq!(first[0]["mss"], 1); // max(mss, 1)
        assert_eq!(first[0]["clamp"], 7);
        assert_eq!(first[0]["rtt_us"].as_f64(), Some(100.0));
        assert_eq!(first[0]["delivery_bps"].as_f64(), Some(5.0));
        assert_eq!(first[0]["bytes_acked"], 1000);
        assert_eq!(first[0]["cwnd"], 10);
        let second = parse(s.sample(&[sample(3000)], &clamps, 10.5));
        assert_eq!(
            second[0]["throughput_bps"].as_f64(),
            Some(2000.0 * 8.0 / 0.5)
        );
        // a counter that went back (a new flow on the same tuple): no throughput
        let third = parse(s.sample(&[sample(10)], &Clamps::default(), 11.0));
        assert_eq!(third[0]["throughput_bps"].as_f64(), Some(0.0));
        assert_eq!(third[0]["clamp"], 0);
        assert_eq!(
            third[0]["flow"],
            json!({"local": "10.0.0.1", "lport": 1, "remote": "10.0.1.1", "rport": 5201})
        );
        assert_eq!(third[0].as_object().unwrap().len(), 8); // FlowStats.to_dict's keys
                                                            // keys in sorted order, as json.dumps(sort_keys=True)
        let text = s.sample(&[sample(10)], &clamps, 11.5);
        let keys: Vec<usize> = [
            "bytes_acked",
            "clamp",
            "cwnd",
            "delivery_bps",
            "flow",
            "mss",
            "rtt_us",
            "throughput_bps",
        ]
        .iter()
        .map(|k| text.find(&format!("\"{k}\"")).unwrap())
        .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{text}");
        // a flow that left is forgotten
        assert_eq!(s.sample(&[], &clamps, 12.0), "[]");
        assert!(s.last.is_empty());
    }

    #[test]
    fn python_texts() {
        assert_eq!(py_float_g(5.0), "5");
        assert_eq!(py_float_g(0.5), "0.5");
        assert_eq!(
            peer_text(&"127.0.0.1:5000".parse().unwrap()),
            "('127.0.0.1', 5000)"
        );
        assert_eq!(
            peer_text(&"[::1]:5000".parse().unwrap()),
            "('::1', 5000, 0, 0)"
        );
        let e = io::Error::from_raw_os_error(libc::E2BIG);
        assert_eq!(errno_text(&e), "Argument list too long (errno 7)");
    }
}
