//! The wire format, carried inside each subflow's TCP byte stream.
//!
//! Every frame starts with a one-byte type; all integers are big-endian.
//!
//! | type | name     | body                                                              | direction |
//! |------|----------|-------------------------------------------------------------------|-----------|
//! | `H`  | HELLO    | magic `DCMP` (4), version u8, conn id u64, subflow index u8, pattern seed u64, total length u64 (`u64::MAX`: unknown), window u64 | sender -> receiver, first frame of every subflow |
//! | `D`  | DATA     | DSN u64, length u32 (1..=[`MAX_PAYLOAD`]), payload                | sender -> receiver |
//! | `A`  | DATA_ACK | cumulative DSN u64: every byte below it was delivered to the application | receiver -> sender |
//! | `F`  | FIN      | total length u64 (every byte was data-acked)                      | sender -> receiver |
//! | `f`  | FIN_ACK  | total length u64, delivered u64, intact u8 (1: every byte matched the sender's pattern), duplicate bytes received u64, reorder-buffer peak u64 | receiver -> sender |
//!
//! A DATA frame may be sent on several subflows (redundant, CFS's tail, reinjection after
//! a subflow died); the receiver keeps the first copy and counts the others as duplicates.
//! Anything else (unknown type, bad magic, zero or oversized length, data outside the
//! receive window or beyond the announced total) is a protocol error that closes the
//! connection.

use std::fmt;

pub const MAGIC: [u8; 4] = *b"DCMP";
pub const VERSION: u8 = 1;
/// Largest DATA payload accepted.
pub const MAX_PAYLOAD: u32 = 1 << 20;
pub const HELLO_LEN: usize = 1 + 4 + 1 + 8 + 1 + 8 + 8 + 8;
pub const DATA_HDR_LEN: usize = 1 + 8 + 4;
pub const UNKNOWN_TOTAL: u64 = u64::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub conn_id: u64,
    pub subflow: u8,
    pub seed: u64,
    pub total: u64,
    pub window: u64,
}

/// The receiver's verdict on a finished connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FinAck {
    pub total: u64,
    pub delivered: u64,
    pub intact: bool,
    pub dup_bytes: u64,
    pub peak_held: u64,
}

pub const FIN_ACK_LEN: usize = 1 + 8 + 8 + 1 + 8 + 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    Hello(Hello),
    Data { dsn: u64, payload: Vec<u8> },
    DataAck(u64),
    Fin(u64),
    FinAck(FinAck),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    UnknownType(u8),
    BadMagic([u8; 4]),
    BadVersion(u8),
    BadLength(u32),
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::UnknownType(t) => write!(f, "malformed frame: unknown type 0x{t:02x}"),
            WireError::BadMagic(m) => write!(f, "malformed HELLO: bad magic {m:02x?}"),
            WireError::BadVersion(v) => {
                write!(f, "malformed HELLO: version {v}, this end speaks {VERSION}")
            }
            WireError::BadLength(l) => {
                write!(f, "malformed DATA: length {l} outside 1..={MAX_PAYLOAD}")
            }
        }
    }
}

impl std::error::Error for WireError {}

pub fn encode_hello(h: &Hello, out: &mut Vec<u8>) {
    out.push(b'H');
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&h.conn_id.to_be_bytes());
    out.push(h.subflow);
    out.extend_from_slice(&h.seed.to_be_bytes());
    out.extend_from_slice(&h.total.to_be_bytes());
    out.extend_from_slice(&h.window.to_be_bytes());
}

pub fn data_header(dsn: u64, len: u32) -> [u8; DATA_HDR_LEN] {
    let mut h = [0u8; DATA_HDR_LEN];
    h[0] = b'D';
    h[1..9].copy_from_slice(&dsn.to_be_bytes());
    h[9..13].copy_from_slice(&len.to_be_bytes());
    h
}

pub fn encode_u64(kind: u8, v: u64, out: &mut Vec<u8>) {
    out.push(kind);
    out.extend_from_slice(&v.to_be_bytes());
}

pub fn encode_fin_ack(a: &FinAck, out: &mut Vec<u8>) {
    out.push(b'f');
    out.extend_from_slice(&a.total.to_be_bytes());
    out.extend_from_slice(&a.delivered.to_be_bytes());
    out.push(a.intact as u8);
    out.extend_from_slice(&a.dup_bytes.to_be_bytes());
    out.extend_from_slice(&a.peak_held.to_be_bytes());
}

