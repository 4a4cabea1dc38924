//! Contexts, queues, buffers, samplers, events and pending commands of a
//! session.
//!
//! Every object has an `id`, the key other records of its session use to
//! name it, and, while the guest holds it, a `guest` handle with the
//! guest-visible reference count. An object the guest released but another
//! object still holds (a program whose kernel lives on, the parent of a
//! live sub-buffer, a buffer still set as a kernel argument) has no guest
//! handle and is still saved, because restoring its holder needs it. The
//! saver picks the ids: the guest handle for an object the guest holds,
//! any other unused value for one it released (the guest may already have
//! reused that handle for something else).

use crate::codec::{record, Codec, DecodeError, Decoder, Encoder, Result};

/// Key of an object inside its session's state (unique per object kind).
pub type ObjectId = u64;

record! {
    /// What the guest sees of an object it holds.
    #[derive(Copy)]
    pub struct GuestRef {
        /// The handle the guest chose (never 0).
        pub handle: u64,
        /// Guest-visible reference count (at least 1).
        pub refs: u32,
    }
}

record! {
    pub struct ContextState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        /// The properties the guest passed (key/value pairs, no terminator);
        /// the platform entry is the guest's and is replaced on restore.
        pub properties: Vec<u64>,
    }
}

record! {
    pub struct QueueState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        /// As for `clCreateCommandQueueWithProperties` (pairs, no terminator).
        pub properties: Vec<u64>,
    }
}

record! {
    /// Where a sub-buffer lies in its parent.
    #[derive(Copy)]
    pub struct SubRegion {
        /// A buffer that is not itself a sub-buffer.
        pub parent: ObjectId,
        pub origin: u64,
    }
}

record! {
    /// A buffer or sub-buffer. The contents of a buffer travel in the
    /// stream's buffer-data chunks; a sub-buffer's are its parent's.
    pub struct BufferState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        /// `cl_mem_flags` as the guest passed them.
        pub flags: u64,
        pub size: u64,
        /// Set for a sub-buffer.
        pub parent: Option<SubRegion>,
    }
}

record! {
    pub struct SamplerState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        /// As for `clCreateSamplerWithProperties` (pairs, no terminator).
        pub properties: Vec<u64>,
    }
}

/// What made an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// `clCreateUserEvent`; `status` is `CL_SUBMITTED` (2) until the guest
    /// sets it, then `CL_COMPLETE` (0) or a negative error.
    User { status: i32 },
    /// The event of an enqueued command: final (`CL_COMPLETE` or an error)
    /// once drained, or queued when its command is among the pending ones.
    Command { status: i32 },
}

record! {
    pub struct EventState {
        pub id: ObjectId,
        pub guest: Option<GuestRef>,
        pub context: ObjectId,
        pub kind: EventKind,
    }
}

record! {
    /// A command the device had not run when the vGPU was quiesced, because
    /// it waits on a user event the guest has not set. Restore replays the
    /// pending commands in order once every object exists.
    pub struct PendingCommand {
        pub queue: ObjectId,
        /// The `vgpu-protocol` opcode of the enqueue.
        pub opcode: u32,
        /// Its payload in the protocol's encoding, with every handle field
        /// rewritten to the `ObjectId` of the object it named.
        pub payload: Vec<u8>,
    }
}

impl Codec for EventKind {
    fn encode(&self, e: &mut Encoder) {
        let (tag, status) = match *self {
            EventKind::User { status } => (1, status),
            EventKind::Command { status } => (2, status),
        };
        e.u32(tag);
        e.i32(status);
    }

    fn decode(d: &mut Decoder<'_>) -> Result<Self> {
        match d.tag()? {
            (1, _) => Ok(EventKind::User { status: d.i32()? }),
            (2, _) => Ok(EventKind::Command { status: d.i32()? }),
            (tag, at) => Err(DecodeError::BadTag {
                what: "event kind",
                tag,
                at,
            }),
        }
    }
}
