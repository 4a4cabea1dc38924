//! The device profile a guest sees and the device's identity, read from the
//! OpenCL device: what a snapshot records and a restore checks.

use cl3::types::{cl_device_id, cl_platform_id};
use vgpu_migration::{DeviceIdentity, Profile, VectorWidths, Version};

fn bytes(device: cl_device_id, param: u32) -> Vec<u8> {
    cl3::device::get_device_data(device, param).unwrap_or_default()
}

fn u64_of(device: cl_device_id, param: u32) -> u64 {
    let b = bytes(device, param);
    match b.len() {
        4 => u32::from_le_bytes(b[..4].try_into().expect("length checked")) as u64,
        n if n >= 8 => u64::from_le_bytes(b[..8].try_into().expect("length checked")),
        _ => 0,
    }
}

/// `CL_DEVICE_LOCAL_MEM_SIZE` of `device` as its driver reports it.
pub(super) fn local_mem_size(device: cl_device_id) -> u64 {
    u64_of(device, 0x1023)
}

fn u32_of(device: cl_device_id, param: u32) -> u32 {
    u64_of(device, param) as u32
}

fn text(device: cl_device_id, param: u32) -> String {
    String::from_utf8_lossy(&bytes(device, param))
        .trim_end_matches('\0')
        .to_string()
}

fn widths(device: cl_device_id, first: u32) -> VectorWidths {
    // char, short, int, long, float, double follow one another; half is apart.
    let half_param = if first == 0x1006 { 0x1034 } else { 0x103C };
    VectorWidths {
        char: u32_of(device, first),
        short: u32_of(device, first + 1),
        int: u32_of(device, first + 2),
        long: u32_of(device, first + 3),
        float: u32_of(device, first + 4),
        double: u32_of(device, first + 5),
        half: u32_of(device, half_param),
    }
}

pub fn device_profile(device: cl_device_id) -> Profile {
    let sizes = bytes(device, 0x1005); // CL_DEVICE_MAX_WORK_ITEM_SIZES (size_t[])
    let extensions = text(device, 0x1030);
    Profile {
        device_type: u64_of(device, 0x1000),
        max_work_group_size: u64_of(device, 0x1004),
        max_work_item_dimensions: u32_of(device, 0x1003),
        max_work_item_sizes: sizes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
            .collect(),
        local_mem_size: local_mem_size(device),
        global_mem_size: u64_of(device, 0x101F),
        max_mem_alloc_size: u64_of(device, 0x1010),
        max_constant_buffer_size: u64_of(device, 0x1020),
        max_parameter_size: u64_of(device, 0x1017),
        mem_base_addr_align: u32_of(device, 0x1019),
        extensions: Profile::parse_extensions(&extensions),
        image_support: u32_of(device, 0x1016) != 0,
        address_bits: u32_of(device, 0x100D),
        little_endian: u32_of(device, 0x1026) != 0,
        opencl_c_version: Version::parse_opencl_c(&text(device, 0x103D)).unwrap_or_default(),
        fp64: u64_of(device, 0x1032) != 0,
        fp16: extensions.split_whitespace().any(|e| e == "cl_khr_fp16"),
        preferred_vector_widths: widths(device, 0x1006),
        native_vector_widths: widths(device, 0x1036),
        // CL_DEVICE_PARTITION_PROPERTIES, without the 0 of a device that
        // has none.
        partition_properties: bytes(device, 0x1044)
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().expect("chunks of 8")))
            .filter(|&p| p != 0)
            .collect(),
    }
}

pub fn device_identity(platform: cl_platform_id, device: cl_device_id) -> DeviceIdentity {
    let platform_name = cl3::platform::get_platform_data(platform, 0x0902).unwrap_or_default();
    DeviceIdentity {
        vendor_id: u32_of(device, 0x1001),
        vendor: text(device, 0x102C),
        name: text(device, 0x102B),
        device_version: text(device, 0x102F),
        driver_version: text(device, 0x102D),
        platform: String::from_utf8_lossy(&platform_name)
            .trim_end_matches('\0')
            .to_string(),
    }
}
