//! The controller connection: non-blocking connect, hello/version negotiation, framing,
//! buffered writes, echo probes, and reconnect with exponential backoff.

use std::io::{self, Read, Write};
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};

use crate::ofp::codec::{error_msg, hello_accepts_v13, our_hello, parse_header, Body, Msg, OfpErr};
use crate::ofp::consts::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Connecting,
    /// TCP up, our hello sent, waiting for the peer's hello.
    Hello,
    Ready,
}

/// Controller output beyond this is not buffered for asynchronous packet-ins (replies are
/// always kept): a slow controller must not make the switch grow without bound.
pub const WBUF_SOFT_CAP: usize = 4 << 20;
/// Output a peer has not read beyond this ends the connection: even replies (and error
/// replies to a flood of bad requests) must not grow the switch without bound.
pub const WBUF_HARD_CAP: usize = 64 << 20;
/// Input read in one go before framing what is there (a fast peer cannot starve the loop).
pub const RBUF_CAP: usize = 16 << 20;
/// Messages other than HELLO a peer may send before its hello, each answered with
/// BAD_REQUEST/BAD_TYPE as the specification asks; past this it is not an OpenFlow
/// controller and the connection ends.
pub const MAX_PREHELLO_MSGS: u32 = 16;

pub struct Conn {
    pub stream: TcpStream,
    pub state: State,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    wpos: usize,
    pub last_rx_ns: u64,
    pub echo_outstanding: bool,
    xid: u32,
    prehello_msgs: u32,
}

pub enum Event {
    /// A complete message for the datapath (after the handshake).
    Msg(Vec<u8>),
    /// Handshake completed.
    Up,
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, u32) {
    // SAFETY: plain data.
    let mut ss: libc::sockaddr_storage = unsafe { zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            // SAFETY: sockaddr_storage is large enough and aligned for sockaddr_in.
            let sin = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in) };
            sin.sin_family = libc::AF_INET as u16;
            sin.sin_port = a.port().to_be();
            sin.sin_addr.s_addr = u32::from_ne_bytes(a.ip().octets());
            (ss, size_of::<libc::sockaddr_in>() as u32)
        }
        SocketAddr::V6(a) => {
            // SAFETY: as above for sockaddr_in6.
            let sin6 = unsafe { &mut *(&mut ss as *mut _ as *mut libc::sockaddr_in6) };
            sin6.sin6_family = libc::AF_INET6 as u16;
            sin6.sin6_port = a.port().to_be();
            sin6.sin6_addr.s6_addr = a.ip().octets();
            (ss, size_of::<libc::sockaddr_in6>() as u32)
        }
    }
}

