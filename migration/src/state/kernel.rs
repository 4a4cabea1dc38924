//! Kernels and their current arguments.

use super::objects::{GuestRef, ObjectId};
use crate::codec::{record, Codec, DecodeError, Decoder, Encoder, Result};

/// The current value of one kernel argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelArg {
    /// Never set.
    Unset,
    /// By-value bytes.
    Value(Vec<u8>),
    /// A buffer of the session.
    Buffer(ObjectId),
    /// A NULL buffer argument.
    NullBuffer,
    /// `__local` memory of this many bytes.
    Local(u64),
    /// A sampler of the session.
    Sampler(ObjectId),
}

record! {
    pub struct KernelState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub program: ObjectId,
        /// The kernel function's name.
        pub name: String,
        /// One entry per argument, in index order.
        pub args: Vec<KernelArg>,
    }
}

impl Codec for KernelArg {
    fn encode(&self, e: &mut Encoder) {
        match self {
            KernelArg::Unset => e.u32(0),
            KernelArg::Value(bytes) => {
                e.u32(1);
                bytes.encode(e);
            }
            KernelArg::Buffer(id) => {
                e.u32(2);
                e.u64(*id);
            }
            KernelArg::NullBuffer => e.u32(3),
            KernelArg::Local(size) => {
                e.u32(4);
                e.u64(*size);
            }
            KernelArg::Sampler(id) => {
                e.u32(5);
                e.u64(*id);
            }
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.tag()? {
            (0, _) => Ok(KernelArg::Unset),
            (1, _) => Ok(KernelArg::Value(Vec::decode(d)?)),
            (2, _) => Ok(KernelArg::Buffer(d.u64()?)),
            (3, _) => Ok(KernelArg::NullBuffer),
            (4, _) => Ok(KernelArg::Local(d.u64()?)),
            (5, _) => Ok(KernelArg::Sampler(d.u64()?)),
            (tag, at) => Err(DecodeError::BadTag {
                what: "kernel argument",
                tag,
                at,
            }),
        }
    }
}
