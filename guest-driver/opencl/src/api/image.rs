//! Image entry points: formats, creation (every image type, with host
//! data as buffers take it), info, reads, writes, copies, fills and maps.
//!
//! Pixels travel tightly packed in pieces of at most `PIECE_LIMIT` bytes;
//! the application's pitches are applied here. A map reads the region into
//! an area of this library (or the application's own memory for
//! `CL_MEM_USE_HOST_PTR`) and an unmap writes it back, as for buffers.

use std::ffi::c_void;
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::image as img;
use vgpu_protocol::messages::{
    CreateImage, EnqueueCopyBufferToImage, EnqueueCopyImage, EnqueueCopyImageToBuffer,
    EnqueueFillImage, EnqueueReadImage, EnqueueWriteImage, GetImageFormats, InitImage,
};
use vgpu_protocol::{InfoTarget, Request};

use crate::api::entry::{object_entry, status_entry};
use crate::api::map::marker;
use crate::api::transfer::{finish_blocking, queue_and_mem};
use crate::api::util::{
    bytes, bytes_mut, properties, read, triple, wait_list, write_info, NewEvent,
};
use crate::core::context::Context;
use crate::core::image::{HostLayout, ImageDesc};
use crate::core::info;
use crate::core::map::{ImageMap, MapArea, Mapping};
use crate::core::memory::{check_flags, Mem, HOST_ACCESS};
use crate::core::object::{Cl, ClResult, RawPtr};
use crate::core::platform;
use crate::core::queue::Queue;
use crate::core::rect::{pieces, Layout};
use crate::core::sync;

object_entry! {
    fn clCreateImage(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_desc: *const cl_image_desc, host_ptr: *mut c_void) -> cl_mem => create_image;
    fn clCreateImageWithProperties(context: cl_context, properties: *const cl_mem_properties, flags: cl_mem_flags, image_format: *const cl_image_format, image_desc: *const cl_image_desc, host_ptr: *mut c_void) -> cl_mem => create_image_with_properties;
    fn clCreateImage2D(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_width: usize, image_height: usize, image_row_pitch: usize, host_ptr: *mut c_void) -> cl_mem => create_image_2d;
    fn clCreateImage3D(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_width: usize, image_height: usize, image_depth: usize, image_row_pitch: usize, image_slice_pitch: usize, host_ptr: *mut c_void) -> cl_mem => create_image_3d;
    fn clEnqueueMapImage(command_queue: cl_command_queue, image: cl_mem, blocking_map: cl_bool, map_flags: cl_map_flags, origin: *const usize, region: *const usize, image_row_pitch: *mut usize, image_slice_pitch: *mut usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) -> *mut c_void => enqueue_map_image;
}

