//! Thin, safe-ish wrappers over the Linux APIs the switch needs: AF_PACKET sockets with
//! batched recvmmsg/sendmmsg, rtnetlink link notifications, epoll, timerfd, clocks.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn mono_ns() -> u64 {
    let mut ts: libc::timespec = unsafe { zeroed() };
    // SAFETY: valid pointer to a timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn wall_secs() -> f64 {
    let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    d.as_secs_f64()
}

pub fn ifindex(name: &str) -> io::Result<i32> {
    let c = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i as i32)
    }
}

/// Interface MAC and whether it is administratively up with carrier.
pub fn if_info(name: &str) -> io::Result<([u8; 6], bool)> {
    let base = format!("/sys/class/net/{name}");
    let addr = std::fs::read_to_string(format!("{base}/address"))?;
    let mut mac = [0u8; 6];
    for (i, p) in addr.trim().split(':').take(6).enumerate() {
        mac[i] = u8::from_str_radix(p, 16).unwrap_or(0);
    }
    let flags = std::fs::read_to_string(format!("{base}/flags"))?;
    let flags = u32::from_str_radix(flags.trim().trim_start_matches("0x"), 16).unwrap_or(0);
    Ok((mac, link_up_from_flags(flags)))
}

pub fn link_up_from_flags(flags: u32) -> bool {
    flags & libc::IFF_UP as u32 != 0 && flags & libc::IFF_RUNNING as u32 != 0
}

fn setsockopt_int(fd: RawFd, level: i32, opt: i32, v: i32) -> io::Result<()> {
    // SAFETY: pointer/len of a local int.
    cvt(unsafe {
        libc::setsockopt(fd, level, opt, &v as *const i32 as *const libc::c_void, size_of::<i32>() as u32)
    })
    .map(|_| ())
}

const PACKET_IGNORE_OUTGOING: i32 = 23;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// One received frame, borrowed from the batch buffers.
pub struct RxFrame<'a> {
    pub data: &'a [u8],
    /// VLAN tag the kernel stripped into metadata (TPID, TCI); must be put back.
    pub vlan: Option<(u16, u16)>,
}

/// Reusable receive buffers for recvmmsg, shared by all ports (the loop is single threaded).
pub struct RxBatch {
    bufs: Vec<Vec<u8>>,
    ctrl: Vec<[u64; 8]>,
    addrs: Vec<libc::sockaddr_ll>,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
    n: usize,
}

pub const MAX_FRAME: usize = 9216 + 64;

impl RxBatch {
    pub fn new(batch: usize) -> RxBatch {
        RxBatch {
            bufs: (0..batch).map(|_| vec![0u8; MAX_FRAME]).collect(),
            ctrl: vec![[0u64; 8]; batch],
            // SAFETY: sockaddr_ll is plain data; all-zero is valid.
            addrs: vec![unsafe { zeroed() }; batch],
            // SAFETY: iovec/mmsghdr are plain data; pointers are filled before use.
            iovs: vec![unsafe { zeroed() }; batch],
            msgs: vec![unsafe { zeroed() }; batch],
            n: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.n
    }

    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Frame i of the last receive, or None when it was truncated or our own transmit.
    pub fn frame(&self, i: usize) -> Option<RxFrame<'_>> {
        let m = &self.msgs[i];
        if m.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            return None;
        }
        if self.addrs[i].sll_pkttype == libc::PACKET_OUTGOING {
            return None;
        }
        let len = (m.msg_len as usize).min(MAX_FRAME);
        let mut vlan = None;
        // Walk the control messages for PACKET_AUXDATA.
        let hdr = &m.msg_hdr;
        // SAFETY: the kernel filled msg_control within msg_controllen; CMSG_* walk it.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == libc::PACKET_AUXDATA {
                    let aux = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::tpacket_auxdata);
                    if aux.tp_status & TP_STATUS_VLAN_VALID != 0 {
                        let tpid = if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 {
                            aux.tp_vlan_tpid
                        } else {
                            0x8100
                        };
                        vlan = Some((tpid, aux.tp_vlan_tci));
                    }
                }
                c = libc::CMSG_NXTHDR(hdr, c);
            }
        }
        Some(RxFrame { data: &self.bufs[i][..len], vlan })
    }

    /// Whether frame i was dropped as truncated (counted as an rx error).
    pub fn truncated(&self, i: usize) -> bool {
        self.msgs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0
    }
}

pub struct PacketSocket {
    fd: OwnedFd,
    pub ifindex: i32,
}

