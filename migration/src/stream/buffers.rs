//! Which buffers a stream carries and how far each has been streamed. A
//! buffer's contents travel in order, from offset 0 to its size, possibly
//! interleaved with other buffers; the end of the stream requires every
//! buffer whole. The writer and the reader keep the same index, so a saver
//! that forgets a buffer fails at `finish`, and a stream that lost one
//! fails at its end.

use std::collections::BTreeMap;

use crate::state::{ObjectId, VgpuState};

/// Why buffer data does not fit the state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BufferError {
    #[error("session {session} has no buffer {buffer} whose contents a stream carries (unknown, or a sub-buffer)")]
    Unknown { session: u64, buffer: ObjectId },
    #[error(
        "session {session} buffer {buffer}: data at offset {offset}, expected offset {expected}"
    )]
    OutOfOrder {
        session: u64,
        buffer: ObjectId,
        offset: u64,
        expected: u64,
    },
    #[error("session {session} buffer {buffer}: data reaches byte {end}, past its size {size}")]
    Overrun {
        session: u64,
        buffer: ObjectId,
        end: u64,
        size: u64,
    },
    #[error("session {session} buffer {buffer}: {streamed} of its {size} bytes streamed")]
    Incomplete {
        session: u64,
        buffer: ObjectId,
        streamed: u64,
        size: u64,
    },
}

#[derive(Debug)]
struct Slot {
    size: u64,
    next: u64,
}

/// Progress of every streamed buffer, keyed by (session, buffer).
#[derive(Debug, Default)]
pub struct BufferIndex {
    slots: BTreeMap<(u64, ObjectId), Slot>,
    total: u64,
}

impl BufferIndex {
    pub fn new(state: &VgpuState) -> Self {
        let mut index = BufferIndex::default();
        for b in state.streamed_buffers() {
            index.slots.insert(
                (b.session, b.buffer),
                Slot {
                    size: b.size,
                    next: 0,
                },
            );
            index.total = index.total.saturating_add(b.size);
        }
        index
    }

    /// Bytes of contents the stream carries in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The size of a buffer the stream carries.
    pub fn size(&self, session: u64, buffer: ObjectId) -> Result<u64, BufferError> {
        self.slots
            .get(&(session, buffer))
            .map(|s| s.size)
            .ok_or(BufferError::Unknown { session, buffer })
    }

    /// Accounts for `len` bytes at `offset` of a buffer.
    pub fn advance(
        &mut self,
        session: u64,
        buffer: ObjectId,
        offset: u64,
        len: u64,
    ) -> Result<(), BufferError> {
        let slot = self
            .slots
            .get_mut(&(session, buffer))
            .ok_or(BufferError::Unknown { session, buffer })?;
        if offset != slot.next {
            return Err(BufferError::OutOfOrder {
                session,
                buffer,
                offset,
                expected: slot.next,
            });
        }
        match offset.checked_add(len) {
            Some(end) if end <= slot.size => {
                slot.next = end;
                Ok(())
            }
            end => Err(BufferError::Overrun {
                session,
                buffer,
                end: end.unwrap_or(u64::MAX),
                size: slot.size,
            }),
        }
    }

    /// Fails on the first buffer not streamed whole.
    pub fn check_complete(&self) -> Result<(), BufferError> {
        match self.slots.iter().find(|(_, s)| s.next != s.size) {
            None => Ok(()),
            Some((&(session, buffer), slot)) => Err(BufferError::Incomplete {
                session,
                buffer,
                streamed: slot.next,
                size: slot.size,
            }),
        }
    }
}
