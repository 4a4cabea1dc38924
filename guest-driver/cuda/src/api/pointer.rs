//! Pointer attributes (`cuPointerGetAttribute(s)`), answered in the guest
//! from what the library handed out: device ranges, mapped host ranges and
//! page-locked host allocations. Triton (`torch.compile`) asks each tensor
//! argument's `DEVICE_POINTER` before every launch and fails on anything
//! but success or `CUDA_ERROR_INVALID_VALUE`.
//!
//! Answered: the memory type, the device and host pointers, the device
//! ordinal, the range's start and size, and the buffer id of a
//! `cuMemAlloc` allocation (cuFFT reads it for each buffer it allocates;
//! ids count up from 1 and are never reused). Not answered
//! (`CUDA_ERROR_NOT_SUPPORTED`): the owning context, managed-memory and
//! IPC flags, P2P tokens and the rest, which this library does not track. The device side of mapped memory reads as device memory
//! (natively it is the host allocation itself).

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::ffi::{put, result, CUdeviceptr, CuResult};
use crate::runtime::{lock, rt, Runtime};

/// `CUpointer_attribute` values answered here.
const MEMORY_TYPE: c_int = 2;
const DEVICE_POINTER: c_int = 3;
const HOST_POINTER: c_int = 4;
const BUFFER_ID: c_int = 7;
const DEVICE_ORDINAL: c_int = 9;
const RANGE_START_ADDR: c_int = 11;
const RANGE_SIZE: c_int = 12;

/// `CUmemorytype`.
const MEMORYTYPE_HOST: u32 = 1;
const MEMORYTYPE_DEVICE: u32 = 2;

/// What an address is, as far as this library knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Inside a device range `[start, start + size)`; allocations have a
    /// buffer id, module globals none.
    Device {
        start: u64,
        size: u64,
        buffer_id: Option<u64>,
    },
    /// Inside host memory of this library's or the program's that is
    /// page-locked; `device` is where a mapped range's copy lives.
    Host {
        start: u64,
        size: u64,
        device: Option<u64>,
    },
    /// Nothing this library handed out.
    Unknown,
}

/// One attribute's value, written at the width the driver writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    U32(u32),
    I32(i32),
    U64(u64),
}

/// The value of `attribute` for `ptr`, which is of `kind`.
fn answer(kind: Kind, ptr: u64, attribute: c_int) -> CuResult<Value> {
    let (start, size) = match kind {
        Kind::Device { start, size, .. } | Kind::Host { start, size, .. } => (start, size),
        Kind::Unknown => return Err(result::ERROR_INVALID_VALUE),
    };
    let offset = ptr.saturating_sub(start);
    match (attribute, kind) {
        (MEMORY_TYPE, Kind::Device { .. }) => Ok(Value::U32(MEMORYTYPE_DEVICE)),
        (MEMORY_TYPE, _) => Ok(Value::U32(MEMORYTYPE_HOST)),
        (DEVICE_POINTER, Kind::Device { .. }) => Ok(Value::U64(ptr)),
        (DEVICE_POINTER, Kind::Host { device, .. }) => device
            .map(|d| Value::U64(d + offset))
            // Page-locked but not mapped: no device address here (natively
            // unified addressing gives the host address).
            .ok_or(result::ERROR_NOT_SUPPORTED),
        (HOST_POINTER, Kind::Host { .. }) => Ok(Value::U64(ptr)),
        (HOST_POINTER, _) => Err(result::ERROR_INVALID_VALUE),
        (DEVICE_ORDINAL, _) => Ok(Value::I32(0)),
        (RANGE_START_ADDR, _) => Ok(Value::U64(start)),
        (RANGE_SIZE, _) => Ok(Value::U64(size)),
        (BUFFER_ID, Kind::Device { buffer_id, .. }) => {
            buffer_id.map(Value::U64).ok_or(result::ERROR_NOT_SUPPORTED)
        }
        _ => Err(result::ERROR_NOT_SUPPORTED),
    }
}