impl PacketSocket {
    pub fn open(ifname: &str) -> io::Result<PacketSocket> {
        let ifindex = ifindex(ifname)?;
        // Protocol 0 at creation so nothing is queued before bind() picks the interface.
        // SAFETY: plain syscall.
        let fd = cvt(unsafe {
            libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0)
        })?;
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_AUXDATA, 1)?;
        // Older kernels lack it; we also filter PACKET_OUTGOING per frame.
        let _ = setsockopt_int(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1);
        // Skip the (useless, on veth) qdisc layer on transmit.
        let _ = setsockopt_int(raw, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, 1);
        for (force, plain) in
            [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)]
        {
            if setsockopt_int(raw, libc::SOL_SOCKET, force, 4 << 20).is_err() {
                let _ = setsockopt_int(raw, libc::SOL_SOCKET, plain, 4 << 20);
            }
        }
        // SAFETY: sockaddr_ll is plain data.
        let mut sll: libc::sockaddr_ll = unsafe { zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex;
        // SAFETY: pointer/len of a local sockaddr_ll.
        cvt(unsafe {
            libc::bind(raw, &sll as *const _ as *const libc::sockaddr, size_of::<libc::sockaddr_ll>() as u32)
        })?;
        // Promiscuous membership: a switch port must see frames for every MAC. The
        // kernel drops the membership when the socket closes.
        // SAFETY: packet_mreq is plain data.
        let mut mr: libc::packet_mreq = unsafe { zeroed() };
        mr.mr_ifindex = ifindex;
        mr.mr_type = libc::PACKET_MR_PROMISC as u16;
        // SAFETY: pointer/len of a local packet_mreq.
        cvt(unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &mr as *const _ as *const libc::c_void,
                size_of::<libc::packet_mreq>() as u32,
            )
        })?;
        Ok(PacketSocket { fd, ifindex })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Receives up to the batch size of frames without blocking. Returns how many.
    pub fn recv_batch(&self, b: &mut RxBatch) -> io::Result<usize> {
        let n = b.bufs.len();
        for i in 0..n {
            b.iovs[i] =
                libc::iovec { iov_base: b.bufs[i].as_mut_ptr() as *mut libc::c_void, iov_len: MAX_FRAME };
            let h = &mut b.msgs[i].msg_hdr;
            h.msg_name = &mut b.addrs[i] as *mut _ as *mut libc::c_void;
            h.msg_namelen = size_of::<libc::sockaddr_ll>() as u32;
            h.msg_iov = &mut b.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = b.ctrl[i].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = size_of::<[u64; 8]>();
            h.msg_flags = 0;
            b.msgs[i].msg_len = 0;
        }
        // SAFETY: every mmsghdr points into buffers owned by `b`, valid for the call.
        let r = unsafe {
            libc::recvmmsg(
                self.fd(),
                b.msgs.as_mut_ptr(),
                n as u32,
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            b.n = 0;
            return match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        b.n = r as usize;
        Ok(b.n)
    }

    /// Sends frames with sendmmsg. Returns how many went out; the rest could not be
    /// queued by the kernel (full socket buffer, link down) and count as drops.
    pub fn send_batch(&self, frames: &[Vec<u8>]) -> usize {
        let mut sent = 0;
        while sent < frames.len() {
            let chunk = &frames[sent..(sent + 256).min(frames.len())];
            let mut iovs: Vec<libc::iovec> = chunk
                .iter()
                .map(|f| libc::iovec { iov_base: f.as_ptr() as *mut libc::c_void, iov_len: f.len() })
                .collect();
            // SAFETY: plain data.
            let mut msgs: Vec<libc::mmsghdr> = vec![unsafe { zeroed() }; chunk.len()];
            for (m, iov) in msgs.iter_mut().zip(iovs.iter_mut()) {
                m.msg_hdr.msg_iov = iov;
                m.msg_hdr.msg_iovlen = 1;
            }
            // SAFETY: msgs/iovs point at frames that outlive the call.
            let r = unsafe {
                libc::sendmmsg(self.fd(), msgs.as_mut_ptr(), msgs.len() as u32, libc::MSG_DONTWAIT)
            };
            if r <= 0 {
                // Skip the frame that failed (e.g. ENETDOWN, EMSGSIZE) and go on.
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    break;
                }
                sent += 1;
                continue;
            }
            sent += r as usize;
            if (r as usize) < chunk.len() {
                // Partial: the next frame failed; skip it so one bad frame does not stall.
                sent += 1;
            }
        }
        sent.min(frames.len())
    }
}

/// rtnetlink socket subscribed to link (carrier) changes.
pub struct LinkMonitor {
    fd: OwnedFd,
}

