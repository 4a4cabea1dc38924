//! Buffer entry points: creation, sub-buffers, info, reference counts.

use std::ffi::c_void;
use std::sync::atomic::Ordering;

use opencl_sys::*;
use vgpu_protocol::messages::{CreateBuffer, CreateSubBuffer, InitBuffer};
use vgpu_protocol::{DataRef, Request};

use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{bytes, properties, read, write_info};
use crate::core::callback::{ObjectCallback, ObjectFn};
use crate::core::context::Context;
use crate::core::info;
use crate::core::memory::{check_flags, sub_buffer_flags, Mem, HOST_ACCESS};
use crate::core::object::{Cl, ClResult, RawPtr};
use crate::core::placed;
use crate::core::platform;

object_entry! {
    fn clCreateBuffer(context: cl_context, flags: cl_mem_flags, size: usize, host_ptr: *mut c_void) -> cl_mem => create_buffer;
    fn clCreateBufferWithProperties(context: cl_context, properties: *const cl_mem_properties, flags: cl_mem_flags, size: usize, host_ptr: *mut c_void) -> cl_mem => create_buffer_with_properties;
    fn clCreateSubBuffer(buffer: cl_mem, flags: cl_mem_flags, buffer_create_type: cl_buffer_create_type, buffer_create_info: *const c_void) -> cl_mem => create_sub_buffer;
}

