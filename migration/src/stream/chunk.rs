//! Chunk kinds, their size caps, and the checksums over chunks and over the
//! whole stream.

use crc32fast::Hasher;

use super::{MAX_BUFFER_CHUNK, MAX_OPTIONAL_CHUNK, MAX_STATE_PART};

/// Kinds with this bit set are optional: a reader that does not know one
/// checks its checksum and skips it. Any other unknown kind is refused.
pub const OPTIONAL_BIT: u32 = 1 << 31;

/// Bytes before the data of a buffer-data chunk: session, buffer, offset.
pub const BUFFER_HEAD_LEN: usize = 24;
/// Bytes before the part of a state chunk: the encoded state's total length.
pub const STATE_HEAD_LEN: usize = 8;
/// Bytes of an end chunk's payload.
pub const END_LEN: usize = 28;
/// Bytes of a base chunk's payload before the base's path.
pub const BASE_HEAD_LEN: usize = 16;
/// Bytes of an identity chunk's payload.
pub const IDENTITY_LEN: usize = 16;
/// Bytes of a base-ref chunk's payload.
pub const BASE_REF_LEN: usize = 32;

/// The chunk kinds (`Base` and `BaseRef` only in format version 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum ChunkKind {
    /// A part of the encoded `VgpuState`.
    State = 1,
    /// Contents of a buffer.
    BufferData = 2,
    /// Totals; the last chunk.
    End = 3,
    /// The whole checkpoint an incremental one is taken against; first.
    Base = 4,
    /// A buffer whose contents are those of a buffer of the base.
    BaseRef = 5,
    /// The checkpoint's identity (`BaseId`); optional, first.
    Identity = OPTIONAL_BIT | 1,
}

impl ChunkKind {
    pub fn from_u32(kind: u32) -> Option<ChunkKind> {
        match kind {
            1 => Some(ChunkKind::State),
            2 => Some(ChunkKind::BufferData),
            3 => Some(ChunkKind::End),
            4 => Some(ChunkKind::Base),
            5 => Some(ChunkKind::BaseRef),
            k if k == OPTIONAL_BIT | 1 => Some(ChunkKind::Identity),
            _ => None,
        }
    }

    /// Largest payload a chunk of this kind may have.
    pub fn max_len(self) -> u64 {
        match self {
            ChunkKind::State => STATE_HEAD_LEN as u64 + MAX_STATE_PART,
            ChunkKind::BufferData => (BUFFER_HEAD_LEN + MAX_BUFFER_CHUNK) as u64,
            ChunkKind::End => END_LEN as u64,
            ChunkKind::Base => (BASE_HEAD_LEN + super::MAX_BASE_PATH) as u64,
            ChunkKind::BaseRef => BASE_REF_LEN as u64,
            ChunkKind::Identity => IDENTITY_LEN as u64,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ChunkKind::State => "state",
            ChunkKind::BufferData => "buffer data",
            ChunkKind::End => "end",
            ChunkKind::Base => "base",
            ChunkKind::BaseRef => "base ref",
            ChunkKind::Identity => "identity",
        }
    }
}

/// Cap and name for any kind value, known or not.
pub fn limits(kind: u32) -> (u64, &'static str) {
    match ChunkKind::from_u32(kind) {
        Some(known) => (known.max_len(), known.name()),
        None => (MAX_OPTIONAL_CHUNK, "unknown"),
    }
}

/// The kind and length that precede a payload.
pub fn head(kind: u32, len: u64) -> [u8; 12] {
    let mut out = [0u8; 12];
    out[..4].copy_from_slice(&kind.to_le_bytes());
    out[4..].copy_from_slice(&len.to_le_bytes());
    out
}

pub fn parse_head(bytes: &[u8; 12]) -> (u32, u64) {
    let mut kind = [0u8; 4];
    let mut len = [0u8; 8];
    kind.copy_from_slice(&bytes[..4]);
    len.copy_from_slice(&bytes[4..]);
    (u32::from_le_bytes(kind), u64::from_le_bytes(len))
}

/// The CRC-32 of one chunk's head and payload, computed as they stream.
pub fn chunk_crc(head: &[u8; 12], pieces: &[&[u8]]) -> Hasher {
    let mut h = Hasher::new();
    h.update(head);
    pieces.iter().for_each(|p| h.update(p));
    h
}

/// CRC-32 over every byte of the stream before the end chunk, extended
/// chunk by chunk without a second pass over the data.
#[derive(Clone, Default)]
pub struct StreamCrc(Hasher);

impl StreamCrc {
    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Appends a chunk: its head and payload (already hashed) and its CRC.
    pub fn append(&mut self, chunk: &Hasher, crc: u32) {
        self.0.combine(chunk);
        self.0.update(&crc.to_le_bytes());
    }

    pub fn value(&self) -> u32 {
        self.0.clone().finalize()
    }
}

/// Little-endian `u64` at `at` of a payload whose length was checked.
pub fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut out = [0u8; 8];
    out.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_crc_equals_one_pass_over_the_bytes() {
        let header = b"header";
        let head = head(2, 5);
        let payload = b"hello";
        let chunk = chunk_crc(&head, &[payload]);
        let crc = chunk.clone().finalize();
        let mut stream = StreamCrc::default();
        stream.update(header);
        stream.append(&chunk, crc);
        let mut whole = header.to_vec();
        whole.extend_from_slice(&head);
        whole.extend_from_slice(payload);
        whole.extend_from_slice(&crc.to_le_bytes());
        assert_eq!(stream.value(), crc32fast::hash(&whole));
    }

    #[test]
    fn head_round_trips() {
        assert_eq!(
            parse_head(&head(0x8000_0001, 1 << 40)),
            (0x8000_0001, 1 << 40)
        );
    }
}
