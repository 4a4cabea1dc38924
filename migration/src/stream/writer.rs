//! Writes a stream: header, state, buffer contents, end.
//!
//! The writer copies nothing: a chunk's head, the caller's bytes and the
//! checksum go straight to the sink, so however large the vGPU, the writer
//! itself holds no buffer contents (only the encoded state while it writes
//! it). Wrap unbuffered sinks in a `BufWriter` to coalesce the small heads.

use std::io::Write;

use super::buffers::{BufferError, BufferIndex};
use super::chunk::{self, ChunkKind, StreamCrc, BASE_HEAD_LEN, BASE_REF_LEN, END_LEN};
use super::{
    BaseId, Progress, ProgressFn, Summary, CHUNK_HEAD_LEN, CHUNK_TAIL_LEN, DELTA_FORMAT_VERSION,
    FORMAT_VERSION, HEADER_LEN, MAGIC, MAX_BASE_PATH, MAX_BUFFER_CHUNK, MAX_STATE_LEN,
    MAX_STATE_PART,
};
use crate::state::{ObjectId, StateError, VgpuState};

/// Why a stream could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write the checkpoint stream")]
    Io(#[source] std::io::Error),
    #[error("the state was already written")]
    StateTwice,
    #[error("the state must be written first")]
    NoState,
    #[error("the state is inconsistent")]
    Invalid(#[source] StateError),
    #[error("the encoded state of {len} bytes exceeds the {max} allowed")]
    StateTooLarge { len: u64, max: u64 },
    #[error("bad buffer data")]
    Buffer(#[source] BufferError),
    #[error("an earlier write failed; the stream is unusable")]
    Failed,
    #[error("a base-ref needs a stream started with `new_incremental`")]
    NotIncremental,
    #[error("the base path is longer than {MAX_BASE_PATH} bytes")]
    BasePathTooLong,
}

pub type Result<T> = std::result::Result<T, WriteError>;

/// Streams a vGPU into `W`.
pub struct StreamWriter<W: Write> {
    inner: W,
    crc: StreamCrc,
    chunks: u64,
    stream_bytes: u64,
    state_bytes: u64,
    buffer_bytes: u64,
    buffers: Option<BufferIndex>,
    progress: Option<ProgressFn>,
    failed: bool,
    incremental: bool,
    identity: Option<BaseId>,
}

impl<W: Write> std::fmt::Debug for StreamWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamWriter")
            .field("chunks", &self.chunks)
            .field("stream_bytes", &self.stream_bytes)
            .field("buffer_bytes", &self.buffer_bytes)
            .finish_non_exhaustive()
    }
}

impl<W: Write> StreamWriter<W> {
    /// Writes the header of a whole checkpoint.
    pub fn new(inner: W) -> Result<Self> {
        Self::with_version(inner, FORMAT_VERSION)
    }

    /// Writes the header of a whole checkpoint and its identity, which
    /// incremental checkpoints taken against it will name.
    pub fn with_identity(inner: W, id: BaseId) -> Result<Self> {
        let mut writer = Self::new(inner)?;
        writer.chunk(ChunkKind::Identity as u32, &[&id.0.to_le_bytes()])?;
        writer.identity = Some(id);
        Ok(writer)
    }

    /// Writes the header of an incremental checkpoint and its base chunk:
    /// `base` names the whole checkpoint whose buffers `write_base_ref`
    /// refers to, `path` where it was (for the operator; a merge checks
    /// the base it is given against `base`, not its path).
    pub fn new_incremental(inner: W, base: BaseId, path: &str) -> Result<Self> {
        if path.len() > MAX_BASE_PATH {
            return Err(WriteError::BasePathTooLong);
        }
        let mut writer = Self::with_version(inner, DELTA_FORMAT_VERSION)?;
        writer.incremental = true;
        let head: [u8; BASE_HEAD_LEN] = base.0.to_le_bytes();
        writer.chunk(ChunkKind::Base as u32, &[&head, path.as_bytes()])?;
        Ok(writer)
    }

    fn with_version(mut inner: W, version: u32) -> Result<Self> {
        let mut header = [0u8; HEADER_LEN as usize];
        header[..8].copy_from_slice(&MAGIC);
        header[8..12].copy_from_slice(&version.to_le_bytes());
        inner.write_all(&header).map_err(WriteError::Io)?;
        let mut crc = StreamCrc::default();
        crc.update(&header);
        Ok(StreamWriter {
            inner,
            crc,
            chunks: 0,
            stream_bytes: HEADER_LEN,
            state_bytes: 0,
            buffer_bytes: 0,
            buffers: None,
            progress: None,
            failed: false,
            incremental: false,
            identity: None,
        })
    }

    /// Calls `f` after every chunk written.
    pub fn on_progress(&mut self, f: impl FnMut(&Progress) + Send + 'static) {
        self.progress = Some(Box::new(f));
    }

    pub fn bytes_written(&self) -> u64 {
        self.stream_bytes
    }

