//! Stream-ordered allocation and memory pools (`cuMemAllocAsync`,
//! `cuMemFreeAsync`, `cuMemPool*`, the device's default and current pool),
//! on the library's own pools (`crate::pools`): memory comes from
//! `cuMemAlloc` in chunks, blocks are carved out of them and return to
//! their pool when freed, so a program that allocates and frees on a
//! stream makes no round trip once its pool holds enough. Pools cannot be shared between processes (no export handle
//! types), and live on the vGPU's one device.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::ffi::{entry, get, handle, put, result, CUdevice, CUdeviceptr, CuResult, Handle};
use crate::pools::{Pool, Pools, BLOCK_ALIGNMENT};
use crate::runtime::{lock, require_context, rt, stream_handle, Runtime};

use super::memory::{alloc_device, free_device};

/// `CUmemAllocationType` and `CUmemLocationType`.
const ALLOCATION_PINNED: c_int = 1;
const LOCATION_DEVICE: c_int = 1;
/// `CUmemAccess_flags`.
const ACCESS_READWRITE: c_int = 3;

/// `CUmemLocation`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemLocation {
    pub type_: c_int,
    pub id: c_int,
}

/// `CUmemPoolProps` (its reserved tail is not read).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemPoolProps {
    pub alloc_type: c_int,
    pub handle_types: c_int,
    pub location: MemLocation,
    pub win32_security_attributes: *mut c_void,
    pub max_size: usize,
    pub usage: u16,
}

/// `CUmemAccessDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MemAccessDesc {
    pub location: MemLocation,
    pub flags: c_int,
}

fn pools() -> MutexGuard<'static, Pools> {
    static POOLS: OnceLock<Mutex<Pools>> = OnceLock::new();
    lock(POOLS.get_or_init(Mutex::default))
}

/// The vGPU's device named by `location`.
fn device_location(location: MemLocation) -> CuResult<()> {
    if location.type_ != LOCATION_DEVICE {
        return Err(result::ERROR_NOT_SUPPORTED);
    }
    check_device(location.id)
}

fn check_device(device: CUdevice) -> CuResult<()> {
    rt()?.device(device).map(drop)
}

/// CUDA 13's pool calls name a device by location and an allocation type:
/// the vGPU's device, page-locked device memory.
fn device_pool_kind(location: *const MemLocation, kind: c_int) -> CuResult<()> {
    device_location(get(location)?)?;
    if kind != ALLOCATION_PINNED {
        return Err(result::ERROR_INVALID_VALUE);
    }
    Ok(())
}

/// Makes `pool` the device's current pool, if the program may name it.
fn set_current(pool: u64) -> CuResult<()> {
    let mut pools = pools();
    if pools.live(pool).is_none() {
        return Err(result::ERROR_INVALID_VALUE);
    }
    pools.current = Some(pool);
    Ok(())
}

/// The device's default pool, made at its first use.
fn default_pool(rt: &Runtime, pools: &mut Pools) -> u64 {
    if let Some(pool) = pools.default {
        return pool;
    }
    let pool = rt.new_handle();
    pools.pools.insert(pool, Pool::new());
    pools.default = Some(pool);
    pool
}

fn current_pool(rt: &Runtime, pools: &mut Pools) -> u64 {
    match pools.current {
        Some(pool) => pool,
        None => default_pool(rt, pools),
    }
}

/// A chunk of `size` bytes from the backend; when it is out of memory,
/// the pools' idle chunks go back first and the allocation is tried once
/// more (the driver's pools would carve the request out of them).
fn alloc_chunk(rt: &Runtime, ctx: u64, size: u64) -> CuResult<u64> {
    match alloc_device(rt, ctx, size as usize) {
        Err(result::ERROR_OUT_OF_MEMORY) => {
            let idle: Vec<u64> = pools()
                .pools
                .values_mut()
                .flat_map(|p| p.release_above(0))
                .collect();
            release(rt, idle)?;
            alloc_device(rt, ctx, size as usize)
        }
        other => other,
    }
}

fn alloc_from(pool: u64, dptr: *mut CUdeviceptr, size: usize, stream: u64) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    if size == 0 {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let stream = stream_handle(stream);
    let size = (size as u64)
        .checked_next_multiple_of(BLOCK_ALIGNMENT)
        .ok_or(result::ERROR_INVALID_VALUE)?;
    let taken = pools()
        .live(pool)
        .ok_or(result::ERROR_INVALID_VALUE)?
        .take(size, ctx, stream);
    let ptr = match taken {
        Some(ptr) => ptr,
        None => {
            // Made now: earlier than its stream reaches the call, which the
            // program cannot tell.
            let chunk = Pool::chunk_for(size).ok_or(result::ERROR_OUT_OF_MEMORY)?;
            let start = alloc_chunk(rt, ctx, chunk)?;
            let block = pools().live(pool).map(|p| {
                p.grew(start, chunk, ctx);
                p.take(size, ctx, stream)
            });
            match block {
                Some(Some(ptr)) => ptr,
                // Destroyed meanwhile by another thread.
                _ => {
                    free_device(rt, start)?;
                    return Err(result::ERROR_INVALID_VALUE);
                }
            }
        }
    };
    put(dptr, ptr)
}

