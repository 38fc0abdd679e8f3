//! The receiver: subflows join a connection by its id (HELLO), DATA goes through the
//! reassembler, in-order bytes are delivered to the application (here: checked against
//! the sender's pattern) and acknowledged at the connection level (DATA_ACK), FIN is
//! answered with the verdict (FIN_ACK).  [`RxConn`] is the protocol state without
//! sockets; [`serve`] runs it over accepted TCP connections.

use crate::net;
use crate::pattern;
use crate::reasm::Reassembler;
use crate::wire::{self, Decoder, FinAck, Frame, FrameRef, Hello, UNKNOWN_TOTAL};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// Largest receive window a sender may ask for.
pub const MAX_WINDOW: u64 = 256 << 20;
const READ_CHUNK: usize = 256 * 1024;

pub struct RxConn {
    pub conn_id: u64,
    seed: u64,
    window: u64,
    announced_total: u64,
    pub reasm: Reassembler,
    pub intact: bool,
    pub first_bad: Option<u64>,
    /// DATA payload bytes received per subflow index (duplicates included).
    pub per_subflow: Vec<u64>,
    acked_sent: u64,
    pub finished: bool,
    pub started: Instant,
    pub completed: Option<Instant>,
    /// Collects the delivered bytes when set (tests).
    pub sink: Option<Vec<u8>>,
}

impl RxConn {
    pub fn new(h: &Hello) -> Result<Self, String> {
        if h.window == 0 || h.window > MAX_WINDOW {
            return Err(format!(
                "HELLO asks for a receive window of {} bytes; allowed 1..={MAX_WINDOW}",
                h.window
            ));
        }
        let total = (h.total != UNKNOWN_TOTAL).then_some(h.total);
        Ok(RxConn {
            conn_id: h.conn_id,
            seed: h.seed,
            window: h.window,
            announced_total: h.total,
            reasm: Reassembler::new(h.window, total),
            intact: true,
            first_bad: None,
            per_subflow: Vec::new(),
            acked_sent: 0,
            finished: false,
            started: Instant::now(),
            completed: None,
            sink: None,
        })
    }

    /// Handles one frame that arrived on subflow `sub`; replies go to `reply` (to be sent
    /// on that subflow).  An error closes the connection.
    pub fn on_frame(&mut self, sub: u8, frame: Frame, reply: &mut Vec<u8>) -> Result<(), String> {
        let sub_i = sub as usize;
        if self.per_subflow.len() <= sub_i {
            self.per_subflow.resize(sub_i + 1, 0);
        }
        match frame {
            Frame::Hello(h) => {
                if h.seed != self.seed || h.window != self.window || h.total != self.announced_total
                {
                    return Err(format!(
                        "subflow {sub}'s HELLO disagrees with the connection's (seed, window or total)"
                    ));
                }
            }
            Frame::Data { dsn, payload } => self.on_data(sub, dsn, &payload)?,
            Frame::Fin(total) => {
                self.reasm.set_total(total).map_err(|e| e.to_string())?;
                if self.reasm.delivered() != total {
                    return Err(format!(
                        "FIN for {total} bytes, but only {} were delivered",
                        self.reasm.delivered()
                    ));
                }
                self.completed.get_or_insert_with(Instant::now);
                self.finished = true;
                wire::encode_fin_ack(&self.verdict(), reply);
            }
            Frame::DataAck(_) | Frame::FinAck(_) => {
                return Err(format!(
                    "subflow {sub}: acknowledgement frames come from the receiver only"
                ));
            }
        }
        Ok(())
    }

    /// Handles a DATA frame (payload borrowed: the zero-copy path of [`serve`]).
    pub fn on_data(&mut self, sub: u8, dsn: u64, payload: &[u8]) -> Result<(), String> {
        let sub_i = sub as usize;
        if self.per_subflow.len() <= sub_i {
            self.per_subflow.resize(sub_i + 1, 0);
        }
        if self.finished {
            return Err(format!("DATA at DSN {dsn} after FIN"));
        }
        self.per_subflow[sub_i] += payload.len() as u64;
        let seed = self.seed;
        let mut bad = None;
        let sink = &mut self.sink;
        self.reasm
            .insert(dsn, payload, &mut |at, bytes| {
                if bad.is_none() {
                    bad = pattern::first_mismatch(seed, at, bytes);
                }
                if let Some(s) = sink.as_mut() {
                    s.extend_from_slice(bytes);
                }
            })
            .map_err(|e| e.to_string())?;
        if let Some(at) = bad {
            self.intact = false;
            self.first_bad.get_or_insert(at);
        }
        if self.reasm.complete() && self.completed.is_none() {
            self.completed = Some(Instant::now());
        }
        Ok(())
    }