status_entry! {
    fn clRetainMemObject(memobj: cl_mem) => Cl::<Mem>::retain;
    fn clReleaseMemObject(memobj: cl_mem) => Cl::<Mem>::release;
    fn clGetMemObjectInfo(memobj: cl_mem, param_name: cl_mem_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_mem_object_info;
    fn clSetMemObjectDestructorCallback(memobj: cl_mem, pfn_notify: Option<ObjectFn>, user_data: *mut c_void) => set_mem_object_destructor_callback;
    fn clGetPipeInfo(pipe: cl_mem, param_name: cl_pipe_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_pipe_info;
}

fn create_buffer(
    context: cl_context,
    flags: cl_mem_flags,
    size: usize,
    host_ptr: *mut c_void,
) -> ClResult<cl_mem> {
    // CL_INVALID_CONTEXT if context is not a valid context.
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_VALUE if values specified in flags are not valid.
    if !check_flags(flags) {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_BUFFER_SIZE if size is 0 or greater than
    // CL_DEVICE_MAX_MEM_ALLOC_SIZE.
    if size == 0 || size as u64 > context.device.number(CL_DEVICE_MAX_MEM_ALLOC_SIZE)? {
        return Err(CL_INVALID_BUFFER_SIZE);
    }
    // CL_INVALID_HOST_PTR if host_ptr is NULL and CL_MEM_USE_HOST_PTR or
    // CL_MEM_COPY_HOST_PTR are set in flags or if host_ptr is not NULL but
    // they are not set.
    let with_host_ptr = flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0;
    if with_host_ptr == host_ptr.is_null() {
        return Err(CL_INVALID_HOST_PTR);
    }
    if flags & CL_MEM_USE_HOST_PTR != 0 {
        if let Some(mem) = crate::api::svm::buffer_over_svm(&context, flags, size, host_ptr)? {
            return Ok(mem);
        }
    }
    let client = platform::client()?;
    let mem = client.new_handle();
    // The device copy of a USE_HOST_PTR buffer starts as a copy too. Host
    // access flags are enforced here: the backend's buffer allows the reads
    // and writes that maps do on the application's behalf.
    let remote_flags = flags & !(CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR | HOST_ACCESS)
        | if with_host_ptr {
            CL_MEM_COPY_HOST_PTR
        } else {
            0
        };
    let create = |init: DataRef| CreateBuffer {
        mem,
        context: context.handle(),
        flags: remote_flags,
        size: size as u64,
        init,
    };
    if flags & CL_MEM_USE_HOST_PTR == 0 {
        let init = if with_host_ptr {
            Some(bytes(host_ptr, size)?)
        } else {
            None
        };
        if let Some(placement) = placed::create(&context, mem, remote_flags, size, init)? {
            let placed = Mem::new(context, flags, size as u64, RawPtr(0), None);
            let object = Cl::publish(mem, placed.with_placement(placement));
            return Ok(object.as_ptr());
        }
    }
    if with_host_ptr {
        // Up to 64 KiB travels in the batch; more is sent at once, the
        // part beyond the first chunk by InitBuffer.
        let data = bytes(host_ptr, size)?;
        client
            .defer_with_out(data, |chunk, start| -> Request {
                if start == 0 {
                    create(chunk).into()
                } else {
                    InitBuffer {
                        mem,
                        offset: start,
                        data: chunk,
                    }
                    .into()
                }
            })
            .map_err(|s| s.0)?;
    } else {
        client
            .defer(create(DataRef::NONE).into())
            .map_err(|s| s.0)?;
    }
    let kept = if flags & CL_MEM_USE_HOST_PTR != 0 {
        RawPtr::new(host_ptr)
    } else {
        RawPtr(0)
    };
    let object = Cl::publish(mem, Mem::new(context, flags, size as u64, kept, None));
    Ok(object.as_ptr())
}

fn create_buffer_with_properties(
    context: cl_context,
    props: *const cl_mem_properties,
    flags: cl_mem_flags,
    size: usize,
    host_ptr: *mut c_void,
) -> ClResult<cl_mem> {
    // CL_INVALID_PROPERTY if a property name in properties is not a
    // supported property name (no buffer properties are supported).
    let listed = properties(props, CL_INVALID_PROPERTY)?;
    if listed.len() > 1 {
        return Err(CL_INVALID_PROPERTY);
    }
    let mem = create_buffer(context, flags, size, host_ptr)?;
    // CL_MEM_PROPERTIES then answers the (empty) list as given.
    Cl::<Mem>::get(mem)?
        .properties_listed
        .store(!listed.is_empty(), Ordering::Relaxed);
    Ok(mem)
}

fn create_sub_buffer(
    buffer: cl_mem,
    flags: cl_mem_flags,
    create_type: cl_buffer_create_type,
    create_info: *const c_void,
) -> ClResult<cl_mem> {
    let parent = Cl::<Mem>::get(buffer)?;
    // CL_INVALID_MEM_OBJECT if buffer is a sub-buffer object (or an image).
    if parent.parent.is_some() || parent.image.is_some() {
        return Err(CL_INVALID_MEM_OBJECT);
    }
    // CL_INVALID_VALUE if the flags conflict with the parent's, or
    // buffer_create_type is not CL_BUFFER_CREATE_TYPE_REGION, or
    // buffer_create_info is NULL or out of bounds.
    let flags = sub_buffer_flags(parent.flags, flags).ok_or(CL_INVALID_VALUE)?;
    if create_type != CL_BUFFER_CREATE_TYPE_REGION {
        return Err(CL_INVALID_VALUE);
    }
    let region: cl_buffer_region = read(create_info as *const cl_buffer_region)?;
    let (origin, size) = (region.origin as u64, region.size as u64);
    // CL_INVALID_BUFFER_SIZE if the size field of the region is 0.
    if size == 0 {
        return Err(CL_INVALID_BUFFER_SIZE);
    }
    if !parent.contains(origin, size) {
        return Err(CL_INVALID_VALUE);
    }
    // CL_MISALIGNED_SUB_BUFFER_OFFSET if the origin is not aligned to
    // CL_DEVICE_MEM_BASE_ADDR_ALIGN (in bits).
    let align = (parent
        .context
        .device
        .number(CL_DEVICE_MEM_BASE_ADDR_ALIGN)?
        / 8)
    .max(1);
    if origin % align != 0 {
        return Err(CL_MISALIGNED_SUB_BUFFER_OFFSET);
    }
    let client = platform::client()?;
    let mem = client.new_handle();
    let remote_flags =
        flags & !(CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | HOST_ACCESS);
    let create = CreateSubBuffer {
        mem,
        parent: parent.handle(),
        flags: remote_flags,
        origin,
        size,
    };
    client.defer(create.into()).map_err(|s| s.0)?;
    let host_ptr = if parent.host_ptr.is_null() {
        RawPtr(0)
    } else {
        RawPtr(parent.host_ptr.0 + origin as usize)
    };
    let context = parent.context.clone();
    let object = Cl::publish(
        mem,
        Mem::new(context, flags, size, host_ptr, Some((parent, origin))),
    );
    Ok(object.as_ptr())
}

fn get_mem_object_info(
    mem: cl_mem,
    param: cl_mem_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let mem = Cl::<Mem>::get(mem)?;
    if let Some(bytes) = crate::api::image::mem_info(&mem, param)? {
        return write_info(&bytes, size, value, size_ret);
    }
    let bytes = match param {
        CL_MEM_TYPE => info::u32(CL_MEM_OBJECT_BUFFER),
        CL_MEM_FLAGS => info::u64(mem.flags),
        CL_MEM_SIZE => info::usize(mem.size as usize),
        CL_MEM_HOST_PTR => info::ptr(mem.host_ptr.get()),
        CL_MEM_MAP_COUNT => info::u32(mem.maps().len() as u32),
        CL_MEM_REFERENCE_COUNT => info::u32(mem.ref_count()),
        CL_MEM_CONTEXT => info::ptr(mem.context.as_ptr()),
        CL_MEM_ASSOCIATED_MEMOBJECT => info::ptr(
            mem.parent
                .as_ref()
                .map_or(std::ptr::null_mut(), |p| p.as_ptr()),
        ),
        CL_MEM_OFFSET => info::usize(mem.origin as usize),
        CL_MEM_USES_SVM_POINTER => info::u32(mem.uses_svm.load(Ordering::Relaxed) as cl_bool),
        // The properties as given: none for clCreateBuffer or a NULL list,
        // the terminator alone for an empty list.
        CL_MEM_PROPERTIES if mem.properties_listed.load(Ordering::Relaxed) => info::u64(0),
        CL_MEM_PROPERTIES => Vec::new(),
        _ => return Err(CL_INVALID_VALUE),
    };
    write_info(&bytes, size, value, size_ret)
}

/// No pipe can exist (`clCreatePipe` answers `CL_INVALID_OPERATION`: the
/// device is reported without pipe support), so no memory object is a
/// valid pipe: `CL_INVALID_MEM_OBJECT`, as OpenCL 3.0 and the CTS's
/// `consistency_pipes` want.
fn get_pipe_info(
    _pipe: cl_mem,
    _param: cl_pipe_info,
    _size: usize,
    _value: *mut c_void,
    _size_ret: *mut usize,
) -> ClResult<()> {
    Err(CL_INVALID_MEM_OBJECT)
}

fn set_mem_object_destructor_callback(
    mem: cl_mem,
    pfn_notify: Option<ObjectFn>,
    user_data: *mut c_void,
) -> ClResult<()> {
    let mem = Cl::<Mem>::get(mem)?;
    // CL_INVALID_VALUE if pfn_notify is NULL.
    let pfn = pfn_notify.ok_or(CL_INVALID_VALUE)?;
    mem.destructors.push(ObjectCallback {
        pfn,
        data: RawPtr::new(user_data),
    });
    Ok(())
}
