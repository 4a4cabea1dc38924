//! The vGPU state model and its checkpoint stream.
//!
//! - [`state`]: plain data describing a whole vGPU (sessions, contexts,
//!   queues, buffers, programs, kernels, events, reference counts),
//!   versioned from the start so old checkpoints stay readable.
//! - [`profile`]: the device profile the guest saw, the compatibility check
//!   of a destination device, and the portable subset of a pool.
//! - [`stream`]: the byte format (magic, version, checksummed and
//!   size-capped chunks, an end chunk with totals), written and read in
//!   bounded memory however large the buffers.
//! - [`write_atomically`]: `FILE.tmp`, fsync, rename.
//!
//! A save quiesces the vGPU, writes its state, streams every buffer, and
//! finishes with the end chunk; a restore reads the state, builds a fresh
//! vGPU, uploads the buffers as their chunks arrive, and swaps the new vGPU
//! in only after `Item::End` verified the stream whole.

pub mod atomic;
pub mod codec;
pub mod profile;
pub mod shared_bytes;
pub mod state;
pub mod stream;

pub use atomic::{write_atomically, AtomicWriteError};
pub use codec::DecodeError;
pub use profile::{
    check, default_memory_size, Incompatible, MemorySizeError, Profile, Shortfall, SubsetError,
    VectorWidths, Version, MEMORY_GRANULE,
};
pub use shared_bytes::SharedBytes;
pub use state::*;
pub use stream::{
    base_id, merge, BaseId, Item, MergeError, Progress, ReadError, StreamReader, StreamWriter,
    Summary, WriteError,
};
