//! The clamp program's maps through raw bpf(2): BPF_OBJ_GET on a pinned path (or a map
//! fd inherited from the Python side), lookup, update, delete, get-next-key, batched
//! reads.  Layouts as `clamp.bpf.c` and `bpf.py` (KEY `=I16s16sHH`, VALUE `=IIQ`,
//! FLOW_VALUE `=IIIIQIIQ`).  The kernel reads and writes a map's key and value sizes
//! through the pointers it is given, so every call checks its buffers against the sizes
//! the map reported when it was opened: a wrong buffer is an error, never an overrun.

use crate::proto::Tuple4;
use std::ffi::CString;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_MAP_DELETE_ELEM: libc::c_long = 3;
const BPF_MAP_GET_NEXT_KEY: libc::c_long = 4;
const BPF_OBJ_GET: libc::c_long = 7;
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;
const ENOTSUPP: i32 = 524; // the kernel's internal "not supported", seen by user space
const BPF_ANY: u64 = 0;

pub const KEY_LEN: usize = 40;
pub const CLAMP_VALUE_LEN: usize = 16;
pub const FLOW_VALUE_LEN: usize = 40;
pub const STAT_NAMES: [&str; 3] = ["applied", "lifted", "errors"];
/// The stats array's keys (u32 indices) and values (u64 counters).
pub const STATS_KEY_LEN: usize = 4;
pub const STATS_VALUE_LEN: usize = 8;
/// The flows map's max_entries (clamp.bpf.c): a walk never needs more steps.
pub const FLOWS_MAX: usize = 4096;
/// The clamps map's max_entries.
pub const CLAMPS_MAX: usize = 65536;

