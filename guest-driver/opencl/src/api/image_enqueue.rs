//! Commands on images: reads and writes (with the application's pitches,
//! see `core::pixels`), copies between images and buffers, fills, and maps,
//! which, as for buffers, read the region into an area of this library (or
//! the application's own memory for `CL_MEM_USE_HOST_PTR`) and write it
//! back on unmap.

use std::ffi::c_void;
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::image as img;
use vgpu_protocol::messages::{
    EnqueueCopyBufferToImage, EnqueueCopyImage, EnqueueCopyImageToBuffer, EnqueueFillImage,
};

use crate::api::entry::{object_entry, status_entry};
use crate::api::host_ptr::HostPtr;
use crate::api::image::image_of;
use crate::api::map::marker;
use crate::api::transfer::{finish_blocking, mem_in_context_of, queue_and_mem};
use crate::api::util::{bytes, bytes_mut, triple, wait_list, NewEvent};
use crate::core::image::{HostLayout, ImageDesc};
use crate::core::map::{ImageMap, MapArea, Mapping};
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::pixels::{move_pixels, Host, Target};
use crate::core::queue::Queue;
use crate::core::staged::{self, Rows, Staged};
use crate::core::sync;

object_entry! {
    fn clEnqueueMapImage(command_queue: cl_command_queue, image: cl_mem, blocking_map: cl_bool, map_flags: cl_map_flags, origin: *const usize, region: *const usize, image_row_pitch: *mut usize, image_slice_pitch: *mut usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> *mut c_void => enqueue_map_image;
}

status_entry! {
    fn clEnqueueReadImage(command_queue: cl_command_queue, image: cl_mem, blocking_read: cl_bool, origin: *const usize, region: *const usize, row_pitch: usize, slice_pitch: usize, ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => read_or_write_image;
    fn clEnqueueWriteImage(command_queue: cl_command_queue, image: cl_mem, blocking_write: cl_bool, origin: *const usize, region: *const usize, input_row_pitch: usize, input_slice_pitch: usize, ptr: *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => read_or_write_image;
    fn clEnqueueCopyImage(command_queue: cl_command_queue, src_image: cl_mem, dst_image: cl_mem, src_origin: *const usize, dst_origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_copy_image;
    fn clEnqueueCopyImageToBuffer(command_queue: cl_command_queue, src_image: cl_mem, dst_buffer: cl_mem, src_origin: *const usize, region: *const usize, dst_offset: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_copy_image_to_buffer;
    fn clEnqueueCopyBufferToImage(command_queue: cl_command_queue, src_buffer: cl_mem, dst_image: cl_mem, src_offset: usize, dst_origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_copy_buffer_to_image;
    fn clEnqueueFillImage(command_queue: cl_command_queue, image: cl_mem, fill_color: *const c_void, origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_fill_image;
}

/// The origin and region of an image command, checked against the image.
fn origin_region(
    image: &ImageDesc,
    origin: *const usize,
    region: *const usize,
) -> ClResult<([u64; 3], [u64; 3])> {
    // CL_INVALID_VALUE if origin or region is NULL, or the region is out
    // of bounds or has a 0 entry.
    let (origin, region) = (triple(origin)?, triple(region)?);
    image.check_region(origin, region)?;
    Ok((origin, region))
}

/// The rows of `region` as the application's memory holds them.
fn host_rows(region: [u64; 3], layout: &HostLayout) -> Rows {
    Rows {
        row_bytes: (region[0] * layout.elem) as usize,
        rows: region[1] as usize,
        slices: region[2] as usize,
        row_pitch: layout.row as usize,
        slice_pitch: layout.slice as usize,
    }
}

/// `clEnqueueReadImage` and `clEnqueueWriteImage`, which differ only in
/// the direction the pixels go.
fn read_or_write_image(
    queue: cl_command_queue,
    image: cl_mem,
    blocking: cl_bool,
    origin: *const usize,
    region: *const usize,
    row_pitch: usize,
    slice_pitch: usize,
    ptr: impl Into<HostPtr>,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let ptr = ptr.into();
    let (queue, mem) = queue_and_mem(queue, image)?;
    let desc = image_of(&mem)?;
    let (origin, region) = origin_region(desc, origin, region)?;
    let layout = desc.host_layout(region, row_pitch as u64, slice_pitch as u64)?;
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let commands = [CL_COMMAND_READ_IMAGE, CL_COMMAND_WRITE_IMAGE];
    let (wait, new_event) =
        ptr.wait_and_event(&queue, &mem, (num_events, events), event, commands)?;
    let len = layout.extent(region)? as usize;
    let host = match ptr {
        HostPtr::Into(ptr) => Host::Into(bytes_mut(ptr, len)?),
        HostPtr::From(ptr) => Host::From(bytes(ptr, len)?),
    };
    if staged::must_stage(blocking) {
        // It may wait for a user event: it must not wait in the backend
        // (a write larger than a batch is sent at once and would), so it
        // goes through a staging buffer.
        let staged = Staged::new(&queue, &mem, 0, wait, new_event.handle());
        let rows = host_rows(region, &layout);
        match host {
            Host::Into(host) => {
                staged.read_image(origin, region, rows, host.as_mut_ptr(), host.len())?;
                staged::keep(new_event.publish(&queue));
            }
            Host::From(host) => {
                staged.write_image(origin, region, rows, host)?;
                new_event.publish(&queue);
            }
        }
        return Ok(());
    }
    // Non-blocking reads complete early too (allowed: the data is simply
    // there sooner).
    let complete_on_return = matches!(host, Host::Into(_)) || blocking != CL_FALSE;
    let target = Target::on(&queue, wait, new_event.handle(), complete_on_return);
    move_pixels(&mem, desc, &target, origin, region, host, layout)?;
    new_event.publish(&queue);
    finish_blocking(blocking)
}

fn enqueue_copy_image(
    queue: cl_command_queue,
    src: cl_mem,
    dst: cl_mem,
    src_origin: *const usize,
    dst_origin: *const usize,
    region: *const usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (queue, src) = queue_and_mem(queue, src)?;
    let dst = mem_in_context_of(&queue, dst)?;
    let (si, di) = (image_of(&src)?, image_of(&dst)?);
    // CL_IMAGE_FORMAT_MISMATCH if the images do not use the same format.
    if (
        si.format.image_channel_order,
        si.format.image_channel_data_type,
    ) != (
        di.format.image_channel_order,
        di.format.image_channel_data_type,
    ) {
        return Err(CL_IMAGE_FORMAT_MISMATCH);
    }
    let (src_origin, region) = origin_region(si, src_origin, region)?;
    let dst_origin = triple(dst_origin)?;
    di.check_region(dst_origin, region)?;
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_COPY_IMAGE)?;
    let copy = EnqueueCopyImage {
        queue: queue.handle(),
        src: src.handle(),
        dst: dst.handle(),
        src_origin,
        dst_origin,
        region,
        wait,
        event: new_event.handle(),
    };
    new_event.submit(&queue, copy.into())
}

/// The buffer of an image ⇄ buffer copy: CL_INVALID_MEM_OBJECT for an
/// image; CL_INVALID_VALUE when `[offset, offset + len)` is out of it.
fn copy_buffer(
    queue: &Cl<Queue>,
    buffer: cl_mem,
    offset: usize,
    len: u64,
) -> ClResult<Arc<Cl<Mem>>> {
    let buffer = mem_in_context_of(queue, buffer)?;
    if buffer.image.is_some() {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    if !buffer.contains(offset as u64, len) {
        return Err(CL_INVALID_VALUE);
    }
    Ok(buffer)
}

/// The checked parts of an image ⇄ buffer copy.
struct ImageBufferCopy {
    queue: Arc<Cl<Queue>>,
    image: Arc<Cl<Mem>>,
    buffer: Arc<Cl<Mem>>,
    origin: [u64; 3],
    region: [u64; 3],
    wait: Vec<u64>,
    new_event: NewEvent,
}

/// `clEnqueueCopyImageToBuffer` and `clEnqueueCopyBufferToImage` check
/// the same things; they differ in the message they send.
fn image_buffer_copy(
    queue: cl_command_queue,
    image: cl_mem,
    buffer: cl_mem,
    origin: *const usize,
    region: *const usize,
    offset: usize,
    (num_events, events): (cl_uint, *const cl_event),
    event: *mut cl_event,
    command: cl_command_type,
) -> ClResult<ImageBufferCopy> {
    let (queue, image) = queue_and_mem(queue, image)?;
    let desc = image_of(&image)?;
    let (origin, region) = origin_region(desc, origin, region)?;
    let len = img::packed_len(region, desc.elem).ok_or(CL_INVALID_VALUE)?;
    let buffer = copy_buffer(&queue, buffer, offset, len)?;
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, command)?;
    Ok(ImageBufferCopy {
        queue,
        image,
        buffer,
        origin,
        region,
        wait,
        new_event,
    })
}

fn enqueue_copy_image_to_buffer(
    queue: cl_command_queue,
    src: cl_mem,
    dst: cl_mem,
    src_origin: *const usize,
    region: *const usize,
    dst_offset: usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let wait = (num_events, events);
    let command = CL_COMMAND_COPY_IMAGE_TO_BUFFER;
    let c = image_buffer_copy(
        queue, src, dst, src_origin, region, dst_offset, wait, event, command,
    )?;
    let copy = EnqueueCopyImageToBuffer {
        queue: c.queue.handle(),
        src: c.image.handle(),
        dst: c.buffer.handle(),
        src_origin: c.origin,
        region: c.region,
        dst_offset: dst_offset as u64,
        wait: c.wait,
        event: c.new_event.handle(),
    };
    c.new_event.submit(&c.queue, copy.into())
}

fn enqueue_copy_buffer_to_image(
    queue: cl_command_queue,
    src: cl_mem,
    dst: cl_mem,
    src_offset: usize,
    dst_origin: *const usize,
    region: *const usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let wait = (num_events, events);
    let command = CL_COMMAND_COPY_BUFFER_TO_IMAGE;
    let c = image_buffer_copy(
        queue, dst, src, dst_origin, region, src_offset, wait, event, command,
    )?;
    let copy = EnqueueCopyBufferToImage {
        queue: c.queue.handle(),
        src: c.buffer.handle(),
        dst: c.image.handle(),
        src_offset: src_offset as u64,
        dst_origin: c.origin,
        region: c.region,
        wait: c.wait,
        event: c.new_event.handle(),
    };
    c.new_event.submit(&c.queue, copy.into())
}

fn enqueue_fill_image(
    queue: cl_command_queue,
    image: cl_mem,
    color: *const c_void,
    origin: *const usize,
    region: *const usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (queue, mem) = queue_and_mem(queue, image)?;
    let desc = image_of(&mem)?;
    // CL_INVALID_VALUE if fill_color is NULL.
    if color.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let (origin, region) = origin_region(desc, origin, region)?;
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_FILL_IMAGE)?;
    let fill = EnqueueFillImage {
        queue: queue.handle(),
        mem: mem.handle(),
        color: bytes(color, 16)?.to_vec(),
        origin,
        region,
        wait,
        event: new_event.handle(),
    };
    new_event.submit(&queue, fill.into())
}

const MAP_FLAGS: cl_map_flags = CL_MAP_READ | CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION;

fn enqueue_map_image(
    queue: cl_command_queue,
    image: cl_mem,
    blocking: cl_bool,
    flags: cl_map_flags,
    origin: *const usize,
    region: *const usize,
    row_pitch: *mut usize,
    slice_pitch: *mut usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<*mut c_void> {
    let (queue, mem) = queue_and_mem(queue, image)?;
    let desc = image_of(&mem)?;
    let (origin, region) = origin_region(desc, origin, region)?;
    // CL_INVALID_VALUE if image_row_pitch is NULL, if image_slice_pitch is
    // NULL for a 3D image or an array, or if map_flags are not valid.
    let layered = matches!(
        desc.image_type,
        CL_MEM_OBJECT_IMAGE3D | CL_MEM_OBJECT_IMAGE1D_ARRAY | CL_MEM_OBJECT_IMAGE2D_ARRAY
    );
    if row_pitch.is_null() || layered && slice_pitch.is_null() || flags & !MAP_FLAGS != 0 {
        return Err(CL_INVALID_VALUE);
    }
    let invalidate = flags & CL_MAP_WRITE_INVALIDATE_REGION != 0;
    if invalidate && flags & (CL_MAP_READ | CL_MAP_WRITE) != 0 {
        return Err(CL_INVALID_VALUE);
    }
    let wait = wait_list(&queue, num_events, events)?;
    let writes = flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0;
    if flags & CL_MAP_READ != 0 && !mem.host_readable() || writes && !mem.host_writable() {
        return Err(CL_INVALID_OPERATION);
    }
    let new_event = NewEvent::new(event, CL_COMMAND_MAP_IMAGE)?;
    // The application's memory (USE_HOST_PTR) keeps its own pitches; an
    // area of this library is packed.
    let (ptr, area, layout) = if mem.host_ptr.is_null() {
        let layout = desc.host_layout(region, 0, 0)?;
        let area = MapArea::new(layout.extent(region)? as usize).ok_or(CL_MAP_FAILURE)?;
        (area.as_ptr() as usize, Some(area), layout)
    } else {
        let layout = desc.host_layout(region, desc.row_pitch, desc.slice_pitch)?;
        let whole = desc.host_layout(desc.extent(), desc.row_pitch, desc.slice_pitch)?;
        let start = whole.offset(origin)? as usize;
        (mem.host_ptr.0 + start, None, layout)
    };
    let extent = layout.extent(region)? as usize;
    let staged_read = !invalidate && staged::must_stage(blocking);
    if staged_read {
        // It may wait for a user event: it must not wait in the backend.
        // The area (or the application's memory) stays until the unmap,
        // which drops the read if it comes first.
        let staged = Staged::new(&queue, &mem, 0, wait, new_event.handle());
        staged.read_image(
            origin,
            region,
            host_rows(region, &layout),
            ptr as *mut u8,
            extent,
        )?;
    } else if !invalidate {
        // SAFETY: `ptr` is either the area just allocated with `extent`
        // bytes, or the application's USE_HOST_PTR memory, which the spec
        // requires to hold the whole image with its pitches.
        let host = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, extent) };
        let target = Target::on(&queue, wait, new_event.handle(), true);
        move_pixels(
            &mem,
            desc,
            &target,
            origin,
            region,
            Host::Into(host),
            layout,
        )?;
    } else {
        marker(&queue, wait, new_event.handle())?;
    }
    crate::api::util::write(row_pitch, layout.row as usize);
    if desc.image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY {
        crate::api::util::write(row_pitch, (region[0] * desc.elem) as usize);
        crate::api::util::write(slice_pitch, layout.row as usize);
    } else if layered {
        crate::api::util::write(slice_pitch, layout.slice as usize);
    } else {
        crate::api::util::write(slice_pitch, 0);
    }
    mem.maps().push(Mapping {
        ptr,
        offset: 0,
        size: extent as u64,
        flags,
        area,
        image: Some(ImageMap {
            origin,
            region,
            layout,
        }),
    });
    let published = new_event.publish(&queue);
    if staged_read {
        staged::keep(published);
    }
    if blocking != CL_FALSE {
        if let Some(status) = sync::take_deferred() {
            return Err(status);
        }
    }
    Ok(ptr as *mut c_void)
}

/// The image half of `clEnqueueUnmapMemObject`: writes a mapping made for
/// writing back, blocking (the area is freed right after).
pub(crate) fn unmap_image(
    queue: &Arc<Cl<Queue>>,
    mem: &Arc<Cl<Mem>>,
    mapping: &Mapping,
    map: &ImageMap,
    wait: Vec<u64>,
    new_event: NewEvent,
) -> ClResult<()> {
    let desc = image_of(mem)?;
    if mapping.writes_back() {
        // SAFETY: the mapping's memory holds `size` bytes and stays alive
        // (owned by `mapping`, or the application's USE_HOST_PTR memory)
        // until the blocking write below has copied them.
        let host =
            unsafe { std::slice::from_raw_parts(mapping.ptr as *const u8, mapping.size as usize) };
        let target = Target::on(queue, wait, new_event.handle(), true);
        move_pixels(
            mem,
            desc,
            &target,
            map.origin,
            map.region,
            Host::From(host),
            map.layout,
        )?;
    } else {
        marker(queue, wait, new_event.handle())?;
    }
    new_event.publish(queue);
    Ok(())
}
