//! Wire primitives shared by every message family: the OFPT_ERROR currency, a
//! bounds-checked big-endian reader and writer, padding and fixed-size strings.

use super::consts::*;

/// An OFPT_ERROR (type, code) pair; the decoder's and the switch's error currency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OfpErr {
    pub typ: u16,
    pub code: u16,
}

impl OfpErr {
    pub const fn new(typ: u16, code: u16) -> Self {
        OfpErr { typ, code }
    }
}

pub type Res<T> = Result<T, OfpErr>;

pub(crate) const BAD_LEN: OfpErr = OfpErr::new(OFPET_BAD_REQUEST, OFPBRC_BAD_LEN);

/// Bounds-checked big-endian reader; every read failure maps to the given error.
pub(crate) struct Rd<'a> {
    b: &'a [u8],
    pos: usize,
    err: OfpErr,
}

impl<'a> Rd<'a> {
    pub(crate) fn new(b: &'a [u8], err: OfpErr) -> Self {
        Rd { b, pos: 0, err }
    }
    pub(crate) fn remaining(&self) -> usize {
        self.b.len() - self.pos
    }
    pub(crate) fn bytes(&mut self, n: usize) -> Res<&'a [u8]> {
        if self.remaining() < n {
            return Err(self.err);
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub(crate) fn skip(&mut self, n: usize) -> Res<()> {
        self.bytes(n).map(|_| ())
    }
    pub(crate) fn u8(&mut self) -> Res<u8> {
        Ok(self.bytes(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> Res<u16> {
        let b = self.bytes(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    pub(crate) fn u32(&mut self) -> Res<u32> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> Res<u64> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.pos..];
        self.pos = self.b.len();
        s
    }
}

/// Big-endian writer helpers on a Vec.
pub(crate) trait Wr {
    fn u8(&mut self, v: u8);
    fn u16(&mut self, v: u16);
    fn u32(&mut self, v: u32);
    fn u64(&mut self, v: u64);
    fn pad(&mut self, n: usize);
    fn set_u16(&mut self, at: usize, v: u16);
}

impl Wr for Vec<u8> {
    fn u8(&mut self, v: u8) {
        self.push(v)
    }
    fn u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes())
    }
    fn pad(&mut self, n: usize) {
        self.resize(self.len() + n, 0)
    }
    fn set_u16(&mut self, at: usize, v: u16) {
        self[at..at + 2].copy_from_slice(&v.to_be_bytes())
    }
}

pub(crate) fn pad_to_8(n: usize) -> usize {
    (8 - n % 8) % 8
}

pub(crate) fn fixed_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

pub(crate) fn put_str(w: &mut Vec<u8>, s: &str, n: usize) {
    // Leave room for the terminating NUL the spec requires.
    let b = s.as_bytes();
    let k = b.len().min(n - 1);
    w.extend_from_slice(&b[..k]);
    w.pad(n - k);
}

/// A fixed-size body must be exactly `n` more bytes: anything else is BAD_LEN.
pub(crate) fn exact(r: &Rd, n: usize) -> Res<()> {
    if r.remaining() == n {
        Ok(())
    } else {
        Err(BAD_LEN)
    }
}
