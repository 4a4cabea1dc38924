//! Moves a checkpoint's buffer and image contents between the host and
//! the device. Host reads and writes (`clEnqueueReadBuffer`,
//! `clEnqueueWriteImage`, ...) are refused (`CL_INVALID_OPERATION`) on a
//! memory object the guest created `CL_MEM_HOST_READ_ONLY`,
//! `CL_MEM_HOST_WRITE_ONLY` or `CL_MEM_HOST_NO_ACCESS`; those flags bind the
//! guest's host accesses, not the backend's saving and restoring. Where
//! they forbid the direction, the bytes go through a temporary buffer of
//! the chunk's (or the image's) size and a device-side copy, which the
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

    fn to_device(&self) -> bool {
        matches!(self, Direction::ToDevice(_))
    }
}

/// Whether a memory object created with `flags` lets the host read it
/// (`to_device` false) or write it (`to_device` true).
pub(super) fn host_may(flags: u64, to_device: bool) -> bool {
    let forbidden = if to_device {
        MEM_HOST_READ_ONLY | MEM_HOST_NO_ACCESS
    } else {
        MEM_HOST_WRITE_ONLY | MEM_HOST_NO_ACCESS
    };
    flags & forbidden == 0
}

/// A temporary buffer of `len` bytes in `mem`'s context, holding a copy
/// of `data` when given.
fn temporary(mem: &HostMem, len: usize, data: Option<&[u8]>) -> Result<Temporary, Status> {
    let (flags, host_ptr) = match data {
        Some(bytes) => (
            MEM_READ_WRITE | MEM_COPY_HOST_PTR,
            bytes.as_ptr().cast_mut().cast(),
        ),
        None => (MEM_READ_WRITE, std::ptr::null_mut()),
    };
    // SAFETY: a live context; with COPY_HOST_PTR the driver copies `len`
    // bytes from `host_ptr` (`data` is `len` bytes: the callers' word)
    // during the call and keeps no pointer to them.
    unsafe { cl3::memory::create_buffer(mem.context.ctx.0, flags, len, host_ptr) }
        .map(Temporary)
        .map_err(Status)
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
    if host_may(mem.flags, data.to_device()) {
        // SAFETY: `queue` belongs to `mem`'s context (the caller's word),
        // `mem` is alive while borrowed, the range was checked above.
        return unsafe { direct(queue, mem.raw, offset, data, &[]) };
    }
    let temporary = match &data {
        Direction::ToDevice(bytes) => temporary(mem, len, Some(bytes))?,
        Direction::ToHost(_) => temporary(mem, len, None)?,
    };
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

/// Moves a whole image between `staged` (its bytes, tightly packed, of
/// `region`) and `mem` through a temporary buffer and a device-side copy:
/// for the images whose flags forbid the host that direction.
pub(super) fn image_through_buffer(
    queue: cl_command_queue,
    mem: &HostMem,
    region: [usize; 3],
    staged: &mut [u8],
    to_device: bool,
) -> Result<(), Status> {
    if staged.is_empty() {
        return Ok(());
    }
    let len = staged.len();
    let temporary = temporary(mem, len, to_device.then_some(&*staged))?;
    let origin = [0usize; 3];
    // SAFETY: both objects are alive for the call; `origin` and `region`
    // are three sizes each, the image's whole extent, whose packed bytes
    // the temporary of `staged.len()` bytes holds (the caller's word).
    let copied = unsafe {
        if to_device {
            cl3::command_queue::enqueue_copy_buffer_to_image(
                queue,
                temporary.0,
                mem.raw,
                0,
                origin.as_ptr(),
                region.as_ptr(),
                0,
                std::ptr::null(),
            )
        } else {
            cl3::command_queue::enqueue_copy_image_to_buffer(
                queue,
                mem.raw,
                temporary.0,
                origin.as_ptr(),
                region.as_ptr(),
                0,
                0,
                std::ptr::null(),
            )
        }
    }
    .map(HostEvent)
    .map_err(Status)?;
    if to_device {
        cl3::event::wait_for_events(&[copied.0]).map_err(Status)?;
        return Ok(());
    }
    // SAFETY: the temporary holds `len` bytes from 0; the read waits for
    // the copy into it.
    unsafe {
        direct(
            queue,
            temporary.0,
            0,
            Direction::ToHost(staged),
            &[copied.0],
        )
    }
}
