//! Device-side copies of a session's allocations taken at a checkpoint's
//! pause: the GPU copies memory at hundreds of GB/s, so the pause lasts as
//! long as that copy (about a millisecond for 1 GiB on an H100) instead of
//! a read to the host, and the checkpoint reads the copies after the guest
//! resumed. Copies live outside the guest's address range, at most a
//! quarter of the device's memory for all of a vGPU's copies at once (more
//! could make another VM's allocations fail for the moment); an
//! allocation that does not fit is read in the pause, as before.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cudarc::driver::sys;

use super::driver::{check, set_current};
use super::DeviceShared;

/// The copy of one allocation, freed when dropped.
pub struct Shadow {
    ptr: u64,
    size: u64,
    shared: Arc<DeviceShared>,
}

impl Shadow {
    /// Copies `[ptr, ptr + size)` (device memory with no work pending)
    /// into fresh device memory; `None` when the budget or the device has
    /// no room, or the copy fails.
    pub fn take(shared: &Arc<DeviceShared>, ptr: u64, size: u64) -> Option<Shadow> {
        let budget = shared.info.total_mem / 4;
        let held = shared.shadow_bytes.fetch_add(size, Ordering::SeqCst);
        if size == 0 || held.saturating_add(size) > budget {
            shared.shadow_bytes.fetch_sub(size, Ordering::SeqCst);
            return None;
        }
        let release = || {
            shared.shadow_bytes.fetch_sub(size, Ordering::SeqCst);
        };
        if set_current(shared.primary).is_err() {
            release();
            return None;
        }
        let mut copy = 0u64;
        // SAFETY: `copy` is valid for writes; the primary context is current.
        if check(unsafe { sys::cuMemAlloc_v2(&mut copy, size as usize) }).is_err() {
            release();
            return None;
        }
        let shadow = Shadow {
            ptr: copy,
            size,
            shared: shared.clone(),
        };
        // SAFETY: both ranges are live device memory of `size` bytes (the
        // source held by the caller, the copy just allocated); the copy is
        // synchronous.
        match check(unsafe { sys::cuMemcpyDtoD_v2(copy, ptr, size as usize) }) {
            Ok(()) => Some(shadow),
            Err(status) => {
                log::warn!("device-side copy of {size} bytes for a checkpoint failed: {status}");
                None
            }
        }
    }

    /// Where the copy is, and its size.
    pub fn range(&self) -> (u64, u64) {
        (self.ptr, self.size)
    }
}

impl Drop for Shadow {
    fn drop(&mut self) {
        if set_current(self.shared.primary).is_ok() {
            // SAFETY: allocated in `take` in the primary context, freed once.
            unsafe { sys::cuMemFree_v2(self.ptr) };
        }
        self.shared
            .shadow_bytes
            .fetch_sub(self.size, Ordering::SeqCst);
    }
}