    pub fn verdict(&self) -> FinAck {
        FinAck {
            total: self.reasm.total().unwrap_or(self.reasm.delivered()),
            delivered: self.reasm.delivered(),
            intact: self.intact,
            dup_bytes: self.reasm.dup_bytes,
            peak_held: self.reasm.peak_held,
        }
    }

    /// A DATA_ACK to send when delivery advanced since the last one.
    pub fn ack_due(&mut self) -> Option<u64> {
        let d = self.reasm.delivered();
        if d > self.acked_sent {
            self.acked_sent = d;
            Some(d)
        } else {
            None
        }
    }

    /// The JSON line reporting this connection.
    pub fn report(&self, error: Option<&str>) -> String {
        let end = self.completed.unwrap_or_else(Instant::now);
        let subs: Vec<String> = self.per_subflow.iter().map(|b| b.to_string()).collect();
        let mut s = format!(
            "{{\"role\":\"receiver\",\"conn\":{},\"bytes\":{},\"intact\":{},\"dup_bytes\":{},\"peak_reorder_bytes\":{},\"duration_ms\":{:.3},\"subflow_bytes\":[{}]",
            self.conn_id,
            self.reasm.delivered(),
            self.intact && error.is_none() && self.finished,
            self.reasm.dup_bytes,
            self.reasm.peak_held,
            end.duration_since(self.started).as_secs_f64() * 1e3,
            subs.join(",")
        );
        if let Some(at) = self.first_bad {
            s.push_str(&format!(",\"first_bad_byte\":{at}"));
        }
        if let Some(e) = error {
            s.push_str(&format!(",\"error\":{}", json_str(e)));
        }
        s.push('}');
        s
    }
}

pub fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

struct RxSock {
    fd: RawFd,
    dec: Decoder,
    conn: Option<u64>,
    sub: u8,
    out: Vec<u8>,
    since: Instant,
}

pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Exit after this many connections (0: serve forever).
    pub count: u64,
    /// A connection with no traffic for this long is closed with an error.
    pub idle: Duration,
}

