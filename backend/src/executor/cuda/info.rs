//! What the guest learns about the device: name, UUID, memory and the
//! attribute table, with the features vgpu does not forward turned off.

use std::ffi::c_char;

use cudarc::driver::sys;
use vgpu_protocol::cuda::{CuDeviceInfoReply, ATTRIBUTE_UNSUPPORTED, DEVICE_ATTRIBUTE_COUNT};

use super::driver::{check_call, device_attribute, DriverError};

/// Attributes answered 0 whatever the device says: host-memory mapping,
/// managed memory, memory pools, IPC and the like, which the guest library
/// does not offer, and the virtual memory API (the backend's own).
const HIDDEN: &[u32] = &[
    19,  // CAN_MAP_HOST_MEMORY
    83,  // MANAGED_MEMORY
    88,  // PAGEABLE_MEMORY_ACCESS
    89,  // CONCURRENT_MANAGED_ACCESS
    91,  // CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM
    99,  // HOST_REGISTER_SUPPORTED
    100, // PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES
    101, // DIRECT_MANAGED_MEM_ACCESS_FROM_HOST
    102, // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    103, // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
    104, // HANDLE_TYPE_WIN32_HANDLE_SUPPORTED
    105, // HANDLE_TYPE_WIN32_KMT_HANDLE_SUPPORTED
    113, // READ_ONLY_HOST_REGISTER_SUPPORTED
    114, // TIMELINE_SEMAPHORE_INTEROP_SUPPORTED
    115, // MEMORY_POOLS_SUPPORTED
    116, // GPU_DIRECT_RDMA_SUPPORTED
    119, // MEMPOOL_SUPPORTED_HANDLE_TYPES
    124, // DMA_BUF_SUPPORTED
    125, // IPC_EVENT_SUPPORTED
    128, // HANDLE_TYPE_FABRIC_SUPPORTED
    132, // MULTICAST_SUPPORTED
    141, // HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    142, // HOST_NUMA_MEMORY_POOLS_SUPPORTED
    143, // HOST_NUMA_MULTINODE_IPC_SUPPORTED
    144, // HOST_MEMORY_POOLS_SUPPORTED
    145, // HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
    146, // HOST_ALLOC_DMA_BUF_SUPPORTED
];

/// Queries everything once, at start-up.
pub fn device_info(device: sys::CUdevice) -> Result<CuDeviceInfoReply, DriverError> {
    let mut name = [0 as c_char; 256];
    // SAFETY: `name` has room for the length passed.
    check_call("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device)
    })?;
    let name: Vec<u8> = name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    // SAFETY: a C struct of 16 bytes; zero is valid.
    let mut uuid: sys::CUuuid = unsafe { std::mem::zeroed() };
    // SAFETY: `uuid` is valid for writes.
    check_call("cuDeviceGetUuid_v2", unsafe {
        sys::cuDeviceGetUuid_v2(&mut uuid, device)
    })?;
    let mut total = 0usize;
    // SAFETY: `total` is valid for writes.
    check_call("cuDeviceTotalMem_v2", unsafe {
        sys::cuDeviceTotalMem_v2(&mut total, device)
    })?;
    let attributes = (0..DEVICE_ATTRIBUTE_COUNT)
        .map(|attribute| {
            if HIDDEN.contains(&attribute) {
                return 0;
            }
            match device_attribute(device, attribute) {
                Ok(value) => i64::from(value) as u64,
                Err(_) => ATTRIBUTE_UNSUPPORTED,
            }
        })
        .collect();
    Ok(CuDeviceInfoReply {
        name,
        uuid: uuid.bytes.iter().map(|b| *b as u8).collect(),
        total_mem: total as u64,
        attributes,
    })
}
