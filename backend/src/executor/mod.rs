//! Compute back-ends behind one trait. Each runs a session's calls on a real
//! device; the vGPU layer above knows nothing of OpenCL or CUDA objects.

mod ahead;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod launcher;
pub mod opencl;
pub mod staged;
mod staged_profile;
pub mod written;

/// How long a quiesce (checkpoint, migration, re-home) waits for one
/// session's batch in progress before it fails that session's waits.
pub const QUIESCE_DRAIN: std::time::Duration = std::time::Duration::from_secs(5);

use std::collections::HashMap;
use std::time::Duration;

use vgpu_migration::{DeviceIdentity, ExecutorKind, ExecutorState, Profile};
use vgpu_protocol::{Request, Status};

use crate::chain::GuestIo;
pub use ahead::{AdoptedSession, PreparedSession};

/// Why a session could not be saved or rebuilt.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot {what}: {status}")]
    Device { what: &'static str, status: Status },
    #[error("cannot rebuild {what} {id}: {status}")]
    Rebuild {
        what: String,
        id: u64,
        status: Status,
    },
    #[error("the state names {what} {id}, which it does not contain")]
    Dangling { what: &'static str, id: u64 },
    #[error("a program exists only as a binary for {built_for}; it cannot move to {here} (create it from source or IL to make it portable)")]
    BinaryOnly { built_for: String, here: String },
    #[error("program {id} is a binary this backend did not hand out (no backend sharing its --binary-key sealed it): refused as a guest's would be (create it from source or IL to make it portable)")]
    ForeignBinary { id: u64 },
    #[error("a {given} part of a session was handed to the {here} executor")]
    WrongKind {
        given: ExecutorKind,
        here: ExecutorKind,
    },
    #[error("{0} cannot be snapshotted yet")]
    Unsupported(&'static str),
    #[error("the vGPU has sub-devices partitioned {partition}; this device cannot partition so ({reason})")]
    Partition { partition: String, reason: String },
}

impl SnapshotError {
    pub fn device(what: &'static str, status: Status) -> Self {
        SnapshotError::Device { what, status }
    }

    /// Names the object a rebuild failure belongs to.
    pub fn for_object(self, what: &str, id: u64) -> Self {
        match self {
            SnapshotError::Rebuild { status, .. } => SnapshotError::Rebuild {
                what: what.to_string(),
                id,
                status,
            },
            SnapshotError::ForeignBinary { .. } => SnapshotError::ForeignBinary { id },
            other => other,
        }
    }
}

/// Reads one buffer's contents from the device.
pub trait BufferSource: Send {
    fn size(&self) -> u64;
    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Status>;

    /// The device object read, as its write mark's serial number and a
    /// part of it; `None` for an untracked object, which a copy taken
    /// while the guest runs must take again at the pause.
    fn object(&self) -> Option<(u64, u64)> {
        None
    }

    /// The latest epoch at which the object may have been written (see
    /// `written`); untracked objects always count as just written.
    fn written_at(&self) -> u64 {
        u64::MAX
    }

    /// Whether reads give the contents as of the save's pause even after
    /// the guest resumed and wrote the object (copy-on-write): a live
    /// checkpoint then reads it after the pause instead of in it.
    fn owed(&self) -> bool {
        false
    }

    /// Called at a checkpoint's pause (quiesced, the session's work
    /// finished) for contents the checkpoint would rather read after the
    /// guest resumed: whether reads now give the contents as of the pause
    /// whatever the guest writes later, making it so if the source can
    /// (a device-side copy); false: read them in the pause.
    fn preserve(&mut self) -> bool {
        self.owed()
    }
}

/// Writes one restored buffer's contents to the device.
pub trait BufferSink: Send {
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Status>;
}

/// An executor's part of a session, captured for a snapshot: its own state
/// type, and a source for each object `state.streamed()` lists.
pub struct SavedSession {
    pub state: ExecutorState,
    /// (the executor's object id, the source of its contents), in the order
    /// `state.streamed()` lists them.
    pub buffers: Vec<(u64, Box<dyn BufferSource>)>,
    /// Time spent waiting for the device to finish issued work.
    pub drain: Duration,
}

/// A session rebuilt from a snapshot, waiting for its buffers' contents.
pub struct RestoredSession {
    pub session: Box<dyn ExecSession>,
    /// By the executor's own object id.
    pub sinks: HashMap<u64, Box<dyn BufferSink>>,
}

/// A host device that serves sessions.
pub trait Executor: Send + Sync {
    /// Human-readable device name for logs and status.
    fn describe(&self) -> String;

    /// Whether calls with this opcode are this executor's (OpenCL, CUDA).
    fn serves(&self, opcode: u32) -> bool;

    /// A new, empty session (its own handle namespace).
    fn open_session(&self) -> Box<dyn ExecSession>;

    /// The front-end mapped (or remapped) its guest memory: `mem` is what
    /// chains name from now on.
    fn map_guest_memory(&self, _mem: &std::sync::Arc<crate::chain::GuestRam>) {}

    /// Which part of a saved session this executor saves and restores
    /// (`None`: it saves nothing).
    fn kind(&self) -> Option<ExecutorKind> {
        None
    }

    /// Whether the vGPU's device profile (what the guest's device queries
    /// answer) and its identity in a snapshot are this executor's.
    fn holds_profile(&self) -> bool {
        false
    }

    /// The device as a snapshot names it (empty for executors that do not
    /// snapshot yet).
    fn identity(&self) -> DeviceIdentity {
        DeviceIdentity::default()
    }

    /// The OpenCL device profile new vGPUs on this executor see, fixed
    /// when it was opened (empty for other APIs).
    fn profile(&self) -> Profile {
        Profile::default()
    }

    /// The most a vGPU restored, re-homed or migrated here may have seen:
    /// what the device offers now, or the `--profile` it is held to.
    fn capacity(&self) -> Profile {
        self.profile()
    }

    /// Rebuilds this executor's part of a saved session on this device (a
    /// part of `self.kind()`, upgraded by the executor to its newest form).
    fn restore_session(&self, _state: &ExecutorState) -> Result<RestoredSession, SnapshotError> {
        Err(SnapshotError::Unsupported("this executor's sessions"))
    }

    /// Builds a part of a whole checkpoint ahead of its restore (see
    /// `ahead`), aside from any guest. An executor that cannot says
    /// `Unsupported`; the restore at the stop then builds its parts whole.
    fn prepare_session(&self, _state: &ExecutorState) -> Result<PreparedSession, SnapshotError> {
        Err(SnapshotError::Unsupported(
            "preparing this executor's sessions",
        ))
    }

    /// Restores a part as `restore_session` does, taking over from
    /// `ahead` (prepared by this executor) the objects that are the same
    /// in `state`, with their contents. What it does not adopt is
    /// released with `ahead`.
    fn adopt_session(
        &self,
        state: &ExecutorState,
        ahead: PreparedSession,
    ) -> Result<AdoptedSession, SnapshotError> {
        drop(ahead);
        Ok(AdoptedSession {
            restored: self.restore_session(state)?,
            adopted: Default::default(),
        })
    }
}

/// One guest process's objects on the device. Dropping it releases them all.
pub trait ExecSession: Send {
    /// Runs one call; `io` gives access to the chain's bulk data.
    fn execute(&mut self, request: &Request, io: &mut GuestIo) -> Result<Vec<u8>, Status>;

    /// Ends a batch: what became of the calls this session handed to a
    /// thread of its own (which may still run them).
    fn finish_batch(&mut self) -> LateOutcomes {
        LateOutcomes::default()
    }

    /// Adds the live objects, per `ObjectKind::index`, to `total` (one
    /// entry per kind). Called after every batch, so it allocates nothing.
    fn add_object_counts(&self, total: &mut [u64]);

    /// Live objects per `ObjectKind::index`.
    fn object_counts(&self) -> Vec<u64> {
        let mut counts = vec![0u64; vgpu_protocol::ObjectKind::ALL.len()];
        self.add_object_counts(&mut counts);
        counts
    }

    /// A function that, called from another thread, unblocks anything the
    /// session may be stuck waiting on (unset user events), so a close can go
    /// through.
    fn aborter(&self) -> Box<dyn Fn() + Send + Sync>;

    /// Whether a call could now wait for something only the guest can do
    /// (set a user event): such a session's batches never run on the
    /// thread that takes the guest's next requests.
    fn may_wait_on_the_guest(&self) -> bool {
        false
    }

    /// Waits for issued work, then captures the session's objects in its
    /// executor's own state type (quiesced by the caller: no call runs
    /// meanwhile); `id` names the session in logs.
    fn save(&mut self, _id: u64) -> Result<SavedSession, SnapshotError> {
        Err(SnapshotError::Unsupported("this executor's sessions"))
    }

    /// The contents a save would carry, for copies taken while the guest
    /// runs (the caller holds the session: no call runs meanwhile). A
    /// buffer missing here is read at the pause instead.
    fn live_buffers(&mut self) -> Result<Vec<Box<dyn BufferSource>>, SnapshotError> {
        Ok(Vec::new())
    }

    /// Waits at most `limit` for the session's issued work, without
    /// failing anything the guest waits on; whether it all finished (a
    /// copy taken while the guest runs needs it finished).
    fn settle(&mut self, _limit: Duration) -> Result<bool, SnapshotError> {
        Ok(true)
    }

    /// Counts the session's objects and device memory against its VM's
    /// quota (those it holds already too).
    fn set_quota(&mut self, _quota: std::sync::Arc<crate::quota::Quota>) {}

    /// Answers device queries from its VM's profile (the vGPU's identity,
    /// which travels with it), not from the device it runs on.
    fn set_profile(&mut self, _profile: std::sync::Arc<Profile>) {}

    /// Whether the session holds any object (an empty one need not be saved).
    fn is_empty(&self) -> bool {
        self.object_counts().iter().all(|n| *n == 0)
    }
}

/// Failures of calls an executor session ran on a thread of its own, known
/// at the end of a batch.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct LateOutcomes {
    /// Calls of this batch that failed, each by its number among the
    /// session's `execute` calls in the batch (0 for the first).
    pub failed: Vec<(usize, Status)>,
    /// The first failure of a call of an earlier batch, whose answer went
    /// already: the guest hears of it with this batch's answer.
    pub earlier: Option<Status>,
}

/// The executor whose device profile the vGPU's guest sees, if any.
pub fn profile_holder(executors: &[std::sync::Arc<dyn Executor>]) -> Option<usize> {
    executors.iter().position(|e| e.holds_profile())
}
