//! The test payload: byte `i` of a connection with seed `s` is a pure function of
//! `(s, i)`, so the receiver checks every delivered byte against what the sender sent
//! (stronger than a checksum: it also says where the first bad byte is).

#[inline]
fn word(seed: u64, k: u64) -> u64 {
    // splitmix64
    let mut z = seed.wrapping_add(k.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fills `buf` with the pattern bytes at offsets `offset..offset + buf.len()`.
pub fn fill(seed: u64, offset: u64, buf: &mut [u8]) {
    let mut i = 0usize;
    let mut off = offset;
    while i < buf.len() {
        let k = off / 8;
        let within = (off % 8) as usize;
        let bytes = word(seed, k).to_le_bytes();
        let n = (8 - within).min(buf.len() - i);
        buf[i..i + n].copy_from_slice(&bytes[within..within + n]);
        i += n;
        off += n as u64;
    }
}

/// The offset of the first byte of `data` (at `offset`) that differs from the pattern.
pub fn first_mismatch(seed: u64, offset: u64, data: &[u8]) -> Option<u64> {
    let mut i = 0usize;
    let mut off = offset;
    while i < data.len() {
        let k = off / 8;
        let within = (off % 8) as usize;
        let bytes = word(seed, k).to_le_bytes();
        let n = (8 - within).min(data.len() - i);
        if data[i..i + n] != bytes[within..within + n] {
            for j in 0..n {
                if data[i + j] != bytes[within + j] {
                    return Some(off + j as u64);
                }
            }
        }
        i += n;
        off += n as u64;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_is_offset_consistent_and_checkable() {
        let mut whole = vec![0u8; 100];
        fill(3, 0, &mut whole);
        let mut part = vec![0u8; 37];
        fill(3, 13, &mut part);
        assert_eq!(&whole[13..50], &part[..]);
        assert_eq!(first_mismatch(3, 13, &part), None);
        part[5] ^= 1;
        assert_eq!(first_mismatch(3, 13, &part), Some(18));
        assert!(first_mismatch(4, 0, &whole[..8]).is_some());
    }
}
