//! Reads a stream item by item, in bounded memory: one chunk's payload at a
//! time (the encoded state excepted, which is gathered whole and decoded).
//!
//! Nothing is handed out before its chunk's checksum has been verified, and
//! `Item::End` only once the end chunk's totals, the whole-stream checksum
//! and the completeness of every buffer have been. A restore therefore
//! builds into a fresh vGPU and swaps it in only after `End`: a truncated
//! or damaged stream fails before anything is applied.

use std::io::Read;

use super::buffers::{BufferError, BufferIndex};
use super::chunk::{
    self, ChunkKind, StreamCrc, BASE_HEAD_LEN, BASE_REF_LEN, BUFFER_HEAD_LEN, END_LEN,
    IDENTITY_LEN, STATE_HEAD_LEN,
};
use super::{
    BaseId, Progress, ProgressFn, Summary, CHUNK_HEAD_LEN, CHUNK_TAIL_LEN, DELTA_FORMAT_VERSION,
    HEADER_LEN, MAGIC, MAX_FORMAT_VERSION, MAX_STATE_LEN, MIN_FORMAT_VERSION,
};
use crate::codec::DecodeError;
use crate::state::{ObjectId, StateError, VgpuState};

/// Why a stream was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read the checkpoint stream")]
    Io(#[source] std::io::Error),
    #[error("not a vGPU checkpoint (bad magic)")]
    BadMagic,
    #[error("unsupported format version {version} (this build reads {min}..={max})")]
    UnsupportedVersion { version: u32, min: u32, max: u32 },
    #[error("reserved header flags {0:#x} are set")]
    HeaderFlags(u32),
    #[error("truncated at byte {at}")]
    Truncated { at: u64 },
    #[error("chunk {index} at byte {at} claims {len} bytes, more than the {max} a {kind} chunk may hold")]
    TooLong {
        index: u64,
        at: u64,
        kind: &'static str,
        len: u64,
        max: u64,
    },
    #[error("checksum mismatch in chunk {index} at byte {at}")]
    Checksum { index: u64, at: u64 },
    #[error("chunk {index} has unknown kind {kind:#x} (written by a newer build?)")]
    UnknownKind { index: u64, kind: u32 },
    #[error("chunk {index}: {what}")]
    Malformed { index: u64, what: &'static str },
    #[error("the state claims {len} bytes, more than the {max} allowed")]
    StateTooLarge { len: u64, max: u64 },
    #[error("the state does not decode")]
    State(#[source] DecodeError),
    #[error("the state is inconsistent")]
    Invalid(#[source] StateError),
    #[error("chunk {index}: bad buffer data")]
    Buffer {
        index: u64,
        #[source]
        source: BufferError,
    },
    #[error("the end chunk counts {expected} {what}, the stream has {found}")]
    EndMismatch {
        what: &'static str,
        expected: u64,
        found: u64,
    },
    #[error("whole-stream checksum mismatch")]
    StreamChecksum,
    #[error("the stream ends with a buffer incomplete")]
    Incomplete(#[source] BufferError),
    #[error("unexpected data after the end chunk, at byte {at}")]
    TrailingData { at: u64 },
    #[error("an earlier read failed; the stream is unusable")]
    Failed,
}

pub type Result<T> = std::result::Result<T, ReadError>;

/// One thing read from a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Item<'a> {
    /// The whole state, validated; always the first item.
    State(Box<VgpuState>),
    /// Contents of a buffer at `offset`; valid until the next read.
    BufferChunk {
        session: u64,
        buffer: ObjectId,
        offset: u64,
        data: &'a [u8],
    },
    /// The whole checkpoint this incremental one is taken against; the
    /// first item of a format-2 stream.
    Base { id: BaseId, path: String },
    /// A buffer (whole, `size` bytes) whose contents are those of
    /// `base_buffer` of `base_session` in the base checkpoint.
    BaseRef {
        session: u64,
        buffer: ObjectId,
        base_session: u64,
        base_buffer: ObjectId,
        size: u64,
    },
    /// The verified end: the stream is whole. Always the last item.
    End(Summary),
}

/// A byte source that counts what it consumed.
struct Source<R> {
    inner: R,
    pos: u64,
}

impl<R: Read> Source<R> {
    /// Reads as much of `buf` as the source has; returns the count.
    fn read_up_to(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
        self.pos += got as u64;
        Ok(got)
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<()> {
        if self.read_up_to(buf)? < buf.len() {
            return Err(ReadError::Truncated { at: self.pos });
        }
        Ok(())
    }

    /// Replaces `out` with the next `len` bytes (`len` is within its
    /// kind's cap).
    fn payload(&mut self, len: u64, out: &mut Vec<u8>) -> Result<()> {
        out.clear();
        // Exactly the claimed length (at most a chunk's cap), so a reused
        // buffer never doubles past it.
        out.reserve_exact(usize::try_from(len).unwrap_or(usize::MAX));
        let got = (&mut self.inner)
            .take(len)
            .read_to_end(out)
            .map_err(ReadError::Io)?;
        self.pos += got as u64;
        if (got as u64) < len {
            return Err(ReadError::Truncated { at: self.pos });
        }
        Ok(())
    }
}

/// The encoded state as its parts arrive.
enum StateParts {
    Waiting,
    Partial { total: u64, bytes: Vec<u8> },
    Done,
}

/// What one chunk amounted to.
enum Step {
    Skip,
    Base(BaseId, String),
    BaseRef([u64; 4], u64),
    State(Box<VgpuState>),
    Buffer {
        session: u64,
        buffer: ObjectId,
        offset: u64,
    },
    End(Summary),
}

#[derive(PartialEq, Eq)]
enum Phase {
    Reading,
    Ended,
    Failed,
}

/// Reads a stream from `R`.
pub struct StreamReader<R: Read> {
    src: Source<R>,
    version: u32,
    chunks: u64,
    crc: StreamCrc,
    payload: Vec<u8>,
    state: StateParts,
    buffers: BufferIndex,
    state_bytes: u64,
    buffer_bytes: u64,
    phase: Phase,
    allow_trailing: bool,
    progress: Option<ProgressFn>,
    /// An incremental stream's base chunk was read.
    has_base: bool,
    identity: Option<BaseId>,
}

impl<R: Read> std::fmt::Debug for StreamReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamReader")
            .field("version", &self.version)
            .field("chunks", &self.chunks)
            .field("bytes_read", &self.src.pos)
            .finish_non_exhaustive()
    }
}

impl<R: Read> StreamReader<R> {
    /// Reads and checks the header.
    pub fn new(inner: R) -> Result<Self> {
        let mut src = Source { inner, pos: 0 };
        let mut header = [0u8; HEADER_LEN as usize];
        let got = src.read_up_to(&mut header)?;
        if header[..got.min(8)] != MAGIC[..got.min(8)] {
            return Err(ReadError::BadMagic);
        }
        if got < header.len() {
            return Err(ReadError::Truncated { at: src.pos });
        }
        let version = u32::from_le_bytes([header[8], header[9], header[10], header[11]]);
        if !(MIN_FORMAT_VERSION..=MAX_FORMAT_VERSION).contains(&version) {
            return Err(ReadError::UnsupportedVersion {
                version,
                min: MIN_FORMAT_VERSION,
                max: MAX_FORMAT_VERSION,
            });
        }
        let flags = u32::from_le_bytes([header[12], header[13], header[14], header[15]]);
        if flags != 0 {
            return Err(ReadError::HeaderFlags(flags));
        }
        let mut crc = StreamCrc::default();
        crc.update(&header);
        Ok(StreamReader {
            src,
            version,
            chunks: 0,
            crc,
            payload: Vec::new(),
            state: StateParts::Waiting,
            buffers: BufferIndex::default(),
            state_bytes: 0,
            buffer_bytes: 0,
            phase: Phase::Reading,
            allow_trailing: false,
            progress: None,
            has_base: false,
            identity: None,
        })
    }

    /// Accepts bytes after the end chunk (a stream embedded in a larger
    /// one); by default they are an error.
    pub fn allow_trailing_data(mut self) -> Self {
        self.allow_trailing = true;
        self
    }

    /// Calls `f` after every chunk read.
    pub fn on_progress(&mut self, f: impl FnMut(&Progress) + Send + 'static) {
        self.progress = Some(Box::new(f));
    }

    pub fn format_version(&self) -> u32 {
        self.version
    }

    pub fn bytes_read(&self) -> u64 {
        self.src.pos
    }

    /// The identity of a whole checkpoint, once its first chunk is read.
    pub fn identity(&self) -> Option<BaseId> {
        self.identity
    }

    /// The next item, `None` after `End`. After an error every call fails.
    pub fn next_item(&mut self) -> Result<Option<Item<'_>>> {
        match self.phase {
            Phase::Reading => {}
            Phase::Ended => return Ok(None),
            Phase::Failed => return Err(ReadError::Failed),
        }
        loop {
            let step = match self.step() {
                Ok(step) => step,
                Err(e) => {
                    self.phase = Phase::Failed;
                    return Err(e);
                }
            };
            return Ok(Some(match step {
                Step::Skip => continue,
                Step::Base(id, path) => Item::Base { id, path },
                Step::BaseRef([session, buffer, base_session, base_buffer], size) => {
                    Item::BaseRef {
                        session,
                        buffer,
                        base_session,
                        base_buffer,
                        size,
                    }
                }
                Step::State(state) => Item::State(state),
                Step::Buffer {
                    session,
                    buffer,
                    offset,
                } => Item::BufferChunk {
                    session,
                    buffer,
                    offset,
                    data: &self.payload[BUFFER_HEAD_LEN..],
                },
                Step::End(summary) => {
                    self.phase = Phase::Ended;
                    Item::End(summary)
                }
            }));
        }
    }

    /// Reads and verifies one chunk, then acts on it.
    fn step(&mut self) -> Result<Step> {
        let index = self.chunks;
        let at = self.src.pos;
        let mut head = [0u8; CHUNK_HEAD_LEN as usize];
        self.src.fill(&mut head)?;
        let (kind, len) = chunk::parse_head(&head);
        let (max, name) = chunk::limits(kind);
        if len > max {
            return Err(ReadError::TooLong {
                index,
                at,
                kind: name,
                len,
                max,
            });
        }
        self.src.payload(len, &mut self.payload)?;
        let mut tail = [0u8; CHUNK_TAIL_LEN as usize];
        self.src.fill(&mut tail)?;
        let hasher = chunk::chunk_crc(&head, &[&self.payload]);
        let crc = hasher.clone().finalize();
        if crc != u32::from_le_bytes(tail) {
            return Err(ReadError::Checksum { index, at });
        }
        if self.version == DELTA_FORMAT_VERSION
            && index == 0
            && ChunkKind::from_u32(kind) != Some(ChunkKind::Base)
        {
            // Refused before anything is handed out: the header has no
            // checksum, so a whole stream whose version field was damaged
            // into this one must not read as an incremental stream.
            return Err(ReadError::Malformed {
                index,
                what: "an incremental stream whose first chunk is not its base",
            });
        }
        let step = match ChunkKind::from_u32(kind) {
            Some(ChunkKind::End) => return self.end(index),
            Some(ChunkKind::State) => self.state_part(index)?,
            Some(ChunkKind::BufferData) => self.buffer_data(index)?,
            Some(ChunkKind::Base) => self.base(index)?,
            Some(ChunkKind::BaseRef) => self.base_ref(index)?,
            Some(ChunkKind::Identity) => self.identity_chunk(index)?,
            None if kind & chunk::OPTIONAL_BIT != 0 => Step::Skip,
            None => return Err(ReadError::UnknownKind { index, kind }),
        };
        self.crc.append(&hasher, crc);
        self.chunks += 1;
        self.report();
        Ok(step)
    }

    fn state_part(&mut self, index: u64) -> Result<Step> {
        let malformed = |what| ReadError::Malformed { index, what };
        if self.payload.len() < STATE_HEAD_LEN {
            return Err(malformed("state chunk shorter than its header"));
        }
        let total = chunk::u64_at(&self.payload, 0);
        let part = &self.payload[STATE_HEAD_LEN..];
        if let StateParts::Waiting = self.state {
            if total > MAX_STATE_LEN {
                return Err(ReadError::StateTooLarge {
                    len: total,
                    max: MAX_STATE_LEN,
                });
            }
            self.state = StateParts::Partial {
                total,
                bytes: Vec::new(),
            };
        }
        let bytes = match &mut self.state {
            StateParts::Partial { total: t, bytes } if *t == total => bytes,
            StateParts::Partial { .. } => {
                return Err(malformed("state parts disagree on the state's length"))
            }
            StateParts::Waiting | StateParts::Done => return Err(malformed("a second state")),
        };
        if part.is_empty() || bytes.len() as u64 + part.len() as u64 > total {
            return Err(malformed("state part does not fit the state's length"));
        }
        bytes.extend_from_slice(part);
        if (bytes.len() as u64) < total {
            return Ok(Step::Skip);
        }
        let state = VgpuState::from_bytes(bytes).map_err(ReadError::State)?;
        state.validate().map_err(ReadError::Invalid)?;
        self.buffers = BufferIndex::new(&state);
        self.state_bytes = total;
        self.state = StateParts::Done;
        Ok(Step::State(Box::new(state)))
    }

    /// The base of an incremental stream: its first chunk, nowhere else.
    fn base(&mut self, index: u64) -> Result<Step> {
        let malformed = |what| ReadError::Malformed { index, what };
        if self.version != DELTA_FORMAT_VERSION || index != 0 {
            return Err(malformed("a base chunk not first in an incremental stream"));
        }
        if self.payload.len() < BASE_HEAD_LEN {
            return Err(malformed("base chunk shorter than its header"));
        }
        let mut id = [0u8; BASE_HEAD_LEN];
        id.copy_from_slice(&self.payload[..BASE_HEAD_LEN]);
        let id = BaseId(u128::from_le_bytes(id));
        let path = std::str::from_utf8(&self.payload[BASE_HEAD_LEN..])
            .map_err(|_| malformed("the base path is not UTF-8"))?;
        self.has_base = true;
        Ok(Step::Base(id, path.to_string()))
    }

    /// A whole checkpoint's identity: its first chunk, nowhere else.
    fn identity_chunk(&mut self, index: u64) -> Result<Step> {
        let malformed = |what| ReadError::Malformed { index, what };
        if index != 0 || self.payload.len() != IDENTITY_LEN {
            return Err(malformed(
                "an identity chunk not first or of the wrong size",
            ));
        }
        let mut id = [0u8; IDENTITY_LEN];
        id.copy_from_slice(&self.payload);
        self.identity = Some(BaseId(u128::from_le_bytes(id)));
        Ok(Step::Skip)
    }

    /// A buffer taken whole from the base.
    fn base_ref(&mut self, index: u64) -> Result<Step> {
        let malformed = |what| ReadError::Malformed { index, what };
        if !self.has_base {
            return Err(malformed("a base ref in a stream without a base"));
        }
        if !matches!(self.state, StateParts::Done) {
            return Err(malformed("a base ref before the state"));
        }
        if self.payload.len() != BASE_REF_LEN {
            return Err(malformed("base ref chunk of the wrong size"));
        }
        let v = [0, 8, 16, 24].map(|at| chunk::u64_at(&self.payload, at));
        let size = self
            .buffers
            .size(v[0], v[1])
            .map_err(|source| ReadError::Buffer { index, source })?;
        self.buffers
            .advance(v[0], v[1], 0, size)
            .map_err(|source| ReadError::Buffer { index, source })?;
        Ok(Step::BaseRef(v, size))
    }

    fn buffer_data(&mut self, index: u64) -> Result<Step> {
        if !matches!(self.state, StateParts::Done) {
            return Err(ReadError::Malformed {
                index,
                what: "buffer data before the state",
            });
        }
        if self.payload.len() < BUFFER_HEAD_LEN {
            return Err(ReadError::Malformed {
                index,
                what: "buffer data chunk shorter than its header",
            });
        }
        let session = chunk::u64_at(&self.payload, 0);
        let buffer = chunk::u64_at(&self.payload, 8);
        let offset = chunk::u64_at(&self.payload, 16);
        let len = (self.payload.len() - BUFFER_HEAD_LEN) as u64;
        self.buffers
            .advance(session, buffer, offset, len)
            .map_err(|source| ReadError::Buffer { index, source })?;
        self.buffer_bytes += len;
        Ok(Step::Buffer {
            session,
            buffer,
            offset,
        })
    }

    /// Verifies the end chunk against what was read.
    fn end(&mut self, index: u64) -> Result<Step> {
        if self.payload.len() != END_LEN {
            return Err(ReadError::Malformed {
                index,
                what: "end chunk of the wrong size",
            });
        }
        if !matches!(self.state, StateParts::Done) {
            return Err(ReadError::Malformed {
                index,
                what: "end of the stream before a whole state",
            });
        }
        let counts = [
            ("chunks", chunk::u64_at(&self.payload, 0), self.chunks),
            (
                "state bytes",
                chunk::u64_at(&self.payload, 8),
                self.state_bytes,
            ),
            (
                "buffer bytes",
                chunk::u64_at(&self.payload, 16),
                self.buffer_bytes,
            ),
        ];
        for (what, expected, found) in counts {
            if expected != found {
                return Err(ReadError::EndMismatch {
                    what,
                    expected,
                    found,
                });
            }
        }
        if self.payload[24..] != self.crc.value().to_le_bytes() {
            return Err(ReadError::StreamChecksum);
        }
        if self.version == DELTA_FORMAT_VERSION && !self.has_base {
            return Err(ReadError::Malformed {
                index,
                what: "an incremental stream without its base chunk",
            });
        }
        self.buffers
            .check_complete()
            .map_err(ReadError::Incomplete)?;
        if !self.allow_trailing {
            let at = self.src.pos;
            if self.src.read_up_to(&mut [0u8; 1])? > 0 {
                return Err(ReadError::TrailingData { at });
            }
        }
        self.report();
        Ok(Step::End(Summary {
            chunks: self.chunks,
            state_bytes: self.state_bytes,
            buffer_bytes: self.buffer_bytes,
            stream_bytes: self.src.pos,
            identity: self.identity,
        }))
    }

    fn report(&mut self) {
        if let Some(progress) = self.progress.as_mut() {
            progress(&Progress {
                stream_bytes: self.src.pos,
                buffer_bytes: self.buffer_bytes,
                buffer_total: self.buffers.total(),
            });
        }
    }
}
