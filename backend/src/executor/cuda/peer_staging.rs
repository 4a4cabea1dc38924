//! Page-locked staging for copies between the device and a loopback
//! peer's memory (`--peer-memory`), one pair of slots per context.
//!
//! Without it a peer's bytes went into a pageable bounce buffer and the
//! driver staged them again: two CPU copies, one after the other. Here
//! the worker copies them once into its own page-locked slots, striped
//! over threads, while the device moves the other slot by DMA
//! (`executor::staged`).

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use vgpu_protocol::Status;

use super::driver::check;
use super::objects::HostContext;
use crate::executor::staged::Slots;

/// Bytes of one slot.
const SLOT_LEN: usize = 8 << 20;
/// `CU_MEMHOSTALLOC_PORTABLE`.
const PORTABLE: u32 = 0x01;
/// `CU_EVENT_DISABLE_TIMING`: the cheapest event, only waited on.
const DISABLE_TIMING: u32 = 0x02;

struct Slot {
    ptr: *mut u8,
    /// Recorded after the slot's last DMA.
    done: sys::CUevent,
    /// Whether `done` was recorded and not yet waited for.
    busy: bool,
}

/// One context's two slots.
pub(super) struct PeerStaging {
    slots: [Slot; 2],
    /// The slot not started last.
    next: usize,
    /// Held so that the context (which owns the events and the memory)
    /// outlives them; dropped after `Drop::drop` freed the slots.
    pub(super) context: Arc<HostContext>,
}

// SAFETY: the raw pointers are driver allocations (page-locked memory and
// events) owned by this value alone; the driver allows using them from any
// thread.
unsafe impl Send for PeerStaging {}

impl PeerStaging {
    /// Two slots, their events in `context`, which is current.
    pub(super) fn new(context: Arc<HostContext>) -> Result<PeerStaging, Status> {
        let first = Self::slot()?;
        let second = match Self::slot() {
            Ok(slot) => slot,
            Err(status) => {
                first.release();
                return Err(status);
            }
        };
        log::debug!("peer copies of a CUDA context go through 2 x {SLOT_LEN} bytes of staging");
        Ok(PeerStaging {
            slots: [first, second],
            next: 0,
            context,
        })
    }

    fn slot() -> Result<Slot, Status> {
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is valid for writes; the size is nonzero.
        check(unsafe { sys::cuMemHostAlloc(&mut ptr, SLOT_LEN, PORTABLE) })?;
        let mut done = std::ptr::null_mut();
        // SAFETY: `done` is valid for writes; a context is current.
        if let Err(status) = check(unsafe { sys::cuEventCreate(&mut done, DISABLE_TIMING) }) {
            // SAFETY: just allocated, never used.
            unsafe { sys::cuMemFreeHost(ptr) };
            return Err(status);
        }
        Ok(Slot {
            ptr: ptr.cast(),
            done,
            busy: false,
        })
    }

    /// The slots driving DMA between them and `device` on `stream` (of
    /// this staging's context, current).
    pub(super) fn moves(
        &mut self,
        device: sys::CUdeviceptr,
        stream: sys::CUstream,
    ) -> DeviceMoves<'_> {
        DeviceMoves {
            staging: self,
            device,
            stream,
        }
    }
}

impl Drop for PeerStaging {
    fn drop(&mut self) {
        for slot in &self.slots {
            slot.release();
        }
    }
}

impl Slot {
    /// Frees the slot once its last DMA finished.
    fn release(&self) {
        // SAFETY: the event is live and the memory came from
        // `cuMemHostAlloc`; it is freed only after the event completed, so
        // no DMA runs on it.
        unsafe {
            if self.busy {
                sys::cuEventSynchronize(self.done);
            }
            sys::cuEventDestroy_v2(self.done);
            sys::cuMemFreeHost(self.ptr.cast());
        }
    }
}

/// [`Slots`] of one transfer: the device range and the stream.
pub(super) struct DeviceMoves<'a> {
    staging: &'a mut PeerStaging,
    device: sys::CUdeviceptr,
    stream: sys::CUstream,
}

impl Slots for DeviceMoves<'_> {
    fn slot_len(&self) -> usize {
        SLOT_LEN
    }

    fn first_slot(&self) -> usize {
        self.staging.next
    }

    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        self.staging.slots[slot].ptr
    }

    fn wait(&mut self, slot: usize) -> Result<(), Status> {
        let slot = &mut self.staging.slots[slot];
        if slot.busy {
            // SAFETY: the event is live.
            check(unsafe { sys::cuEventSynchronize(slot.done) })?;
            slot.busy = false;
        }
        Ok(())
    }

    fn start(&mut self, slot: usize, at: usize, len: usize, to_device: bool) -> Result<(), Status> {
        let device = self.device + at as u64;
        self.staging.next = slot ^ 1;
        let slot = &mut self.staging.slots[slot];
        // SAFETY: the slot holds `SLOT_LEN >= len` page-locked bytes that
        // stay allocated until its event completed (`Drop` waits); the
        // caller checked the device range.
        check(unsafe {
            if to_device {
                sys::cuMemcpyHtoDAsync_v2(device, slot.ptr.cast(), len, self.stream)
            } else {
                sys::cuMemcpyDtoHAsync_v2(slot.ptr.cast(), device, len, self.stream)
            }
        })?;
        // SAFETY: the event and the stream are live, of one context.
        if let Err(status) = check(unsafe { sys::cuEventRecord(slot.done, self.stream) }) {
            // No event marks the DMA's end: wait for it here instead.
            // SAFETY: the stream is live.
            unsafe { sys::cuStreamSynchronize(self.stream) };
            return Err(status);
        }
        slot.busy = true;
        Ok(())
    }
}
