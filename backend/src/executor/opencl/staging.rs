//! Pinned staging for peer-memory transfers to devices whose buffers do
//! not live in host memory (GPUs).
//!
//! A CPU device's buffer is host memory: mapping it costs nothing, and the
//! peer's bytes are copied straight into it (`transfer_mapped`). A GPU's
//! map of a device buffer is a host copy the driver makes and pins for
//! the occasion; measured on the H100 with NVIDIA OpenCL that path moved
//! 4–6 GB/s where a native pageable write moves 7–12. Here each context
//! keeps one buffer of `CL_MEM_ALLOC_HOST_PTR` memory mapped for good,
//! which NVIDIA's driver pins (its documented way to get pinned memory in
//! OpenCL): the peer's bytes are copied into it (the one CPU copy, striped
//! over threads by `peer_copy`) and the device reads them by DMA, chunk by
//! chunk, the buffer's two halves taking turns (`executor::staged`) so that
//! the copy of one chunk overlaps the DMA of the other.
//!
//! `VGPU_PEER_STAGING` (read once by the worker): `auto` (the default:
//! staging for every device that is not a CPU), `always` or `never`.

use std::sync::Arc;

use cl3::types::{cl_event, cl_mem, CL_BLOCKING, CL_NON_BLOCKING};
use vgpu_protocol::Status;

use super::objects::{ContextEntry, HostEvent, QueueEntry};
use crate::executor::staged::Slots;

/// Bytes of one staging slot (one DMA per chunk this long).
const SLOT_LEN: usize = 8 << 20;
/// Bytes of one context's staging buffer: two slots.
const STAGING_LEN: usize = 2 * SLOT_LEN;
const MEM_READ_WRITE: u64 = 1;
const MEM_ALLOC_HOST_PTR: u64 = 1 << 4;
const DEVICE_TYPE: u32 = 0x1000;
const DEVICE_TYPE_CPU: u64 = 1 << 1;

/// Environment variable choosing when peer transfers are staged.
pub const STAGING_ENV: &str = "VGPU_PEER_STAGING";

/// Whether peer transfers to `context`'s device go through staging.
pub(super) fn wanted(context: &ContextEntry) -> bool {
    static MODE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let mode = MODE.get_or_init(|| std::env::var(STAGING_ENV).unwrap_or_default());
    match mode.as_str() {
        "always" => true,
        "never" => false,
        _ => !is_cpu(context),
    }
}

/// Whether `context`'s (first) device is a CPU, whose buffers are host
/// memory; a device that does not say counts as one.
pub(super) fn is_cpu(context: &ContextEntry) -> bool {
    let device = context.devices[0].raw.0;
    let kind = cl3::device::get_device_data(device, DEVICE_TYPE)
        .ok()
        .and_then(|b| {
            b.get(..8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        })
        .unwrap_or(DEVICE_TYPE_CPU);
    kind & DEVICE_TYPE_CPU != 0
}

/// One context's mapped staging buffer.
pub(super) struct Staging {
    pub context: Arc<ContextEntry>,
    /// The backend's queue the buffer was mapped on (and is unmapped on).
    queue: Arc<QueueEntry>,
    mem: cl_mem,
    ptr: *mut u8,
    /// Each slot's last device move, until waited for: a transfer may
    /// return with its last moves still reading the slots.
    pending: [Option<HostEvent>; 2],
    /// The slot not started last.
    next: usize,
}

// SAFETY: OpenCL objects are thread-safe handles; the mapped pointer is
// used only by the thread that holds the session.
unsafe impl Send for Staging {}

impl Staging {
    /// A buffer of `STAGING_LEN` bytes in `context`, mapped on `queue`.
    pub(super) fn new(
        context: Arc<ContextEntry>,
        queue: Arc<QueueEntry>,
    ) -> Result<Staging, Status> {
        // SAFETY: a live context; no host pointer is given.
        let mem = unsafe {
            cl3::memory::create_buffer(
                context.ctx.0,
                MEM_READ_WRITE | MEM_ALLOC_HOST_PTR,
                STAGING_LEN,
                std::ptr::null_mut(),
            )
        }
        .map_err(Status)?;
        let mut ptr: cl_mem = std::ptr::null_mut();
        // SAFETY: `mem` was just made with `STAGING_LEN` bytes; the map is
        // blocking and stays until `drop`.
        let mapped = unsafe {
            cl3::command_queue::enqueue_map_buffer(
                queue.queue.0,
                mem,
                CL_BLOCKING,
                cl3::memory::CL_MAP_READ | cl3::memory::CL_MAP_WRITE,
                0,
                STAGING_LEN,
                &mut ptr,
                0,
                std::ptr::null(),
            )
        };
        match mapped {
            Ok(event) => drop(HostEvent(event)),
            Err(code) => {
                // SAFETY: the one reference `create_buffer` gave.
                let _ = unsafe { cl3::memory::release_mem_object(mem) };
                return Err(Status(code));
            }
        }
        log::debug!("peer transfers of a context go through {STAGING_LEN} bytes of staging");
        Ok(Staging {
            context,
            queue,
            mem,
            ptr: ptr.cast(),
            pending: [None, None],
            next: 0,
        })
    }

    /// The slots driving moves between them and `[offset, ..)` of `mem`
    /// on `queue`, each after `wait` (the guest's checked list).
    pub(super) fn moves<'a>(
        &'a mut self,
        queue: &'a QueueEntry,
        mem: cl_mem,
        offset: usize,
        wait: (u32, *const cl_event),
    ) -> QueueMoves<'a> {
        QueueMoves {
            staging: self,
            queue,
            mem,
            offset,
            wait,
        }
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        for event in self.pending.iter_mut().filter_map(Option::take) {
            let _ = cl3::event::wait_for_events(&[event.0]);
        }
        // SAFETY: `ptr` came from mapping `mem` on `queue`; nothing uses it
        // after this.
        let unmap = unsafe {
            cl3::command_queue::enqueue_unmap_mem_object(
                self.queue.queue.0,
                self.mem,
                self.ptr.cast(),
                0,
                std::ptr::null(),
            )
        };
        match unmap {
            Ok(event) => {
                let _ = cl3::event::wait_for_events(&[event]);
                drop(HostEvent(event));
            }
            Err(code) => log::warn!("staging unmap failed: {code}"),
        }
        // SAFETY: the one reference `create_buffer` gave.
        if let Err(code) = unsafe { cl3::memory::release_mem_object(self.mem) } {
            log::warn!("staging release failed: {code}");
        }
    }
}