impl Conn {
    /// Starts a non-blocking connect (the event loop never blocks on the controller).
    pub fn start(addr: &SocketAddr) -> io::Result<Conn> {
        let fam = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        // SAFETY: plain syscall.
        let fd =
            unsafe { libc::socket(fam, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: we own fd; TcpStream closes it on drop.
        let stream = unsafe { TcpStream::from_raw_fd(fd) };
        let (ss, len) = sockaddr(addr);
        // SAFETY: valid fd and address.
        let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
        let state = if r == 0 {
            State::Hello
        } else {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(e);
            }
            State::Connecting
        };
        let _ = stream.set_nodelay(true);
        let mut c = Conn {
            stream,
            state,
            rbuf: Vec::new(),
            wbuf: Vec::new(),
            wpos: 0,
            last_rx_ns: 0,
            echo_outstanding: false,
            xid: 1,
            prehello_msgs: 0,
        };
        if state == State::Hello {
            c.send(&our_hello(0));
        }
        Ok(c)
    }

    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    pub fn wants_write(&self) -> bool {
        self.state == State::Connecting || self.wpos < self.wbuf.len()
    }

    pub fn pending_bytes(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    pub fn next_xid(&mut self) -> u32 {
        self.xid = self.xid.wrapping_add(1);
        self.xid
    }

    pub fn send(&mut self, m: &Msg) {
        self.wbuf.extend_from_slice(&m.encode());
    }

    /// Called when the socket is writable: completes a pending connect, flushes output.
    pub fn on_writable(&mut self) -> io::Result<()> {
        if self.state == State::Connecting {
            let mut err: i32 = 0;
            let mut len = size_of::<i32>() as u32;
            // SAFETY: valid fd and int buffer.
            unsafe {
                libc::getsockopt(
                    self.fd(),
                    libc::SOL_SOCKET,
                    libc::SO_ERROR,
                    &mut err as *mut i32 as *mut libc::c_void,
                    &mut len,
                )
            };
            if err != 0 {
                return Err(io::Error::from_raw_os_error(err));
            }
            self.state = State::Hello;
            self.send(&our_hello(0));
        }
        self.flush()
    }

    pub fn flush(&mut self) -> io::Result<()> {
        if self.pending_bytes() > WBUF_HARD_CAP {
            return Err(io::Error::other(format!(
                "controller left {} bytes unread (cap {WBUF_HARD_CAP})",
                self.pending_bytes()
            )));
        }
        while self.wpos < self.wbuf.len() {
            match self.stream.write(&self.wbuf[self.wpos..]) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => self.wpos += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        if self.wpos == self.wbuf.len() {
            self.wbuf.clear();
            self.wpos = 0;
        } else if self.wpos > (1 << 20) {
            self.wbuf.drain(..self.wpos);
            self.wpos = 0;
        }
        Ok(())
    }

    /// Reads what is available and returns framed events. Errors (EOF, protocol failure)
    /// mean the connection must be dropped.
    pub fn on_readable(&mut self, now_ns: u64) -> io::Result<Vec<Event>> {
        let mut buf = [0u8; 65536];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(n) => {
                    self.rbuf.extend_from_slice(&buf[..n]);
                    if self.rbuf.len() > RBUF_CAP {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        self.last_rx_ns = now_ns;
        self.echo_outstanding = false;
        let mut out = Vec::new();
        let mut off = 0;
        while let Some((version, typ, len, xid)) = parse_header(&self.rbuf[off..]) {
            let len = len as usize;
            if len < OFP_HEADER_LEN {
                // A length below the header size cannot be framed: the stream is lost.
                let e =
                    error_msg(xid, OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_BAD_LEN), &self.rbuf[off..off + 8]);
                self.send(&e);
                let _ = self.flush();
                return Err(io::Error::new(io::ErrorKind::InvalidData, "message length < 8"));
            }
            if self.rbuf.len() - off < len {
                break;
            }
            let raw = self.rbuf[off..off + len].to_vec();
            off += len;
            if self.state == State::Hello {
                if typ != OFPT_HELLO {
                    // The spec requires hello first; answer and go on waiting, a while.
                    self.send(&error_msg(xid, OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_BAD_TYPE), &raw));
                    self.prehello_msgs += 1;
                    if self.prehello_msgs > MAX_PREHELLO_MSGS {
                        let _ = self.flush();
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            format!(
                                "{} messages before hello: not an OpenFlow controller",
                                self.prehello_msgs
                            ),
                        ));
                    }
                    continue;
                }
                let elements = match Msg::decode(&raw) {
                    Ok(Msg { body: Body::Hello { elements }, .. }) => elements,
                    _ => Vec::new(),
                };
                if !hello_accepts_v13(version, &elements) {
                    let e = Msg::new(
                        xid,
                        Body::Error {
                            typ: OFPET_HELLO_FAILED,
                            code: OFPHFC_INCOMPATIBLE,
                            data: b"dcnlab-switch speaks OpenFlow 1.3 (0x04) only".to_vec(),
                        },
                    );
                    self.send(&e);
                    let _ = self.flush();
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "controller does not speak OpenFlow 1.3",
                    ));
                }
                self.state = State::Ready;
                out.push(Event::Up);
                continue;
            }
            out.push(Event::Msg(raw));
        }
        self.rbuf.drain(..off);
        Ok(out)
    }
}

/// Exponential reconnect backoff: 100 ms doubling to a cap, reset on a good handshake.
#[derive(Debug, Clone)]
pub struct Backoff {
    pub cur_ms: u64,
    pub max_ms: u64,
}

