//! Pointer attributes (`cuPointerGetAttribute(s)`), answered in the guest
//! from what the library handed out: device ranges, mapped host ranges and
//! page-locked host allocations. Triton (`torch.compile`) asks each tensor
//! argument's `DEVICE_POINTER` before every launch and fails on anything
//! but success or `CUDA_ERROR_INVALID_VALUE`; cudart's
//! `cudaPointerGetAttributes` (CuPy asks it of every host array it copies)
//! asks several at once and fails unless each has an answer.
//!
//! Every attribute the driver has (1 to 21) is answered at the width the
//! driver writes it (measured: booleans are 4 bytes, the P2P tokens 12),
//! with the driver's values, except where vgpu's memory differs and the
//! honest answer differs too: device memory is not usable with legacy
//! CUDA IPC, GPUDirect RDMA or hardware decompression (0), its mapping is
//! the range itself, and its owning context is the one it was allocated
//! in. Page-locked host memory answers its own address as the device
//! pointer, as with unified addressing natively; only mapped memory
//! (`CU_MEMHOSTALLOC_DEVICEMAP`) can be read by kernels through vgpu.
//! Pointers this library does not know answer `CUDA_ERROR_INVALID_VALUE`
//! alone and the driver's defaults in a batch.

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use crate::ffi::{put, result, CUdeviceptr, CuResult};
use crate::runtime::{current_context, lock, rt, Runtime};

/// `CUpointer_attribute` values.
const CONTEXT: c_int = 1;
const MEMORY_TYPE: c_int = 2;
const DEVICE_POINTER: c_int = 3;
const HOST_POINTER: c_int = 4;
const P2P_TOKENS: c_int = 5;
const SYNC_MEMOPS: c_int = 6;
const BUFFER_ID: c_int = 7;
const IS_MANAGED: c_int = 8;
const DEVICE_ORDINAL: c_int = 9;
const IS_LEGACY_CUDA_IPC_CAPABLE: c_int = 10;
const RANGE_START_ADDR: c_int = 11;
const RANGE_SIZE: c_int = 12;
const MAPPED: c_int = 13;
const ALLOWED_HANDLE_TYPES: c_int = 14;
const IS_GPU_DIRECT_RDMA_CAPABLE: c_int = 15;
const ACCESS_FLAGS: c_int = 16;
const MEMPOOL_HANDLE: c_int = 17;
const MAPPING_SIZE: c_int = 18;
const MAPPING_BASE_ADDR: c_int = 19;
const MEMORY_BLOCK_ID: c_int = 20;
const IS_HW_DECOMPRESS_CAPABLE: c_int = 21;

/// `CUmemorytype`.
const MEMORYTYPE_HOST: u32 = 1;
const MEMORYTYPE_DEVICE: u32 = 2;
/// `CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE`.
const ACCESS_READWRITE: u32 = 3;

/// What an address is, as far as this library knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Inside a device range `[start, start + size)`; allocations have a
    /// buffer id and the context they were made in, module globals none.
    Device {
        start: u64,
        size: u64,
        allocation: Option<Allocation>,
    },
    /// Inside host memory of this library's or the program's that is
    /// page-locked; `device` is where a mapped range's copy lives.
    Host {
        start: u64,
        size: u64,
        device: Option<u64>,
        buffer_id: u64,
    },
    /// Nothing this library handed out.
    Unknown,
}

/// What the library recorded of one `cuMemAlloc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Allocation {
    buffer_id: u64,
    ctx: u64,
}

/// One attribute's value, written at the width the driver writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    U32(u32),
    I32(i32),
    U64(u64),
    /// `CUDA_POINTER_ATTRIBUTE_P2P_TOKENS`: a 64-bit and a 32-bit token.
    Tokens(u64, u32),
    /// Success without a value: the driver leaves the output as it was.
    Unwritten,
}

