//! Device entry points.

use std::ffi::c_void;

use opencl_sys::*;

use crate::api::entry::status_entry;
use crate::api::util::{write, write_info};
use crate::core::device::Device;
use crate::core::info;
use crate::core::object::{Cl, ClResult};
use crate::core::platform::{self, connection};

const ALL_TYPES: cl_device_type = CL_DEVICE_TYPE_DEFAULT
    | CL_DEVICE_TYPE_CPU
    | CL_DEVICE_TYPE_GPU
    | CL_DEVICE_TYPE_ACCELERATOR
    | CL_DEVICE_TYPE_CUSTOM;

status_entry! {
    fn clGetDeviceIDs(platform: cl_platform_id, device_type: cl_device_type, num_entries: cl_uint, devices: *mut cl_device_id, num_devices: *mut cl_uint) => get_device_ids;
    fn clGetDeviceInfo(device: cl_device_id, param_name: cl_device_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_device_info;
    fn clRetainDevice(device: cl_device_id) => retain_device;
    fn clReleaseDevice(device: cl_device_id) => release_device;
}

/// Whether the device matches a `cl_device_type` filter; `CL_INVALID_DEVICE_TYPE`
/// for an invalid filter.
pub(crate) fn matches_type(device_type: cl_device_type) -> ClResult<bool> {
    if device_type != CL_DEVICE_TYPE_ALL && device_type & !ALL_TYPES != 0 || device_type == 0 {
        return Err(CL_INVALID_DEVICE_TYPE);
    }
    if device_type == CL_DEVICE_TYPE_ALL || device_type & CL_DEVICE_TYPE_DEFAULT != 0 {
        return Ok(true);
    }
    let device = &connection().ok_or(CL_INVALID_PLATFORM)?.device;
    Ok(device.number(CL_DEVICE_TYPE)? & device_type != 0)
}

fn get_device_ids(
    platform: cl_platform_id,
    device_type: cl_device_type,
    num_entries: cl_uint,
    devices: *mut cl_device_id,
    num_devices: *mut cl_uint,
) -> ClResult<()> {
    // CL_INVALID_PLATFORM if platform is not a valid platform.
    platform::platform_or_default(platform)?;
    // CL_INVALID_VALUE if num_entries is equal to zero and devices is not
    // NULL or if both num_devices and devices are NULL.
    if num_entries == 0 && !devices.is_null() || num_devices.is_null() && devices.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // CL_DEVICE_NOT_FOUND if no OpenCL devices that matched device_type
    // were found.
    if !matches_type(device_type)? {
        write(num_devices, 0);
        return Err(CL_DEVICE_NOT_FOUND);
    }
    let device = &connection().ok_or(CL_INVALID_PLATFORM)?.device;
    write(devices, device.as_ptr());
    write(num_devices, 1);
    Ok(())
}

fn get_device_info(
    device: cl_device_id,
    param: cl_device_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let device = Cl::<Device>::get(device)?;
    let bytes = match param {
        CL_DEVICE_PLATFORM => info::ptr(connection().ok_or(CL_INVALID_DEVICE)?.platform.as_ptr()),
        CL_DEVICE_PARENT_DEVICE => info::ptr(match &device.parent {
            Some(parent) => parent.as_ptr(),
            None => std::ptr::null_mut(),
        }),
        // A root device is not counted (it always answers 1).
        CL_DEVICE_REFERENCE_COUNT if device.is_root() => info::u32(1),
        CL_DEVICE_REFERENCE_COUNT => info::u32(device.ref_count()),
        _ => device.info(param)?,
    };
    write_info(&bytes, size, value, size_ret)
}

/// `clRetainDevice`: counts sub-devices; the root device is valid and
/// not counted.
fn retain_device(device: cl_device_id) -> ClResult<()> {
    if Cl::<Device>::get(device)?.is_root() {
        return Ok(());
    }
    Cl::<Device>::retain(device)
}

/// `clReleaseDevice`: a sub-device goes (and its backend handle with it)
/// when nothing holds it any more; the root device is not counted.
fn release_device(device: cl_device_id) -> ClResult<()> {
    if Cl::<Device>::get(device)?.is_root() {
        return Ok(());
    }
    Cl::<Device>::release(device)
}