impl Backoff {
    pub fn new(max_ms: u64) -> Self {
        Backoff { cur_ms: 100, max_ms }
    }
    pub fn next_delay_ms(&mut self) -> u64 {
        let d = self.cur_ms;
        self.cur_ms = (self.cur_ms * 2).min(self.max_ms);
        d
    }
    pub fn reset(&mut self) {
        self.cur_ms = 100;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    /// A switch-side connection and the controller's end of it, handshake not yet done.
    fn pair() -> (Conn, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Conn::start(&listener.local_addr().unwrap()).unwrap();
        let (peer, _) = listener.accept().unwrap();
        peer.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while c.wants_write() && Instant::now() < deadline {
            c.on_writable().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        (c, peer)
    }

    /// One whole message from the switch, as the controller reads it.
    fn read_msg(peer: &mut TcpStream) -> Vec<u8> {
        let mut head = [0u8; 8];
        peer.read_exact(&mut head).unwrap();
        let len = u16::from_be_bytes([head[2], head[3]]) as usize;
        let mut rest = vec![0u8; len - 8];
        peer.read_exact(&mut rest).unwrap();
        [head.to_vec(), rest].concat()
    }

    fn error_of(msg: &[u8]) -> (u16, u16) {
        assert_eq!(msg[1], OFPT_ERROR, "expected an error, got type {}", msg[1]);
        (u16::from_be_bytes([msg[8], msg[9]]), u16::from_be_bytes([msg[10], msg[11]]))
    }

    fn header(version: u8, typ: u8, len: u16, xid: u32) -> Vec<u8> {
        let mut b = vec![version, typ];
        b.extend_from_slice(&len.to_be_bytes());
        b.extend_from_slice(&xid.to_be_bytes());
        b
    }

    /// Reads until the switch has something to say (events) or gives up on the peer.
    fn pump(c: &mut Conn) -> io::Result<Vec<Event>> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let evs = c.on_readable(1)?;
            c.flush()?;
            if !evs.is_empty() || Instant::now() > deadline {
                return Ok(evs);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Reads until the switch has answered on the wire or ended the connection (for cases
    /// that produce no events); the answer stays unread for the test (peek).
    fn pump_until_written(c: &mut Conn, peer: &mut TcpStream) -> io::Result<()> {
        peer.set_nonblocking(true).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut res = Ok(());
        let mut buf = [0u8; 8];
        while Instant::now() < deadline {
            if let Err(e) = c.on_readable(1).and_then(|_| c.flush()) {
                res = Err(e);
                break;
            }
            if matches!(peer.peek(&mut buf), Ok(n) if n >= 8) {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        peer.set_nonblocking(false).unwrap();
        res
    }

    fn hello_v13() -> Vec<u8> {
        header(OFP_VERSION, OFPT_HELLO, 8, 1)
    }

    #[test]
    fn the_switch_says_hello_first_and_comes_up_on_the_peers() {
        let (mut c, mut peer) = pair();
        let hello = read_msg(&mut peer);
        assert_eq!((hello[0], hello[1]), (OFP_VERSION, OFPT_HELLO));
        assert_eq!(c.state, State::Hello);
        peer.write_all(&hello_v13()).unwrap();
        let evs = pump(&mut c).unwrap();
        assert!(matches!(evs.as_slice(), [Event::Up]));
        assert_eq!(c.state, State::Ready);
    }

    #[test]
    fn a_length_below_the_header_is_bad_len_and_ends_the_connection() {
        let (mut c, mut peer) = pair();
        let _hello = read_msg(&mut peer);
        peer.write_all(&header(OFP_VERSION, OFPT_ECHO_REQUEST, 4, 9)).unwrap();
        let res = pump_until_written(&mut c, &mut peer);
        assert_eq!(res.unwrap_err().kind(), io::ErrorKind::InvalidData);
        assert_eq!(error_of(&read_msg(&mut peer)), (OFPET_BAD_REQUEST, OFPBRC_BAD_LEN));
    }

    #[test]
    fn a_message_before_hello_is_answered_and_the_handshake_still_completes() {
        let (mut c, mut peer) = pair();
        let _hello = read_msg(&mut peer);
        peer.write_all(&header(OFP_VERSION, OFPT_ECHO_REQUEST, 8, 5)).unwrap();
        pump_until_written(&mut c, &mut peer).unwrap();
        assert_eq!(c.state, State::Hello);
        assert_eq!(error_of(&read_msg(&mut peer)), (OFPET_BAD_REQUEST, OFPBRC_BAD_TYPE));
        peer.write_all(&hello_v13()).unwrap();
        assert!(matches!(pump(&mut c).unwrap().as_slice(), [Event::Up]));
    }

    #[test]
    fn a_peer_that_never_says_hello_is_dropped_after_a_few_messages() {
        let (mut c, mut peer) = pair();
        let _hello = read_msg(&mut peer);
        let echoes: Vec<u8> =
            (0..MAX_PREHELLO_MSGS + 1).flat_map(|x| header(OFP_VERSION, OFPT_ECHO_REQUEST, 8, x)).collect();
        peer.write_all(&echoes).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match c.on_readable(1).and_then(|_| c.flush()) {
                Err(e) => break e,
                Ok(()) if Instant::now() > deadline => panic!("never dropped"),
                Ok(()) => std::thread::sleep(Duration::from_millis(2)),
            }
        };
        assert!(err.to_string().contains("before hello"), "{err}");
    }

    #[test]
    fn a_peer_without_openflow_13_gets_hello_failed() {
        let (mut c, mut peer) = pair();
        let _hello = read_msg(&mut peer);
        peer.write_all(&header(0x01, OFPT_HELLO, 8, 3)).unwrap();
        assert!(pump_until_written(&mut c, &mut peer).is_err());
        assert_eq!(error_of(&read_msg(&mut peer)), (OFPET_HELLO_FAILED, OFPHFC_INCOMPATIBLE));
    }

    #[test]
    fn after_the_handshake_every_message_reaches_the_datapath_whatever_its_version() {
        // The datapath answers a wrong version with BAD_REQUEST/BAD_VERSION (its decoder);
        // the connection only frames, and must not drop a session for it.
        let (mut c, mut peer) = pair();
        let _hello = read_msg(&mut peer);
        peer.write_all(&hello_v13()).unwrap();
        pump(&mut c).unwrap();
        peer.write_all(&header(0x05, OFPT_ECHO_REQUEST, 8, 77)).unwrap();
        let evs = pump(&mut c).unwrap();
        match evs.as_slice() {
            [Event::Msg(raw)] => assert_eq!(raw[0], 0x05),
            _ => panic!("expected the message to be handed on"),
        }
    }

    #[test]
    fn sixteen_mib_of_garbage_never_panics_and_buffers_stay_bounded() {
        // Whatever the bytes, the connection frames them (or ends on what it cannot frame)
        // and the datapath answers each message; nothing panics and the switch buffers at
        // most one unfinished message.  Garbage may even contain a hello that negotiates
        // 1.3: from then on messages are decoded and answered, not a reason to hang up.
        use crate::datapath::{Datapath, DpConfig, FailMode};
        use crate::group::SelectMode;
        let mut dp = Datapath::new(DpConfig {
            name: "s1".into(),
            dpid: 1,
            n_tables: 4,
            select_mode: SelectMode::Random,
            fail_mode: FailMode::Secure,
            seed: 3,
        });
        let (mut c, mut peer) = pair();
        let _hello = read_msg(&mut peer);
        let writer = std::thread::spawn(move || {
            let mut x: u32 = 12345;
            let junk: Vec<u8> = (0..(16 << 20))
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (x >> 16) as u8
                })
                .collect();
            let _ = peer.write_all(&junk); // fails once the switch hangs up: fine
            peer
        });
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut messages = 0;
        while Instant::now() < deadline && !writer.is_finished() {
            match c.on_readable(1) {
                Ok(evs) => {
                    for ev in evs {
                        if let Event::Msg(raw) = ev {
                            dp.handle_raw(&raw, 0);
                            dp.ctrl.clear();
                            dp.out.clear();
                            messages += 1;
                        }
                    }
                }
                Err(_) => break, // what cannot be framed ends the connection
            }
            assert!(c.rbuf.len() <= RBUF_CAP + 65536, "read buffer {}", c.rbuf.len());
            c.wbuf.clear(); // the peer never reads: keep the test about input
            c.wpos = 0;
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(c);
        let _ = writer.join().unwrap();
        eprintln!("{messages} garbage messages reached the datapath");
    }

    #[test]
    fn a_peer_that_never_reads_is_dropped_past_the_hard_cap() {
        let (mut c, _peer) = pair(); // the peer reads nothing from here on
        let big = Msg::new(1, Body::EchoReply(vec![0u8; 60_000]));
        let mut ended = None;
        for _ in 0..2 * (WBUF_HARD_CAP / 60_000) {
            c.send(&big);
            if let Err(e) = c.flush() {
                ended = Some(e);
                break;
            }
        }
        let e = ended.expect("output grew past the hard cap without an error");
        assert!(e.to_string().contains("unread"), "{e}");
        assert!(c.pending_bytes() <= WBUF_HARD_CAP + 60_100);
    }

    #[test]
    fn backoff_doubles_to_cap() {
        let mut b = Backoff::new(1000);
        let v: Vec<u64> = (0..6).map(|_| b.next_delay_ms()).collect();
        assert_eq!(v, vec![100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay_ms(), 100);
    }
}