/// [`Slots`] of one transfer: the buffer range, the queue and the guest's
/// wait list.
pub(super) struct QueueMoves<'a> {
    staging: &'a mut Staging,
    queue: &'a QueueEntry,
    mem: cl_mem,
    offset: usize,
    wait: (u32, *const cl_event),
}

impl QueueMoves<'_> {
    /// An event that completes when this transfer's moves (and the slots'
    /// earlier ones) have: a marker after those still pending, or after
    /// the guest's wait list when none is.
    pub(super) fn finish(self) -> Result<cl_event, Status> {
        let pending: Vec<cl_event> = self.staging.pending.iter().flatten().map(|e| e.0).collect();
        let (count, list) = if pending.is_empty() {
            self.wait
        } else {
            (pending.len() as u32, pending.as_ptr())
        };
        // SAFETY: a live queue; `list` is `count` live events of its
        // context (the slots' own, or the guest's checked list).
        unsafe {
            cl3::command_queue::enqueue_marker_with_wait_list(self.queue.queue.0, count, list)
        }
        .map_err(Status)
    }
}

impl Slots for QueueMoves<'_> {
    fn slot_len(&self) -> usize {
        SLOT_LEN
    }

    fn first_slot(&self) -> usize {
        self.staging.next
    }

    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        // SAFETY: `slot` is 0 or 1: inside the mapped `STAGING_LEN` bytes.
        unsafe { self.staging.ptr.add(slot * SLOT_LEN) }
    }

    fn wait(&mut self, slot: usize) -> Result<(), Status> {
        if let Some(event) = self.staging.pending[slot].take() {
            cl3::event::wait_for_events(&[event.0]).map_err(Status)?;
        }
        Ok(())
    }

    fn start(&mut self, slot: usize, at: usize, len: usize, to_device: bool) -> Result<(), Status> {
        let host = self.slot_ptr(slot);
        let offset = self.offset + at;
        // Every move waits for the guest's list: on an out-of-order queue
        // a later chunk could otherwise run before it.
        let (count, list) = self.wait;
        // SAFETY: the caller checked `[offset, offset + total)` against the
        // buffer; the slot holds `SLOT_LEN >= len` mapped bytes that are not
        // touched again until this move's event was waited for
        // (`pending`, `Drop`); `list` is the guest's checked wait list.
        let event = unsafe {
            if to_device {
                cl3::command_queue::enqueue_write_buffer(
                    self.queue.queue.0,
                    self.mem,
                    CL_NON_BLOCKING,
                    offset,
                    len,
                    host.cast_const().cast(),
                    count,
                    list,
                )
            } else {
                cl3::command_queue::enqueue_read_buffer(
                    self.queue.queue.0,
                    self.mem,
                    CL_NON_BLOCKING,
                    offset,
                    len,
                    host.cast(),
                    count,
                    list,
                )
            }
        }
        .map_err(Status)?;
        self.staging.pending[slot] = Some(HostEvent(event));
        self.staging.next = slot ^ 1;
        // Non-blocking moves reach the device only once submitted.
        cl3::command_queue::flush(self.queue.queue.0).map_err(Status)?;
        Ok(())
    }
}
