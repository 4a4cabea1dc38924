//! Map and unmap, done in this library: a map reads the region into host
//! memory (the application's own for `CL_MEM_USE_HOST_PTR`, else an area
//! allocated here) and returns it; an unmap writes it back when it was
//! mapped for writing. Copies: as for reads and writes (see
//! `core::transfer`); `CL_MAP_WRITE_INVALIDATE_REGION` skips the read.

use std::ffi::c_void;
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::messages::EnqueueMarker;

use crate::api::entry::{object_entry, status_entry};
use crate::api::transfer::queue_and_mem;
use crate::api::util::{wait_list, NewEvent};
use crate::core::map::{MapArea, Mapping};
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::queue::Queue;
use crate::core::staged::{self, Staged};
use crate::core::sync;
use crate::core::transfer::Transfer;

object_entry! {
    fn clEnqueueMapBuffer(command_queue: cl_command_queue, buffer: cl_mem, blocking_map: cl_bool, map_flags: cl_map_flags, offset: usize, size: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> *mut c_void => enqueue_map_buffer;
}

status_entry! {
    fn clEnqueueUnmapMemObject(command_queue: cl_command_queue, memobj: cl_mem, mapped_ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_unmap_mem_object;
}

const MAP_FLAGS: cl_map_flags = CL_MAP_READ | CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION;

/// An event for a command done without a device command of its own: a
/// marker after the wait list.
pub(crate) fn marker(queue: &Arc<Cl<Queue>>, wait: Vec<u64>, event: u64) -> ClResult<()> {
    if event == 0 && wait.is_empty() {
        return Ok(());
    }
    let marker = EnqueueMarker {
        queue: queue.handle(),
        wait,
        event,
    };
    platform::client()?.defer(marker.into()).map_err(|s| s.0)
}

/// The bytes `[offset, offset + size)` of the application's USE_HOST_PTR
/// memory.
fn host_region<'a>(mem: &Cl<Mem>, offset: u64, size: u64) -> ClResult<&'a mut [u8]> {
    crate::api::util::bytes_mut(
        (mem.host_ptr.0 + offset as usize) as *mut c_void,
        size as usize,
    )
}

fn enqueue_map_buffer(
    queue: cl_command_queue,
    buffer: cl_mem,
    blocking: cl_bool,
    flags: cl_map_flags,
    offset: usize,
    size: usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<*mut c_void> {
    let (queue, mem) = queue_and_mem(queue, buffer)?;
    // CL_INVALID_MEM_OBJECT if buffer is not a buffer (images map with
    // clEnqueueMapImage).
    if mem.image.is_some() {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    let (offset, size) = (offset as u64, size as u64);
    // CL_INVALID_VALUE if the region (offset, size) is out of bounds, size
    // is 0, or map_flags are not valid (WRITE_INVALIDATE_REGION excludes
    // READ and WRITE).
    if size == 0 || !mem.contains(offset, size) || flags & !MAP_FLAGS != 0 {
        return Err(CL_INVALID_VALUE);
    }
    let invalidate = flags & CL_MAP_WRITE_INVALIDATE_REGION != 0;
    if invalidate && flags & (CL_MAP_READ | CL_MAP_WRITE) != 0 {
        return Err(CL_INVALID_VALUE);
    }
    let wait = wait_list(&queue, num_events, events)?;
    // CL_INVALID_OPERATION if the buffer's host access flags forbid the
    // mapping.
    let reads = !invalidate;
    let writes = flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0;
    if flags & CL_MAP_READ != 0 && !mem.host_readable() || writes && !mem.host_writable() {
        return Err(CL_INVALID_OPERATION);
    }
    let new_event = NewEvent::new(event, CL_COMMAND_MAP_BUFFER)?;
    let (ptr, area) = if mem.host_ptr.is_null() {
        let area = MapArea::new(size as usize).ok_or(CL_MAP_FAILURE)?;
        (area.as_ptr() as usize, Some(area))
    } else {
        (mem.host_ptr.0 + offset as usize, None)
    };
    if reads {
        let target = match &area {
            // SAFETY: the area was just allocated with `size` bytes and is
            // not shared yet.
            Some(area) => unsafe { std::slice::from_raw_parts_mut(area.as_ptr(), size as usize) },
            None => host_region(&mem, offset, size)?,
        };
        if staged::must_stage(blocking) {
            // It may wait for a user event: it must not wait in the
            // backend. The mapping's memory outlives the read: the
            // application may unmap only after the map's event completes.
            let staged = Staged::new(&queue, &mem, offset, wait, new_event.handle());
            staged.read(target.as_mut_ptr(), size as usize)?;
        } else {
            let transfer = Transfer::new(&queue, &mem, offset, wait, new_event.handle());
            transfer.read(target)?;
        }
    } else {
        marker(&queue, wait, new_event.handle())?;
    }
    mem.maps().push(Mapping {
        ptr,
        offset,
        size,
        flags,
        area,
        image: None,
    });
    staged::keep(new_event.publish(&queue));
    // The map is complete on return, blocking or not (unless staged).
    if blocking != CL_FALSE {
        staged::settle_ready();
        if let Some(status) = sync::take_deferred() {
            return Err(status);
        }
    }
    Ok(ptr as *mut c_void)
}

fn enqueue_unmap_mem_object(
    queue: cl_command_queue,
    memobj: cl_mem,
    mapped_ptr: *mut c_void,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (queue, mem) = queue_and_mem(queue, memobj)?;
    let wait = wait_list(&queue, num_events, events)?;
    // CL_INVALID_VALUE if mapped_ptr is not a valid pointer returned by
    // clEnqueueMapBuffer for memobj.
    let mapping = {
        let mut maps = mem.maps();
        let index = maps
            .iter()
            .position(|m| m.ptr == mapped_ptr as usize)
            .ok_or(CL_INVALID_VALUE)?;
        maps.remove(index)
    };
    if mapping.area.is_some() {
        staged::forget_target(mapping.ptr);
    }
    let new_event = NewEvent::new(event, CL_COMMAND_UNMAP_MEM_OBJECT)?;
    if let Some(image) = &mapping.image {
        return crate::api::image_enqueue::unmap_image(
            &queue, &mem, &mapping, image, wait, new_event,
        );
    }
    if mapping.writes_back() {
        let source: &[u8] = match &mapping.area {
            // SAFETY: the area holds `size` bytes and stays alive (owned by
            // `mapping`) until the write below has copied them.
            Some(area) => unsafe {
                std::slice::from_raw_parts(area.as_ptr(), mapping.size as usize)
            },
            None => host_region(&mem, mapping.offset, mapping.size)?,
        };
        let transfer = Transfer::new(&queue, &mem, mapping.offset, wait, new_event.handle());
        // Blocking: the area is freed right after.
        transfer.write(source, true)?;
    } else {
        marker(&queue, wait, new_event.handle())?;
    }
    new_event.publish(&queue);
    Ok(())
}
