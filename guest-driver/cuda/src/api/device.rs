//! Initialization, driver version and device queries, answered from what
//! the backend reported once (`CuDeviceInfo`).

use std::ffi::{c_char, c_int};

use vgpu_protocol::cuda::ATTRIBUTE_UNSUPPORTED;

use crate::ffi::{c_str, entry, put, put_c_string, result, CUdevice, CuResult};
use crate::runtime::{init, rt, session};

/// `CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY`: the backend reads 0 (it does
/// not map guest memory), but this library emulates mapped memory
/// (`crate::mapped`).
const CAN_MAP_HOST_MEMORY: c_int = 19;
/// `CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED`: the backend reads 0, but
/// this library keeps pools of its own (`crate::pools`).
const MEMORY_POOLS_SUPPORTED: c_int = 115;
/// `CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID`, `_PCI_BUS_ID`, `_PCI_DEVICE_ID`.
const PCI_DOMAIN_ID: c_int = 50;
const PCI_BUS_ID: c_int = 33;
const PCI_DEVICE_ID: c_int = 34;

/// `cuDeviceGetAttribute`'s answer.
pub(crate) fn attribute(device: CUdevice, attribute: c_int) -> CuResult<c_int> {
    let info = rt()?.device(device)?;
    if attribute == CAN_MAP_HOST_MEMORY || attribute == MEMORY_POOLS_SUPPORTED {
        return Ok(1);
    }
    let index = usize::try_from(attribute).map_err(|_| result::ERROR_INVALID_VALUE)?;
    match info.attributes.get(index) {
        Some(&ATTRIBUTE_UNSUPPORTED) | None => Err(result::ERROR_INVALID_VALUE),
        Some(&value) => Ok(value as i64 as c_int),
    }
}

entry! {
    /// `cuInit`: opens the session with the vgpu device.
    fn cuInit(flags: u32) {
        if flags != 0 {
            return Err(result::ERROR_INVALID_VALUE);
        }
        init()
    }
}

/// `cuDriverGetVersion`'s answer.
pub(crate) fn driver_version() -> CuResult<c_int> {
    let reported = session()?.init.driver_version;
    Ok(c_int::try_from(reported).unwrap_or(c_int::MAX))
}

/// `cuDeviceGetCount`'s answer.
pub(crate) fn device_count() -> CuResult<c_int> {
    Ok(c_int::try_from(rt()?.init.device_count).unwrap_or(0))
}

/// `cuDeviceGetUuid`'s answer.
pub(crate) fn uuid(device: CUdevice) -> CuResult<[u8; 16]> {
    let info = rt()?.device(device)?;
    let mut bytes = [0u8; 16];
    let n = info.uuid.len().min(16);
    bytes[..n].copy_from_slice(&info.uuid[..n]);
    Ok(bytes)
}

entry! {
    fn cuDriverGetVersion(version: *mut c_int) {
        put(version, driver_version()?)
    }
}

entry! {
    fn cuDeviceGetCount(count: *mut c_int) {
        put(count, device_count()?)
    }
}

entry! {
    fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) {
        let count = rt()?.init.device_count;
        if ordinal < 0 || ordinal as u32 >= count {
            return Err(result::ERROR_INVALID_DEVICE);
        }
        put(device, ordinal)
    }
}

entry! {
    fn cuDeviceGetName(name: *mut c_char, len: c_int, device: CUdevice) {
        put_c_string(name, len, &rt()?.device(device)?.name)
    }
}

entry! {
    fn cuDeviceGetUuid_v2(out: *mut [u8; 16], device: CUdevice) | cuDeviceGetUuid {
        put(out, uuid(device)?)
    }
}

entry! {
    fn cuDeviceTotalMem_v2(bytes: *mut usize, device: CUdevice) {
        put(bytes, rt()?.device(device)?.total_mem as usize)
    }
}

entry! {
    fn cuDeviceGetAttribute(value: *mut c_int, attrib: c_int, device: CUdevice) {
        put(value, attribute(device, attrib)?)
    }
}

