//! Field encoding: little-endian integers, length-prefixed byte strings and
//! lists, each length bounded before anything is allocated.

use crate::limits::{MAX_BYTES_FIELD, MAX_LIST_LEN};
use crate::DecodeError;

/// Cursor over a byte slice that never reads past its end.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        if len > self.remaining() {
            return Err(DecodeError::Truncated {
                needed: len,
                available: self.remaining(),
            });
        }
        let slice = &self.bytes[self.pos..self.pos + len];
        self.pos += len;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A `u32` length checked against `max`.
    pub fn length(&mut self, max: u32) -> Result<usize, DecodeError> {
        let len = self.u32()?;
        if len > max {
            return Err(DecodeError::TooLong {
                len: len as u64,
                max: max as u64,
            });
        }
        Ok(len as usize)
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        if self.remaining() != 0 {
            return Err(DecodeError::TrailingBytes(self.remaining()));
        }
        Ok(())
    }
}

/// Growable encoder.
#[derive(Debug, Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Writer::default()
    }

    pub fn u16(&mut self, v: u16) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i32(&mut self, v: i32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn raw(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }

    /// Zero bytes up to the next multiple of 8.
    pub fn pad8(&mut self) {
        let pad = padding8(self.bytes.len());
        self.bytes.resize(self.bytes.len() + pad, 0);
    }
}

/// Bytes needed to round `len` up to a multiple of 8.
pub fn padding8(len: usize) -> usize {
    (8 - len % 8) % 8
}

/// A value that can be a message field.
pub trait Field: Sized {
    fn put(&self, w: &mut Writer);
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError>;
}

impl Field for u32 {
    fn put(&self, w: &mut Writer) {
        w.u32(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u32()
    }
}

impl Field for i32 {
    fn put(&self, w: &mut Writer) {
        w.i32(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.i32()
    }
}

impl Field for u64 {
    fn put(&self, w: &mut Writer) {
        w.u64(*self)
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        r.u64()
    }
}

impl Field for [u64; 3] {
    fn put(&self, w: &mut Writer) {
        self.iter().for_each(|v| w.u64(*v));
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        Ok([r.u64()?, r.u64()?, r.u64()?])
    }
}

/// Byte strings: `u32` length, then the bytes.
impl Field for Vec<u8> {
    fn put(&self, w: &mut Writer) {
        w.u32(u32::try_from(self.len()).expect("encoders keep byte fields under 4 GiB"));
        w.raw(self);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let len = r.length(MAX_BYTES_FIELD)?;
        Ok(r.take(len)?.to_vec())
    }
}

/// Lists of handles or properties: `u32` count, then the elements.
impl Field for Vec<u64> {
    fn put(&self, w: &mut Writer) {
        w.u32(u32::try_from(self.len()).expect("encoders keep lists under 4 G elements"));
        self.iter().for_each(|v| w.u64(*v));
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = r.length(MAX_LIST_LEN)?;
        // The count is bounded and every element must be present, so the
        // allocation below is at most MAX_LIST_LEN * 8 bytes.
        if count * 8 > r.remaining() {
            return Err(DecodeError::Truncated {
                needed: count * 8,
                available: r.remaining(),
            });
        }
        (0..count).map(|_| r.u64()).collect()
    }
}

/// A region of a chain's out-data or in-data stream (see the README).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataRef {
    pub offset: u64,
    pub len: u64,
}

impl DataRef {
    pub const NONE: DataRef = DataRef { offset: 0, len: 0 };

    /// Offset one past the end, `None` on overflow.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.len)
    }
}

impl Field for DataRef {
    fn put(&self, w: &mut Writer) {
        w.u64(self.offset);
        w.u64(self.len);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let offset = r.u64()?;
        let len = r.u64()?;
        if len > crate::limits::MAX_DATA_LEN {
            return Err(DecodeError::TooLong {
                len,
                max: crate::limits::MAX_DATA_LEN,
            });
        }
        Ok(DataRef { offset, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_rejects_reads_past_end() {
        let mut r = Reader::new(&[1, 2, 3]);
        assert!(matches!(
            r.u32(),
            Err(DecodeError::Truncated {
                needed: 4,
                available: 3
            })
        ));
    }

    #[test]
    fn list_rejects_count_beyond_limit() {
        let mut w = Writer::new();
        w.u32(MAX_LIST_LEN + 1);
        let mut r = Reader::new(&w.bytes);
        assert!(matches!(
            Vec::<u64>::get(&mut r),
            Err(DecodeError::TooLong { .. })
        ));
    }

    #[test]
    fn list_rejects_count_beyond_payload() {
        let mut w = Writer::new();
        w.u32(1000);
        w.u64(7);
        let mut r = Reader::new(&w.bytes);
        assert!(matches!(
            Vec::<u64>::get(&mut r),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn bytes_round_trip() {
        let mut w = Writer::new();
        vec![1u8, 2, 3].put(&mut w);
        let mut r = Reader::new(&w.bytes);
        assert_eq!(Vec::<u8>::get(&mut r).unwrap(), vec![1, 2, 3]);
        r.finish().unwrap();
    }
}
