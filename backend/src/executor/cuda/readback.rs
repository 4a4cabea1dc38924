//! Device-to-host copies that return at once (`cuMemcpyDtoHAsync` into
//! page-locked guest memory). Guest pages are only lent for one chain, so
//! the copy cannot land in them while its stream is still busy: it lands
//! in page-locked host staging instead, an event marks its end, and the
//! guest collects the bytes when its stream is known to have reached them
//! (a synchronization or a query that said so). Staging buffers are kept
//! for reuse, since page-locking memory costs far more than a copy.

use std::collections::HashMap;
use std::ffi::c_void;

use cudarc::driver::sys;
use vgpu_protocol::cuda::result;
use vgpu_protocol::Status;

use super::driver::check;
use super::session::cuda;

/// Staging bytes one session may hold in copies not yet collected.
pub const MAX_PENDING_BYTES: u64 = 1 << 30;
/// Copies one session may have outstanding.
pub const MAX_PENDING_COPIES: usize = 4096;
/// Staging bytes kept for reuse once collected.
const MAX_SPARE_BYTES: usize = 256 << 20;
/// `CU_MEMHOSTALLOC_PORTABLE`: the staging outlives any one context.
const PORTABLE: u32 = 0x01;
/// `CU_EVENT_DISABLE_TIMING`: the cheapest event, only waited on.
const DISABLE_TIMING: u32 = 0x02;

/// Page-locked host memory from the driver.
struct Staging {
    ptr: *mut u8,
    capacity: usize,
}

impl Staging {
    fn alloc(capacity: usize) -> Result<Staging, Status> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is valid for writes; the size is nonzero.
        check(unsafe { sys::cuMemHostAlloc(&mut ptr, capacity, PORTABLE) })?;
        Ok(Staging {
            ptr: ptr.cast(),
            capacity,
        })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `cuMemHostAlloc` and no copy into it is in
        // flight: a staging buffer is dropped only after its event completed
        // or after the session synchronized its contexts.
        unsafe { sys::cuMemFreeHost(self.ptr.cast()) };
    }
}

/// A driver event owned by one copy.
struct OwnedEvent(sys::CUevent);

impl Drop for OwnedEvent {
    fn drop(&mut self) {
        // SAFETY: the event is live and owned by this value alone.
        unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

/// One copy on its way to the guest.
struct Readback {
    staging: Staging,
    len: usize,
    done: OwnedEvent,
    /// Whether `done` was seen complete (no need to wait again).
    landed: bool,
}

/// A session's outstanding device-to-host copies, by guest handle.
#[derive(Default)]
pub struct Readbacks {
    pending: HashMap<u64, Readback>,
    pending_bytes: u64,
    spare: Vec<Staging>,
    warnings: crate::ratelimit::WarnLimiter,
}

// SAFETY: the raw pointers are driver allocations (page-locked memory and
// events) owned by this value alone; the driver allows using them from any
// thread.
unsafe impl Send for Readbacks {}

/// Whether `capacity` suits a copy of `len` bytes (not more than twice as
/// large, so a small copy does not hold a large buffer).
fn fits(capacity: usize, len: usize) -> bool {
    capacity >= len && capacity <= len.saturating_mul(2)
}

impl Readbacks {
    /// Starts copying `len` bytes at device address `src` into staging on
    /// `stream` (its context current) under the guest's handle `copy`.
    pub fn start(
        &mut self,
        copy: u64,
        src: sys::CUdeviceptr,
        len: usize,
        stream: sys::CUstream,
    ) -> Result<(), Status> {
        if self.pending.contains_key(&copy) || len == 0 {
            return Err(cuda(result::ERROR_INVALID_VALUE));
        }
        if self.pending.len() >= MAX_PENDING_COPIES
            || self.pending_bytes + len as u64 > MAX_PENDING_BYTES
        {
            crate::guest_warn!(
                self.warnings,
                "device-to-host copies not collected exceed the session's limit"
            );
            return Err(cuda(result::ERROR_OUT_OF_MEMORY));
        }
        let staging = match self.spare.iter().position(|s| fits(s.capacity, len)) {
            Some(i) => self.spare.swap_remove(i),
            None => Staging::alloc(len)?,
        };
        let mut done = std::ptr::null_mut();
        // SAFETY: `done` is valid for writes; a context is current.
        check(unsafe { sys::cuEventCreate(&mut done, DISABLE_TIMING) })?;
        let done = OwnedEvent(done);
        let readback = Readback {
            staging,
            len,
            done,
            landed: false,
        };
        // SAFETY: the staging holds at least `len` bytes and stays allocated
        // until the event recorded after the copy completed; the caller
        // checked the device range.
        check(unsafe { sys::cuMemcpyDtoHAsync_v2(readback.staging.ptr.cast(), src, len, stream) })?;
        // SAFETY: the event and the stream are live.
        check(unsafe { sys::cuEventRecord(readback.done.0, stream) })?;
        self.pending_bytes += len as u64;
        self.pending.insert(copy, readback);
        Ok(())
    }

    /// Waits for copy `copy` and returns its bytes `[offset, offset+len)`,
    /// handing them to `write`; forgets the copy once its last byte went.
    pub fn collect(
        &mut self,
        copy: u64,
        offset: u64,
        len: u64,
        write: impl FnOnce(&[u8]) -> Result<(), Status>,
    ) -> Result<(), Status> {
        let readback = self
            .pending
            .get_mut(&copy)
            .ok_or_else(|| cuda(result::ERROR_INVALID_HANDLE))?;
        let end = offset
            .checked_add(len)
            .filter(|&end| end <= readback.len as u64)
            .ok_or_else(|| cuda(result::ERROR_INVALID_VALUE))?;
        if !readback.landed {
            // SAFETY: the event is live.
            check(unsafe { sys::cuEventSynchronize(readback.done.0) })?;
            readback.landed = true;
        }
        // SAFETY: the copy into the staging completed (above) and `end` is
        // within the `len` bytes it wrote.
        let bytes = unsafe {
            std::slice::from_raw_parts(readback.staging.ptr.add(offset as usize), len as usize)
        };
        write(bytes)?;
        if end == readback.len as u64 {
            self.forget(copy);
        }
        Ok(())
    }

    fn forget(&mut self, copy: u64) {
        let Some(readback) = self.pending.remove(&copy) else {
            return;
        };
        self.pending_bytes -= readback.len as u64;
        let spare: usize = self.spare.iter().map(|s| s.capacity).sum();
        if readback.landed && spare + readback.staging.capacity <= MAX_SPARE_BYTES {
            self.spare.push(readback.staging);
        }
    }

    /// Whether every copy was collected.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::fits;

    #[test]
    fn staging_fits_copies_up_to_twice_smaller() {
        assert!(fits(4096, 4096));
        assert!(fits(8192, 4096));
        assert!(!fits(8193, 4096));
        assert!(!fits(4095, 4096));
    }
}