pub struct LinkEvent {
    pub ifindex: i32,
    pub up: bool,
}

impl LinkMonitor {
    pub fn open() -> io::Result<LinkMonitor> {
        // SAFETY: plain syscall.
        let fd = cvt(unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        })?;
        // SAFETY: fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain data.
        let mut sa: libc::sockaddr_nl = unsafe { zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = libc::RTMGRP_LINK as u32;
        // SAFETY: pointer/len of a local sockaddr_nl.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const _ as *const libc::sockaddr,
                size_of::<libc::sockaddr_nl>() as u32,
            )
        })?;
        Ok(LinkMonitor { fd })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Drains pending notifications.
    pub fn read_events(&self) -> Vec<LinkEvent> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 32768];
        loop {
            // SAFETY: buffer pointer/len valid.
            let r = unsafe {
                libc::recv(self.fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_DONTWAIT)
            };
            if r <= 0 {
                break;
            }
            parse_link_msgs(&buf[..r as usize], &mut out);
        }
        out
    }
}

/// Parses a buffer of netlink messages into link events (bounds-checked).
pub fn parse_link_msgs(b: &[u8], out: &mut Vec<LinkEvent>) {
    let mut o = 0;
    while o + 16 <= b.len() {
        let len = u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]) as usize;
        let typ = u16::from_ne_bytes([b[o + 4], b[o + 5]]);
        if len < 16 || o + len > b.len() {
            break;
        }
        if (typ == libc::RTM_NEWLINK || typ == libc::RTM_DELLINK) && len >= 32 {
            let p = o + 16;
            let ifindex = i32::from_ne_bytes([b[p + 4], b[p + 5], b[p + 6], b[p + 7]]);
            let flags = u32::from_ne_bytes([b[p + 8], b[p + 9], b[p + 10], b[p + 11]]);
            let up = typ == libc::RTM_NEWLINK && link_up_from_flags(flags);
            out.push(LinkEvent { ifindex, up });
        }
        o += (len + 3) & !3;
    }
}

pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: fresh fd we own.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    fn ctl(&self, op: i32, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: valid epoll fd and event pointer.
        cvt(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) }).map(|_| ())
    }

    pub fn add(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, token)
    }

    pub fn modify(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_MOD, fd, events, token)
    }

    pub fn delete(&self, fd: RawFd) {
        // SAFETY: valid epoll fd; a null event is allowed for DEL.
        unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    /// Waits up to `timeout_ms`; returns (token, events) pairs.
    pub fn wait(&self, evs: &mut Vec<libc::epoll_event>, timeout_ms: i32) -> usize {
        let cap = evs.capacity().max(16);
        evs.clear();
        // SAFETY: the buffer has `cap` slots; the kernel writes at most that many.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), evs.as_mut_ptr(), cap as i32, timeout_ms) };
        if n > 0 {
            // SAFETY: the kernel initialized n entries.
            unsafe { evs.set_len(n as usize) };
            n as usize
        } else {
            0
        }
    }
}

/// A CLOCK_MONOTONIC timerfd armed to absolute deadlines (link-emulation departures).
pub struct Timer {
    fd: OwnedFd,
    armed_at: Option<u64>,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        // SAFETY: plain syscall.
        let fd = cvt(unsafe {
            libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC)
        })?;
        // SAFETY: fresh fd we own.
        Ok(Timer { fd: unsafe { OwnedFd::from_raw_fd(fd) }, armed_at: None })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Arms for `deadline_ns` (monotonic), or disarms with None. Cheap when unchanged.
    pub fn set(&mut self, deadline_ns: Option<u64>) {
        if deadline_ns == self.armed_at {
            return;
        }
        self.armed_at = deadline_ns;
        let d = deadline_ns.map(|d| d.max(1));
        let ts = |ns: u64| libc::timespec {
            tv_sec: (ns / 1_000_000_000) as i64,
            tv_nsec: (ns % 1_000_000_000) as i64,
        };
        let spec = libc::itimerspec { it_interval: ts(0), it_value: ts(d.unwrap_or(0)) };
        // SAFETY: valid fd and itimerspec.
        unsafe { libc::timerfd_settime(self.fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
    }

    pub fn clear(&mut self) {
        let mut b = [0u8; 8];
        // SAFETY: 8-byte buffer for the expiration count.
        unsafe { libc::read(self.fd(), b.as_mut_ptr() as *mut libc::c_void, 8) };
        self.armed_at = None;
    }
}

/// Finer timer wake-ups: default slack is 50 µs, too coarse for pacing at 100 Mbit/s.
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}
