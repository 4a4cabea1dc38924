//! Wire format of the vgpu device, shared by the guest libraries, the guest
//! kernel driver and `vgpu-backend`. No I/O: see `README.md` for the layout.

pub mod codec;
pub mod cuda;
pub mod frame;
pub mod image;
pub mod limits;
pub mod messages;
pub mod objects;
pub mod pacing;
pub mod status;

pub use codec::DataRef;
pub use frame::{decode, decode_reply, Batch, BatchBuilder, BatchHeader, Message, Reply};
pub use messages::{opcode, Request, Wire};
pub use objects::{ArgKind, InfoTarget, ObjectKind};
pub use status::Status;

/// Virtio device id of the vgpu device.
pub const VIRTIO_ID_VGPU: u32 = 60;
/// Submit queue index.
pub const SUBMIT_QUEUE: u16 = 0;
/// Event queue index.
pub const EVENT_QUEUE: u16 = 1;
pub const NUM_QUEUES: usize = 2;
pub const SUBMIT_QUEUE_SIZE: u16 = 1024;
pub const EVENT_QUEUE_SIZE: u16 = 256;

/// Why bytes did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated: needed {needed} bytes, {available} available")]
    Truncated { needed: usize, available: usize },
    #[error("length {len} exceeds the limit {max}")]
    TooLong { len: u64, max: u64 },
    #[error("{0} trailing bytes")]
    TrailingBytes(usize),
    #[error("bad magic {0:#010x}")]
    BadMagic(u32),
    #[error("unsupported protocol version {0}")]
    UnsupportedVersion(u16),
    #[error("unknown opcode {0:#06x}")]
    UnknownOpcode(u32),
    #[error("bad header: {0}")]
    BadHeader(&'static str),
}

impl DecodeError {
    /// The status a guest sees for a message that did not decode.
    pub fn status(&self) -> Status {
        match self {
            DecodeError::UnknownOpcode(_) => Status::INVALID_OPERATION,
            _ => Status::INVALID_VALUE,
        }
    }
}
