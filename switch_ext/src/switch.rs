//! The event loop: one thread, epoll over the port sockets, the controller connection,
//! rtnetlink and a timerfd for link-emulation departures. Nothing busy-spins: with
//! no traffic the process sleeps in epoll_wait (20 switches on 2 cores must coexist).

use std::fs::File;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cli::Config;
use crate::conn::{Backoff, Conn, Event, State, WBUF_SOFT_CAP};
use crate::datapath::{Datapath, DpConfig};
use crate::group::{Rng, SelectMode};
use crate::linkem::Egress;
use crate::ofp::codec::{error_msg, Body, Msg, OfpErr, PortDesc};
use crate::ofp::consts::*;
use crate::ports::{PortQueues, Ports};
use crate::qdisc;
use crate::sys::{self, Epoll, LinkMonitor, PacketSocket, RxBatch, Timer};

pub static SHUTDOWN: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SHUTDOWN.store(true, Ordering::SeqCst);
}

pub fn install_signal_handlers() {
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGHUP, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

macro_rules! log {
    ($sw:expr, $lvl:expr, $($a:tt)*) => {
        if $sw.verbose >= $lvl {
            eprintln!("dcnlab-switch[{}]: {}", $sw.name, format!($($a)*));
        }
    };
}

const TOK_CONN: u64 = 1 << 32;
const TOK_NETLINK: u64 = (1 << 32) + 1;
const TOK_TIMER: u64 = (1 << 32) + 2;
const TICK_NS: u64 = 100_000_000;
/// Receive batches per port per wake-up, so one busy port cannot starve the others.
const RX_ROUNDS: usize = 4;

/// A port's I/O side; its queues are `Switch::queues.queues[i]` at the same index.
pub struct PortRt {
    pub port_no: u32,
    pub ifname: String,
    pub sock: PacketSocket,
}

pub struct Switch {
    pub name: String,
    verbose: u8,
    pub dp: Datapath,
    pub ports: Vec<PortRt>,
    /// Queues per port; transmit lists are flushed with one sendmmsg per loop iteration.
    pub queues: Ports,
    epoll: Epoll,
    timer: Timer,
    netlink: Option<LinkMonitor>,
    rx: RxBatch,
    controller: Option<std::net::SocketAddr>,
    conn: Option<Conn>,
    backoff: Backoff,
    reconnect_at_ns: u64,
    probe_ns: u64,
    stats: Option<File>,
    stats_interval_ns: u64,
    next_stats_ns: u64,
    next_tick_ns: u64,
}

impl Switch {
    /// Opens every port socket; fails (touching nothing else) if any interface is missing.
    pub fn new(cfg: &Config) -> Result<Switch, String> {
        let now = sys::mono_ns();
        let seed = cfg.seed.unwrap_or_else(|| now ^ (std::process::id() as u64) << 32);
        let mut dp = Datapath::new(DpConfig {
            name: cfg.name.clone(),
            dpid: cfg.dpid,
            n_tables: cfg.n_tables,
            select_mode: SelectMode::Hash,
            fail_mode: cfg.fail_mode,
            seed,
        });
        dp.set_switch_balancer(cfg.select_mode.clone())?;
        dp.set_max_flows(cfg.max_flows);
        // Check every interface before opening any socket: a bad option must not leave a
        // port half-configured.
        let mut infos = Vec::new();
        for p in &cfg.ports {
            let info = sys::if_info(&p.ifname).map_err(|e| format!("interface {}: {e}", p.ifname))?;
            sys::ifindex(&p.ifname).map_err(|e| format!("interface {}: {e}", p.ifname))?;
            infos.push(info);
        }
        let stats = match &cfg.stats_file {
            Some(path) => Some(File::create(path).map_err(|e| format!("--stats-file {path}: {e}"))?),
            None => None,
        };
        let epoll = Epoll::new().map_err(|e| format!("epoll: {e}"))?;
        let timer = Timer::new().map_err(|e| format!("timerfd: {e}"))?;
        epoll.add(timer.fd(), libc::EPOLLIN as u32, TOK_TIMER).map_err(|e| e.to_string())?;
        let netlink = LinkMonitor::open().ok();
        if let Some(n) = &netlink {
            epoll.add(n.fd(), libc::EPOLLIN as u32, TOK_NETLINK).map_err(|e| e.to_string())?;
        }
        let mut ports = Vec::new();
        let mut queues = Ports::new(Rng::new(seed ^ 0x5eed));
        for (i, (p, (mac, up))) in cfg.ports.iter().zip(infos).enumerate() {
            let sock = PacketSocket::open(&p.ifname)
                .map_err(|e| format!("port {} ({}): {e}", p.port_no, p.ifname))?;
            epoll.add(sock.fd(), libc::EPOLLIN as u32, i as u64).map_err(|e| e.to_string())?;
            let speed_kbps = p.link.rate_bps.map_or(10_000_000, |r| (r / 1000).min(u32::MAX as u64) as u32);
            dp.add_port(
                PortDesc {
                    port_no: p.port_no,
                    hw_addr: mac,
                    name: p.ifname.clone(),
                    config: 0,
                    state: 0,
                    curr: OFPPF_10GB_FD | OFPPF_COPPER,
                    advertised: 0,
                    supported: 0,
                    peer: 0,
                    curr_speed: speed_kbps,
                    max_speed: speed_kbps,
                },
                up,
                now,
            );
            // The command line built these once already; errors here are just as clear.
            let at = |e: String| format!("port {} ({}): {e}", p.port_no, p.ifname);
            let egress = Egress::new(p.link.clone(), qdisc::build_egress(&p.egress).map_err(at)?);
            let ingress = p.ingress.as_ref().map(qdisc::build_ingress).transpose().map_err(at)?;
            queues.add(PortQueues::new(p.port_no, egress, ingress));
            ports.push(PortRt { port_no: p.port_no, ifname: p.ifname.clone(), sock });
        }
        sys::set_timer_slack_ns(1000);
        Ok(Switch {
            name: cfg.name.clone(),
            verbose: cfg.verbose,
            dp,
            ports,
            queues,
            epoll,
            timer,
            netlink,
            rx: RxBatch::new(cfg.batch),
            controller: cfg.controller,
            conn: None,
            backoff: Backoff::new(cfg.max_backoff_ms),
            reconnect_at_ns: now,
            probe_ns: cfg.probe_interval_ms * 1_000_000,
            stats,
            stats_interval_ns: cfg.stats_interval_ms * 1_000_000,
            next_stats_ns: now,
            next_tick_ns: now + TICK_NS,
        })
    }

    pub fn run(&mut self) -> io::Result<()> {
        log!(
            self,
            1,
            "started: dpid {:#x}, {} ports, {}",
            self.dp.cfg.dpid,
            self.ports.len(),
            self.dp.sw_desc()
        );
        let mut evs: Vec<libc::epoll_event> = Vec::with_capacity(64);
        while !SHUTDOWN.load(Ordering::Relaxed) {
            let now = sys::mono_ns();
            let timeout_ms = self.timeout_ms(now);
            self.epoll.wait(&mut evs, timeout_ms);
            let now = sys::mono_ns();
            for ev in evs.iter() {
                let (tok, events) = (ev.u64, ev.events);
                match tok {
                    TOK_CONN => self.conn_event(events, now),
                    TOK_NETLINK => self.link_events(),
                    TOK_TIMER => self.timer.clear(),
                    i => self.rx_port(i as usize, now),
                }
            }
            self.after_io(now);
        }
        self.write_stats(sys::mono_ns());
        log!(self, 1, "stopping");
        Ok(())
    }

    fn timeout_ms(&self, now: u64) -> i32 {
        let mut next = self.next_tick_ns;
        if self.stats.is_some() {
            next = next.min(self.next_stats_ns);
        }
        if self.conn.is_none() && self.controller.is_some() {
            next = next.min(self.reconnect_at_ns);
        }
        // Sub-millisecond deadlines are the timerfd's job.
        next.saturating_sub(now).div_ceil(1_000_000).min(1000) as i32
    }

    /// Work after a batch of events: route datapath output, service queues, flush.
    fn after_io(&mut self, now: u64) {
        self.route_outputs(now);
        self.queues.service(&mut self.dp, now);
        self.flush_ports();
        self.flush_ctrl();
        if now >= self.next_tick_ns {
            self.next_tick_ns = now + TICK_NS;
            self.dp.tick(now);
            self.conn_housekeeping(now);
            self.flush_ctrl();
        }
        if self.stats.is_some() && now >= self.next_stats_ns {
            self.write_stats(now);
            self.next_stats_ns = now + self.stats_interval_ns;
        }
        self.timer.set(self.queues.next_deadline());
    }

    fn rx_port(&mut self, i: usize, now: u64) {
        if i >= self.ports.len() {
            return;
        }
        let port_no = self.ports[i].port_no;
        for _ in 0..RX_ROUNDS {
            let n = match self.ports[i].sock.recv_batch(&mut self.rx) {
                Ok(n) => n,
                Err(e) => {
                    log!(self, 2, "port {port_no}: recv: {e}");
                    0
                }
            };
            for k in 0..n {
                let Some(f) = self.rx.frame(k) else {
                    if self.rx.truncated(k) {
                        if let Some(p) = self.dp.ports.get_mut(&port_no) {
                            p.counters.rx_errors += 1;
                        }
                    }
                    continue;
                };
                let frame = match f.vlan {
                    // The kernel moved the tag into metadata; put it back where it was.
                    Some((tpid, tci)) if f.data.len() >= 12 => {
                        let mut v = Vec::with_capacity(f.data.len() + 4);
                        v.extend_from_slice(&f.data[..12]);
                        v.extend_from_slice(&tpid.to_be_bytes());
                        v.extend_from_slice(&tci.to_be_bytes());
                        v.extend_from_slice(&f.data[12..]);
                        v
                    }
                    _ => f.data.to_vec(),
                };
                self.queues.receive(&mut self.dp, i, frame, now);
            }
            // Route as we go so a large burst does not pile up in dp.out.
            self.route_outputs(now);
            if n < self.rx.capacity() {
                break;
            }
        }
    }

    fn route_outputs(&mut self, now: u64) {
        self.queues.route_outputs(&mut self.dp, now);
    }

    fn flush_ports(&mut self) {
        for (p, q) in self.ports.iter().zip(self.queues.queues.iter_mut()) {
            if q.tx.is_empty() {
                continue;
            }
            let sent = p.sock.send_batch(&q.tx);
            if let Some(c) = self.dp.ports.get_mut(&p.port_no).map(|d| &mut d.counters) {
                c.tx_packets += sent as u64;
                c.tx_bytes += q.tx[..sent].iter().map(|f| f.len() as u64).sum::<u64>();
                c.tx_dropped += (q.tx.len() - sent) as u64;
            }
            q.tx.clear();
        }
    }

    fn link_events(&mut self) {
        let Some(n) = &self.netlink else { return };
        for ev in n.read_events() {
            if let Some(p) = self.ports.iter().find(|p| p.sock.ifindex == ev.ifindex) {
                let port_no = p.port_no;
                log!(self, 1, "port {port_no}: link {}", if ev.up { "up" } else { "down" });
                self.dp.set_link(port_no, ev.up);
            }
        }
    }

    // -------------------------------------------------------------------------------
    // Controller

    fn drop_conn(&mut self, now: u64, why: &str) {
        if let Some(c) = self.conn.take() {
            self.epoll.delete(c.fd());
            log!(self, 1, "controller connection lost: {why}");
        }
        self.dp.connected = false;
        self.reconnect_at_ns = now + self.backoff.next_delay_ms() * 1_000_000;
    }

    fn conn_housekeeping(&mut self, now: u64) {
        let Some(addr) = self.controller else { return };
        match &mut self.conn {
            None if now >= self.reconnect_at_ns => match Conn::start(&addr) {
                Ok(c) => {
                    let ev = (libc::EPOLLIN | libc::EPOLLOUT) as u32;
                    if self.epoll.add(c.fd(), ev, TOK_CONN).is_ok() {
                        log!(self, 2, "connecting to {addr}");
                        let mut c = c;
                        c.last_rx_ns = now;
                        self.conn = Some(c);
                    }
                }
                Err(e) => {
                    log!(self, 2, "connect {addr}: {e}");
                    self.reconnect_at_ns = now + self.backoff.next_delay_ms() * 1_000_000;
                }
            },
            None => {}
            Some(c) => {
                let silent = now.saturating_sub(c.last_rx_ns);
                if c.state != State::Ready && silent > self.probe_ns {
                    self.drop_conn(now, "handshake timeout");
                } else if silent > 3 * self.probe_ns {
                    self.drop_conn(now, "echo timeout");
                } else if silent > self.probe_ns && !c.echo_outstanding && c.state == State::Ready {
                    let xid = c.next_xid();
                    c.send(&Msg::new(xid, Body::EchoRequest(Vec::new())));
                    c.echo_outstanding = true;
                }
            }
        }
    }

    fn conn_event(&mut self, events: u32, now: u64) {
        let Some(c) = &mut self.conn else { return };
        if events & libc::EPOLLOUT as u32 != 0 {
            let was_connecting = c.state == State::Connecting;
            if let Err(e) = c.on_writable() {
                self.drop_conn(now, &e.to_string());
                return;
            }
            if was_connecting {
                c.last_rx_ns = now;
                log!(self, 2, "TCP connected; hello sent");
            }
        }
        if events & (libc::EPOLLIN | libc::EPOLLHUP | libc::EPOLLERR) as u32 != 0 {
            let evs = match c.on_readable(now) {
                Ok(v) => v,
                Err(e) => {
                    let _ = c.flush();
                    self.drop_conn(now, &e.to_string());
                    return;
                }
            };
            for ev in evs {
                match ev {
                    Event::Up => {
                        log!(self, 1, "controller handshake done (OpenFlow 1.3)");
                        self.dp.connected = true;
                        self.backoff.reset();
                    }
                    Event::Msg(raw) => {
                        let dp = &mut self.dp;
                        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dp.handle_raw(&raw, now)))
                            .is_err()
                        {
                            let xid = u32::from_be_bytes([raw[4], raw[5], raw[6], raw[7]]);
                            let err = OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_EPERM);
                            self.dp.ctrl.push(error_msg(xid, err, &raw));
                        }
                        // Packet-outs produce frames; route them in order with replies.
                        self.route_outputs(now);
                        for req in std::mem::take(&mut self.dp.ingress_ctl) {
                            if let Err(e) = self.queues.control_ingress(&mut self.dp, &req, now) {
                                log!(self, 1, "ingress control on port {}: {e}", req.port_no);
                                let err = OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_EPERM);
                                self.dp.ctrl.push(error_msg(req.xid, err, &req.raw));
                            }
                        }
                    }
                }
            }
        }
        self.flush_ctrl();
    }

    fn flush_ctrl(&mut self) {
        if self.dp.ctrl.is_empty() && self.conn.as_ref().is_none_or(|c| !c.wants_write()) {
            return;
        }
        let msgs = std::mem::take(&mut self.dp.ctrl);
        let Some(c) = &mut self.conn else {
            return;
        };
        if c.state != State::Ready {
            return;
        }
        for m in msgs {
            if matches!(m.body, Body::PacketIn { .. }) && c.pending_bytes() > WBUF_SOFT_CAP {
                self.dp.packet_ins_dropped += 1;
                continue;
            }
            c.send(&m);
        }
        let res = c.flush();
        let want = if c.wants_write() { libc::EPOLLIN | libc::EPOLLOUT } else { libc::EPOLLIN };
        let fd = c.fd();
        let _ = self.epoll.modify(fd, want as u32, TOK_CONN);
        if let Err(e) = res {
            self.drop_conn(sys::mono_ns(), &e.to_string());
        }
    }

    // -------------------------------------------------------------------------------
    // Stats file

    pub fn stats_line(&mut self, now: u64) -> String {
        let mut s = format!(
            "{{\"ts\":{:.6},\"mono_ns\":{},\"switch\":\"{}\",\"dpid\":{},\"connected\":{},\"packet_ins_dropped\":{},\"resubmit_drops\":{},\"learn_failures\":{},\"ports\":[",
            sys::wall_secs(),
            now,
            json_escape(&self.name),
            self.dp.cfg.dpid,
            self.dp.connected,
            self.dp.packet_ins_dropped,
            self.dp.resubmit_drops,
            self.dp.learn_failures
        );
        for (i, (p, q)) in self.ports.iter().zip(self.queues.queues.iter_mut()).enumerate() {
            let (peak_p, peak_b) = q.egress.take_peaks();
            let c =
                self.dp.ports.get(&p.port_no).map(|d| (d.counters.clone(), d.link_up)).unwrap_or_default();
            let (c, up) = c;
            if i > 0 {
                s.push(',');
            }
            let egress = qdisc::counters_json(q.egress.qdisc.kind(), &q.egress.qdisc.counters());
            q.egress.qhist.advance(now);
            let qout = q.egress.qhist.json();
            let qin = if q.ingress.is_some() {
                q.qin_hist.advance(now);
                q.qin_hist.json()
            } else {
                "null".to_string()
            };
            let ingress = match &q.ingress {
                None => "null".to_string(),
                Some(ing) => {
                    let held = ing.held();
                    let mut counters = vec![("held", held.pkts as u64), ("held_bytes", held.bytes as u64)];
                    counters.extend(ing.counters());
                    qdisc::counters_json(ing.kind(), &counters)
                }
            };
            s.push_str(&format!(
                "{{\"port\":{},\"name\":\"{}\",\"up\":{},\"qlen\":{},\"qlen_bytes\":{},\"qlen_max\":{},\"qlen_bytes_max\":{},\"in_flight\":{},\
                 \"rx_packets\":{},\"rx_bytes\":{},\"tx_packets\":{},\"tx_bytes\":{},\"drops\":{},\"tx_dropped\":{},\"ce_marks\":{},\"rx_errors\":{},\
                 \"rx_dropped\":{},\"egress\":{},\"ingress\":{},\"qout\":{},\"qin\":{}}}",
                p.port_no,
                json_escape(&p.ifname),
                up,
                q.egress.qlen_pkts(),
                q.egress.qlen_bytes(),
                peak_p,
                peak_b,
                q.egress.in_flight(),
                c.rx_packets,
                c.rx_bytes,
                c.tx_packets,
                c.tx_bytes,
                q.egress.stats.drops,
                c.tx_dropped,
                c.ce_marks,
                c.rx_errors,
                c.rx_dropped,
                egress,
                ingress,
                qout,
                qin
            ));
        }
        s.push_str("],\"balancers\":[");
        for (i, (group, kind, counters)) in self.dp.groups.balancer_counters().into_iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let mut c = qdisc::counters_json(kind, &counters);
            c.insert_str(1, &format!("\"group\":{group},"));
            s.push_str(&c);
        }
        s.push(']');
        if let Some(o) = &self.dp.conga {
            let mut counters = vec![
                ("labels_in", o.labels_in),
                ("feedback_in", o.feedback_in),
                ("feedback_out", o.feedback_out),
            ];
            if let Some(leaf) = o.leaf {
                counters.insert(0, ("leaf", leaf as u64));
            }
            s.push_str(",\"overlay\":");
            s.push_str(&qdisc::counters_json("conga", &counters));
        }
        s.push_str("}\n");
        s
    }

    fn write_stats(&mut self, now: u64) {
        if self.stats.is_none() {
            return;
        }
        let line = self.stats_line(now);
        if let Some(f) = &mut self.stats {
            if f.write_all(line.as_bytes()).is_err() {
                // A full disk must not stop the switch; stop writing stats instead.
                self.stats = None;
            }
        }
    }
}

pub fn json_escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o
}
