//! The small binary encoding of the state model.
//!
//! Integers are little-endian; byte strings, text and lists carry a `u64`
//! length or count; enums and versioned types a `u32` tag; booleans and
//! options one byte that must be 0 or 1. Decoding is total: any byte
//! string gives a value or an error. Every length is checked against the
//! bytes that remain before anything is allocated, and nesting is bounded,
//! so a hostile input can neither exhaust memory nor the stack.

/// Deepest nesting the decoder follows (linked programs built from linked
/// libraries).
pub const MAX_DEPTH: u32 = 8;

pub type Result<T> = std::result::Result<T, DecodeError>;

/// Why bytes did not decode into a state value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated at byte {at}: {needed} more bytes needed")]
    Truncated { at: usize, needed: usize },
    #[error("{what} of {len} at byte {at} exceeds the {remaining} bytes left")]
    TooLong {
        what: &'static str,
        len: u64,
        at: usize,
        remaining: usize,
    },
    #[error("invalid {what} tag {tag} at byte {at}")]
    BadTag {
        what: &'static str,
        tag: u32,
        at: usize,
    },
    #[error("unsupported {what} version {version} (this build reads 1..={max})")]
    UnsupportedVersion {
        what: &'static str,
        version: u32,
        max: u32,
    },
    #[error("invalid boolean {value} at byte {at}")]
    BadBool { value: u8, at: usize },
    #[error("text at byte {at} is not UTF-8")]
    BadUtf8 { at: usize },
    #[error("nesting deeper than {max} at byte {at}")]
    TooDeep { max: u32, at: usize },
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
}

/// Builds an encoding in memory.
#[derive(Debug, Default)]
pub struct Encoder {
    bytes: Vec<u8>,
}

impl Encoder {
    pub fn new() -> Self {
        Encoder::default()
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    pub fn u8(&mut self, v: u8) {
        self.bytes.push(v);
    }

    pub fn u32(&mut self, v: u32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn i32(&mut self, v: i32) {
        self.bytes.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    /// A length or count (`usize` always fits a `u64`).
    pub fn len(&mut self, n: usize) {
        self.u64(n as u64);
    }

    pub fn raw(&mut self, bytes: &[u8]) {
        self.bytes.extend_from_slice(bytes);
    }
}

/// A cursor over bytes that never reads past their end.
#[derive(Debug)]
pub struct Decoder<'a> {
    bytes: &'a [u8],
    pos: usize,
    depth: u32,
}

impl<'a> Decoder<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Decoder {
            bytes,
            pos: 0,
            depth: 0,
        }
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated {
                at: self.pos,
                needed: n - self.remaining(),
            });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    pub fn i32(&mut self) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array()?))
    }

    pub fn bool(&mut self) -> Result<bool> {
        let at = self.pos;
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(DecodeError::BadBool { value, at }),
        }
    }

    /// A length or count of items that take at least one byte each, so it
    /// can never exceed the bytes left.
    pub fn len(&mut self, what: &'static str) -> Result<usize> {
        let at = self.pos;
        let len = self.u64()?;
        match usize::try_from(len) {
            Ok(n) if n <= self.remaining() => Ok(n),
            _ => Err(DecodeError::TooLong {
                what,
                len,
                at,
                remaining: self.remaining(),
            }),
        }
    }

    /// Reads an enum tag, with the position it was read at for errors.
    pub fn tag(&mut self) -> Result<(u32, usize)> {
        let at = self.pos;
        Ok((self.u32()?, at))
    }

    /// Runs `f` one nesting level deeper, refusing past `MAX_DEPTH`.
    pub fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.depth >= MAX_DEPTH {
            return Err(DecodeError::TooDeep {
                max: MAX_DEPTH,
                at: self.pos,
            });
        }
        self.depth += 1;
        let out = f(self);
        self.depth -= 1;
        out
    }

    pub fn finish(&self) -> Result<()> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }
}

