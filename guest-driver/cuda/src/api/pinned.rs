//! Page-locked host allocations in the transport's shared heap: the
//! backend registers each block with its driver once (`CuHostRegister`,
//! the block named in place), so copies to and from it are DMA straight
//! between the program's memory and the device, as natively. Without a
//! heap (or with it full) `cuMemAllocHost` falls back to ordinary memory.

use std::ffi::c_void;

use vgpu_protocol::messages::{CuHostRegister, CuHostUnregister};
use vgpu_protocol::Request;

use crate::ffi::{result, CuResult};
use crate::runtime::{cuda_status, lock, Runtime};

/// A registered block of at least `size` bytes (whole pages) in the heap,
/// and its length; `None` when there is no heap, no room, or the backend
/// could not register it.
pub(crate) fn alloc(rt: &Runtime, size: usize) -> Option<(*mut c_void, usize)> {
    let (start, len) = lock(&rt.heap).as_mut()?.alloc(size)?;
    let block = rt.new_handle();
    // SAFETY: the block is `len` bytes of the heap's shared mapping, which
    // lives as long as the session, and nothing else uses it yet.
    let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, len) };
    let registered = crate::trace::round_trip("CuHostRegister", || {
        rt.client.call_with_out(bytes, |data, _| {
            Request::CuHostRegister(CuHostRegister { block, data })
        })
    })
    .map_err(cuda_status);
    if let Err(e) = registered {
        log::warn!("page-locking a {len}-byte host allocation failed ({e}); using ordinary memory");
        if let Some(heap) = lock(&rt.heap).as_mut() {
            heap.free(start);
        }
        return None;
    }
    lock(&rt.heap_blocks).insert(start, block);
    Some((start as *mut c_void, len))
}

/// Frees `p` if it is a heap block (`None` if it is not): the backend
/// waits for work that may use it, then unpins it.
pub(crate) fn free(rt: &Runtime, p: *mut c_void) -> Option<CuResult<()>> {
    let block = lock(&rt.heap_blocks).remove(&(p as usize))?;
    let unregistered = match rt.call(Request::CuHostUnregister(CuHostUnregister { block })) {
        // A backend restored from a checkpoint never registered it (its
        // copies took the staged path): nothing to undo.
        Err(result::ERROR_HOST_MEMORY_NOT_REGISTERED) => Ok(()),
        other => other.map(drop),
    };
    if let Some(heap) = lock(&rt.heap).as_mut() {
        heap.free(p as usize);
    }
    Some(unregistered)
}
