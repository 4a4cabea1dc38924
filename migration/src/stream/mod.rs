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
mod reader;
mod writer;

pub use buffers::BufferError;
pub use chunk::ChunkKind;
pub use reader::{Item, ReadError, StreamReader};
pub use writer::{StreamWriter, WriteError};

/// First bytes of every stream.
pub const MAGIC: [u8; 8] = *b"VGPUSNAP";
/// The format version this build writes.
pub const FORMAT_VERSION: u32 = 1;
/// The oldest format version this build reads.
pub const MIN_FORMAT_VERSION: u32 = 1;
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