    /// Writes the state (validated first), in parts of at most
    /// `MAX_STATE_PART` bytes. Must come first, exactly once.
    pub fn write_state(&mut self, state: &VgpuState) -> Result<()> {
        self.usable()?;
        if self.buffers.is_some() {
            return Err(WriteError::StateTwice);
        }
        state.validate().map_err(WriteError::Invalid)?;
        let bytes = state.to_bytes();
        let total = bytes.len() as u64;
        if total > MAX_STATE_LEN {
            return Err(WriteError::StateTooLarge {
                len: total,
                max: MAX_STATE_LEN,
            });
        }
        self.buffers = Some(BufferIndex::new(state));
        let total_le = total.to_le_bytes();
        for part in bytes.chunks(MAX_STATE_PART as usize) {
            self.chunk(ChunkKind::State as u32, &[&total_le, part])?;
        }
        self.state_bytes = total;
        Ok(())
    }

    /// Writes `data`, the contents of `buffer` of `session` from `offset`
    /// on, in chunks of at most `MAX_BUFFER_CHUNK` bytes. Each buffer the
    /// state names (sub-buffers aside) must be written whole, in order of
    /// offset; buffers may interleave.
    pub fn write_buffer_chunk(
        &mut self,
        session: u64,
        buffer: ObjectId,
        offset: u64,
        data: &[u8],
    ) -> Result<()> {
        self.usable()?;
        let index = self.buffers.as_mut().ok_or(WriteError::NoState)?;
        index
            .advance(session, buffer, offset, data.len() as u64)
            .map_err(WriteError::Buffer)?;
        let mut at = offset;
        for piece in data.chunks(MAX_BUFFER_CHUNK) {
            let mut head = [0u8; chunk::BUFFER_HEAD_LEN];
            head[..8].copy_from_slice(&session.to_le_bytes());
            head[8..16].copy_from_slice(&buffer.to_le_bytes());
            head[16..].copy_from_slice(&at.to_le_bytes());
            self.buffer_bytes += piece.len() as u64;
            self.chunk(ChunkKind::BufferData as u32, &[&head, piece])?;
            at += piece.len() as u64;
        }
        Ok(())
    }

    /// Records that `buffer` of `session` holds what `base_buffer` of
    /// `base_session` holds in the base checkpoint: the whole buffer, so
    /// none of its data may be written.
    pub fn write_base_ref(
        &mut self,
        session: u64,
        buffer: ObjectId,
        base_session: u64,
        base_buffer: ObjectId,
    ) -> Result<()> {
        self.usable()?;
        if !self.incremental {
            return Err(WriteError::NotIncremental);
        }
        let index = self.buffers.as_mut().ok_or(WriteError::NoState)?;
        let size = index.size(session, buffer).map_err(WriteError::Buffer)?;
        index
            .advance(session, buffer, 0, size)
            .map_err(WriteError::Buffer)?;
        let mut payload = [0u8; BASE_REF_LEN];
        for (i, v) in [session, buffer, base_session, base_buffer]
            .into_iter()
            .enumerate()
        {
            payload[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        self.chunk(ChunkKind::BaseRef as u32, &[&payload])
    }

    /// Writes the end chunk once every buffer is whole, flushes, and gives
    /// the sink back with the stream's totals.
    pub fn finish(mut self) -> Result<(W, Summary)> {
        self.usable()?;
        let index = self.buffers.as_ref().ok_or(WriteError::NoState)?;
        index.check_complete().map_err(WriteError::Buffer)?;
        let mut end = [0u8; END_LEN];
        end[..8].copy_from_slice(&self.chunks.to_le_bytes());
        end[8..16].copy_from_slice(&self.state_bytes.to_le_bytes());
        end[16..24].copy_from_slice(&self.buffer_bytes.to_le_bytes());
        end[24..].copy_from_slice(&self.crc.value().to_le_bytes());
        self.chunk(ChunkKind::End as u32, &[&end])?;
        self.inner.flush().map_err(WriteError::Io)?;
        let summary = Summary {
            chunks: self.chunks,
            state_bytes: self.state_bytes,
            buffer_bytes: self.buffer_bytes,
            stream_bytes: self.stream_bytes,
            identity: self.identity,
        };
        Ok((self.inner, summary))
    }

    fn usable(&self) -> Result<()> {
        if self.failed {
            return Err(WriteError::Failed);
        }
        Ok(())
    }

    /// Writes one chunk from pieces of payload; the stream is unusable
    /// after an I/O error.
    fn chunk(&mut self, kind: u32, pieces: &[&[u8]]) -> Result<()> {
        let len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        let head = chunk::head(kind, len);
        let hasher = chunk::chunk_crc(&head, pieces);
        let crc = hasher.clone().finalize();
        let written = self.write_all(&head, pieces, crc);
        if let Err(e) = written {
            self.failed = true;
            return Err(WriteError::Io(e));
        }
        if kind != ChunkKind::End as u32 {
            self.crc.append(&hasher, crc);
            self.chunks += 1;
        }
        self.stream_bytes += CHUNK_HEAD_LEN + len + CHUNK_TAIL_LEN;
        if let Some(progress) = self.progress.as_mut() {
            progress(&Progress {
                stream_bytes: self.stream_bytes,
                buffer_bytes: self.buffer_bytes,
                buffer_total: self.buffers.as_ref().map_or(0, BufferIndex::total),
            });
        }
        Ok(())
    }

    fn write_all(&mut self, head: &[u8], pieces: &[&[u8]], crc: u32) -> std::io::Result<()> {
        self.inner.write_all(head)?;
        for piece in pieces {
            self.inner.write_all(piece)?;
        }
        self.inner.write_all(&crc.to_le_bytes())
    }
}
