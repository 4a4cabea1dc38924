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
//! OpenCL): the peer's bytes are copied into it (the one CPU copy) and the
//! device reads them by DMA, chunk by chunk.
//!
//! `VGPU_PEER_STAGING` (read once by the worker): `auto` (the default:
//! staging for every device that is not a CPU), `always` or `never`.

use std::sync::Arc;

use cl3::types::{cl_event, cl_mem, CL_BLOCKING};
use vgpu_protocol::Status;

use super::objects::{ContextEntry, HostEvent, QueueEntry};
use crate::chain::{peer_failed, Piece};
use crate::peer::PeerMemory;

/// Bytes of one context's staging buffer (one DMA per chunk this long).
const STAGING_LEN: usize = 8 << 20;
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
        })
    }

    /// The mapped bytes.
    pub(super) fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    pub(super) fn len(&self) -> usize {
        STAGING_LEN
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
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

/// One blocking transfer between the staging buffer's first `len` bytes
/// and `[offset, offset + len)` of `mem`, after `wait` (count, list).
///
/// # Safety
/// `mem` must be a live buffer of `queue`'s context with the range inside
/// it, `len <= staging.len()`, and `wait` a valid event list.
pub(super) unsafe fn move_chunk(
    queue: &QueueEntry,
    mem: cl_mem,
    staging: *mut u8,
    offset: usize,
    len: usize,
    wait: (u32, *const cl_event),
    to_device: bool,
) -> Result<cl_event, Status> {
    // SAFETY: as the caller guarantees; blocking, so the staging bytes
    // are free again when it returns.
    unsafe {
        if to_device {
            cl3::command_queue::enqueue_write_buffer(
                queue.queue.0,
                mem,
                CL_BLOCKING,
                offset,
                len,
                staging.cast_const().cast(),
                wait.0,
                wait.1,
            )
        } else {
            cl3::command_queue::enqueue_read_buffer(
                queue.queue.0,
                mem,
                CL_BLOCKING,
                offset,
                len,
                staging.cast(),
                wait.0,
                wait.1,
            )
        }
    }
    .map_err(Status)
}

/// Copies `n` bytes from `done` into `piece` between the piece and
/// `staging`: into the staging buffer when `to_staging`, else out of it.
///
/// # Safety
/// `staging` must be valid for `n` bytes and not used elsewhere meanwhile;
/// `done + n <= piece.len()`.
pub(super) unsafe fn stage(
    piece: &Piece,
    done: usize,
    staging: *mut u8,
    n: usize,
    peer: &PeerMemory,
    to_staging: bool,
) -> Result<(), Status> {
    match piece {
        Piece::Local(s) => {
            // SAFETY: the segment is live guest memory of `s.len >= done + n`
            // bytes; `staging` holds `n` (the caller's contract).
            unsafe {
                let here = s.ptr.add(done);
                if to_staging {
                    std::ptr::copy_nonoverlapping(here, staging, n);
                } else {
                    std::ptr::copy_nonoverlapping(staging, here, n);
                }
            }
            Ok(())
        }
        Piece::Peer(p) => {
            let remote = p.addr.wrapping_add(done as u64);
            // SAFETY: `staging` is valid for `n` bytes (the caller's contract).
            unsafe {
                if to_staging {
                    peer.read_raw(remote, staging, n)
                } else {
                    peer.write_raw(remote, staging, n)
                }
            }
            .map_err(peer_failed)
        }
    }
}