/// Gives released chunks back to the backend.
fn release(rt: &Runtime, chunks: Vec<u64>) -> CuResult<()> {
    chunks.into_iter().try_for_each(|ptr| free_device(rt, ptr))
}

/// A synchronization of `ctx` (of `stream` only, if given) returned: the
/// frees before it are done, and pools shrink to their release threshold.
pub(crate) fn synchronized(ctx: u64, stream: Option<u64>) -> CuResult<()> {
    let released: Vec<u64> = {
        let mut pools = pools();
        let released = pools
            .pools
            .values_mut()
            .flat_map(|pool| {
                pool.reached(ctx, stream);
                pool.release_over_threshold()
            })
            .collect();
        pools.sweep();
        released
    };
    if released.is_empty() {
        return Ok(());
    }
    release(rt()?, released)
}

/// Returns a pool's block freed on `stream`; `false` if no pool handed out
/// `ptr`. A destroyed pool gives back its chunks as they empty.
fn give_back(rt: &Runtime, ptr: u64, stream: u64) -> CuResult<bool> {
    let released = {
        let mut pools = pools();
        let Some(pool) = pools.owner(ptr) else {
            // A block freed twice, where its chunk starts: the chunk holds
            // other blocks, which a free would take with it.
            if pools.chunk_at(ptr) {
                log::debug!("free of {ptr:#x}: a pool's chunk, no block handed out");
                return Err(result::ERROR_INVALID_VALUE);
            }
            return Ok(false);
        };
        pool.give_back(ptr, stream);
        let released = if pool.destroyed {
            pool.release_over_threshold()
        } else {
            Vec::new()
        };
        pools.sweep();
        released
    };
    release(rt, released).map(|()| true)
}

/// `cuMemFree` of a pool's block: it returns to its pool as freed on the
/// NULL stream (the backend's allocation is the chunk, not the block).
/// `false` if no pool handed out `ptr`.
pub(crate) fn free_block(rt: &Runtime, ptr: u64) -> CuResult<bool> {
    give_back(rt, ptr, 0)
}

entry! {
    fn cuMemAllocAsync(dptr: *mut CUdeviceptr, size: usize, stream: Handle) | cuMemAllocAsync_ptsz {
        let rt = rt()?;
        let pool = current_pool(rt, &mut pools());
        alloc_from(pool, dptr, size, handle(stream))
    }
}

entry! {
    fn cuMemAllocFromPoolAsync(dptr: *mut CUdeviceptr, size: usize, pool: Handle, stream: Handle) | cuMemAllocFromPoolAsync_ptsz {
        alloc_from(handle(pool), dptr, size, handle(stream))
    }
}

entry! {
    fn cuMemFreeAsync(dptr: CUdeviceptr, stream: Handle) | cuMemFreeAsync_ptsz {
        let rt = rt()?;
        require_context()?;
        let stream = stream_handle(handle(stream));
        if give_back(rt, dptr, stream)? {
            return Ok(());
        }
        // A `cuMemAlloc` allocation: freed as `cuMemFree` frees it (the
        // backend waits for the device first).
        free_device(rt, dptr)
    }
}

entry! {
    fn cuDeviceGetDefaultMemPool(pool: *mut Handle, device: CUdevice) {
        check_device(device)?;
        let rt = rt()?;
        put(pool, default_pool(rt, &mut pools()) as Handle)
    }
}

entry! {
    fn cuDeviceGetMemPool(pool: *mut Handle, device: CUdevice) {
        check_device(device)?;
        let rt = rt()?;
        put(pool, current_pool(rt, &mut pools()) as Handle)
    }
}

entry! {
    fn cuDeviceSetMemPool(device: CUdevice, pool: Handle) {
        check_device(device)?;
        set_current(handle(pool))
    }
}

entry! {
    /// CUDA 13's form of `cuDeviceGetDefaultMemPool`, by location.
    fn cuMemGetDefaultMemPool(pool: *mut Handle, location: *const MemLocation, kind: c_int) {
        device_pool_kind(location, kind)?;
        let rt = rt()?;
        put(pool, default_pool(rt, &mut pools()) as Handle)
    }
}

entry! {
    fn cuMemGetMemPool(pool: *mut Handle, location: *const MemLocation, kind: c_int) {
        device_pool_kind(location, kind)?;
        let rt = rt()?;
        put(pool, current_pool(rt, &mut pools()) as Handle)
    }
}

