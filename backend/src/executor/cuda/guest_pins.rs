//! A VM's guest memory registered with the CUDA driver as a whole
//! (`--cuda-pin-guest-memory`), so that copies between the device and any
//! guest page run as DMA, as a native program's page-locked copies do,
//! instead of the driver's staged copies of pageable memory. In loopback
//! that is the transport's data area, through which every copy from or to
//! a program's ordinary memory goes; in a VM, its RAM, as with a GPU given
//! to it by VFIO. Registering pins the pages: they stay resident while the
//! VM runs, so only regions up to the configured size are registered, and
//! the registration keeps the mapping alive until it is undone.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use vm_memory::{GuestMemoryBackend, GuestMemoryRegion};

use super::driver::{check, set_current};
use crate::chain::GuestRam;

/// `CU_MEMHOSTREGISTER_PORTABLE`: pinned for every context.
const PORTABLE: u32 = 0x01;

/// The registered regions of one mapping of guest memory.
pub struct GuestPins {
    /// Host address and length of each registered region.
    ranges: Vec<(usize, usize)>,
    /// Made current to unregister (the driver wants a context).
    primary: sys::CUcontext,
    /// Held so that the regions stay mapped while registered.
    _mem: Arc<GuestRam>,
}

// SAFETY: the ranges are plain addresses and `primary` the executor's
// retained primary context (it outlives this: `DeviceShared` holds both);
// the driver owns the registrations, which any thread may undo.
unsafe impl Send for GuestPins {}

impl GuestPins {
    /// Registers every region of `mem` of at most `limit` bytes;
    /// `primary` is made current for the driver. A region the driver
    /// refuses is left pageable (logged): copies through it still work.
    pub fn register(mem: Arc<GuestRam>, limit: u64, primary: sys::CUcontext) -> GuestPins {
        let mut ranges = Vec::new();
        if set_current(primary).is_ok() {
            for region in mem.iter() {
                let len = region.len() as usize;
                let ptr = region.as_ptr() as usize;
                if len == 0 || region.len() > limit {
                    log::info!(
                        "guest memory region of {len} bytes at {:#x} left pageable for CUDA (over --cuda-pin-guest-memory)",
                        region.start_addr().0
                    );
                    continue;
                }
                let started = std::time::Instant::now();
                // SAFETY: the region is mapped for as long as `mem` lives,
                // which this registration holds; the driver pins its pages
                // until `Drop` unregisters them.
                let code = unsafe { sys::cuMemHostRegister_v2(ptr as *mut c_void, len, PORTABLE) };
                match check(code) {
                    Ok(()) => {
                        log::info!(
                            "guest memory region of {len} bytes registered with CUDA in {:?}",
                            started.elapsed()
                        );
                        ranges.push((ptr, len));
                    }
                    Err(status) => log::warn!(
                        "cannot register {len} bytes of guest memory with CUDA ({status}): copies through it stay pageable"
                    ),
                }
            }
        }
        GuestPins {
            ranges,
            primary,
            _mem: mem,
        }
    }

    /// Whether `[start, start + len)` lies in one registered region.
    pub fn covers(&self, start: usize, len: usize) -> bool {
        self.ranges
            .iter()
            .any(|&(s, l)| start >= s && start.saturating_add(len) <= s + l)
    }
}

impl Drop for GuestPins {
    fn drop(&mut self) {
        if !self.ranges.is_empty() && set_current(self.primary).is_err() {
            log::warn!("cannot unregister guest memory from CUDA: no context");
        }
        for &(start, _) in &self.ranges {
            // SAFETY: registered in `register`, still mapped (`_mem` is
            // dropped after this), unregistered once.
            unsafe { sys::cuMemHostUnregister(start as *mut c_void) };
        }
    }
}
