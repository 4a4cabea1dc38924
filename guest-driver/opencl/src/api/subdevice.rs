//! Device partitioning: `clCreateSubDevices` on the backend's device, which
//! creates the host's sub-devices under handles this library chose. The
//! backend checks the partition against the device; this side checks what
//! the specification asks of the arguments before anything is sent.

use opencl_sys::*;
use vgpu_protocol::messages::CreateSubDevices;

use crate::api::entry::status_entry;
use crate::api::util::write;
use crate::core::device::Device;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;

status_entry! {
    fn clCreateSubDevices(in_device: cl_device_id, properties: *const cl_device_partition_property, num_devices: cl_uint, out_devices: *mut cl_device_id, num_devices_ret: *mut cl_uint) => create_sub_devices;
}

/// Longest partition list read (BY_COUNTS: one entry per sub-device).
const MAX_PARTITION_LIST: usize = 1024;

/// The application's partition list, its terminator included: one 0 ends
/// it, two for `CL_DEVICE_PARTITION_BY_COUNTS` (the counts' own end, then
/// the list's). `CL_INVALID_VALUE` for NULL or a list without its end.
fn partition_list(ptr: *const cl_device_partition_property) -> ClResult<Vec<isize>> {
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let mut list = Vec::new();
    let mut zeros_needed = 1;
    for i in 0..MAX_PARTITION_LIST {
        // SAFETY: the application's list is readable up to its terminator,
        // which has not been reached yet.
        let value = unsafe { ptr.add(i).read_unaligned() };
        list.push(value);
        if i == 0 && value == CL_DEVICE_PARTITION_BY_COUNTS {
            zeros_needed = 2;
        }
        if value == 0 {
            zeros_needed -= 1;
            if zeros_needed == 0 {
                return Ok(list);
            }
        }
    }
    Err(CL_INVALID_VALUE)
}

/// Whether the device offers the partition scheme the list names.
fn offered(device: &Device, scheme: isize) -> ClResult<bool> {
    let offered = device.info(CL_DEVICE_PARTITION_PROPERTIES)?;
    Ok(offered
        .chunks_exact(8)
        .any(|p| isize::from_ne_bytes(p.try_into().expect("chunks of 8")) == scheme))
}

fn create_sub_devices(
    device: cl_device_id,
    properties: *const cl_device_partition_property,
    num_devices: cl_uint,
    out_devices: *mut cl_device_id,
    num_devices_ret: *mut cl_uint,
) -> ClResult<()> {
    // CL_INVALID_DEVICE if in_device is not a valid device.
    let parent = Cl::<Device>::get(device)?;
    // CL_INVALID_VALUE if values specified in properties are not valid or
    // if values specified in properties are valid but not supported by the
    // device.
    let list = partition_list(properties)?;
    if list[0] == 0 || !offered(&parent, list[0])? {
        return Err(CL_INVALID_VALUE);
    }
    // The most this device can be split into: no more handles are needed.
    let max = parent.number(CL_DEVICE_PARTITION_MAX_SUB_DEVICES)?;
    let client = platform::client()?;
    let handles: Vec<u64> = if out_devices.is_null() {
        Vec::new()
    } else {
        (0..u64::from(num_devices).min(max))
            .map(|_| client.new_handle())
            .collect()
    };
    let request = CreateSubDevices {
        parent: parent.remote_handle(),
        properties: list.iter().map(|&p| p as u64).collect(),
        devices: handles.clone(),
    };
    let reply = client.call(request.into()).map_err(|status| status.0)?;
    let count = reply
        .get(..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("four bytes")))
        .ok_or(CL_OUT_OF_RESOURCES)?;
    // CL_INVALID_VALUE if out_devices is not NULL and num_devices is less
    // than the number of sub-devices created by the partition scheme (the
    // backend refused those too, keeping none).
    if !out_devices.is_null() && count > num_devices {
        return Err(CL_INVALID_VALUE);
    }
    if !out_devices.is_null() {
        for (i, &handle) in handles.iter().take(count as usize).enumerate() {
            let sub = Cl::publish(handle, Device::sub(handle, parent.clone()));
            // The application passes room for `num_devices` ids, and
            // `i < count <= num_devices`.
            write(out_devices.wrapping_add(i), sub.as_ptr());
        }
    }
    write(num_devices_ret, count);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_counts_lists_end_after_their_second_zero() {
        let list = [CL_DEVICE_PARTITION_BY_COUNTS, 1, 1, 0, 0, 77];
        assert_eq!(partition_list(list.as_ptr()), Ok(list[..5].to_vec()));
        let equally = [CL_DEVICE_PARTITION_EQUALLY, 1, 0, 77];
        assert_eq!(partition_list(equally.as_ptr()), Ok(equally[..3].to_vec()));
    }

    #[test]
    fn a_null_list_is_an_invalid_value() {
        assert_eq!(partition_list(std::ptr::null()), Err(CL_INVALID_VALUE));
    }
}
