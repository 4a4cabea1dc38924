//! Device partitioning. The vGPU device reports no partition types
//! (`CL_DEVICE_PARTITION_PROPERTIES` is a single 0, `CL_DEVICE_PARTITION_
//! MAX_SUB_DEVICES` 0), so `clCreateSubDevices` answers what the
//! specification says for a device without them.

use opencl_sys::*;

use crate::api::entry::status_entry;
use crate::core::device::Device;
use crate::core::object::{Cl, ClResult};

status_entry! {
    fn clCreateSubDevices(in_device: cl_device_id, properties: *const cl_device_partition_property, num_devices: cl_uint, out_devices: *mut cl_device_id, num_devices_ret: *mut cl_uint) => create_sub_devices;
}

fn create_sub_devices(
    device: cl_device_id,
    _properties: *const cl_device_partition_property,
    _num_devices: cl_uint,
    _out_devices: *mut cl_device_id,
    _num_devices_ret: *mut cl_uint,
) -> ClResult<()> {
    // CL_INVALID_DEVICE if in_device is not a valid device.
    Cl::<Device>::get(device)?;
    // CL_INVALID_VALUE if values specified in properties are not valid or
    // if values specified in properties are valid but not supported by the
    // device: it supports no partition scheme, and NULL names none.
    Err(CL_INVALID_VALUE)
}
