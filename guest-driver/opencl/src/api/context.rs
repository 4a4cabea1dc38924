//! Context entry points.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::messages::{CreateContext, CreateContextOnDevices};

use crate::api::device::matches_type;
use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{array, properties, write_info};
use crate::core::callback::{ObjectCallback, ObjectFn};
use crate::core::context::Context;
use crate::core::device::Device;
use crate::core::info;
use crate::core::object::{Cl, ClResult, RawPtr};
use crate::core::platform::{self, connection, Platform};

type ContextNotify = Option<unsafe extern "C" fn(*const c_char, *const c_void, usize, *mut c_void)>;

object_entry! {
    fn clCreateContext(properties: *const cl_context_properties, num_devices: cl_uint, devices: *const cl_device_id, pfn_notify: ContextNotify, user_data: *mut c_void) -> cl_context => create_context;
    fn clCreateContextFromType(properties: *const cl_context_properties, device_type: cl_device_type, pfn_notify: ContextNotify, user_data: *mut c_void) -> cl_context => create_context_from_type;
}

status_entry! {
    fn clRetainContext(context: cl_context) => Cl::<Context>::retain;
    fn clReleaseContext(context: cl_context) => Cl::<Context>::release;
    fn clGetContextInfo(context: cl_context, param_name: cl_context_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_context_info;
    fn clSetContextDestructorCallback(context: cl_context, pfn_notify: Option<ObjectFn>, user_data: *mut c_void) => set_context_destructor_callback;
}

/// Checks a context property list; returns it (with its terminator) and
/// the part the backend gets (the platform is ours, not the backend's).
fn parse_properties(ptr: *const cl_context_properties) -> ClResult<(Vec<isize>, Vec<u64>)> {
    let list = properties(ptr, CL_INVALID_PROPERTY)?;
    let mut remote = Vec::new();
    let mut seen = Vec::new();
    for pair in list.chunks_exact(2) {
        let (key, value) = (pair[0], pair[1]);
        // CL_INVALID_PROPERTY if the same property name is specified more
        // than once.
        if seen.contains(&key) {
            return Err(CL_INVALID_PROPERTY);
        }
        seen.push(key);
        match key {
            // CL_INVALID_PLATFORM if the platform value specified in
            // properties is not a valid platform.
            k if k == CL_CONTEXT_PLATFORM => {
                Cl::<Platform>::get(value as *mut c_void)?;
            }
            k if k == CL_CONTEXT_INTEROP_USER_SYNC => {
                remote.extend([key as u64, value as u64]);
            }
            // CL_INVALID_PROPERTY if a context property name is not
            // supported.
            _ => return Err(CL_INVALID_PROPERTY),
        }
    }
    if !remote.is_empty() {
        remote.push(0);
    }
    Ok((list, remote))
}

fn new_context(
    properties: *const cl_context_properties,
    devices: Vec<Arc<Cl<Device>>>,
    pfn_notify: ContextNotify,
    user_data: *mut c_void,
) -> ClResult<cl_context> {
    // CL_INVALID_VALUE if pfn_notify is NULL but user_data is not NULL.
    if pfn_notify.is_none() && !user_data.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let (local, remote) = parse_properties(properties)?;
    let connection = connection().ok_or(CL_INVALID_PLATFORM)?;
    let client = &connection.client;
    let handle = client.new_handle();
    let request = if devices.iter().all(|d| d.is_root()) {
        CreateContext {
            context: handle,
            properties: remote,
        }
        .into()
    } else {
        CreateContextOnDevices {
            context: handle,
            properties: remote,
            devices: devices.iter().map(|d| d.remote_handle()).collect(),
        }
        .into()
    };
    client.defer(request).map_err(|s| s.0)?;
    let context = Cl::publish(handle, Context::new(devices, local));
    Ok(context.as_ptr())
}

fn create_context(
    properties: *const cl_context_properties,
    num_devices: cl_uint,
    devices: *const cl_device_id,
    pfn_notify: ContextNotify,
    user_data: *mut c_void,
) -> ClResult<cl_context> {
    // CL_INVALID_VALUE if devices is NULL or num_devices is equal to zero.
    if devices.is_null() || num_devices == 0 {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_DEVICE if any device in devices is not a valid device.
    // Duplicate devices are ignored.
    let mut chosen: Vec<Arc<Cl<Device>>> = Vec::new();
    for &device in array(devices, num_devices as usize)? {
        let device = Cl::<Device>::get(device)?;
        if !chosen.iter().any(|d| Arc::ptr_eq(d, &device)) {
            chosen.push(device);
        }
    }
    new_context(properties, chosen, pfn_notify, user_data)
}

fn create_context_from_type(
    properties: *const cl_context_properties,
    device_type: cl_device_type,
    pfn_notify: ContextNotify,
    user_data: *mut c_void,
) -> ClResult<cl_context> {
    platform::connection().ok_or(CL_INVALID_PLATFORM)?;
    // CL_DEVICE_NOT_FOUND if no devices that match device_type are available.
    if !matches_type(device_type)? {
        return Err(CL_DEVICE_NOT_FOUND);
    }
    let root = platform::connection()
        .ok_or(CL_INVALID_PLATFORM)?
        .device
        .clone();
    new_context(properties, vec![root], pfn_notify, user_data)
}

fn get_context_info(
    context: cl_context,
    param: cl_context_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let context = Cl::<Context>::get(context)?;
    let bytes = match param {
        CL_CONTEXT_REFERENCE_COUNT => info::u32(context.ref_count()),
        CL_CONTEXT_NUM_DEVICES => info::u32(context.devices.len() as u32),
        CL_CONTEXT_DEVICES => devices_info(&context.devices),
        CL_CONTEXT_PROPERTIES => context
            .properties
            .iter()
            .flat_map(|p| p.to_ne_bytes())
            .collect(),
        _ => return Err(CL_INVALID_VALUE),
    };
    write_info(&bytes, size, value, size_ret)
}

fn set_context_destructor_callback(
    context: cl_context,
    pfn_notify: Option<ObjectFn>,
    user_data: *mut c_void,
) -> ClResult<()> {
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_VALUE if pfn_notify is NULL.
    let pfn = pfn_notify.ok_or(CL_INVALID_VALUE)?;
    context.destructors.push(ObjectCallback {
        pfn,
        data: RawPtr::new(user_data),
    });
    Ok(())
}

/// The device argument of calls that take one: it must be one of the
/// context's.
pub(crate) fn check_device(context: &Arc<Cl<Context>>, device: cl_device_id) -> ClResult<()> {
    context.member(device).map(drop)
}

/// A `cl_device_id[]` info value.
pub(crate) fn devices_info(devices: &[Arc<Cl<Device>>]) -> Vec<u8> {
    devices
        .iter()
        .flat_map(|d| (d.as_ptr() as usize).to_ne_bytes())
        .collect()
}
