//! Image entry points: supported formats, creation (every image type, with
//! host data as buffers take it, the initial pixels packed by
//! `core::pixels`) and info. Commands on images are in `image_enqueue`.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use opencl_sys::*;
use vgpu_protocol::image as img;
use vgpu_protocol::messages::{CreateImage, GetImageFormats};
use vgpu_protocol::InfoTarget;

use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{bytes, properties, read, write_info};
use crate::core::context::Context;
use crate::core::image::ImageDesc;
use crate::core::info;
use crate::core::memory::{check_flags, Mem, HOST_ACCESS};
use crate::core::object::{Cl, ClResult, RawPtr};
use crate::core::pixels::{move_pixels, Host, Target};
use crate::core::platform;

object_entry! {
    fn clCreateImage(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_desc: *const cl_image_desc, host_ptr: *mut c_void) -> cl_mem => create_image;
    fn clCreateImageWithProperties(context: cl_context, properties: *const cl_mem_properties, flags: cl_mem_flags, image_format: *const cl_image_format, image_desc: *const cl_image_desc, host_ptr: *mut c_void) -> cl_mem => create_image_with_properties;
    fn clCreateImage2D(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_width: usize, image_height: usize, image_row_pitch: usize, host_ptr: *mut c_void) -> cl_mem => create_image_2d;
    fn clCreateImage3D(context: cl_context, flags: cl_mem_flags, image_format: *const cl_image_format, image_width: usize, image_height: usize, image_depth: usize, image_row_pitch: usize, image_slice_pitch: usize, host_ptr: *mut c_void) -> cl_mem => create_image_3d;
}

status_entry! {
    fn clGetSupportedImageFormats(context: cl_context, flags: cl_mem_flags, image_type: cl_mem_object_type, num_entries: cl_uint, image_formats: *mut cl_image_format, num_image_formats: *mut cl_uint) => get_supported_image_formats;
    fn clGetImageInfo(image: cl_mem, param_name: cl_image_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_image_info;
}

const IMAGE_TYPES: [cl_mem_object_type; 6] = [
    CL_MEM_OBJECT_IMAGE1D,
    CL_MEM_OBJECT_IMAGE1D_BUFFER,
    CL_MEM_OBJECT_IMAGE1D_ARRAY,
    CL_MEM_OBJECT_IMAGE2D,
    CL_MEM_OBJECT_IMAGE2D_ARRAY,
    CL_MEM_OBJECT_IMAGE3D,
];

/// The image a memory object is: CL_INVALID_MEM_OBJECT for a buffer.
pub(crate) fn image_of(mem: &Cl<Mem>) -> ClResult<&ImageDesc> {
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
    let found = device_formats(&context, flags, image_type)?;
    if !formats.is_null() {
        for (i, format) in found.iter().take(num_entries as usize).enumerate() {
            crate::api::util::write(formats.wrapping_add(i), *format);
        }
    }
    crate::api::util::write(num_formats, found.len() as cl_uint);
    Ok(())
}

/// Formats (order, type) the device supports for `flags` and `image_type`,
/// asked once per context and key.
fn device_formats(
    context: &Cl<Context>,
    flags: cl_mem_flags,
    image_type: cl_mem_object_type,
) -> ClResult<Vec<cl_image_format>> {
    type Key = (u64, cl_mem_flags, cl_mem_object_type);
    static CACHE: Mutex<BTreeMap<Key, Vec<(u32, u32)>>> = Mutex::new(BTreeMap::new());
    let key = (context.handle(), flags, image_type);
    let cached = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .cloned();
    let pairs = match cached {
        Some(pairs) => pairs,
        None => {
            let query = GetImageFormats {
                context: context.handle(),
                flags,
                image_type,
            };
            let reply = platform::client()?.call(query.into()).map_err(|s| s.0)?;
            let pairs: Vec<(u32, u32)> = reply
                .chunks_exact(8)
                .map(|p| {
                    (
                        u32::from_le_bytes([p[0], p[1], p[2], p[3]]),
                        u32::from_le_bytes([p[4], p[5], p[6], p[7]]),
                    )
                })
                .collect();
            CACHE
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key, pairs.clone());
            pairs
        }
    };
    Ok(pairs
        .into_iter()
        .map(|(order, data_type)| cl_image_format {
            image_channel_order: order,
            image_channel_data_type: data_type,
        })
        .collect())
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
    // CL_IMAGE_FORMAT_NOT_SUPPORTED if the format is not supported for
    // these access flags and this type: answered now, as natively, not at
    // the next synchronization point.
    // No access flag means CL_MEM_READ_WRITE (the spec's default): ask
    // for that, not for flags 0, which NVIDIA's driver refuses with
    // CL_INVALID_VALUE (PoCL takes it), so an image made with only
    // CL_MEM_USE_HOST_PTR (CTS basic hostptr) failed there.
    let access = match flags
        & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY | CL_MEM_KERNEL_READ_AND_WRITE)
    {
        0 => CL_MEM_READ_WRITE,
        access => access,
    };
    let supported = device_formats(&context, access, ty)?;
    if !supported.iter().any(|f| {
        (f.image_channel_order, f.image_channel_data_type)
            == (format.image_channel_order, format.image_channel_data_type)
    }) {
        return Err(CL_IMAGE_FORMAT_NOT_SUPPORTED);
    }
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
    } else if ty == CL_MEM_OBJECT_IMAGE2D && !desc.buffer.is_null() {
        // CL_INVALID_OPERATION for a 2D image from a buffer where the
        // device does not support them (cl_khr_image2d_from_buffer).
        return Err(CL_INVALID_OPERATION);
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
    let listed = properties(props, CL_INVALID_PROPERTY)?;
    if listed.len() > 1 {
        return Err(CL_INVALID_PROPERTY);
    }
    let image = create_image(context, flags, format, desc, host_ptr)?;
    // CL_MEM_PROPERTIES then answers the (empty) list as given.
    Cl::<Mem>::get(image)?
        .properties_listed
        .store(!listed.is_empty(), std::sync::atomic::Ordering::Relaxed);
    Ok(image)
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