/// The value of `attribute` for `ptr`, which is of `kind`.
fn answer(kind: Kind, ptr: u64, attribute: c_int) -> CuResult<Value> {
    let (start, size) = match kind {
        Kind::Device { start, size, .. } | Kind::Host { start, size, .. } => (start, size),
        Kind::Unknown => return Err(result::ERROR_INVALID_VALUE),
    };
    let offset = ptr.saturating_sub(start);
    let device = matches!(kind, Kind::Device { .. });
    match (attribute, kind) {
        (
            CONTEXT,
            Kind::Device {
                allocation: Some(a),
                ..
            },
        ) => Ok(Value::U64(a.ctx)),
        (CONTEXT, _) => Ok(Value::U64(current_context())),
        (MEMORY_TYPE, _) if device => Ok(Value::U32(MEMORYTYPE_DEVICE)),
        (MEMORY_TYPE, _) => Ok(Value::U32(MEMORYTYPE_HOST)),
        (
            DEVICE_POINTER,
            Kind::Host {
                device: Some(d), ..
            },
        ) => Ok(Value::U64(d + offset)),
        (DEVICE_POINTER, _) => Ok(Value::U64(ptr)),
        (HOST_POINTER, _) if device => Err(result::ERROR_INVALID_VALUE),
        (HOST_POINTER, _) => Ok(Value::U64(ptr)),
        (P2P_TOKENS, _) if device => Ok(Value::Tokens(0, 0)),
        (P2P_TOKENS, _) => Err(result::ERROR_INVALID_VALUE),
        (SYNC_MEMOPS, _) => Ok(Value::U32(device as u32)),
        (
            BUFFER_ID | MEMORY_BLOCK_ID,
            Kind::Device {
                allocation: Some(a),
                ..
            },
        ) => Ok(Value::U64(a.buffer_id)),
        (BUFFER_ID | MEMORY_BLOCK_ID, Kind::Host { buffer_id, .. }) => Ok(Value::U64(buffer_id)),
        (BUFFER_ID | MEMORY_BLOCK_ID, _) => Err(result::ERROR_NOT_SUPPORTED),
        (IS_MANAGED | IS_LEGACY_CUDA_IPC_CAPABLE, _) => Ok(Value::U32(0)),
        (IS_GPU_DIRECT_RDMA_CAPABLE | IS_HW_DECOMPRESS_CAPABLE, _) => Ok(Value::U32(0)),
        (DEVICE_ORDINAL, _) => Ok(Value::I32(0)),
        (RANGE_START_ADDR | MAPPING_BASE_ADDR, _) => Ok(Value::U64(start)),
        (RANGE_SIZE | MAPPING_SIZE, _) => Ok(Value::U64(size)),
        (MAPPED, _) => Ok(Value::U32(1)),
        (ALLOWED_HANDLE_TYPES | MEMPOOL_HANDLE, _) => Ok(Value::U64(0)),
        (ACCESS_FLAGS, _) => Ok(Value::U32(ACCESS_READWRITE)),
        _ => Err(result::ERROR_INVALID_VALUE),
    }
}

/// The default for an address this library does not know, in
/// `cuPointerGetAttributes` (which then still succeeds, as the driver
/// documents), as the driver gives it (measured): the address itself as
/// the host pointer, the range left unwritten, -2 as the ordinal
/// (`cudaInvalidDeviceId`), zeros at each other attribute's width.
fn unknown_default(ptr: u64, attribute: c_int) -> CuResult<Value> {
    match attribute {
        HOST_POINTER => Ok(Value::U64(ptr)),
        RANGE_START_ADDR | RANGE_SIZE => Ok(Value::Unwritten),
        DEVICE_ORDINAL => Ok(Value::I32(-2)),
        P2P_TOKENS => Ok(Value::Tokens(0, 0)),
        MEMORY_TYPE
        | SYNC_MEMOPS
        | IS_MANAGED
        | IS_LEGACY_CUDA_IPC_CAPABLE
        | MAPPED
        | IS_GPU_DIRECT_RDMA_CAPABLE
        | ACCESS_FLAGS
        | IS_HW_DECOMPRESS_CAPABLE => Ok(Value::U32(0)),
        CONTEXT..=IS_HW_DECOMPRESS_CAPABLE => Ok(Value::U64(0)),
        _ => Err(result::ERROR_INVALID_VALUE),
    }
}

/// Allocation start → what was recorded of it.
fn allocations() -> &'static Mutex<HashMap<u64, Allocation>> {
    static IDS: OnceLock<Mutex<HashMap<u64, Allocation>>> = OnceLock::new();
    IDS.get_or_init(Mutex::default)
}

/// Records the allocation at `start`, made in `ctx`, with a buffer id no
/// allocation had before.
pub(crate) fn allocated(start: u64, ctx: u64) {
    let buffer_id = next_buffer_id();
    lock(allocations()).insert(start, Allocation { buffer_id, ctx });
}

/// Page-locked host range start → its buffer id, given at the first
/// question (the driver gives such memory ids too).
fn host_ids() -> &'static Mutex<HashMap<u64, u64>> {
    static IDS: OnceLock<Mutex<HashMap<u64, u64>>> = OnceLock::new();
    IDS.get_or_init(Mutex::default)
}

/// A buffer id no range had before.
fn next_buffer_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Forgets the buffer id of the page-locked host range at `start`.
pub(crate) fn host_released(start: usize) {
    lock(host_ids()).remove(&(start as u64));
}