/// Accepts subflows, runs connections, prints one JSON line per connection through
/// `emit`.  Returns how many connections failed.
pub fn serve(cfg: &ServeConfig, emit: &mut dyn FnMut(&str)) -> std::io::Result<u64> {
    let lfd = net::listen(cfg.listen)?;
    emit(&format!(
        "{{\"role\":\"receiver\",\"listening\":{}}}",
        json_str(&net::local_addr(lfd)?.to_string())
    ));
    let mut socks: Vec<RxSock> = Vec::new();
    let mut conns: HashMap<u64, (RxConn, Instant)> = HashMap::new();
    // Connections that ended, and when: a subflow whose handshake completes after its
    // connection did (a slow path's, once the fast one carried everything) says HELLO
    // for an id that is gone.  It must not start a new connection (whose FIN would then
    // find nothing delivered, and be reported and counted as a second, failed one): it
    // is closed without a word.  Kept for `cfg.idle`, as long as a subflow may be silent.
    let mut ended_at: HashMap<u64, Instant> = HashMap::new();
    let mut done = 0u64;
    let mut failed = 0u64;
    let mut pfds: Vec<libc::pollfd> = Vec::new();
    while cfg.count == 0 || done < cfg.count {
        pfds.clear();
        pfds.push(libc::pollfd {
            fd: lfd,
            events: libc::POLLIN,
            revents: 0,
        });
        for s in &socks {
            let mut ev = libc::POLLIN;
            if !s.out.is_empty() {
                ev |= libc::POLLOUT;
            }
            pfds.push(libc::pollfd {
                fd: s.fd,
                events: ev,
                revents: 0,
            });
        }
        net::poll(&mut pfds, 100)?;
        if pfds[0].revents & libc::POLLIN != 0 {
            while let Some((fd, _)) = net::accept(lfd)? {
                socks.push(RxSock {
                    fd,
                    dec: Decoder::new(),
                    conn: None,
                    sub: 0,
                    out: Vec::new(),
                    since: Instant::now(),
                });
            }
        }
        // conn id -> error ending it
        let mut ended: Vec<(u64, Option<String>)> = Vec::new();
        let mut drop_socks: Vec<usize> = Vec::new();
        let nsocks = pfds.len() - 1;
        for i in 0..nsocks {
            let rev = pfds[i + 1].revents;
            if rev == 0 {
                continue;
            }
            let s = &mut socks[i];
            if rev & libc::POLLOUT != 0 && !s.out.is_empty() {
                match net::write(s.fd, &s.out) {
                    Ok(n) => {
                        s.out.drain(..n);
                    }
                    Err(_) => {
                        drop_socks.push(i);
                        continue;
                    }
                }
            }
            if rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
                continue;
            }
            let mut eof = false;
            let mut late = false; // a subflow of a connection that already ended
            let mut proto_err: Option<String> = None;
            // read what is there (bounded, so one subflow cannot starve the others)
            for _ in 0..16 {
                match s.dec.read_from(s.fd, READ_CHUNK) {
                    Ok(Some(0)) | Err(_) => {
                        eof = true;
                        break;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                }
            }
            loop {
                let frame = match s.dec.next_ref() {
                    Ok(Some(FrameRef::Data { dsn, payload })) => {
                        let Some(id) = s.conn else {
                            proto_err = Some("the first frame of a subflow must be HELLO".into());
                            break;
                        };
                        let Some((c, seen)) = conns.get_mut(&id) else {
                            break;
                        };
                        *seen = Instant::now();
                        if let Err(e) = c.on_data(s.sub, dsn, payload) {
                            proto_err = Some(e);
                            break;
                        }
                        continue;
                    }
                    Ok(Some(FrameRef::Other(f))) => f,
                    Ok(None) => break,
                    Err(e) => {
                        proto_err = Some(e.to_string());
                        break;
                    }
                };
                if s.conn.is_none() {
                    match frame {
                        Frame::Hello(h) if ended_at.contains_key(&h.conn_id) => {
                            late = true;
                            break;
                        }
                        Frame::Hello(h) => {
                            s.sub = h.subflow;
                            s.conn = Some(h.conn_id);
                            if let Some((c, _)) = conns.get_mut(&h.conn_id) {
                                let mut reply = Vec::new();
                                if let Err(e) = c.on_frame(h.subflow, Frame::Hello(h), &mut reply) {
                                    proto_err = Some(e);
                                    break;
                                }
                            } else {
                                match RxConn::new(&h) {
                                    Ok(c) => {
                                        conns.insert(h.conn_id, (c, Instant::now()));
                                    }
                                    Err(e) => {
                                        proto_err = Some(e);
                                        break;
                                    }
                                }
                            }
                            continue;
                        }
                        _ => {
                            proto_err = Some("the first frame of a subflow must be HELLO".into());
                            break;
                        }
                    }
                }
                let id = s.conn.unwrap();
                let Some((c, seen)) = conns.get_mut(&id) else {
                    break; // the connection already ended
                };
                *seen = Instant::now();
                if let Err(e) = c.on_frame(s.sub, frame, &mut s.out) {
                    proto_err = Some(e);
                    break;
                }
                if c.finished {
                    ended.push((id, None));
                    break;
                }
            }
            if let Some(id) = s.conn {
                if let Some((c, _)) = conns.get_mut(&id) {
                    if let Some(a) = c.ack_due() {
                        if c.reasm.complete() {
                            // the last ack goes on every subflow: the first to arrive wins
                            for (j, o) in socks.iter_mut().enumerate() {
                                if o.conn == Some(id) && j != i {
                                    wire::encode_u64(b'A', a, &mut o.out);
                                }
                            }
                        }
                        wire::encode_u64(b'A', a, &mut socks[i].out);
                    }
                }
            }
            let s = &mut socks[i];
            if late {
                net::shutdown_write(s.fd);
                drop_socks.push(i);
            } else if let Some(e) = proto_err {
                match s.conn {
                    Some(id) => ended.push((id, Some(e))),
                    None => {
                        emit(&format!(
                            "{{\"role\":\"receiver\",\"error\":{}}}",
                            json_str(&e)
                        ));
                        drop_socks.push(i);
                    }
                }
            } else if eof {
                drop_socks.push(i);
                if let Some(id) = s.conn {
                    let alive = socks
                        .iter()
                        .enumerate()
                        .any(|(j, o)| o.conn == Some(id) && j != i && !drop_socks.contains(&j));
                    if !alive {
                        ended.push((id, Some("every subflow closed before FIN".into())));
                    }
                }
            }
        }
        // idle connections and sockets that never said HELLO
        let now = Instant::now();
        ended_at.retain(|_, at| now.duration_since(*at) <= cfg.idle);
        for (id, (_, seen)) in conns.iter() {
            if now.duration_since(*seen) > cfg.idle {
                ended.push((*id, Some(format!("no traffic for {:?}", cfg.idle))));
            }
        }
        for (i, s) in socks.iter().enumerate() {
            if s.conn.is_none() && now.duration_since(s.since) > cfg.idle {
                drop_socks.push(i);
            }
        }
        for (id, err) in ended {
            let Some((c, _)) = conns.remove(&id) else {
                continue;
            };
            ended_at.insert(id, now);
            // flush replies (FIN_ACK) best effort, then close every subflow
            for (i, s) in socks.iter_mut().enumerate() {
                if s.conn == Some(id) {
                    if !s.out.is_empty() {
                        let _ = net::write(s.fd, &s.out);
                        s.out.clear();
                    }
                    if err.is_some() {
                        net::abort(s.fd);
                        s.fd = -1;
                    } else {
                        net::shutdown_write(s.fd);
                    }
                    drop_socks.push(i);
                }
            }
            emit(&c.report(err.as_deref()));
            done += 1;
            if err.is_some() || !c.intact {
                failed += 1;
            }
        }
        drop_socks.sort_unstable();
        drop_socks.dedup();
        for i in drop_socks.into_iter().rev() {
            let s = socks.swap_remove(i);
            if s.fd >= 0 {
                net::close(s.fd);
            }
        }
    }
    for s in socks {
        if s.fd >= 0 {
            net::close(s.fd);
        }
    }
    net::close(lfd);
    Ok(failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(total: u64) -> Hello {
        Hello {
            conn_id: 1,
            subflow: 0,
            seed: 42,
            total,
            window: 1 << 16,
        }
    }

    fn data(dsn: u64, len: usize) -> Frame {
        let mut payload = vec![0u8; len];
        pattern::fill(42, dsn, &mut payload);
        Frame::Data { dsn, payload }
    }

    #[test]
    fn delivers_acks_and_answers_fin() {
        let mut c = RxConn::new(&hello(3000)).unwrap();
        let mut reply = Vec::new();
        c.on_frame(1, data(1000, 2000), &mut reply).unwrap();
        assert_eq!(c.ack_due(), None);
        c.on_frame(0, data(0, 1500), &mut reply).unwrap();
        assert_eq!(c.ack_due(), Some(3000));
        assert_eq!(c.reasm.dup_bytes, 500);
        c.on_frame(0, Frame::Fin(3000), &mut reply).unwrap();
        let mut d = Decoder::new();
        d.push(&reply);
        let Some(Frame::FinAck(a)) = d.next_frame().unwrap() else {
            panic!("no FIN_ACK")
        };
        assert!(a.intact && a.delivered == 3000 && a.dup_bytes == 500);
        assert!(c.report(None).contains("\"intact\":true"));
    }

    #[test]
    fn bad_input_closes_with_a_clear_error_and_delivers_nothing_corrupt() {
        let mut reply = Vec::new();
        let mut c = RxConn::new(&hello(UNKNOWN_TOTAL)).unwrap();
        c.sink = Some(Vec::new());
        let e = c.on_frame(0, data(70_000, 10), &mut reply).unwrap_err();
        assert!(e.contains("out-of-window"), "{e}");
        // corrupt bytes are flagged, never reported intact
        let mut bad = data(0, 100);
        if let Frame::Data { payload, .. } = &mut bad {
            payload[50] ^= 0xff;
        }
        c.on_frame(0, bad, &mut reply).unwrap();
        assert!(!c.intact);
        assert_eq!(c.first_bad, Some(50));
        // FIN before everything arrived
        let e = c.on_frame(0, Frame::Fin(200), &mut reply).unwrap_err();
        assert!(e.contains("only 100"), "{e}");
        let e = c.on_frame(0, Frame::DataAck(5), &mut reply).unwrap_err();
        assert!(e.contains("receiver only"), "{e}");
        let mut h = hello(0);
        h.window = MAX_WINDOW + 1;
        assert!(RxConn::new(&h).err().unwrap().contains("window"));
        let mut h2 = hello(UNKNOWN_TOTAL);
        h2.seed = 1;
        assert!(c.on_frame(1, Frame::Hello(h2), &mut reply).is_err());
    }
}
