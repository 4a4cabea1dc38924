//! Turns an incremental checkpoint and its base into one whole checkpoint
//! (format version 1), streaming: the incremental one's state and data
//! first, then the base's data for every buffer it refers to. Memory stays
//! bounded by one chunk however large the buffers. The result is what a
//! restore reads; a base that is not the one the incremental checkpoint was
//! taken against, or lacks a buffer it refers to, fails the merge.

use std::collections::HashMap;
use std::io::{Read, Write};

use super::{BaseId, Item, ReadError, StreamReader, StreamWriter, Summary, WriteError};
use crate::state::ObjectId;

/// Why a merge failed.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("the incremental checkpoint is not usable")]
    Delta(#[source] ReadError),
    #[error("the base checkpoint is not usable")]
    Base(#[source] ReadError),
    #[error("cannot write the merged checkpoint")]
    Write(#[from] WriteError),
    #[error("the checkpoint is not incremental (it names no base)")]
    NotIncremental,
    #[error("the base given is not the checkpoint the incremental one was taken against (it names {expected:032x}, the base is {found})")]
    WrongBase { expected: u128, found: String },
    #[error("buffer {base_buffer} of session {base_session} of the base has {found} bytes; the incremental checkpoint expects {expected}")]
    SizeMismatch {
        base_session: u64,
        base_buffer: ObjectId,
        expected: u64,
        found: u64,
    },
}

/// Where a base buffer's contents go, and how much of it arrived.
struct Target {
    session: u64,
    buffer: ObjectId,
    size: u64,
}

fn check_base(expected: BaseId, found: Option<BaseId>) -> Result<(), MergeError> {
    if found == Some(expected) {
        return Ok(());
    }
    Err(MergeError::WrongBase {
        expected: expected.0,
        found: found.map_or("without an identity".into(), |id| format!("{:032x}", id.0)),
    })
}

/// Writes the whole checkpoint that `delta` on top of `base` amounts to.
pub fn merge<B: Read, D: Read, W: Write>(
    base: B,
    delta: D,
    out: W,
) -> Result<(W, Summary), MergeError> {
    let mut delta = StreamReader::new(delta).map_err(MergeError::Delta)?;
    let mut writer = StreamWriter::new(out)?;
    let mut expected: Option<BaseId> = None;
    let mut wanted: HashMap<(u64, ObjectId), Target> = HashMap::new();
    loop {
        match delta.next_item().map_err(MergeError::Delta)? {
            Some(Item::Base { id, .. }) => expected = Some(id),
            Some(Item::State(state)) => writer.write_state(&state)?,
            Some(Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            }) => writer.write_buffer_chunk(session, buffer, offset, data)?,
            Some(Item::BaseRef {
                session,
                buffer,
                base_session,
                base_buffer,
                size,
            }) => {
                wanted.insert(
                    (base_session, base_buffer),
                    Target {
                        session,
                        buffer,
                        size,
                    },
                );
            }
            Some(Item::End(_)) | None => break,
        }
    }
    let expected = expected.ok_or(MergeError::NotIncremental)?;
    if wanted.is_empty() {
        // Everything changed since the base: nothing to read from it.
        return Ok(writer.finish()?);
    }
    let mut base = StreamReader::new(base).map_err(MergeError::Base)?;
    loop {
        match base.next_item().map_err(MergeError::Base)? {
            Some(Item::State(state)) => {
                check_base(expected, base.identity())?;
                for b in state.streamed_buffers() {
                    if let Some(t) = wanted.get(&(b.session, b.buffer)) {
                        if t.size != b.size {
                            return Err(MergeError::SizeMismatch {
                                base_session: b.session,
                                base_buffer: b.buffer,
                                expected: t.size,
                                found: b.size,
                            });
                        }
                    }
                }
            }
            Some(Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            }) => {
                if let Some(t) = wanted.get(&(session, buffer)) {
                    writer.write_buffer_chunk(t.session, t.buffer, offset, data)?;
                }
            }
            Some(Item::End(summary)) => {
                check_base(expected, summary.identity)?;
                break;
            }
            // A base is whole: it has no base of its own.
            Some(Item::Base { .. } | Item::BaseRef { .. }) => {
                return Err(MergeError::Base(ReadError::UnsupportedVersion {
                    version: super::DELTA_FORMAT_VERSION,
                    min: super::FORMAT_VERSION,
                    max: super::FORMAT_VERSION,
                }))
            }
            None => break,
        }
    }
    // `finish` fails unless every buffer arrived whole.
    Ok(writer.finish()?)
}
