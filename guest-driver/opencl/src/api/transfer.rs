//! Buffer read, write, copy and fill entry points.

use std::ffi::c_void;
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::messages::{EnqueueCopyBuffer, EnqueueFillBuffer};

use crate::api::entry::status_entry;
use crate::api::host_ptr::HostPtr;
use crate::api::util::{bytes, bytes_mut, wait_list, NewEvent};
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::placed::{self, Direction, WhenBusy};
use crate::core::queue::Queue;
use crate::core::staged::{self, Staged};
use crate::core::sync;

/// Non-blocking writes up to this size travel in the batch (the
/// transport's limit), so they never wait in the backend.
const SMALL_WRITE: usize = 64 << 10;
use crate::core::transfer::Transfer;

status_entry! {
    fn clEnqueueReadBuffer(command_queue: cl_command_queue, buffer: cl_mem, blocking_read: cl_bool, offset: usize, size: usize, ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => read_or_write_buffer;
    fn clEnqueueWriteBuffer(command_queue: cl_command_queue, buffer: cl_mem, blocking_write: cl_bool, offset: usize, size: usize, ptr: *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => read_or_write_buffer;
    fn clEnqueueCopyBuffer(command_queue: cl_command_queue, src_buffer: cl_mem, dst_buffer: cl_mem, src_offset: usize, dst_offset: usize, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_copy_buffer;
    fn clEnqueueFillBuffer(command_queue: cl_command_queue, buffer: cl_mem, pattern: *const c_void, pattern_size: usize, offset: usize, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_fill_buffer;
}

/// A command's queue and buffer.
pub(crate) type QueueAndMem = (Arc<Cl<Queue>>, Arc<Cl<Mem>>);

/// The queue and a buffer of a command: CL_INVALID_COMMAND_QUEUE,
/// CL_INVALID_MEM_OBJECT, and CL_INVALID_CONTEXT if the context associated
/// with command_queue and buffer are not the same.
pub(crate) fn queue_and_mem(queue: cl_command_queue, mem: cl_mem) -> ClResult<QueueAndMem> {
    let queue = Cl::<Queue>::get(queue)?;
    let mem = mem_in_context_of(&queue, mem)?;
    Ok((queue, mem))
}

/// A memory object of a command on `queue`: CL_INVALID_MEM_OBJECT, and
/// CL_INVALID_CONTEXT if it belongs to another context than the queue.
pub(crate) fn mem_in_context_of(queue: &Cl<Queue>, mem: cl_mem) -> ClResult<Arc<Cl<Mem>>> {
    let mem = Cl::<Mem>::get(mem)?;
    if !Arc::ptr_eq(&queue.context, &mem.context) {
        return Err(CL_INVALID_CONTEXT);
    }
    Ok(mem)
}

/// A blocking command is a synchronization point: earlier deferred errors
/// surface here.
pub(crate) fn finish_blocking(blocking: cl_bool) -> ClResult<()> {
    if blocking != CL_FALSE {
        // Everything before it in an in-order queue is complete.
        staged::settle_ready();
    }
    match (blocking != CL_FALSE).then(sync::take_deferred).flatten() {
        Some(status) => Err(status),
        None => Ok(()),
    }
}

/// `clEnqueueReadBuffer` and `clEnqueueWriteBuffer`, which differ only in
/// the direction the bytes go.
fn read_or_write_buffer(
    queue: cl_command_queue,
    buffer: cl_mem,
    blocking: cl_bool,
    offset: usize,
    size: usize,
    ptr: impl Into<HostPtr>,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let ptr = ptr.into();
    let (queue, mem) = queue_and_mem(queue, buffer)?;
    // CL_INVALID_VALUE if the region being read or written specified by
    // (offset, size) is out of bounds or if ptr is a NULL value.
    if ptr.is_null() || size == 0 || !mem.contains(offset as u64, size as u64) {
        return Err(CL_INVALID_VALUE);
    }
    let commands = [CL_COMMAND_READ_BUFFER, CL_COMMAND_WRITE_BUFFER];
    let (wait, new_event) =
        ptr.wait_and_event(&queue, &mem, (num_events, events), event, commands)?;
    let offset = offset as u64;
    // Placed buffers: a memcpy here. Non-blocking transfers may complete
    // early; a non-blocking write waits for no drain (the batch carries it
    // without a round trip when the queue is busy).
    if wait.is_empty() && new_event.handle() == 0 && !crate::core::event::unset_user_events() {
        let (host, direction) = match ptr {
            HostPtr::Into(ptr) => (bytes_mut(ptr, size)?.as_mut_ptr(), Direction::FromBuffer),
            HostPtr::From(ptr) => (bytes(ptr, size)?.as_ptr().cast_mut(), Direction::ToBuffer),
        };
        let when_busy = match (direction, blocking != CL_FALSE) {
            (Direction::ToBuffer, false) => WhenBusy::GiveUp,
            _ => WhenBusy::Drain,
        };
        // SAFETY: `host` is the application's `size` bytes (checked for
        // NULL above), readable or writable as the command says; the spec
        // makes overlapping them with the buffer's storage undefined.
        if unsafe { placed::transfer(&queue, &mem, offset, host, size, direction, when_busy) }? {
            return finish_blocking(blocking);
        }
    }
    match ptr {
        HostPtr::Into(ptr) => {
            let target = bytes_mut(ptr, size)?;
            if staged::must_stage(blocking) {
                // It may wait for a user event: it must not wait in the
                // backend.
                let staged = Staged::new(&queue, &mem, offset, wait, new_event.handle());
                staged.read(target.as_mut_ptr(), size)?;
                staged::keep(new_event.publish(&queue));
                return Ok(());
            }
            // Non-blocking reads complete early too (allowed: the data is
            // simply there sooner).
            Transfer::new(&queue, &mem, offset, wait, new_event.handle()).read(target)?;
        }
        HostPtr::From(ptr) => {
            if staged::must_stage(blocking) && size > SMALL_WRITE {
                // A large write is sent at once and would wait in the
                // backend for a user event: it goes through a staging
                // buffer.
                let staged = Staged::new(&queue, &mem, offset, wait, new_event.handle());
                staged.write(bytes(ptr, size)?)?;
                new_event.publish(&queue);
                return Ok(());
            }
            let transfer = Transfer::new(&queue, &mem, offset, wait, new_event.handle());
            transfer.write(bytes(ptr, size)?, blocking != CL_FALSE)?;
        }
    }
    new_event.publish(&queue);
    finish_blocking(blocking)
}

/// A buffer's root and its offset in it (sub-buffers share their parent's
/// storage).
fn root_offset(mem: &Cl<Mem>) -> (usize, u64) {
    match &mem.parent {
        Some(parent) => (Arc::as_ptr(parent) as usize, mem.origin),
        None => (mem as *const Cl<Mem> as usize, 0),
    }
}

fn enqueue_copy_buffer(
    queue: cl_command_queue,
    src: cl_mem,
    dst: cl_mem,
    src_offset: usize,
    dst_offset: usize,
    size: usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (queue, src) = queue_and_mem(queue, src)?;
    let dst = mem_in_context_of(&queue, dst)?;
    let (src_offset, dst_offset, size) = (src_offset as u64, dst_offset as u64, size as u64);
    // CL_INVALID_VALUE if src_offset, dst_offset, size, src_offset + size
    // or dst_offset + size require accessing elements outside the buffers,
    // or if size is 0.
    if size == 0 || !src.contains(src_offset, size) || !dst.contains(dst_offset, size) {
        return Err(CL_INVALID_VALUE);
    }
    // CL_MEM_COPY_OVERLAP if src and dst are the same buffer or sub-buffers
    // of the same buffer and the regions overlap.
    let (src_root, src_base) = root_offset(&src);
    let (dst_root, dst_base) = root_offset(&dst);
    let (s, d) = (src_base + src_offset, dst_base + dst_offset);
    if src_root == dst_root && s < d + size && d < s + size {
        return Err(CL_MEM_COPY_OVERLAP);
    }
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_COPY_BUFFER)?;
    let copy = EnqueueCopyBuffer {
        queue: queue.handle(),
        src: src.handle(),
        dst: dst.handle(),
        src_offset,
        dst_offset,
        size,
        wait,
        event: new_event.handle(),
    };
    new_event.submit(&queue, copy.into())
}

fn enqueue_fill_buffer(
    queue: cl_command_queue,
    buffer: cl_mem,
    pattern: *const c_void,
    pattern_size: usize,
    offset: usize,
    size: usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (queue, mem) = queue_and_mem(queue, buffer)?;
    // CL_INVALID_VALUE if pattern is NULL, if pattern_size is 0 or not one
    // of {1, 2, 4, 8, 16, 32, 64, 128}, if offset or size is not a multiple
    // of pattern_size, or if (offset, size) is out of bounds.
    if pattern.is_null() || !pattern_size.is_power_of_two() || pattern_size > 128 {
        return Err(CL_INVALID_VALUE);
    }
    if !offset.is_multiple_of(pattern_size)
        || !size.is_multiple_of(pattern_size)
        || !mem.contains(offset as u64, size as u64)
    {
        return Err(CL_INVALID_VALUE);
    }
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_FILL_BUFFER)?;
    let fill = EnqueueFillBuffer {
        queue: queue.handle(),
        mem: mem.handle(),
        pattern: bytes(pattern, pattern_size)?.to_vec(),
        offset: offset as u64,
        size: size as u64,
        wait,
        event: new_event.handle(),
    };
    new_event.submit(&queue, fill.into())
}
