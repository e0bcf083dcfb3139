//! Byte-range helpers shared by every format: fields are `Range<usize>` constants in a
//! `field` module of each format, and these read/write big-endian values at them.
//!
//! All helpers index with ranges and so panic on short buffers: callers check lengths once
//! (in `new_checked`) and only then use them, as smoltcp does.

/// A field spanning a range of bytes.
pub type Field = core::ops::Range<usize>;
/// A field running to the end of the buffer.
pub type Rest = core::ops::RangeFrom<usize>;

#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
pub(crate) fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}
#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}
#[inline]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn put24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}
#[inline]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut x = [0u8; N];
    x.copy_from_slice(&b[at..at + N]);
    x
}

/// `width` bits of `byte` starting `shift` bits above the least significant bit.
#[inline]
pub(crate) const fn get_bits(byte: u8, shift: u32, width: u32) -> u8 {
    (byte >> shift) & (((1u16 << width) - 1) as u8)
}

/// Replace `width` bits of `byte` starting `shift` bits above the LSB with `value` (masked).
#[inline]
pub(crate) fn set_bits(byte: &mut u8, shift: u32, width: u32, value: u8) {
    let mask = (((1u16 << width) - 1) as u8) << shift;
    *byte = (*byte & !mask) | ((value << shift) & mask);
}
