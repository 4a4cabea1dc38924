//! Bytes a state shares with the live object it describes (a CUDA module's
//! image): capturing the state at a checkpoint's pause takes a reference,
//! not a copy of what may be tens of megabytes. On the wire it is exactly
//! a `Vec<u8>` (a length, then the bytes), so streams do not change.

use std::ops::Deref;
use std::sync::Arc;

use crate::codec::{Codec, Decoder, Encoder, Result};

#[derive(Clone, PartialEq, Eq, Default)]
pub struct SharedBytes(Arc<[u8]>);

impl SharedBytes {
    /// The shared allocation itself, for an owner that keeps it.
    pub fn shared(&self) -> Arc<[u8]> {
        self.0.clone()
    }
}

impl Deref for SharedBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl From<Arc<[u8]>> for SharedBytes {
    fn from(bytes: Arc<[u8]>) -> Self {
        SharedBytes(bytes)
    }
}

impl From<Vec<u8>> for SharedBytes {
    fn from(bytes: Vec<u8>) -> Self {
        SharedBytes(bytes.into())
    }
}

impl std::fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SharedBytes({} bytes)", self.0.len())
    }
}

impl Codec for SharedBytes {
    fn encode(&self, e: &mut Encoder) {
        e.len(self.0.len());
        e.raw(&self.0);
    }
    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        let bytes: Vec<u8> = Codec::decode(d)?;
        Ok(bytes.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{from_bytes, to_bytes};

    #[test]
    fn shared_bytes_are_a_byte_vector_on_the_wire() {
        let bytes = vec![1u8, 2, 3, 250];
        let shared = SharedBytes::from(bytes.clone());
        assert_eq!(to_bytes(&shared), to_bytes(&bytes));
        let back: SharedBytes = from_bytes(&to_bytes(&bytes)).unwrap();
        assert_eq!(&*back, &bytes[..]);
    }

    #[test]
    fn a_clone_shares_the_bytes() {
        let shared = SharedBytes::from(vec![7u8; 1 << 20]);
        let clone = shared.clone();
        assert!(Arc::ptr_eq(&shared.shared(), &clone.shared()));
    }
}