/// The default written for an address this library does not know, in
/// `cuPointerGetAttributes` (which then still succeeds, as the driver
/// documents): zeros, and for the ordinal -2, what cudart reports for such
/// memory (`cudaInvalidDeviceId`; the driver's own value was not measured).
fn unknown_default(attribute: c_int) -> CuResult<Value> {
    match attribute {
        MEMORY_TYPE => Ok(Value::U32(0)),
        DEVICE_POINTER | HOST_POINTER | RANGE_START_ADDR | RANGE_SIZE => Ok(Value::U64(0)),
        DEVICE_ORDINAL => Ok(Value::I32(-2)),
        _ => Err(result::ERROR_NOT_SUPPORTED),
    }
}

/// Allocation start → buffer id.
fn buffer_ids() -> &'static Mutex<HashMap<u64, u64>> {
    static IDS: OnceLock<Mutex<HashMap<u64, u64>>> = OnceLock::new();
    IDS.get_or_init(Mutex::default)
}

/// Gives the allocation at `start` a buffer id no allocation had before.
pub(crate) fn allocated(start: u64) {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    lock(buffer_ids()).insert(start, id);
}

/// Forgets the buffer id of the allocation at `start`.
pub(crate) fn freed(start: u64) {
    lock(buffer_ids()).remove(&start);
}

/// What `ptr` is: a device range, a mapped or page-locked host range.
fn classify(rt: &Runtime, ptr: u64) -> Kind {
    if let Some((&start, &size)) = lock(&rt.ranges).range(..=ptr).next_back() {
        if ptr < start.saturating_add(size.max(1)) {
            let buffer_id = lock(buffer_ids()).get(&start).copied();
            return Kind::Device {
                start,
                size,
                buffer_id,
            };
        }
    }
    let mapped = lock(&rt.mapped)
        .all()
        .into_iter()
        .find(|t| (t.host as u64..t.host as u64 + t.len as u64).contains(&ptr));
    if let Some(t) = mapped {
        return Kind::Host {
            start: t.host as u64,
            size: t.len as u64,
            device: Some(t.device),
        };
    }
    lock(&rt.host_allocations)
        .iter()
        .map(|(&start, &len)| (start as u64, len as u64))
        .find(|&(start, len)| (start..start + len).contains(&ptr))
        .map_or(Kind::Unknown, |(start, size)| Kind::Host {
            start,
            size,
            device: None,
        })
}

/// Writes `value` at `data`, at its own width.
fn write(data: *mut c_void, value: Value) -> CuResult<()> {
    match value {
        Value::U32(v) => put(data.cast::<u32>(), v),
        Value::I32(v) => put(data.cast::<i32>(), v),
        Value::U64(v) => put(data.cast::<u64>(), v),
    }
}

crate::ffi::entry! {
    fn cuPointerGetAttribute(data: *mut c_void, attribute: c_int, ptr: CUdeviceptr) {
        let rt = rt()?;
        let value = answer(classify(rt, ptr), ptr, attribute)
            .inspect_err(|_| log::debug!("cuPointerGetAttribute: attribute {attribute} of {ptr:#x}"))?;
        write(data, value)
    }
}