status_entry! {
    fn clGetSupportedImageFormats(context: cl_context, flags: cl_mem_flags, image_type: cl_mem_object_type, num_entries: cl_uint, image_formats: *mut cl_image_format, num_image_formats: *mut cl_uint) => get_supported_image_formats;
    fn clGetImageInfo(image: cl_mem, param_name: cl_image_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_image_info;
    fn clEnqueueReadImage(command_queue: cl_command_queue, image: cl_mem, blocking_read: cl_bool, origin: *const usize, region: *const usize, row_pitch: usize, slice_pitch: usize, ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_read_image;
    fn clEnqueueWriteImage(command_queue: cl_command_queue, image: cl_mem, blocking_write: cl_bool, origin: *const usize, region: *const usize, input_row_pitch: usize, input_slice_pitch: usize, ptr: *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_write_image;
    fn clEnqueueCopyImage(command_queue: cl_command_queue, src_image: cl_mem, dst_image: cl_mem, src_origin: *const usize, dst_origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_copy_image;
    fn clEnqueueCopyImageToBuffer(command_queue: cl_command_queue, src_image: cl_mem, dst_buffer: cl_mem, src_origin: *const usize, region: *const usize, dst_offset: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_copy_image_to_buffer;
    fn clEnqueueCopyBufferToImage(command_queue: cl_command_queue, src_buffer: cl_mem, dst_image: cl_mem, src_offset: usize, dst_origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_copy_buffer_to_image;
    fn clEnqueueFillImage(command_queue: cl_command_queue, image: cl_mem, fill_color: *const c_void, origin: *const usize, region: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_fill_image;
}

/// Packed bytes of one message at most; well under any transport's chunk.
const PIECE_LIMIT: u64 = 1 << 20;

const IMAGE_TYPES: [cl_mem_object_type; 6] = [
    CL_MEM_OBJECT_IMAGE1D,
    CL_MEM_OBJECT_IMAGE1D_BUFFER,
    CL_MEM_OBJECT_IMAGE1D_ARRAY,
    CL_MEM_OBJECT_IMAGE2D,
    CL_MEM_OBJECT_IMAGE2D_ARRAY,
    CL_MEM_OBJECT_IMAGE3D,
];

/// The image a memory object is: CL_INVALID_MEM_OBJECT for a buffer.
fn image_of(mem: &Cl<Mem>) -> ClResult<&ImageDesc> {
    mem.image.as_deref().ok_or(CL_INVALID_MEM_OBJECT)
}

fn get_supported_image_formats(
    context: cl_context,
    flags: cl_mem_flags,
    image_type: cl_mem_object_type,
    num_entries: cl_uint,
    formats: *mut cl_image_format,
    num_formats: *mut cl_uint,
) -> ClResult<()> {
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_VALUE if flags or image_type are not valid, or if
    // num_entries is 0 and image_formats is not NULL.
    if !check_flags(flags)
        || !IMAGE_TYPES.contains(&image_type)
        || num_entries == 0 && !formats.is_null()
    {
        return Err(CL_INVALID_VALUE);
    }
    let query = GetImageFormats {
        context: context.handle(),
        flags,
        image_type,
    };
    let reply = platform::client()?.call(query.into()).map_err(|s| s.0)?;
    let found: Vec<cl_image_format> = reply
        .chunks_exact(8)
        .map(|pair| cl_image_format {
            image_channel_order: u32::from_le_bytes([pair[0], pair[1], pair[2], pair[3]]),
            image_channel_data_type: u32::from_le_bytes([pair[4], pair[5], pair[6], pair[7]]),
        })
        .collect();
    if !formats.is_null() {
        for (i, format) in found.iter().take(num_entries as usize).enumerate() {
            crate::api::util::write(formats.wrapping_add(i), *format);
        }
    }
    crate::api::util::write(num_formats, found.len() as cl_uint);
    Ok(())
}

/// Checks a descriptor against the spec and the device's limits; returns
/// the image's dims, array size and packed pitches.
fn check_desc(context: &Cl<Context>, desc: &cl_image_desc, elem: u64) -> ClResult<([u64; 3], u64)> {
    let device = &context.device;
    // CL_INVALID_OPERATION if no device in context supports images.
    if device.number(CL_DEVICE_IMAGE_SUPPORT)? == 0 {
        return Err(CL_INVALID_OPERATION);
    }
    let ty = desc.image_type;
    // CL_INVALID_IMAGE_DESCRIPTOR if values in image_desc are not valid.
    if !IMAGE_TYPES.contains(&ty) || desc.num_mip_levels != 0 || desc.num_samples != 0 {
        return Err(CL_INVALID_IMAGE_DESCRIPTOR);
    }
    let (w, h, d, a) = (
        desc.image_width as u64,
        desc.image_height as u64,
        desc.image_depth as u64,
        desc.image_array_size as u64,
    );
    let limit = |param| device.number(param);
    // CL_INVALID_IMAGE_SIZE if a dimension is 0 or beyond the device's
    // limit for the type.
    let (max, dims) = match ty {
        CL_MEM_OBJECT_IMAGE1D => ([limit(CL_DEVICE_IMAGE2D_MAX_WIDTH)?, 1, 1, 1], [w, 1, 1, 1]),
        CL_MEM_OBJECT_IMAGE1D_BUFFER => (
            [limit(CL_DEVICE_IMAGE_MAX_BUFFER_SIZE)?, 1, 1, 1],
            [w, 1, 1, 1],
        ),
        CL_MEM_OBJECT_IMAGE1D_ARRAY => (
            [
                limit(CL_DEVICE_IMAGE2D_MAX_WIDTH)?,
                1,
                1,
                limit(CL_DEVICE_IMAGE_MAX_ARRAY_SIZE)?,
            ],
            [w, 1, 1, a],
        ),
        CL_MEM_OBJECT_IMAGE2D => (
            [
                limit(CL_DEVICE_IMAGE2D_MAX_WIDTH)?,
                limit(CL_DEVICE_IMAGE2D_MAX_HEIGHT)?,
                1,
                1,
            ],
            [w, h, 1, 1],
        ),
        CL_MEM_OBJECT_IMAGE2D_ARRAY => (
            [
                limit(CL_DEVICE_IMAGE2D_MAX_WIDTH)?,
                limit(CL_DEVICE_IMAGE2D_MAX_HEIGHT)?,
                1,
                limit(CL_DEVICE_IMAGE_MAX_ARRAY_SIZE)?,
            ],
            [w, h, 1, a],
        ),
        _ => (
            [
                limit(CL_DEVICE_IMAGE3D_MAX_WIDTH)?,
                limit(CL_DEVICE_IMAGE3D_MAX_HEIGHT)?,
                limit(CL_DEVICE_IMAGE3D_MAX_DEPTH)?,
                1,
            ],
            [w, h, d, 1],
        ),
    };
    if dims.iter().zip(&max).any(|(v, m)| *v == 0 || v > m) {
        return Err(CL_INVALID_IMAGE_SIZE);
    }
    let given = [
        w,
        if dims[1] > 1
            || ty == CL_MEM_OBJECT_IMAGE2D
            || ty == CL_MEM_OBJECT_IMAGE2D_ARRAY
            || ty == CL_MEM_OBJECT_IMAGE3D
        {
            h
        } else {
            0
        },
        if ty == CL_MEM_OBJECT_IMAGE3D { d } else { 0 },
    ];
    let array = if ty == CL_MEM_OBJECT_IMAGE1D_ARRAY || ty == CL_MEM_OBJECT_IMAGE2D_ARRAY {
        a
    } else {
        0
    };
    // The whole image must be one allocation the device allows.
    let extent = img::extent(ty, given, array).ok_or(CL_INVALID_IMAGE_DESCRIPTOR)?;
    let size = img::packed_len(extent, elem).ok_or(CL_INVALID_IMAGE_SIZE)?;
    if size > device.number(CL_DEVICE_MAX_MEM_ALLOC_SIZE)? {
        return Err(CL_INVALID_IMAGE_SIZE);
    }
    Ok((given, array))
}

fn create_image(
    context: cl_context,
    flags: cl_mem_flags,
    format: *const cl_image_format,
    desc: *const cl_image_desc,
    host_ptr: *mut c_void,
) -> ClResult<cl_mem> {
    // CL_INVALID_CONTEXT if context is not a valid context.
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_VALUE if values specified in flags are not valid.
    if !check_flags(flags) {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_IMAGE_FORMAT_DESCRIPTOR if values specified in
    // image_format are not valid or if image_format is NULL.
    let format: cl_image_format = read(format).map_err(|_| CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)?;
    let elem = img::element_size(format.image_channel_order, format.image_channel_data_type)
        .ok_or(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)?;
    // CL_INVALID_IMAGE_DESCRIPTOR if image_desc is NULL.
    let desc: cl_image_desc = read(desc).map_err(|_| CL_INVALID_IMAGE_DESCRIPTOR)?;
    let (dims, array_size) = check_desc(&context, &desc, elem)?;
    let ty = desc.image_type;
    // A 1D buffer image takes a buffer (not an image) large enough; other
    // types take none (2D images from buffers are not forwarded).
    let buffer = if ty == CL_MEM_OBJECT_IMAGE1D_BUFFER {
        let buffer = Cl::<Mem>::get(desc.buffer).map_err(|_| CL_INVALID_IMAGE_DESCRIPTOR)?;
        if buffer.image.is_some() || !Arc::ptr_eq(&buffer.context, &context) {
            return Err(CL_INVALID_IMAGE_DESCRIPTOR);
        }
        if dims[0].checked_mul(elem).is_none_or(|n| n > buffer.size) {
            return Err(CL_INVALID_IMAGE_SIZE);
        }
        Some(buffer)
    } else if !desc.buffer.is_null() {
        return Err(CL_INVALID_IMAGE_DESCRIPTOR);
    } else {
        None
    };
    // CL_INVALID_HOST_PTR if host_ptr is NULL and CL_MEM_USE_HOST_PTR or
    // CL_MEM_COPY_HOST_PTR are set in flags or if host_ptr is not NULL but
    // they are not set.
    let with_host_ptr = flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0;
    if with_host_ptr == host_ptr.is_null() {
        return Err(CL_INVALID_HOST_PTR);
    }
    // CL_INVALID_IMAGE_DESCRIPTOR if pitches are given without host_ptr,
    // or are too small.
    let (row_pitch, slice_pitch) = (desc.image_row_pitch as u64, desc.image_slice_pitch as u64);
    if host_ptr.is_null() && (row_pitch != 0 || slice_pitch != 0) {
        return Err(CL_INVALID_IMAGE_DESCRIPTOR);
    }
    let mut image = ImageDesc {
        format,
        image_type: ty,
        dims,
        array_size,
        elem,
        row_pitch: 0,
        slice_pitch: 0,
        buffer: buffer.clone(),
    };
    let extent = image.extent();
    let layout = image
        .host_layout(extent, row_pitch, slice_pitch)
        .map_err(|_| CL_INVALID_IMAGE_DESCRIPTOR)?;
    if row_pitch != 0 && row_pitch % elem != 0 {
        return Err(CL_INVALID_IMAGE_DESCRIPTOR);
    }
    let packed = image.host_layout(extent, 0, 0)?;
    let shown = if flags & CL_MEM_USE_HOST_PTR != 0 {
        layout
    } else {
        packed
    };
    image.row_pitch = shown.row;
    image.slice_pitch = match ty {
        CL_MEM_OBJECT_IMAGE1D_ARRAY => shown.row,
        CL_MEM_OBJECT_IMAGE2D_ARRAY | CL_MEM_OBJECT_IMAGE3D => shown.slice,
        _ => 0,
    };
    if ty == CL_MEM_OBJECT_IMAGE1D_ARRAY {
        // `host_layout` steps a 1D array's layers along rows.
        image.row_pitch = packed.elem * extent[0].max(1);
        if flags & CL_MEM_USE_HOST_PTR != 0 && row_pitch != 0 {
            image.row_pitch = row_pitch;
        }
    }
    let client = platform::client()?;
    let mem = client.new_handle();
    let create = CreateImage {
        mem,
        context: context.handle(),
        flags: flags & !(CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR | HOST_ACCESS),
        channel_order: format.image_channel_order,
        channel_type: format.image_channel_data_type,
        image_type: ty,
        dims,
        array_size,
        buffer: buffer.as_ref().map_or(0, |b| b.handle()),
    };
    client.defer(create.into()).map_err(|s| s.0)?;
    let kept = if flags & CL_MEM_USE_HOST_PTR != 0 {
        RawPtr::new(host_ptr)
    } else {
        RawPtr(0)
    };
    let size = img::packed_len(extent, elem).ok_or(CL_INVALID_IMAGE_SIZE)?;
    let object = Cl::publish(
        mem,
        Mem::new(context, flags, size, kept, None).with_image(image),
    );
    if with_host_ptr {
        let desc = image_of(&object)?;
        let host = bytes(host_ptr, layout.extent(extent)? as usize)?;
        let to = Target::Init;
        move_pixels(&object, desc, &to, [0; 3], extent, Host::From(host), layout)?;
    }
    Ok(object.as_ptr())
}

fn create_image_with_properties(
    context: cl_context,
    props: *const cl_mem_properties,
    flags: cl_mem_flags,
    format: *const cl_image_format,
    desc: *const cl_image_desc,
    host_ptr: *mut c_void,
) -> ClResult<cl_mem> {
    // CL_INVALID_PROPERTY if a property name in properties is not a
    // supported property name (no image properties are supported).
    if properties(props, CL_INVALID_PROPERTY)?.len() > 1 {
        return Err(CL_INVALID_PROPERTY);
    }
    create_image(context, flags, format, desc, host_ptr)
}

fn desc_of(
    ty: cl_mem_object_type,
    dims: [usize; 3],
    row_pitch: usize,
    slice_pitch: usize,
) -> cl_image_desc {
    cl_image_desc {
        image_type: ty,
        image_width: dims[0],
        image_height: dims[1],
        image_depth: dims[2],
        image_array_size: 0,
        image_row_pitch: row_pitch,
        image_slice_pitch: slice_pitch,
        num_mip_levels: 0,
        num_samples: 0,
        buffer: std::ptr::null_mut(),
    }
}

fn create_image_2d(
    context: cl_context,
    flags: cl_mem_flags,
    format: *const cl_image_format,
    width: usize,
    height: usize,
    row_pitch: usize,
    host_ptr: *mut c_void,
) -> ClResult<cl_mem> {
    let desc = desc_of(CL_MEM_OBJECT_IMAGE2D, [width, height, 0], row_pitch, 0);
    create_image(context, flags, format, &desc, host_ptr)
}

fn create_image_3d(
    context: cl_context,
    flags: cl_mem_flags,
    format: *const cl_image_format,
    width: usize,
    height: usize,
    depth: usize,
    row_pitch: usize,
    slice_pitch: usize,
    host_ptr: *mut c_void,
) -> ClResult<cl_mem> {
    let desc = desc_of(
        CL_MEM_OBJECT_IMAGE3D,
        [width, height, depth],
        row_pitch,
        slice_pitch,
    );
    create_image(context, flags, format, &desc, host_ptr)
}

fn get_image_info(
    mem: cl_mem,
    param: cl_image_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let mem = Cl::<Mem>::get(mem)?;
    let image = image_of(&mem)?;
    let bytes = match param {
        CL_IMAGE_FORMAT => {
            let mut v = info::u32(image.format.image_channel_order);
            v.extend(info::u32(image.format.image_channel_data_type));
            v
        }
        CL_IMAGE_ELEMENT_SIZE => info::usize(image.elem as usize),
        CL_IMAGE_ROW_PITCH => info::usize(image.row_pitch as usize),
        CL_IMAGE_SLICE_PITCH => info::usize(image.slice_pitch as usize),
        CL_IMAGE_WIDTH => info::usize(image.dims[0] as usize),
        CL_IMAGE_HEIGHT => info::usize(image.dims[1] as usize),
        CL_IMAGE_DEPTH => info::usize(image.dims[2] as usize),
        CL_IMAGE_ARRAY_SIZE => info::usize(image.array_size as usize),
        CL_IMAGE_BUFFER => info::ptr(
            image
                .buffer
                .as_ref()
                .map_or(std::ptr::null_mut(), |b| b.as_ptr()),
        ),
        CL_IMAGE_NUM_MIP_LEVELS | CL_IMAGE_NUM_SAMPLES => info::u32(0),
        _ => return Err(CL_INVALID_VALUE),
    };
    write_info(&bytes, size, value, size_ret)
}

/// `clGetMemObjectInfo` values that differ for images; `None`: as buffers.
pub(crate) fn mem_info(mem: &Cl<Mem>, param: cl_mem_info) -> ClResult<Option<Vec<u8>>> {
    let Some(image) = mem.image.as_deref() else {
        return Ok(None);
    };
    Ok(Some(match param {
        CL_MEM_TYPE => info::u32(image.image_type),
        // The device's own size (it may pad rows).
        CL_MEM_SIZE => info::remote(InfoTarget::Mem, mem.handle(), 0, CL_MEM_SIZE)?,
        CL_MEM_ASSOCIATED_MEMOBJECT => info::ptr(
            image
                .buffer
                .as_ref()
                .map_or(std::ptr::null_mut(), |b| b.as_ptr()),
        ),
        _ => return Ok(None),
    }))
}

/// What a pixel move talks to.
enum Target {
    /// Initial contents, outside any queue.
    Init,
    /// A command on `queue`, after `wait`; `event` on its last piece.
    Queue {
        queue: u64,
        wait: Vec<u64>,
        event: u64,
        blocking: bool,
    },
}

/// Application memory of a pixel move.
enum Host<'a> {
    From(&'a [u8]),
    Into(&'a mut [u8]),
}

/// Moves `region` at `origin` of the image between the image and `host`
/// (laid out by `layout`), in packed pieces.
fn move_pixels(
    mem: &Cl<Mem>,
    image: &ImageDesc,
    target: &Target,
    origin: [u64; 3],
    region: [u64; 3],
    mut host: Host<'_>,
    layout: HostLayout,
) -> ClResult<()> {
    let client = platform::client()?;
    let elem = image.elem;
    let packed_px = Layout {
        origin: [0; 3],
        row_pitch: region[0],
        slice_pitch: region[0] * region[1],
    };
    let list = pieces(region, &packed_px, (PIECE_LIMIT / elem).max(1));
    for (i, p) in list.iter().enumerate() {
        let (first, last) = (i == 0, i + 1 == list.len());
        let at = [0, 1, 2].map(|d| origin[d] + p.at[d]);
        let len = img::packed_len(p.size, elem).ok_or(CL_INVALID_VALUE)? as usize;
        let mut packed = vec![0u8; len];
        // A chunk the client split further than a piece names no image, so
        // the backend refuses it rather than misplacing pixels.
        let handle = |chunk: u64| if chunk == 0 { mem.handle() } else { 0 };
        match (&mut host, target) {
            (Host::From(src), _) => {
                gather(&layout, src, &mut packed, p.at, p.size)?;
                let make = |data, chunk| -> Request {
                    match target {
                        Target::Init => InitImage {
                            mem: handle(chunk),
                            origin: at,
                            region: p.size,
                            data,
                        }
                        .into(),
                        Target::Queue {
                            queue, wait, event, ..
                        } => EnqueueWriteImage {
                            queue: *queue,
                            mem: handle(chunk),
                            origin: at,
                            region: p.size,
                            data,
                            wait: if first { wait.clone() } else { Vec::new() },
                            event: if last { *event } else { 0 },
                        }
                        .into(),
                    }
                };
                let blocking = matches!(target, Target::Queue { blocking: true, .. });
                if blocking {
                    client.call_with_out(&packed, make).map(drop)
                } else {
                    client.defer_with_out(&packed, make)
                }
                .map_err(|s| s.0)?;
            }
            (
                Host::Into(dst),
                Target::Queue {
                    queue, wait, event, ..
                },
            ) => {
                client
                    .call_with_in(&mut packed, |data, chunk| -> Request {
                        EnqueueReadImage {
                            queue: *queue,
                            mem: handle(chunk),
                            origin: at,
                            region: p.size,
                            data,
                            wait: if first { wait.clone() } else { Vec::new() },
                            event: if last { *event } else { 0 },
                        }
                        .into()
                    })
                    .map_err(|s| s.0)?;
                scatter(&layout, dst, &packed, p.at, p.size)?;
            }
            (Host::Into(_), Target::Init) => return Err(CL_INVALID_OPERATION),
        }
    }
    Ok(())
}

/// Rows of the piece `(at, size)` of the region, from `host` into `packed`.
fn gather(
    layout: &HostLayout,
    host: &[u8],
    packed: &mut [u8],
    at: [u64; 3],
    size: [u64; 3],
) -> ClResult<()> {
    let row = (size[0] * layout.elem) as usize;
    for (n, chunk) in packed.chunks_exact_mut(row).enumerate() {
        let (y, z) = (n as u64 % size[1], n as u64 / size[1]);
        let start = layout.offset([at[0], at[1] + y, at[2] + z])? as usize;
        chunk.copy_from_slice(host.get(start..start + row).ok_or(CL_INVALID_VALUE)?);
    }
    Ok(())
}

/// Rows of the piece `(at, size)` of the region, from `packed` into `host`.
fn scatter(
    layout: &HostLayout,
    host: &mut [u8],
    packed: &[u8],
    at: [u64; 3],
    size: [u64; 3],
) -> ClResult<()> {
    let row = (size[0] * layout.elem) as usize;
    for (n, chunk) in packed.chunks_exact(row).enumerate() {
        let (y, z) = (n as u64 % size[1], n as u64 / size[1]);
        let start = layout.offset([at[0], at[1] + y, at[2] + z])? as usize;
        host.get_mut(start..start + row)
            .ok_or(CL_INVALID_VALUE)?
            .copy_from_slice(chunk);
    }
    Ok(())
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

fn enqueue_read_image(
    queue: cl_command_queue,
    image: cl_mem,
    blocking: cl_bool,
    origin: *const usize,
    region: *const usize,
    row_pitch: usize,
    slice_pitch: usize,
    ptr: *mut c_void,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (queue, mem) = queue_and_mem(queue, image)?;
    let desc = image_of(&mem)?;
    let (origin, region) = origin_region(desc, origin, region)?;
    let layout = desc.host_layout(region, row_pitch as u64, slice_pitch as u64)?;
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let wait = wait_list(&queue, num_events, events)?;
    // CL_INVALID_OPERATION if the image was created with
    // CL_MEM_HOST_WRITE_ONLY or CL_MEM_HOST_NO_ACCESS.
    if !mem.host_readable() {
        return Err(CL_INVALID_OPERATION);
    }
    let new_event = NewEvent::new(event, CL_COMMAND_READ_IMAGE)?;
    let host = bytes_mut(ptr, layout.extent(region)? as usize)?;
    let target = Target::Queue {
        queue: queue.handle(),
        wait,
        event: new_event.handle(),
        blocking: true,
    };
    move_pixels(
        &mem,
        desc,
        &target,
        origin,
        region,
        Host::Into(host),
        layout,
    )?;
    new_event.publish(&queue);
    finish_blocking(blocking)
}

fn enqueue_write_image(
    queue: cl_command_queue,
    image: cl_mem,
    blocking: cl_bool,
    origin: *const usize,
    region: *const usize,
    row_pitch: usize,
    slice_pitch: usize,
    ptr: *const c_void,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (queue, mem) = queue_and_mem(queue, image)?;
    let desc = image_of(&mem)?;
    let (origin, region) = origin_region(desc, origin, region)?;
    let layout = desc.host_layout(region, row_pitch as u64, slice_pitch as u64)?;
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let wait = wait_list(&queue, num_events, events)?;
    // CL_INVALID_OPERATION if the image was created with
    // CL_MEM_HOST_READ_ONLY or CL_MEM_HOST_NO_ACCESS.
    if !mem.host_writable() {
        return Err(CL_INVALID_OPERATION);
    }
    let new_event = NewEvent::new(event, CL_COMMAND_WRITE_IMAGE)?;
    let host = bytes(ptr, layout.extent(region)? as usize)?;
    let target = Target::Queue {
        queue: queue.handle(),
        wait,
        event: new_event.handle(),
        blocking: blocking != CL_FALSE,
    };
    move_pixels(
        &mem,
        desc,
        &target,
        origin,
        region,
        Host::From(host),
        layout,
    )?;
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
    let dst = Cl::<Mem>::get(dst)?;
    if !Arc::ptr_eq(&queue.context, &dst.context) {
        return Err(CL_INVALID_CONTEXT);
    }
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
    platform::client()?.defer(copy.into()).map_err(|s| s.0)?;
    new_event.publish(&queue);
    Ok(())
}

/// The buffer of an image ⇄ buffer copy: CL_INVALID_MEM_OBJECT for an
/// image; CL_INVALID_VALUE when `[offset, offset + len)` is out of it.
fn copy_buffer(
    queue: &Cl<Queue>,
    buffer: cl_mem,
    offset: usize,
    len: u64,
) -> ClResult<Arc<Cl<Mem>>> {
    let buffer = Cl::<Mem>::get(buffer)?;
    if !Arc::ptr_eq(&queue.context, &buffer.context) {
        return Err(CL_INVALID_CONTEXT);
    }
    if buffer.image.is_some() {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    if !buffer.contains(offset as u64, len) {
        return Err(CL_INVALID_VALUE);
    }
    Ok(buffer)
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
    let (queue, src) = queue_and_mem(queue, src)?;
    let image = image_of(&src)?;
    let (src_origin, region) = origin_region(image, src_origin, region)?;
    let len = img::packed_len(region, image.elem).ok_or(CL_INVALID_VALUE)?;
    let dst = copy_buffer(&queue, dst, dst_offset, len)?;
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_COPY_IMAGE_TO_BUFFER)?;
    let copy = EnqueueCopyImageToBuffer {
        queue: queue.handle(),
        src: src.handle(),
        dst: dst.handle(),
        src_origin,
        region,
        dst_offset: dst_offset as u64,
        wait,
        event: new_event.handle(),
    };
    platform::client()?.defer(copy.into()).map_err(|s| s.0)?;
    new_event.publish(&queue);
    Ok(())
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
    let (queue, dst) = queue_and_mem(queue, dst)?;
    let image = image_of(&dst)?;
    let (dst_origin, region) = origin_region(image, dst_origin, region)?;
    let len = img::packed_len(region, image.elem).ok_or(CL_INVALID_VALUE)?;
    let src = copy_buffer(&queue, src, src_offset, len)?;
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_COPY_BUFFER_TO_IMAGE)?;
    let copy = EnqueueCopyBufferToImage {
        queue: queue.handle(),
        src: src.handle(),
        dst: dst.handle(),
        src_offset: src_offset as u64,
        dst_origin,
        region,
        wait,
        event: new_event.handle(),
    };
    platform::client()?.defer(copy.into()).map_err(|s| s.0)?;
    new_event.publish(&queue);
    Ok(())
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
    platform::client()?.defer(fill.into()).map_err(|s| s.0)?;
    new_event.publish(&queue);
    Ok(())
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
    if !invalidate {
        // SAFETY: `ptr` is either the area just allocated with `extent`
        // bytes, or the application's USE_HOST_PTR memory, which the spec
        // requires to hold the whole image with its pitches.
        let host = unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, extent) };
        let target = Target::Queue {
            queue: queue.handle(),
            wait,
            event: new_event.handle(),
            blocking: true,
        };
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
    new_event.publish(&queue);
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
        let target = Target::Queue {
            queue: queue.handle(),
            wait,
            event: new_event.handle(),
            blocking: true,
        };
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