#[repr(C)]
#[derive(Default)]
struct ElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64, // or next_key
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ObjAttr {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

#[repr(C)]
#[derive(Default)]
struct InfoAttr {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The head of `struct bpf_map_info`: the kernel fills at most `info_len` bytes.
#[repr(C)]
#[derive(Default)]
struct MapInfo {
    map_type: u32,
    id: u32,
    key_size: u32,
    value_size: u32,
}

#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> io::Result<libc::c_long> {
    // SAFETY: attr is a valid, initialised bpf_attr prefix of size_of::<T>() bytes; the
    // pointers in it point to buffers of the sizes the map was created with.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A map's entries: (key, value) byte arrays.
pub type Entries<const K: usize, const V: usize> = Vec<([u8; K], [u8; V])>;

/// Buffers for batched reads, kept between reads.
pub struct Scratch<const K: usize, const V: usize> {
    keys: Vec<[u8; K]>,
    values: Vec<[u8; V]>,
}

impl<const K: usize, const V: usize> Default for Scratch<K, V> {
    fn default() -> Self {
        Scratch {
            keys: vec![[0; K]; 64],
            values: vec![[0; V]; 64],
        }
    }
}

/// One BPF map, by fd, with the key and value sizes the kernel reported for it.
pub struct Map {
    fd: OwnedFd,
    key_size: usize,
    value_size: usize,
    pub what: String,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl Map {
    /// `spec`: a pinned path, or `fd:N` for a map fd this process inherited; the map's
    /// keys and values must be of `key_size` and `value_size` bytes.
    pub fn open(spec: &str, key_size: usize, value_size: usize) -> io::Result<Map> {
        let map = Map::open_any(spec)?;
        if (map.key_size, map.value_size) != (key_size, value_size) {
            return Err(invalid(format!(
                "map {spec}: keys of {} and values of {} bytes, not {key_size} and {value_size}",
                map.key_size, map.value_size
            )));
        }
        Ok(map)
    }

    fn open_any(spec: &str) -> io::Result<Map> {
        if let Some(num) = spec.strip_prefix("fd:") {
            let fd: RawFd = num.parse().map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("bad map fd {spec:?}"))
            })?;
            // SAFETY: fcntl on an arbitrary number only queries it.
            if fd < 0 || unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("map {spec}: no such open file descriptor"),
                ));
            }
            // SAFETY: an open fd handed to us by the parent, owned by this process now.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            return Map::of_fd(fd, spec);
        }
        let path = CString::new(spec).map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("bad path {spec:?}"))
        })?;
        let mut attr = ObjAttr {
            pathname: path.as_ptr() as u64,
            ..Default::default()
        };
        let fd = sys_bpf(BPF_OBJ_GET, &mut attr)
            .map_err(|e| io::Error::new(e.kind(), format!("BPF_OBJ_GET {spec}: {e}")))?;
        // SAFETY: the kernel returned a new fd that nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        Map::of_fd(fd, spec)
    }

    /// A map fd with its sizes (BPF_OBJ_GET_INFO_BY_FD: an fd that is no map fails).
    fn of_fd(fd: OwnedFd, what: &str) -> io::Result<Map> {
        let mut info = MapInfo::default();
        let mut attr = InfoAttr {
            bpf_fd: fd.as_raw_fd() as u32,
            info_len: std::mem::size_of::<MapInfo>() as u32,
            info: &mut info as *mut MapInfo as u64,
        };
        sys_bpf(BPF_OBJ_GET_INFO_BY_FD, &mut attr)
            .map_err(|e| io::Error::new(e.kind(), format!("map {what}: not a BPF map: {e}")))?;
        Ok(Map {
            fd,
            key_size: info.key_size as usize,
            value_size: info.value_size as usize,
            what: what.to_string(),
        })
    }

    /// An error unless `key` (and `value`, when given) are of the map's sizes.
    fn check(&self, key: usize, value: Option<usize>) -> io::Result<()> {
        if key != self.key_size || value.is_some_and(|v| v != self.value_size) {
            return Err(invalid(format!(
                "map {}: a key of {key} bytes{} for keys of {} and values of {}",
                self.what,
                value.map_or(String::new(), |v| format!(" and a value of {v}")),
                self.key_size,
                self.value_size
            )));
        }
        Ok(())
    }

    fn elem(&self, key: &[u8], value: u64, flags: u64) -> ElemAttr {
        ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: key.as_ptr() as u64,
            value,
            flags,
            ..Default::default()
        }
    }

    /// The value of `key` into `value` (its size must be the map's value size);
    /// Ok(false) when the key is not there.
    pub fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<bool> {
        self.check(key.len(), Some(value.len()))?;
        let mut attr = self.elem(key, value.as_mut_ptr() as u64, 0);
        match sys_bpf(BPF_MAP_LOOKUP_ELEM, &mut attr) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        self.check(key.len(), Some(value.len()))?;
        let mut attr = self.elem(key, value.as_ptr() as u64, BPF_ANY);
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
    }

    /// Ok(false) when the key was not there.
    pub fn delete(&self, key: &[u8]) -> io::Result<bool> {
        self.check(key.len(), None)?;
        let mut attr = self.elem(key, 0, 0);
        match sys_bpf(BPF_MAP_DELETE_ELEM, &mut attr) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The key after `prev` (the first key for None) into `next`; Ok(false) at the end.
    pub fn next_key(&self, prev: Option<&[u8]>, next: &mut [u8]) -> io::Result<bool> {
        self.check(next.len(), None)?;
        self.check(prev.map_or(next.len(), <[u8]>::len), None)?;
        let mut attr = ElemAttr {
            map_fd: self.fd.as_raw_fd() as u32,
            key: prev.map_or(0, |p| p.as_ptr() as u64),
            value: next.as_mut_ptr() as u64,
            ..Default::default()
        };
        match sys_bpf(BPF_MAP_GET_NEXT_KEY, &mut attr) {
            Ok(_) => Ok(true),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Every entry into `out`, in as few syscalls as the kernel allows
    /// (BPF_MAP_LOOKUP_BATCH: one per `scratch.chunk` entries), at most `limit`; false
    /// when the kernel cannot batch this map (then walk with `keys` and `lookup`).  A
    /// syscall costs ~10 us on a loaded VM; `scratch` is reused so that a report
    /// allocates nothing here.
    pub fn entries<const K: usize, const V: usize>(
        &self,
        limit: usize,
        scratch: &mut Scratch<K, V>,
        out: &mut Entries<K, V>,
    ) -> io::Result<bool> {
        out.clear();
        self.check(K, Some(V))?;
        let (mut token_in, mut token_out) = (0u64, 0u64); // a bucket index for hash maps
        let mut first = true;
        while out.len() < limit {
            let chunk = scratch.keys.len();
            let mut attr = BatchAttr {
                in_batch: if first {
                    0
                } else {
                    &mut token_in as *mut u64 as u64
                },
                out_batch: &mut token_out as *mut u64 as u64,
                keys: scratch.keys.as_mut_ptr() as u64,
                values: scratch.values.as_mut_ptr() as u64,
                count: chunk as u32,
                map_fd: self.fd.as_raw_fd() as u32,
                ..Default::default()
            };
            let result = sys_bpf(BPF_MAP_LOOKUP_BATCH, &mut attr);
            let got = (attr.count as usize).min(chunk);
            let done = match result {
                Ok(_) => false,
                Err(e) => match e.raw_os_error() {
                    Some(libc::ENOENT) => true,
                    Some(libc::ENOSPC) if got == 0 => {
                        // one bucket holds more than a chunk: a bigger buffer, same start
                        scratch.keys.resize(chunk * 2, [0; K]);
                        scratch.values.resize(chunk * 2, [0; V]);
                        continue;
                    }
                    Some(libc::EINVAL | libc::EOPNOTSUPP | ENOTSUPP) if first => return Ok(false),
                    _ => return Err(e),
                },
            };
            let pairs = scratch.keys[..got].iter().zip(&scratch.values[..got]);
            out.extend(pairs.map(|(k, v)| (*k, *v)));
            if done {
                break;
            }
            token_in = token_out;
            first = false;
        }
        out.truncate(limit);
        Ok(true)
    }

    /// Every key, at most `limit` of them (a hash map restarts a walk whose previous key
    /// was deleted meanwhile: the limit ends such a walk).
    pub fn keys(&self, limit: usize) -> io::Result<Vec<[u8; KEY_LEN]>> {
        let mut out: Vec<[u8; KEY_LEN]> = Vec::new();
        let mut key = [0u8; KEY_LEN];
        while out.len() < limit && self.next_key(out.last().map(|k| &k[..]), &mut key)? {
            out.push(key);
        }
        Ok(out)
    }
}

const AF_INET: u32 = libc::AF_INET as u32;
const AF_INET6: u32 = libc::AF_INET6 as u32;

/// `struct flow_key` of a flow: family, addresses (network order, IPv4 in the first 4
/// bytes), ports in host order.
pub fn key_bytes(flow: &Tuple4) -> [u8; KEY_LEN] {
    let mut key = [0u8; KEY_LEN];
    let family = if flow.local.is_ipv4() {
        AF_INET
    } else {
        AF_INET6
    };
    key[..4].copy_from_slice(&family.to_ne_bytes());
    for (ip, at) in [(flow.local, 4), (flow.remote, 20)] {
        match ip {
            IpAddr::V4(v4) => key[at..at + 4].copy_from_slice(&v4.octets()),
            IpAddr::V6(v6) => key[at..at + 16].copy_from_slice(&v6.octets()),
        }
    }
    key[36..38].copy_from_slice(&flow.lport.to_ne_bytes());
    key[38..40].copy_from_slice(&flow.rport.to_ne_bytes());
    key
}

/// The flow of a `struct flow_key`; None for a family it does not know.
pub fn flow_from_key(key: &[u8; KEY_LEN]) -> Option<Tuple4> {
    let family = u32::from_ne_bytes(key[..4].try_into().unwrap());
    let addr = |at: usize| -> Option<IpAddr> {
        match family {
            AF_INET => Some(IpAddr::V4(Ipv4Addr::new(
                key[at],
                key[at + 1],
                key[at + 2],
                key[at + 3],
            ))),
            AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(
                <[u8; 16]>::try_from(&key[at..at + 16]).unwrap(),
            ))),
            _ => None,
        }
    };
    Some(Tuple4 {
        local: addr(4)?,
        lport: u16::from_ne_bytes([key[36], key[37]]),
        remote: addr(20)?,
        rport: u16::from_ne_bytes([key[38], key[39]]),
    })
}

