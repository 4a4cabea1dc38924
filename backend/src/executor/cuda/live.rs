//! What a checkpoint or migration copies while the guest keeps computing:
//! the session's allocations, read like a save reads them. Module globals
//! are small and are read at the pause.

use cudarc::driver::sys;
use vgpu_protocol::Status;

use super::driver::{check, set_current};
use super::session::CudaSession;
use crate::executor::BufferSource;

impl CudaSession {
    /// A source per allocation (the caller holds the session).
    pub(super) fn live_sources(&self) -> Vec<Box<dyn BufferSource>> {
        self.allocations
            .values()
            .map(|allocation| self.allocation_source(allocation.clone()))
            .collect()
    }

    /// Waits for everything issued in every context of the session. It
    /// runs on the copier's thread, sets contexts directly and leaves none
    /// current; chains the copier resumes on this thread afterwards make
    /// their own context current (`driver::make_current` asks the driver).
    pub(super) fn synchronize_all(&self) -> Result<(), Status> {
        let contexts = self.contexts.entries().map(|(_, context, _)| context.raw);
        let result = std::iter::once(self.shared.primary)
            .chain(contexts)
            .try_for_each(|raw| {
                set_current(raw)?;
                // SAFETY: the primary context or a live context of the
                // session is current.
                check(unsafe { sys::cuCtxSynchronize() })
            });
        let _ = set_current(std::ptr::null_mut());
        result
    }
}