/// A value with an encoding. Every encoding takes at least one byte, and no
/// type is more than a small constant (about 8) times larger in memory than
/// its shortest encoding, so what a decode allocates is bounded by a
/// constant times its input.
pub trait Codec: Sized {
    fn encode(&self, e: &mut Encoder);
    fn decode(d: &mut Decoder<'_>) -> Result<Self>;

    /// Encodes the items of a list (overridden for bytes, copied at once).
    fn encode_slice(items: &[Self], e: &mut Encoder) {
        items.iter().for_each(|item| item.encode(e));
    }

    /// Decodes `count` items of a list; `count` was checked against the
    /// bytes left, and the vector grows only as items actually decode.
    fn decode_vec(d: &mut Decoder<'_>, count: usize) -> Result<Vec<Self>> {
        let mut out = Vec::new();
        for _ in 0..count {
            out.push(Self::decode(d)?);
        }
        Ok(out)
    }
}

/// Encodes a whole value.
pub fn to_bytes<T: Codec>(value: &T) -> Vec<u8> {
    let mut e = Encoder::new();
    value.encode(&mut e);
    e.into_bytes()
}

/// Decodes a whole value; trailing bytes are an error.
pub fn from_bytes<T: Codec>(bytes: &[u8]) -> Result<T> {
    let mut d = Decoder::new(bytes);
    let value = T::decode(&mut d)?;
    d.finish()?;
    Ok(value)
}

impl Codec for u8 {
    fn encode(&self, e: &mut Encoder) {
        e.u8(*self);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        d.u8()
    }
    fn encode_slice(items: &[Self], e: &mut Encoder) {
        e.raw(items);
    }
    fn decode_vec(d: &mut Decoder<'_>, count: usize) -> Result<Vec<Self>> {
        Ok(d.take(count)?.to_vec())
    }
}

macro_rules! primitive {
    ($($ty:ty => $method:ident),*) => {$(
        impl Codec for $ty {
            fn encode(&self, e: &mut Encoder) {
                e.$method(*self);
            }
            fn decode(d: &mut Decoder<'_>) -> Result<Self> {
                d.$method()
            }
        }
    )*};
}

primitive!(u32 => u32, u64 => u64, i32 => i32, bool => bool);

impl<T: Codec> Codec for Vec<T> {
    fn encode(&self, e: &mut Encoder) {
        e.len(self.len());
        T::encode_slice(self, e);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        let count = d.len("list")?;
        T::decode_vec(d, count)
    }
}

impl Codec for String {
    fn encode(&self, e: &mut Encoder) {
        e.len(self.len());
        e.raw(self.as_bytes());
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        let len = d.len("text")?;
        let at = d.position();
        let bytes = d.take(len)?;
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| DecodeError::BadUtf8 { at })
    }
}

impl<T: Codec> Codec for Option<T> {
    fn encode(&self, e: &mut Encoder) {
        e.bool(self.is_some());
        if let Some(value) = self {
            value.encode(e);
        }
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.bool()? {
            false => Ok(None),
            true => T::decode(d).map(Some),
        }
    }
}

/// Defines a struct whose encoding is its fields in order.
macro_rules! record {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$fmeta:meta])* pub $field:ident : $ty:ty,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl $crate::codec::Codec for $name {
            fn encode(&self, e: &mut $crate::codec::Encoder) {
                $($crate::codec::Codec::encode(&self.$field, e);)*
            }
            fn decode(
                d: &mut $crate::codec::Decoder<'_>,
            ) -> $crate::codec::Result<Self> {
                Ok($name {
                    $($field: <$ty as $crate::codec::Codec>::decode(d)?,)*
                })
            }
        }
    };
}
pub(crate) use record;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip() {
        let value = (7u32, u64::MAX, -3i32, true, "héllo".to_string());
        let mut e = Encoder::new();
        value.0.encode(&mut e);
        value.1.encode(&mut e);
        value.2.encode(&mut e);
        value.3.encode(&mut e);
        value.4.encode(&mut e);
        let bytes = e.into_bytes();
        let mut d = Decoder::new(&bytes);
        assert_eq!(u32::decode(&mut d), Ok(7));
        assert_eq!(u64::decode(&mut d), Ok(u64::MAX));
        assert_eq!(i32::decode(&mut d), Ok(-3));
        assert_eq!(bool::decode(&mut d), Ok(true));
        assert_eq!(String::decode(&mut d), Ok("héllo".to_string()));
        assert_eq!(d.finish(), Ok(()));
    }

    #[test]
    fn nested_lists_and_options_round_trip() {
        let value: Vec<Option<Vec<u8>>> = vec![None, Some(vec![]), Some(vec![1, 2, 3])];
        assert_eq!(
            from_bytes::<Vec<Option<Vec<u8>>>>(&to_bytes(&value)),
            Ok(value)
        );
    }

    #[test]
    fn decode_rejects_count_beyond_remaining_bytes() {
        let mut bytes = (u64::MAX).to_le_bytes().to_vec();
        bytes.push(0);
        assert!(matches!(
            from_bytes::<Vec<u64>>(&bytes),
            Err(DecodeError::TooLong { len: u64::MAX, .. })
        ));
    }

    #[test]
    fn decode_rejects_bad_bool_and_utf8() {
        assert_eq!(
            from_bytes::<bool>(&[2]),
            Err(DecodeError::BadBool { value: 2, at: 0 })
        );
        let mut bytes = 2u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0xc3, 0x28]);
        assert_eq!(
            from_bytes::<String>(&bytes),
            Err(DecodeError::BadUtf8 { at: 8 })
        );
    }

    #[test]
    fn decode_rejects_trailing_and_truncated_input() {
        assert_eq!(
            from_bytes::<u32>(&[1, 0, 0, 0, 9]),
            Err(DecodeError::TrailingBytes(1))
        );
        assert_eq!(
            from_bytes::<u64>(&[1, 0, 0]),
            Err(DecodeError::Truncated { at: 0, needed: 5 })
        );
    }

    #[test]
    fn nesting_is_bounded() {
        fn dive(d: &mut Decoder<'_>) -> Result<()> {
            d.nested(dive)
        }
        let mut d = Decoder::new(&[]);
        assert!(matches!(dive(&mut d), Err(DecodeError::TooDeep { .. })));
    }
}
