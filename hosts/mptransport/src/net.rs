//! Sockets: non-blocking TCP subflows bound to a source address, `TCP_INFO`,
//! `TCP_NOTSENT_LOWAT`, `poll`.

use std::io;
use std::mem;
use std::net::SocketAddr;
use std::os::fd::RawFd;

/// The kernel's `struct tcp_info` (linux/tcp.h) up to `tcpi_min_rtt`; the kernel fills
/// as much as we ask for.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct TcpInfo {
    pub state: u8,
    pub ca_state: u8,
    pub retransmits: u8,
    pub probes: u8,
    pub backoff: u8,
    pub options: u8,
    pub wscale: u8,
    pub flags: u8,
    pub rto: u32,
    pub ato: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub unacked: u32,
    pub sacked: u32,
    pub lost: u32,
    pub retrans: u32,
    pub fackets: u32,
    pub last_data_sent: u32,
    pub last_ack_sent: u32,
    pub last_data_recv: u32,
    pub last_ack_recv: u32,
    pub pmtu: u32,
    pub rcv_ssthresh: u32,
    pub rtt: u32,
    pub rttvar: u32,
    pub snd_ssthresh: u32,
    pub snd_cwnd: u32,
    pub advmss: u32,
    pub reordering: u32,
    pub rcv_rtt: u32,
    pub rcv_space: u32,
    pub total_retrans: u32,
    pub pacing_rate: u64,
    pub max_pacing_rate: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub segs_out: u32,
    pub segs_in: u32,
    pub notsent_bytes: u32,
    pub min_rtt: u32,
}

/// `tcpi_ca_state` values of loss recovery (TCP_CA_Recovery = 3, TCP_CA_Loss = 4).
pub fn in_recovery(ca_state: u8) -> bool {
    ca_state >= 3
}

pub fn tcp_info(fd: RawFd) -> io::Result<TcpInfo> {
    let mut info = TcpInfo::default();
    let mut len = mem::size_of::<TcpInfo>() as libc::socklen_t;
    // SAFETY: info is a plain repr(C) struct of len bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut TcpInfo as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

pub fn set_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: v is a c_int the call reads.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            &v as *const libc::c_int as *const libc::c_void,
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: zeroed sockaddr_storage is valid; we fill one variant.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in.
            unsafe { *(&mut ss as *mut _ as *mut libc::sockaddr_in) = sin };
            mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above.
            unsafe { *(&mut ss as *mut _ as *mut libc::sockaddr_in6) = sin6 };
            mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Starts a non-blocking connect from `src` (any port) to `dst`; the fd is returned at
/// once (connect in progress).
pub fn connect_from(src: Option<SocketAddr>, dst: SocketAddr, lowat: u32) -> io::Result<RawFd> {
    connect_proto(src, dst, lowat, 0)
}

/// `IPPROTO_MPTCP`: the kernel's own Multipath TCP (the reference the schedulers here are
/// compared with).
pub const IPPROTO_MPTCP: libc::c_int = 262;

/// A non-blocking, close-on-exec stream socket of `addr`'s family and protocol `proto`.
fn stream_socket(addr: &SocketAddr, proto: libc::c_int) -> io::Result<RawFd> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket call.
    check(unsafe {
        libc::socket(
            family,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            proto,
        )
    })
    .map_err(|e| io::Error::new(e.kind(), format!("socket (protocol {proto}): {e}")))
}

/// As [`connect_from`] with an explicit protocol (0: TCP, [`IPPROTO_MPTCP`]).
pub fn connect_proto(
    src: Option<SocketAddr>,
    dst: SocketAddr,
    lowat: u32,
    proto: libc::c_int,
) -> io::Result<RawFd> {
    let fd = stream_socket(&dst, proto)?;
    let setup = || -> io::Result<()> {
        set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
        if lowat > 0 {
            set_int(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, lowat as i32)?;
        }
        if let Some(src) = src {
            let (ss, len) = sockaddr(&src);
            // SAFETY: ss holds a valid address of len bytes.
            check(unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) })
                .map_err(|e| io::Error::new(e.kind(), format!("bind {src}: {e}")))?;
        }
        let (ss, len) = sockaddr(&dst);
        // SAFETY: as above.
        let r = unsafe { libc::connect(fd, &ss as *const _ as *const libc::sockaddr, len) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(io::Error::new(e.kind(), format!("connect {dst}: {e}")));
            }
        }
        Ok(())
    };
    if let Err(e) = setup() {
        close(fd);
        return Err(e);
    }
    Ok(fd)
}

/// The pending error of a socket (`SO_ERROR`), for a finished non-blocking connect.
pub fn so_error(fd: RawFd) -> io::Result<()> {
    let mut v: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: v is a c_int of len bytes.
    check(unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    })?;
    if v != 0 {
        return Err(io::Error::from_raw_os_error(v));
    }
    Ok(())
}

/// A listening non-blocking socket on `addr`.
pub fn listen(addr: SocketAddr) -> io::Result<RawFd> {
    listen_proto(addr, 0)
}