/// Forgets the buffer id of the allocation at `start`.
pub(crate) fn freed(start: u64) {
    lock(allocations()).remove(&start);
}

/// What `ptr` is: a device range, a mapped or page-locked host range.
fn classify(rt: &Runtime, ptr: u64) -> Kind {
    if let Some((&start, &size)) = lock(&rt.ranges).range(..=ptr).next_back() {
        if ptr < start.saturating_add(size.max(1)) {
            let allocation = lock(allocations()).get(&start).copied();
            return Kind::Device {
                start,
                size,
                allocation,
            };
        }
    }
    let mapped = lock(&rt.mapped)
        .all()
        .into_iter()
        .find(|t| (t.host as u64..t.host as u64 + t.len as u64).contains(&ptr));
    let (start, size, device) = match mapped {
        Some(t) => (t.host as u64, t.len as u64, Some(t.device)),
        None => {
            let pinned = lock(&rt.pinned);
            let Some((&start, &len)) = pinned.range(..=ptr as usize).next_back() else {
                return Kind::Unknown;
            };
            if ptr as usize >= start.saturating_add(len) {
                return Kind::Unknown;
            }
            (start as u64, len as u64, None)
        }
    };
    let buffer_id = *lock(host_ids()).entry(start).or_insert_with(next_buffer_id);
    Kind::Host {
        start,
        size,
        device,
        buffer_id,
    }
}

/// The value of `attribute` in `cuPointerGetAttributes`, which differs
/// from the single question as the driver's does (measured): the P2P
/// tokens are refused, an attribute that does not apply to this memory
/// (the host pointer of device memory) reads as its default, and unknown
/// memory reads as defaults.
fn batch_answer(kind: Kind, ptr: u64, attribute: c_int) -> CuResult<Value> {
    if attribute == P2P_TOKENS {
        return Err(result::ERROR_INVALID_VALUE);
    }
    match (kind, answer(kind, ptr, attribute)) {
        // Not applicable to known memory: zero (the host pointer of
        // device memory; measured).
        (Kind::Device { .. } | Kind::Host { .. }, Err(result::ERROR_INVALID_VALUE)) => {
            unknown_default(0, attribute)
        }
        (Kind::Unknown, _) => unknown_default(ptr, attribute),
        (_, other) => other,
    }
}