entry! {
    fn cuMemSetMemPool(location: *const MemLocation, kind: c_int, pool: Handle) {
        device_pool_kind(location, kind)?;
        set_current(handle(pool))
    }
}

entry! {
    fn cuMemPoolCreate(pool: *mut Handle, props: *const MemPoolProps) {
        let props = get(props)?;
        if props.alloc_type != ALLOCATION_PINNED {
            return Err(result::ERROR_INVALID_VALUE);
        }
        device_location(props.location)?;
        if props.handle_types != 0 {
            // Pools shareable with other processes (IPC) are not offered.
            return Err(result::ERROR_NOT_SUPPORTED);
        }
        let rt = rt()?;
        let handle = rt.new_handle();
        pools().pools.insert(handle, Pool::new());
        put(pool, handle as Handle)
    }
}

entry! {
    fn cuMemPoolDestroy(pool: Handle) {
        let rt = rt()?;
        let released = {
            let mut pools = pools();
            if pools.default == Some(handle(pool)) {
                return Err(result::ERROR_INVALID_VALUE);
            }
            let gone = pools.live(handle(pool)).ok_or(result::ERROR_INVALID_VALUE)?;
            // Blocks still handed out stay valid until freed: their chunks
            // go as they empty.
            gone.destroyed = true;
            let released = gone.release_over_threshold();
            if pools.current == Some(handle(pool)) {
                pools.current = None;
            }
            pools.sweep();
            released
        };
        release(rt, released)
    }
}

entry! {
    fn cuMemPoolTrimTo(pool: Handle, min_bytes_to_keep: usize) {
        let rt = rt()?;
        let released = pools()
            .live(handle(pool))
            .ok_or(result::ERROR_INVALID_VALUE)?
            .release_above(min_bytes_to_keep as u64);
        release(rt, released)
    }
}

/// Whether `attribute` is one of the 32-bit (reuse) attributes.
fn is_flag(attribute: c_int) -> bool {
    (crate::pools::REUSE_FOLLOW_EVENT_DEPENDENCIES
        ..=crate::pools::REUSE_ALLOW_INTERNAL_DEPENDENCIES)
        .contains(&attribute)
}

entry! {
    fn cuMemPoolSetAttribute(pool: Handle, attribute: c_int, value: *mut c_void) {
        let value = if is_flag(attribute) {
            get(value.cast::<c_int>())? as u64
        } else {
            get(value.cast::<u64>())?
        };
        let mut pools = pools();
        let pool = pools.live(handle(pool)).ok_or(result::ERROR_INVALID_VALUE)?;
        if pool.set_attribute(attribute, value) {
            Ok(())
        } else {
            Err(result::ERROR_INVALID_VALUE)
        }
    }
}

entry! {
    fn cuMemPoolGetAttribute(pool: Handle, attribute: c_int, value: *mut c_void) {
        let answer = pools()
            .live(handle(pool))
            .ok_or(result::ERROR_INVALID_VALUE)?
            .attribute(attribute)
            .ok_or(result::ERROR_INVALID_VALUE)?;
        if is_flag(attribute) {
            put(value.cast::<c_int>(), answer as c_int)
        } else {
            put(value.cast::<u64>(), answer)
        }
    }
}

entry! {
    fn cuMemPoolSetAccess(pool: Handle, map: *const MemAccessDesc, count: usize) {
        if pools().live(handle(pool)).is_none() {
            return Err(result::ERROR_INVALID_VALUE);
        }
        for i in 0..count {
            // The caller passes `count` descriptors; `get` refuses NULL.
            let desc = get(map.wrapping_add(i))?;
            device_location(desc.location)?;
            if desc.flags != ACCESS_READWRITE {
                // The owning device always has read-write access.
                return Err(result::ERROR_INVALID_DEVICE);
            }
        }
        Ok(())
    }
}

entry! {
    fn cuMemPoolGetAccess(flags: *mut c_int, pool: Handle, location: *const MemLocation) {
        if pools().live(handle(pool)).is_none() {
            return Err(result::ERROR_INVALID_VALUE);
        }
        device_location(get(location)?)?;
        put(flags, ACCESS_READWRITE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structs_have_the_drivers_layout() {
        assert_eq!(std::mem::size_of::<MemLocation>(), 8);
        assert_eq!(std::mem::offset_of!(MemPoolProps, location), 8);
        assert_eq!(
            std::mem::offset_of!(MemPoolProps, win32_security_attributes),
            16
        );
        assert_eq!(std::mem::offset_of!(MemPoolProps, max_size), 24);
        assert_eq!(std::mem::size_of::<MemAccessDesc>(), 12);
        assert!(is_flag(1) && is_flag(3) && !is_flag(4));
    }
}
