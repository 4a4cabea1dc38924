//! Moves a checkpoint's buffer contents between the host and a buffer.
//! `clEnqueueReadBuffer` and `clEnqueueWriteBuffer` are refused
//! (`CL_INVALID_OPERATION`) on a buffer the guest created
//! `CL_MEM_HOST_READ_ONLY`, `CL_MEM_HOST_WRITE_ONLY` or `CL_MEM_HOST_NO_ACCESS`;
//! those flags bind the guest's host accesses, not the backend's saving
//! and restoring. Where they forbid the direction, the bytes go through a
//! temporary buffer of the chunk's size and a device-side copy, which the
//! flags do not restrict.

use cl3::types::{cl_command_queue, cl_mem, CL_BLOCKING};
use vgpu_protocol::Status;

use super::objects::{HostEvent, HostMem};

const MEM_READ_WRITE: u64 = 1;
const MEM_COPY_HOST_PTR: u64 = 1 << 5;
const MEM_HOST_WRITE_ONLY: u64 = 1 << 7;
const MEM_HOST_READ_ONLY: u64 = 1 << 8;
const MEM_HOST_NO_ACCESS: u64 = 1 << 9;

/// Which way the bytes go.
pub(super) enum Direction<'a> {
    /// From the buffer into host memory.
    ToHost(&'a mut [u8]),
    /// From host memory into the buffer.
    ToDevice(&'a [u8]),
}

impl Direction<'_> {
    fn len(&self) -> usize {
        match self {
            Direction::ToHost(buf) => buf.len(),
            Direction::ToDevice(data) => data.len(),
        }
    }

    /// Whether a buffer created with `flags` lets the host go this way.
    fn allowed_by(&self, flags: u64) -> bool {
        let forbidden = match self {
            Direction::ToHost(_) => MEM_HOST_WRITE_ONLY | MEM_HOST_NO_ACCESS,
            Direction::ToDevice(_) => MEM_HOST_READ_ONLY | MEM_HOST_NO_ACCESS,
        };
        flags & forbidden == 0
    }
}

/// A buffer of the backend's own, released when dropped.
struct Temporary(cl_mem);

impl Drop for Temporary {
    fn drop(&mut self) {
        // SAFETY: this wrapper owns the one reference `create_buffer` gave.
        if let Err(code) = unsafe { cl3::memory::release_mem_object(self.0) } {
            log::warn!("temporary buffer release failed: {code}");
        }
    }
}

/// A blocking host read or write of `data` at `offset` of `mem`.
///
/// # Safety
/// `queue` is a live queue of `mem`'s context and `mem` a live buffer
/// with `offset + data.len()` within its size.
unsafe fn direct(
    queue: cl_command_queue,
    mem: cl_mem,
    offset: usize,
    data: Direction<'_>,
    wait: &[cl3::types::cl_event],
) -> Result<(), Status> {
    let wait_ptr = if wait.is_empty() {
        std::ptr::null()
    } else {
        wait.as_ptr()
    };
    let event = match data {
        // SAFETY: blocking, so `buf` outlives the read; the range is the
        // caller's to keep within `mem`.
        Direction::ToHost(buf) => unsafe {
            cl3::command_queue::enqueue_read_buffer(
                queue,
                mem,
                CL_BLOCKING,
                offset,
                buf.len(),
                buf.as_mut_ptr().cast(),
                wait.len() as u32,
                wait_ptr,
            )
        },
        // SAFETY: as above, for a blocking write of `data`.
        Direction::ToDevice(data) => unsafe {
            cl3::command_queue::enqueue_write_buffer(
                queue,
                mem,
                CL_BLOCKING,
                offset,
                data.len(),
                data.as_ptr().cast(),
                wait.len() as u32,
                wait_ptr,
            )
        },
    }
    .map_err(Status)?;
    drop(HostEvent(event));
    Ok(())
}

/// Moves `data` between host memory and `mem` at `offset`, through `queue`
/// (a queue of `mem`'s context), whatever host access the guest allowed.
/// The caller keeps `offset + data.len()` within the buffer.
pub(super) fn transfer(
    queue: cl_command_queue,
    mem: &HostMem,
    offset: u64,
    data: Direction<'_>,
) -> Result<(), Status> {
    let offset = usize::try_from(offset).map_err(|_| Status::INVALID_VALUE)?;
    let len = data.len();
    if offset
        .checked_add(len)
        .is_none_or(|end| end as u64 > mem.size)
    {
        return Err(Status::INVALID_VALUE);
    }
    if len == 0 {
        return Ok(());
    }
    if data.allowed_by(mem.flags) {
        // SAFETY: `queue` belongs to `mem`'s context (the caller's word),
        // `mem` is alive while borrowed, the range was checked above.
        return unsafe { direct(queue, mem.raw, offset, data, &[]) };
    }
    let (flags, host_ptr) = match &data {
        Direction::ToDevice(bytes) => (
            MEM_READ_WRITE | MEM_COPY_HOST_PTR,
            bytes.as_ptr().cast_mut().cast(),
        ),
        Direction::ToHost(_) => (MEM_READ_WRITE, std::ptr::null_mut()),
    };
    // SAFETY: a live context; with COPY_HOST_PTR the driver copies `len`
    // bytes from `host_ptr` during the call and keeps no pointer to them.
    let temporary = unsafe { cl3::memory::create_buffer(mem.context.ctx.0, flags, len, host_ptr) }
        .map(Temporary)
        .map_err(Status)?;
    let (src, dst, src_offset, dst_offset) = match &data {
        Direction::ToDevice(_) => (temporary.0, mem.raw, 0, offset),
        Direction::ToHost(_) => (mem.raw, temporary.0, offset, 0),
    };
    // SAFETY: both buffers are alive for the call and hold the ranges
    // (checked above, and the temporary is `len` bytes).
    let copied = unsafe {
        cl3::command_queue::enqueue_copy_buffer(
            queue,
            src,
            dst,
            src_offset,
            dst_offset,
            len,
            0,
            std::ptr::null(),
        )
    }
    .map(HostEvent)
    .map_err(Status)?;
    match data {
        Direction::ToDevice(_) => {
            cl3::event::wait_for_events(&[copied.0]).map_err(Status)?;
            Ok(())
        }
        // SAFETY: the temporary holds `len` bytes from 0; the read waits
        // for the copy into it.
        to_host => unsafe { direct(queue, temporary.0, 0, to_host, &[copied.0]) },
    }
}