/// `struct clamp_val`: window (segments), flags 0, lease expiry (CLOCK_MONOTONIC ns).
pub fn clamp_value(window: u32, expires_ns: u64) -> [u8; CLAMP_VALUE_LEN] {
    let mut v = [0u8; CLAMP_VALUE_LEN];
    v[..4].copy_from_slice(&window.to_ne_bytes());
    v[8..].copy_from_slice(&expires_ns.to_ne_bytes());
    v
}

/// One flow as the program last saw it (`bpf.flow_sample`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSample {
    pub flow: Tuple4,
    pub rtt_us: f64,
    pub mss: u32,
    pub cwnd: u32,
    pub delivery_bps: f64,
    pub bytes_acked: u64,
}

/// A `struct flow_val` as the agent reports it: delivery rate from the last rate sample
/// (packets over an interval) times the MSS, computed as Python computes it.
pub fn flow_sample(flow: Tuple4, raw: &[u8; FLOW_VALUE_LEN]) -> FlowSample {
    let u32_at = |at: usize| u32::from_ne_bytes(raw[at..at + 4].try_into().unwrap());
    let srtt_us = u32_at(0);
    let mss = u32_at(4);
    let cwnd = u32_at(8);
    let acked = u64::from_ne_bytes(raw[16..24].try_into().unwrap());
    let delivered = u32_at(24);
    let interval_us = u32_at(28);
    // Python: delivered * mss * 8 * 1e6 / interval_us (exact integer product, then float)
    let rate = if interval_us != 0 {
        (delivered as u64 * mss as u64 * 8) as f64 * 1e6 / interval_us as f64
    } else {
        0.0
    };
    FlowSample {
        flow,
        rtt_us: srtt_us as f64,
        mss,
        cwnd,
        delivery_bps: rate,
        bytes_acked: acked,
    }
}

