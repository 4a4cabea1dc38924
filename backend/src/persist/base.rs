//! What the last whole checkpoint of a vGPU holds, so an incremental one
//! can refer to it for every buffer not written since: per buffer object
//! (its write mark's serial and part), the session and id it has in that
//! checkpoint and the epoch its contents were copied at.

use std::collections::HashMap;

use vgpu_migration::BaseId;

use crate::executor::BufferSource;

/// Whole checkpoints a live migration's device-state stream may lean on,
/// moved between the hosts by the operator while the VM runs
/// (`vgpu-ctl migration-base FILE` on both sides).
#[derive(Default)]
pub struct MigrationBase {
    /// Source: send only what changed since this checkpoint.
    pub(crate) outgoing: Option<super::Incremental>,
    /// Destination: the whole checkpoint an incoming stream may refer to.
    pub(crate) incoming: Option<(BaseId, std::fs::File)>,
    /// Destination: `incoming`, restored ahead of the stop (pre-copy).
    pub(crate) prepared: Option<super::ahead::Preparing>,
}

impl MigrationBase {
    pub(crate) fn outgoing(&self) -> Option<super::Incremental> {
        self.outgoing.clone()
    }
}

/// Where one buffer's contents are in a whole checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    pub session: u64,
    pub buffer: u64,
    /// Writes at or after this epoch are not in the checkpoint.
    pub copied_at: u64,
}

/// The last whole checkpoint written of a vGPU.
#[derive(Debug, Clone, Default)]
pub struct CheckpointBase {
    pub id: BaseId,
    pub(crate) buffers: HashMap<(u64, u64), Taken>,
}

impl CheckpointBase {
    pub(crate) fn new(id: BaseId) -> CheckpointBase {
        CheckpointBase {
            id,
            buffers: HashMap::new(),
        }
    }

    /// Notes that the checkpoint holds `source`'s contents as copied at
    /// `copied_at`, under `session` and `buffer`.
    pub(crate) fn note(&mut self, source: &dyn BufferSource, taken: Taken) {
        if let Some(key) = source.object() {
            self.buffers.insert(key, taken);
        }
    }

    /// Where the checkpoint has `source`'s contents, if nothing was
    /// written to it since.
    pub(crate) fn unchanged(&self, source: &dyn BufferSource) -> Option<Taken> {
        let taken = self.buffers.get(&source.object()?)?;
        (source.written_at() < taken.copied_at).then_some(*taken)
    }
}
