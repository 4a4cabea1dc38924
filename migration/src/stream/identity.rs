//! Naming a whole checkpoint cheaply: the identity chunk that opens it, so
//! an incremental checkpoint can be checked against a base file without
//! reading the base.

use std::io::Read;

use super::chunk::{self, ChunkKind, IDENTITY_LEN};
use super::{BaseId, ReadError, CHUNK_HEAD_LEN, CHUNK_TAIL_LEN, FORMAT_VERSION, HEADER_LEN, MAGIC};

/// The identity of the whole checkpoint `file` starts with (its header and
/// first chunk are checked; a merge verifies the rest). `None` for a
/// checkpoint without one (written by an older build, or a merge).
pub fn base_id<F: Read>(file: &mut F) -> Result<Option<BaseId>, ReadError> {
    let first = HEADER_LEN + CHUNK_HEAD_LEN + IDENTITY_LEN as u64 + CHUNK_TAIL_LEN;
    let mut bytes = vec![0u8; first as usize];
    let mut got = 0;
    while got < bytes.len() {
        match file.read(&mut bytes[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ReadError::Io(e)),
        }
    }
    if bytes[..got.min(8)] != MAGIC[..got.min(8)] {
        return Err(ReadError::BadMagic);
    }
    if got < HEADER_LEN as usize {
        return Err(ReadError::Truncated { at: got as u64 });
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != FORMAT_VERSION {
        return Err(ReadError::UnsupportedVersion {
            version,
            min: FORMAT_VERSION,
            max: FORMAT_VERSION,
        });
    }
    if got < bytes.len() {
        return Ok(None);
    }
    let at = HEADER_LEN as usize;
    let mut head = [0u8; CHUNK_HEAD_LEN as usize];
    head.copy_from_slice(&bytes[at..at + CHUNK_HEAD_LEN as usize]);
    let (kind, len) = chunk::parse_head(&head);
    if kind != ChunkKind::Identity as u32 || len != IDENTITY_LEN as u64 {
        return Ok(None);
    }
    let payload = &bytes[at + CHUNK_HEAD_LEN as usize..][..IDENTITY_LEN];
    let crc = &bytes[at + CHUNK_HEAD_LEN as usize + IDENTITY_LEN..];
    if chunk::chunk_crc(&head, &[payload]).finalize().to_le_bytes() != crc {
        return Err(ReadError::Checksum {
            index: 0,
            at: at as u64,
        });
    }
    let mut id = [0u8; IDENTITY_LEN];
    id.copy_from_slice(payload);
    Ok(Some(BaseId(u128::from_le_bytes(id))))
}