/// CLOCK_MONOTONIC in ns: the clock of bpf_ktime_get_ns(), which judges the leases.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::IntoRawFd;

    #[test]
    fn keys_pack_as_struct_flow_key() {
        let flow = Tuple4 {
            local: "10.0.0.1".parse().unwrap(),
            lport: 40000,
            remote: "10.0.1.1".parse().unwrap(),
            rport: 5201,
        };
        let key = key_bytes(&flow);
        // struct.pack("=I16s16sHH", 2, b"\n\0\0\x01".ljust(16), ..., 40000, 5201)
        let mut want = vec![2, 0, 0, 0, 10, 0, 0, 1];
        want.extend([0; 12]);
        want.extend([10, 0, 1, 1]);
        want.extend([0; 12]);
        want.extend(40000u16.to_ne_bytes());
        want.extend(5201u16.to_ne_bytes());
        assert_eq!(key.to_vec(), want);
        assert_eq!(flow_from_key(&key), Some(flow));
        let v6 = Tuple4 {
            local: "::1".parse().unwrap(),
            lport: 1,
            remote: "fe80::2".parse().unwrap(),
            rport: 65535,
        };
        let key = key_bytes(&v6);
        assert_eq!(&key[..4], &10u32.to_ne_bytes());
        assert_eq!(key[19], 1);
        assert_eq!(flow_from_key(&key), Some(v6));
        let mut unknown = key;
        unknown[..4].copy_from_slice(&99u32.to_ne_bytes());
        assert_eq!(flow_from_key(&unknown), None);
    }

    #[test]
    fn values_pack_as_the_c_structs() {
        let v = clamp_value(30, 0x0102030405060708);
        assert_eq!(&v[..4], &30u32.to_ne_bytes());
        assert_eq!(&v[4..8], &[0; 4]);
        assert_eq!(&v[8..], &0x0102030405060708u64.to_ne_bytes());
        // bpf.FLOW_VALUE.pack(2500, 1448, 20, 0, 123, 10, 1000, 7): as test_uc3_flowmap
        let mut raw = [0u8; FLOW_VALUE_LEN];
        for (at, x) in [
            (0, 2500u32),
            (4, 1448),
            (8, 20),
            (12, 0),
            (24, 10),
            (28, 1000),
        ] {
            raw[at..at + 4].copy_from_slice(&x.to_ne_bytes());
        }
        raw[16..24].copy_from_slice(&123u64.to_ne_bytes());
        raw[32..40].copy_from_slice(&7u64.to_ne_bytes());
        let flow = flow_from_key(&key_bytes(&Tuple4 {
            local: "::1".parse().unwrap(),
            lport: 40000,
            remote: "::2".parse().unwrap(),
            rport: 80,
        }))
        .unwrap();
        let s = flow_sample(flow, &raw);
        assert_eq!(
            (s.rtt_us, s.mss, s.cwnd, s.bytes_acked),
            (2500.0, 1448, 20, 123)
        );
        assert!(
            (s.delivery_bps - 115_840_000.0).abs() < 1e-3,
            "{}",
            s.delivery_bps
        );
        raw[28..32].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(flow_sample(flow, &raw).delivery_bps, 0.0);
    }

    #[test]
    fn a_missing_pin_or_fd_is_a_clear_error() {
        let open = |spec: &str| Map::open(spec, KEY_LEN, CLAMP_VALUE_LEN).err().unwrap();
        let e = open("/nonexistent/dcnlab-pin/clamps");
        assert!(e.to_string().contains("BPF_OBJ_GET /nonexistent"), "{e}");
        let e = open("fd:999999");
        assert!(
            e.to_string().contains("no such open file descriptor"),
            "{e}"
        );
        open("fd:x");
        // an open fd that is no BPF map
        let file = std::fs::File::open("/proc/self/status").unwrap();
        let fd = file.into_raw_fd();
        let e = open(&format!("fd:{fd}"));
        assert!(e.to_string().contains("not a BPF map"), "{e}");
    }

    /// A fresh hash map (root or CAP_BPF); None where this process may not create one
    /// (a developer's unprivileged run: in CI, which runs as root, that is a failure).
    fn hash_map(max_entries: u32) -> Option<Map> {
        #[repr(C)]
        #[derive(Default)]
        struct CreateAttr {
            map_type: u32,
            key_size: u32,
            value_size: u32,
            max_entries: u32,
            map_flags: u32,
        }
        let mut attr = CreateAttr {
            map_type: 1, // BPF_MAP_TYPE_HASH
            key_size: KEY_LEN as u32,
            value_size: FLOW_VALUE_LEN as u32,
            max_entries,
            map_flags: 0,
        };
        match sys_bpf(0, &mut attr) {
            // SAFETY: a new fd from the kernel, owned here.
            Ok(fd) => {
                Some(Map::of_fd(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }, "test map").unwrap())
            }
            Err(e) if std::env::var("CI").as_deref() != Ok("true") => {
                eprintln!("skipping: cannot create a BPF map here ({e})");
                None
            }
            Err(e) => panic!("cannot create a BPF map in CI: {e}"),
        }
    }

    #[test]
    fn batched_reads_see_what_a_walk_sees() {
        let Some(map) = hash_map(FLOWS_MAX as u32) else {
            return;
        };
        let mut scratch = Scratch::<KEY_LEN, FLOW_VALUE_LEN>::default();
        let mut out = Vec::new();
        assert!(map.entries(FLOWS_MAX, &mut scratch, &mut out).unwrap());
        assert!(out.is_empty());
        let flow = |i: u16| Tuple4 {
            local: "10.0.0.1".parse().unwrap(),
            lport: 1000 + i,
            remote: "10.0.1.1".parse().unwrap(),
            rport: 80,
        };
        // more than one batch (64) and more than the first buffer
        for i in 0..300u16 {
            let mut val = [0u8; FLOW_VALUE_LEN];
            val[..2].copy_from_slice(&i.to_ne_bytes());
            map.update(&key_bytes(&flow(i)), &val).unwrap();
        }
        assert!(map.entries(FLOWS_MAX, &mut scratch, &mut out).unwrap());
        let mut batched: Vec<(u16, u16)> = out
            .iter()
            .map(|(k, v)| {
                (
                    flow_from_key(k).unwrap().lport - 1000,
                    u16::from_ne_bytes([v[0], v[1]]),
                )
            })
            .collect();
        batched.sort();
        assert_eq!(batched, (0..300).map(|i| (i, i)).collect::<Vec<_>>());
        let mut walked: Vec<[u8; KEY_LEN]> = map.keys(FLOWS_MAX).unwrap();
        let mut keys: Vec<[u8; KEY_LEN]> = out.iter().map(|(k, _)| *k).collect();
        walked.sort();
        keys.sort();
        assert_eq!(walked, keys);
        assert_eq!(map.keys(10).unwrap().len(), 10); // the limit ends a walk
        assert!(map.entries(10, &mut scratch, &mut out).unwrap());
        assert_eq!(out.len(), 10);
        let mut val = [0u8; FLOW_VALUE_LEN];
        assert!(map.lookup(&key_bytes(&flow(7)), &mut val).unwrap());
        assert!(map.delete(&key_bytes(&flow(7))).unwrap());
        assert!(!map.delete(&key_bytes(&flow(7))).unwrap()); // ENOENT: not an error
        assert!(!map.lookup(&key_bytes(&flow(7)), &mut val).unwrap());
        assert!(map.entries(FLOWS_MAX, &mut scratch, &mut out).unwrap());
        assert_eq!(out.len(), 299);
    }

    #[test]
    fn buffers_of_other_sizes_than_the_maps_are_refused() {
        let Some(map) = hash_map(16) else {
            return;
        };
        let key = [0u8; KEY_LEN];
        // the kernel would write FLOW_VALUE_LEN bytes into 8, or read past a short key
        let mut short = [0u8; 8];
        let e = map.lookup(&key, &mut short).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            e.to_string(),
            "map test map: a key of 40 bytes and a value of 8 for keys of 40 and values of 40"
        );
        assert!(map.update(&key, &short).is_err());
        assert!(map.update(&key[..4], &[0; FLOW_VALUE_LEN]).is_err());
        assert!(map.delete(&key[..39]).is_err());
        assert!(map.next_key(None, &mut short).is_err());
        assert!(map.next_key(Some(&key[..4]), &mut [0; KEY_LEN]).is_err());
        let mut scratch = Scratch::<KEY_LEN, CLAMP_VALUE_LEN>::default();
        assert!(map.entries(10, &mut scratch, &mut Vec::new()).is_err());
        // nothing was written: the right sizes still find an empty map
        assert!(!map.lookup(&key, &mut [0; FLOW_VALUE_LEN]).unwrap());
        assert!(map.keys(10).unwrap().is_empty());
        // a map of other sizes than the agent expects is refused when opened (here as an
        // inherited fd: the check is the same for a pinned path)
        let dup = |m: &Map| m.fd.try_clone().unwrap().into_raw_fd();
        let spec = format!("fd:{}", dup(&map));
        let e = Map::open(&spec, KEY_LEN, CLAMP_VALUE_LEN).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!("map {spec}: keys of 40 and values of 40 bytes, not 40 and 16")
        );
        let spec = format!("fd:{}", dup(&map));
        assert_eq!(
            Map::open(&spec, KEY_LEN, FLOW_VALUE_LEN).unwrap().what,
            spec
        );
    }

    #[test]
    fn monotonic_clock_moves_forward() {
        let a = monotonic_ns();
        let b = monotonic_ns();
        assert!(a > 0 && b >= a);
    }
}