/// As [`listen`] with an explicit protocol (0: TCP, [`IPPROTO_MPTCP`]).
pub fn listen_proto(addr: SocketAddr, proto: libc::c_int) -> io::Result<RawFd> {
    let fd = stream_socket(&addr, proto)?;
    let r = (|| {
        set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
        let (ss, len) = sockaddr(&addr);
        // SAFETY: ss holds a valid address.
        check(unsafe { libc::bind(fd, &ss as *const _ as *const libc::sockaddr, len) })
            .map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
        // SAFETY: plain call.
        check(unsafe { libc::listen(fd, 128) })?;
        Ok(())
    })();
    if let Err(e) = r {
        close(fd);
        return Err(e);
    }
    Ok(fd)
}

/// The local address a socket is bound to.
pub fn local_addr(fd: RawFd) -> io::Result<SocketAddr> {
    // SAFETY: zeroed storage, the kernel fills it.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    check(unsafe { libc::getsockname(fd, &mut ss as *mut _ as *mut libc::sockaddr, &mut len) })?;
    Ok(from_storage(&ss))
}

fn from_storage(ss: &libc::sockaddr_storage) -> SocketAddr {
    if ss.ss_family as libc::c_int == libc::AF_INET {
        // SAFETY: family says sockaddr_in.
        let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
        SocketAddr::from((
            sin.sin_addr.s_addr.to_ne_bytes(),
            u16::from_be(sin.sin_port),
        ))
    } else {
        // SAFETY: family says sockaddr_in6.
        let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
        SocketAddr::from((sin6.sin6_addr.s6_addr, u16::from_be(sin6.sin6_port)))
    }
}

/// Accepts one connection (non-blocking); `None` when none is waiting.
pub fn accept(fd: RawFd) -> io::Result<Option<(RawFd, SocketAddr)>> {
    // SAFETY: zeroed storage, the kernel fills it.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let r = unsafe {
        libc::accept4(
            fd,
            &mut ss as *mut _ as *mut libc::sockaddr,
            &mut len,
            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        return Err(e);
    }
    let _ = set_int(r, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    Ok(Some((r, from_storage(&ss))))
}

/// read(2); Ok(0) is end of stream, WouldBlock is mapped to `None`.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: buf is valid for buf.len() bytes.
    let r = unsafe { libc::read(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
    syscall_result(r as isize)
}

/// A non-blocking call's result: the count, None when it would block, or the error.
fn syscall_result(r: isize) -> io::Result<Option<usize>> {
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(r as usize))
}

/// write(2) (MSG_NOSIGNAL); WouldBlock is `Ok(0)`.
pub fn write(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for buf.len() bytes.
    let r = unsafe {
        libc::send(
            fd,
            buf.as_ptr() as *const libc::c_void,
            buf.len(),
            libc::MSG_NOSIGNAL,
        )
    };
    Ok(syscall_result(r as isize)?.unwrap_or(0))
}

/// writev(2) of two buffers (MSG_NOSIGNAL); WouldBlock is `Ok(0)`.
pub fn write2(fd: RawFd, a: &[u8], b: &[u8]) -> io::Result<usize> {
    let iov = [
        libc::iovec {
            iov_base: a.as_ptr() as *mut libc::c_void,
            iov_len: a.len(),
        },
        libc::iovec {
            iov_base: b.as_ptr() as *mut libc::c_void,
            iov_len: b.len(),
        },
    ];
    // SAFETY: a zeroed msghdr with a valid iovec array.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = 2;
    let r = unsafe { libc::sendmsg(fd, &msg, libc::MSG_NOSIGNAL) };
    Ok(syscall_result(r as isize)?.unwrap_or(0))
}

/// Closes with an RST (SO_LINGER 0): how a test kills a path abruptly.
pub fn abort(fd: RawFd) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: l is a valid linger struct.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const _ as *const libc::c_void,
            mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    close(fd);
}

pub fn shutdown_write(fd: RawFd) {
    // SAFETY: plain call.
    unsafe { libc::shutdown(fd, libc::SHUT_WR) };
}

pub fn close(fd: RawFd) {
    // SAFETY: fd is ours and closed once.
    unsafe { libc::close(fd) };
}

/// poll(2) over `fds`; returns the number ready (EINTR counts as 0).
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: fds is a valid array.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// ppoll(2) with a timeout in microseconds; EINTR counts as 0.
pub fn poll_us(fds: &mut [libc::pollfd], timeout_us: u64) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: (timeout_us / 1_000_000) as libc::time_t,
        tv_nsec: ((timeout_us % 1_000_000) * 1000) as libc::c_long,
    };
    // SAFETY: fds is a valid array, ts a valid timespec, no signal mask.
    let r = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// CPU time (user + system) this process used, in seconds.
pub fn cpu_seconds() -> f64 {
    // SAFETY: zeroed rusage, the kernel fills it.
    let mut ru: libc::rusage = unsafe { mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}