/// Encodes any frame (used by tests and by the sender for control frames).
pub fn encode(frame: &Frame, out: &mut Vec<u8>) {
    match frame {
        Frame::Hello(h) => encode_hello(h, out),
        Frame::Data { dsn, payload } => {
            out.extend_from_slice(&data_header(*dsn, payload.len() as u32));
            out.extend_from_slice(payload);
        }
        Frame::DataAck(v) => encode_u64(b'A', *v, out),
        Frame::Fin(v) => encode_u64(b'F', *v, out),
        Frame::FinAck(a) => encode_fin_ack(a, out),
    }
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

/// A decoded frame whose DATA payload borrows the decoder's buffer.
#[derive(Debug)]
pub enum FrameRef<'a> {
    Data { dsn: u64, payload: &'a [u8] },
    Other(Frame),
}

/// Incremental decoder over one subflow's byte stream.
#[derive(Default)]
pub struct Decoder {
    buf: Vec<u8>,
    start: usize,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends received bytes.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes buffered but not yet decoded.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Reads once from `fd` straight into the buffer (at most `max` bytes); as
    /// [`crate::net::read`].
    pub fn read_from(
        &mut self,
        fd: std::os::fd::RawFd,
        max: usize,
    ) -> std::io::Result<Option<usize>> {
        if self.start > 0 && (self.start == self.buf.len() || self.start >= self.buf.len() / 2) {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.reserve(max);
        let spare = self.buf.spare_capacity_mut();
        let n = spare.len().min(max);
        // SAFETY: reading into the vector's spare capacity, then exposing only the bytes
        // the kernel wrote.
        let r = unsafe { libc::read(fd, spare.as_mut_ptr() as *mut libc::c_void, n) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::WouldBlock {
                return Ok(None);
            }
            return Err(e);
        }
        unsafe { self.buf.set_len(self.buf.len() + r as usize) };
        Ok(Some(r as usize))
    }

    /// The next complete frame, `None` when more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, WireError> {
        Ok(match self.next_ref()? {
            None => None,
            Some(FrameRef::Data { dsn, payload }) => Some(Frame::Data {
                dsn,
                payload: payload.to_vec(),
            }),
            Some(FrameRef::Other(f)) => Some(f),
        })
    }

    /// As [`Decoder::next_frame`], DATA payloads borrowed from the buffer (no copy).
    pub fn next_ref(&mut self) -> Result<Option<FrameRef<'_>>, WireError> {
        let b = &self.buf[self.start..];
        let Some(&kind) = b.first() else {
            return Ok(None);
        };
        let (frame, used) = match kind {
            b'H' => {
                if b.len() < HELLO_LEN {
                    return Ok(None);
                }
                let magic: [u8; 4] = b[1..5].try_into().unwrap();
                if magic != MAGIC {
                    return Err(WireError::BadMagic(magic));
                }
                if b[5] != VERSION {
                    return Err(WireError::BadVersion(b[5]));
                }
                let h = Hello {
                    conn_id: be64(&b[6..]),
                    subflow: b[14],
                    seed: be64(&b[15..]),
                    total: be64(&b[23..]),
                    window: be64(&b[31..]),
                };
                (Frame::Hello(h), HELLO_LEN)
            }
            b'D' => {
                if b.len() < DATA_HDR_LEN {
                    return Ok(None);
                }
                let dsn = be64(&b[1..]);
                let len = u32::from_be_bytes(b[9..13].try_into().unwrap());
                if len == 0 || len > MAX_PAYLOAD {
                    return Err(WireError::BadLength(len));
                }
                let end = DATA_HDR_LEN + len as usize;
                if b.len() < end {
                    return Ok(None);
                }
                let at = self.start;
                self.start += end;
                return Ok(Some(FrameRef::Data {
                    dsn,
                    payload: &self.buf[at + DATA_HDR_LEN..at + end],
                }));
            }
            b'A' | b'F' => {
                if b.len() < 9 {
                    return Ok(None);
                }
                let v = be64(&b[1..]);
                let f = if kind == b'A' {
                    Frame::DataAck(v)
                } else {
                    Frame::Fin(v)
                };
                (f, 9)
            }
            b'f' => {
                if b.len() < FIN_ACK_LEN {
                    return Ok(None);
                }
                (
                    Frame::FinAck(FinAck {
                        total: be64(&b[1..]),
                        delivered: be64(&b[9..]),
                        intact: b[17] == 1,
                        dup_bytes: be64(&b[18..]),
                        peak_held: be64(&b[26..]),
                    }),
                    FIN_ACK_LEN,
                )
            }
            other => return Err(WireError::UnknownType(other)),
        };
        self.start += used;
        Ok(Some(FrameRef::Other(frame)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_byte_by_byte() {
        let frames = vec![
            Frame::Hello(Hello {
                conn_id: 7,
                subflow: 1,
                seed: 99,
                total: 1000,
                window: 1 << 20,
            }),
            Frame::Data {
                dsn: 5,
                payload: vec![1, 2, 3],
            },
            Frame::DataAck(8),
            Frame::Fin(8),
            Frame::FinAck(FinAck {
                total: 8,
                delivered: 8,
                intact: true,
                dup_bytes: 3,
                peak_held: 4,
            }),
        ];
        let mut bytes = Vec::new();
        for f in &frames {
            encode(f, &mut bytes);
        }
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for b in bytes {
            d.push(&[b]);
            while let Some(f) = d.next_frame().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, frames);
        assert_eq!(d.pending(), 0);
    }

    #[test]
    fn malformed_frames_are_errors() {
        let mut d = Decoder::new();
        d.push(&[b'Z', 0, 0]);
        assert_eq!(d.next_frame(), Err(WireError::UnknownType(b'Z')));
        let mut d = Decoder::new();
        d.push(&data_header(0, 0));
        assert_eq!(d.next_frame(), Err(WireError::BadLength(0)));
        let mut d = Decoder::new();
        d.push(&data_header(0, MAX_PAYLOAD + 1));
        assert!(d.next_frame().unwrap_err().to_string().contains("length"));
        let mut d = Decoder::new();
        let mut h = Vec::new();
        encode_hello(
            &Hello {
                conn_id: 1,
                subflow: 0,
                seed: 0,
                total: 0,
                window: 0,
            },
            &mut h,
        );
        h[1] = b'X';
        d.push(&h);
        assert!(matches!(d.next_frame(), Err(WireError::BadMagic(_))));
    }
}