crate::ffi::entry! {
    fn cuPointerGetAttributes(count: c_uint, attributes: *const c_int, data: *mut *mut c_void, ptr: CUdeviceptr) {
        let rt = rt()?;
        if count == 0 || attributes.is_null() || data.is_null() {
            return Err(result::ERROR_INVALID_VALUE);
        }
        let kind = classify(rt, ptr);
        let mut values = Vec::with_capacity(count as usize);
        for i in 0..count as usize {
            // SAFETY: the caller passes `count` attributes.
            let attribute = unsafe { *attributes.add(i) };
            values.push(match kind {
                Kind::Unknown => unknown_default(attribute)?,
                _ => answer(kind, ptr, attribute)?,
            });
        }
        // Nothing is written unless every attribute has an answer.
        for (i, value) in values.into_iter().enumerate() {
            // SAFETY: the caller passes `count` output pointers.
            let out = unsafe { *data.add(i) };
            write(out, value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: Kind = Kind::Device {
        start: 0x7000_0000,
        size: 0x1000,
        buffer_id: Some(4),
    };

    #[test]
    fn device_memory_answers_its_type_pointer_and_range() {
        let p = 0x7000_0010;
        assert_eq!(
            answer(DEV, p, MEMORY_TYPE),
            Ok(Value::U32(MEMORYTYPE_DEVICE))
        );
        assert_eq!(answer(DEV, p, DEVICE_POINTER), Ok(Value::U64(p)));
        assert_eq!(
            answer(DEV, p, RANGE_START_ADDR),
            Ok(Value::U64(0x7000_0000))
        );
        assert_eq!(answer(DEV, p, RANGE_SIZE), Ok(Value::U64(0x1000)));
        assert_eq!(answer(DEV, p, DEVICE_ORDINAL), Ok(Value::I32(0)));
        assert_eq!(
            answer(DEV, p, HOST_POINTER),
            Err(result::ERROR_INVALID_VALUE)
        );
        assert_eq!(answer(DEV, p, BUFFER_ID), Ok(Value::U64(4)));
    }

    #[test]
    fn buffer_ids_are_never_reused_for_a_new_allocation_at_the_same_address() {
        allocated(0x5000);
        let first = lock(buffer_ids()).get(&0x5000).copied();
        freed(0x5000);
        assert_eq!(lock(buffer_ids()).get(&0x5000), None);
        allocated(0x5000);
        let second = lock(buffer_ids()).get(&0x5000).copied();
        assert!(first.is_some() && second.is_some() && first != second);
        let global = Kind::Device {
            start: 0x6000,
            size: 8,
            buffer_id: None,
        };
        assert_eq!(
            answer(global, 0x6000, BUFFER_ID),
            Err(result::ERROR_NOT_SUPPORTED)
        );
    }

    #[test]
    fn mapped_host_memory_gives_its_device_copy_at_the_same_offset() {
        let mapped = Kind::Host {
            start: 0x1000,
            size: 64,
            device: Some(0x9000),
        };
        assert_eq!(
            answer(mapped, 0x1008, MEMORY_TYPE),
            Ok(Value::U32(MEMORYTYPE_HOST))
        );
        assert_eq!(
            answer(mapped, 0x1008, DEVICE_POINTER),
            Ok(Value::U64(0x9008))
        );
        assert_eq!(answer(mapped, 0x1008, HOST_POINTER), Ok(Value::U64(0x1008)));
        let pinned = Kind::Host {
            start: 0x1000,
            size: 64,
            device: None,
        };
        assert_eq!(
            answer(pinned, 0x1008, DEVICE_POINTER),
            Err(result::ERROR_NOT_SUPPORTED)
        );
    }

    #[test]
    fn unknown_pointers_are_invalid_alone_and_defaults_in_a_batch() {
        assert_eq!(
            answer(Kind::Unknown, 5, DEVICE_POINTER),
            Err(result::ERROR_INVALID_VALUE)
        );
        assert_eq!(unknown_default(MEMORY_TYPE), Ok(Value::U32(0)));
        assert_eq!(unknown_default(DEVICE_POINTER), Ok(Value::U64(0)));
    }

    #[test]
    fn untracked_attributes_are_not_supported() {
        const CONTEXT: c_int = 1;
        const IS_MANAGED: c_int = 8;
        assert_eq!(
            answer(DEV, 0x7000_0000, CONTEXT),
            Err(result::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(
            answer(DEV, 0x7000_0000, IS_MANAGED),
            Err(result::ERROR_NOT_SUPPORTED)
        );
        assert_eq!(
            unknown_default(IS_MANAGED),
            Err(result::ERROR_NOT_SUPPORTED)
        );
    }
}
