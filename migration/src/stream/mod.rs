//! The checkpoint stream: a header, then checksummed chunks, then an end
//! chunk with totals. See `README.md` for the byte layout.
//!
//! ```text
//! header   "VGPUSNAP" | u32 format version | u32 flags (0)
//! chunk    u32 kind | u64 length | payload | u32 CRC-32 of kind, length, payload
//! ...      state parts, then buffer data
//! end      a chunk of kind END: chunks, state bytes, buffer bytes, stream CRC
//! ```

mod buffers;
mod chunk;
mod identity;
mod merge;
mod reader;
mod writer;

pub use buffers::BufferError;
pub use chunk::ChunkKind;
pub use identity::base_id;
pub use merge::{merge, MergeError};
pub use reader::{Item, ReadError, StreamReader};
pub use writer::{StreamWriter, WriteError};

/// First bytes of every stream.
pub const MAGIC: [u8; 8] = *b"VGPUSNAP";
/// The format version this build writes for a whole checkpoint.
pub const FORMAT_VERSION: u32 = 1;
/// The format version of an incremental checkpoint (base and base-ref
/// chunks): builds that know only version 1 refuse it.
pub const DELTA_FORMAT_VERSION: u32 = 2;
/// The oldest format version this build reads.
pub const MIN_FORMAT_VERSION: u32 = 1;
/// The newest format version this build reads.
pub const MAX_FORMAT_VERSION: u32 = DELTA_FORMAT_VERSION;
/// Longest base path an incremental checkpoint records.
pub const MAX_BASE_PATH: usize = 4096;
/// Magic, version, flags.
pub const HEADER_LEN: u64 = 16;
/// Kind and length before a chunk's payload.
pub const CHUNK_HEAD_LEN: u64 = 12;
/// The CRC after a chunk's payload.
pub const CHUNK_TAIL_LEN: u64 = 4;

/// Most state bytes in one state chunk.
pub const MAX_STATE_PART: u64 = 16 << 20;
/// Largest encoded state (all its parts together).
pub const MAX_STATE_LEN: u64 = 256 << 20;
/// Most data bytes in one buffer-data chunk; also a good staging size for
/// reading buffers off the device.
pub const MAX_BUFFER_CHUNK: usize = 4 << 20;
/// Largest payload of an optional chunk kind this build does not know.
pub const MAX_OPTIONAL_CHUNK: u64 = 16 << 20;

/// Totals of a stream, as its end chunk records them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Chunks before the end chunk.
    pub chunks: u64,
    /// Bytes of the encoded state.
    pub state_bytes: u64,
    /// Bytes of buffer contents.
    pub buffer_bytes: u64,
    /// Bytes of the whole stream, end chunk included.
    pub stream_bytes: u64,
    /// The checkpoint's identity chunk, if it has one.
    pub identity: Option<BaseId>,
}

/// Names a whole checkpoint, so an incremental one can say which it was
/// taken against. Random, written in the checkpoint's first chunk (an
/// optional kind: builds that do not know it skip it). The end chunk's
/// stream CRC cannot serve: every chunk is followed by its own CRC, which
/// brings a CRC-32 register back to the same value, so that CRC is the
/// same for every stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct BaseId(pub u128);

impl BaseId {
    /// A fresh random identity.
    pub fn random() -> BaseId {
        use std::hash::{BuildHasher, Hasher};
        let half = || {
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        };
        BaseId(u128::from(half()) << 64 | u128::from(half()))
    }
}

/// How far a long write or read has got, reported after every chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Stream bytes written or read so far.
    pub stream_bytes: u64,
    /// Buffer contents written or read so far.
    pub buffer_bytes: u64,
    /// Buffer contents the stream carries in all (known once the state is
    /// written or read).
    pub buffer_total: u64,
}

/// A progress callback.
pub type ProgressFn = Box<dyn FnMut(&Progress) + Send>;