entry! {
    fn cuDeviceComputeCapability(major: *mut c_int, minor: *mut c_int, device: CUdevice) {
        put(major, attribute(device, 75)?)?;
        put(minor, attribute(device, 76)?)
    }
}

/// The device's PCI domain, bus and device numbers (its attributes).
pub(crate) fn pci_address(device: CUdevice) -> CuResult<(c_int, c_int, c_int)> {
    Ok((
        attribute(device, PCI_DOMAIN_ID)?,
        attribute(device, PCI_BUS_ID)?,
        attribute(device, PCI_DEVICE_ID)?,
    ))
}

entry! {
    fn cuDeviceGetPCIBusId(bus_id: *mut c_char, len: c_int, device: CUdevice) {
        let (domain, bus, slot) = pci_address(device)?;
        let id = format!("{domain:04x}:{bus:02x}:{slot:02x}.0");
        put_c_string(bus_id, len, id.as_bytes())
    }
}

/// A PCI address as `cuDeviceGetByPCIBusId` takes it: `domain:bus:device`
/// or `bus:device`, each part hexadecimal, with an optional `.function`.
/// `None` when malformed.
fn parse_pci_bus_id(id: &str) -> Option<(u32, u32, u32)> {
    let id = id
        .split_once('.')
        .map_or(id, |(address, _function)| address);
    let parts: Vec<u32> = id
        .split(':')
        .map(|part| u32::from_str_radix(part, 16).ok())
        .collect::<Option<_>>()?;
    match parts[..] {
        [domain, bus, device] => Some((domain, bus, device)),
        [bus, device] => Some((0, bus, device)),
        _ => None,
    }
}

entry! {
    fn cuDeviceGetByPCIBusId(dev: *mut CUdevice, pci_bus_id: *const c_char) {
        let id = std::str::from_utf8(c_str(pci_bus_id)?).map_err(|_| result::ERROR_INVALID_VALUE)?;
        let (domain, bus, slot) = parse_pci_bus_id(id).ok_or(result::ERROR_INVALID_VALUE)?;
        for device in 0..device_count()? {
            if pci_address(device)? == (domain as c_int, bus as c_int, slot as c_int) {
                return put(dev, device);
            }
        }
        Err(result::ERROR_INVALID_DEVICE)
    }
}

/// `CUdevprop` (deprecated, still used by old samples).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CuDevProp {
    pub max_threads_per_block: c_int,
    pub max_threads_dim: [c_int; 3],
    pub max_grid_size: [c_int; 3],
    pub shared_mem_per_block: c_int,
    pub total_constant_memory: c_int,
    pub simd_width: c_int,
    pub mem_pitch: c_int,
    pub regs_per_block: c_int,
    pub clock_rate: c_int,
    pub texture_align: c_int,
}

entry! {
    fn cuDeviceGetProperties(prop: *mut CuDevProp, device: CUdevice) {
        let a = |n| attribute(device, n);
        put(
            prop,
            CuDevProp {
                max_threads_per_block: a(1)?,
                max_threads_dim: [a(2)?, a(3)?, a(4)?],
                max_grid_size: [a(5)?, a(6)?, a(7)?],
                shared_mem_per_block: a(8)?,
                total_constant_memory: a(9)?,
                simd_width: a(10)?,
                mem_pitch: a(11)?,
                regs_per_block: a(12)?,
                clock_rate: a(13)?,
                texture_align: a(14)?,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_bus_ids_parse_in_the_drivers_forms() {
        assert_eq!(parse_pci_bus_id("0000:1b:00.0"), Some((0, 0x1b, 0)));
        assert_eq!(parse_pci_bus_id("FFFF:FF:FF.F"), Some((0xffff, 0xff, 0xff)));
        assert_eq!(parse_pci_bus_id("1b:00"), Some((0, 0x1b, 0)));
        assert_eq!(parse_pci_bus_id("fake:id"), None);
        assert_eq!(parse_pci_bus_id(""), None);
        assert_eq!(parse_pci_bus_id("1:2:3:4"), None);
    }
}