/// Writes `value` at `data`, at its own width.
fn write(data: *mut c_void, value: Value) -> CuResult<()> {
    match value {
        Value::U32(v) => put(data.cast::<u32>(), v),
        Value::I32(v) => put(data.cast::<i32>(), v),
        Value::U64(v) => put(data.cast::<u64>(), v),
        Value::Unwritten => Ok(()),
        Value::Tokens(token, va_space) => {
            put(data.cast::<u64>(), token)?;
            // The struct's second field lies 8 bytes in.
            put(data.cast::<u8>().wrapping_add(8).cast::<u32>(), va_space)
        }
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
            values.push(batch_answer(kind, ptr, attribute).inspect_err(|_| {
                log::debug!("cuPointerGetAttributes: attribute {attribute} of {ptr:#x}")
            })?);
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
        allocation: Some(Allocation {
            buffer_id: 4,
            ctx: 0x77,
        }),
    };

    #[test]
    fn device_memory_answers_as_the_driver_does() {
        let p = 0x7000_0010;
        let cases = [
            (CONTEXT, Ok(Value::U64(0x77))),
            (MEMORY_TYPE, Ok(Value::U32(MEMORYTYPE_DEVICE))),
            (DEVICE_POINTER, Ok(Value::U64(p))),
            (HOST_POINTER, Err(result::ERROR_INVALID_VALUE)),
            (P2P_TOKENS, Ok(Value::Tokens(0, 0))),
            (SYNC_MEMOPS, Ok(Value::U32(1))),
            (BUFFER_ID, Ok(Value::U64(4))),
            (IS_MANAGED, Ok(Value::U32(0))),
            (DEVICE_ORDINAL, Ok(Value::I32(0))),
            (RANGE_START_ADDR, Ok(Value::U64(0x7000_0000))),
            (RANGE_SIZE, Ok(Value::U64(0x1000))),
            (MAPPED, Ok(Value::U32(1))),
            (ALLOWED_HANDLE_TYPES, Ok(Value::U64(0))),
            (ACCESS_FLAGS, Ok(Value::U32(ACCESS_READWRITE))),
            (MEMPOOL_HANDLE, Ok(Value::U64(0))),
            (MAPPING_BASE_ADDR, Ok(Value::U64(0x7000_0000))),
            (MEMORY_BLOCK_ID, Ok(Value::U64(4))),
            (22, Err(result::ERROR_INVALID_VALUE)),
        ];
        for (attribute, expected) in cases {
            assert_eq!(answer(DEV, p, attribute), expected, "attribute {attribute}");
        }
    }

    #[test]
    fn buffer_ids_are_never_reused_for_a_new_allocation_at_the_same_address() {
        allocated(0x5000, 1);
        let first = lock(allocations()).get(&0x5000).copied();
        freed(0x5000);
        assert_eq!(lock(allocations()).get(&0x5000), None);
        allocated(0x5000, 1);
        let second = lock(allocations()).get(&0x5000).copied();
        assert!(first.is_some() && second.is_some() && first != second);
        let global = Kind::Device {
            start: 0x6000,
            size: 8,
            allocation: None,
        };
        assert_eq!(
            answer(global, 0x6000, BUFFER_ID),
            Err(result::ERROR_NOT_SUPPORTED)
        );
    }

    #[test]
    fn host_memory_answers_its_own_address_or_its_device_copy() {
        let mapped = Kind::Host {
            start: 0x1000,
            size: 64,
            device: Some(0x9000),
            buffer_id: 9,
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
            buffer_id: 9,
        };
        assert_eq!(answer(pinned, 0x1008, BUFFER_ID), Ok(Value::U64(9)));
        assert_eq!(
            answer(pinned, 0x1008, DEVICE_POINTER),
            Ok(Value::U64(0x1008))
        );
        assert_eq!(answer(pinned, 0x1008, SYNC_MEMOPS), Ok(Value::U32(0)));
        assert_eq!(
            answer(pinned, 0x1008, P2P_TOKENS),
            Err(result::ERROR_INVALID_VALUE)
        );
    }

    #[test]
    fn unknown_pointers_are_invalid_alone_and_defaults_in_a_batch() {
        assert_eq!(
            answer(Kind::Unknown, 5, DEVICE_POINTER),
            Err(result::ERROR_INVALID_VALUE)
        );
        for attribute in CONTEXT..=IS_HW_DECOMPRESS_CAPABLE {
            let default = match unknown_default(5, attribute) {
                Ok(Value::U32(v)) => v == 0,
                Ok(Value::U64(v)) => v == 0 || (attribute == HOST_POINTER && v == 5),
                Ok(Value::Tokens(a, b)) => a == 0 && b == 0,
                Ok(Value::I32(v)) => attribute == DEVICE_ORDINAL && v == -2,
                Ok(Value::Unwritten) => matches!(attribute, RANGE_START_ADDR | RANGE_SIZE),
                Err(_) => false,
            };
            assert!(default, "attribute {attribute}");
        }
        assert_eq!(unknown_default(5, IS_MANAGED), Ok(Value::U32(0)));
        assert_eq!(unknown_default(5, 22), Err(result::ERROR_INVALID_VALUE));
    }

    #[test]
    fn batches_refuse_tokens_and_default_what_does_not_apply() {
        let p = 0x7000_0010;
        assert_eq!(
            batch_answer(DEV, p, P2P_TOKENS),
            Err(result::ERROR_INVALID_VALUE)
        );
        assert_eq!(batch_answer(DEV, p, HOST_POINTER), Ok(Value::U64(0)));
        assert_eq!(batch_answer(DEV, p, DEVICE_POINTER), Ok(Value::U64(p)));
        assert_eq!(
            batch_answer(Kind::Unknown, p, DEVICE_ORDINAL),
            Ok(Value::I32(-2))
        );
        assert_eq!(
            batch_answer(Kind::Unknown, p, HOST_POINTER),
            Ok(Value::U64(p))
        );
        assert_eq!(
            batch_answer(Kind::Unknown, p, RANGE_SIZE),
            Ok(Value::Unwritten)
        );
        assert_eq!(
            batch_answer(Kind::Unknown, p, P2P_TOKENS),
            Err(result::ERROR_INVALID_VALUE)
        );
    }

    #[test]
    fn values_are_written_at_the_drivers_widths() {
        let mut bytes = [0xaau8; 16];
        let at = bytes.as_mut_ptr().cast::<c_void>();
        write(at, Value::U32(1)).unwrap();
        assert_eq!(bytes[..5], [1, 0, 0, 0, 0xaa]);
        write(at, Value::Tokens(0, 0)).unwrap();
        assert_eq!(bytes[..13], [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xaa]);
        bytes[0] = 0xaa;
        write(at, Value::Unwritten).unwrap();
        assert_eq!(bytes[0], 0xaa);
    }
}
