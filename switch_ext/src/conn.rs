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

pub struct Conn {
    pub stream: TcpStream,
    pub state: State,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    wpos: usize,
    pub last_rx_ns: u64,
    pub echo_outstanding: bool,
    xid: u32,
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
                    if self.rbuf.len() > (16 << 20) {
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
                    // The spec requires hello first; answer and go on waiting.
                    self.send(&error_msg(xid, OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_BAD_TYPE), &raw));
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

    #[test]
    fn backoff_doubles_to_cap() {
        let mut b = Backoff::new(1000);
        let v: Vec<u64> = (0..6).map(|_| b.next_delay_ms()).collect();
        assert_eq!(v, vec![100, 200, 400, 800, 1000, 1000]);
        b.reset();
        assert_eq!(b.next_delay_ms(), 100);
    }
}
