//! Device memory, copies and fills. Copies to the device are batched (their
//! bytes travel with the batch, or at once when large). Copies to the host
//! follow CUDA's rules: into pageable memory, or without a stream, they
//! wait for the data; `cuMemcpyDtoHAsync` into page-locked memory returns
//! at once. In the transport's page-locked heap (`pinned.rs`) the backend's
//! DMA writes it in place in the stream's time; elsewhere its bytes land at
//! the next synchronization that covers it (`readback.rs`). Mapped host
//! memory (`CU_MEMHOSTALLOC_DEVICEMAP`) is kept equal to a device
//! allocation of its own (`crate::mapped`).

use std::ffi::{c_uint, c_void};

use vgpu_protocol::cuda::{CuMemInfoReply, CuRangeReply};
use vgpu_protocol::messages::{
    CuMemAlloc, CuMemFree, CuMemGetInfo, CuMemcpyDtoD, CuMemcpyDtoH, CuMemcpyDtoHSignalled,
    CuMemcpyHtoD, CuMemcpyHtoDSignalled, CuMemset, CuMemsetD2D, CuStreamSynchronize,
};
use vgpu_protocol::Request;

use super::signal::Signals;
use crate::ffi::{
    bytes, bytes_mut, entry, handle, put, put_opt, result, CUdeviceptr, CuResult, Handle,
};
use crate::runtime::{cuda_status, decode, lock, require_context, rt, stream_handle, Runtime};

const PAGE: usize = 4096;

/// A copy to the device; `synchronous` for the entry points without a
/// stream, which return once page-locked source memory was read.
pub(crate) fn copy_to_device(
    dst: u64,
    src: *const c_void,
    n: usize,
    stream: u64,
    synchronous: bool,
) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    let data = bytes(src, n)?;
    if n == 0 {
        return Ok(());
    }
    // Small copies are batched (their bytes travel with the batch).
    let signalled = n > vgpu_transport::client::MAX_STAGED_DATA;
    if synchronous && signalled && rt.in_heap(src as usize, n) {
        if let Some(signals) = super::signal::signals(rt) {
            if copy_to_device_signalled(rt, signals, ctx, dst, data)? {
                return Ok(());
            }
        }
    }
    rt.on_stream(ctx, stream, |_, _| {
        crate::trace::batched("CuMemcpyHtoD (or a round trip if large)");
        rt.client
            .defer_with_out(data, |data, start| {
                Request::CuMemcpyHtoD(CuMemcpyHtoD {
                    ctx,
                    stream,
                    dst: dst + start,
                    data,
                })
            })
            .map_err(cuda_status)
    })
}

/// A copy to the host; `asynchronous` for the `Async` entry points, which
/// return at once where the destination is page-locked.
pub(crate) fn copy_to_host(
    dst: *mut c_void,
    src: u64,
    n: usize,
    stream: u64,
    asynchronous: bool,
) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    let buf = bytes_mut(dst, n)?;
    if n == 0 {
        return Ok(());
    }
    rt.mapped_to_device()?;
    let request = |data, start| {
        Request::CuMemcpyDtoH(CuMemcpyDtoH {
            ctx,
            stream,
            src: src + start,
            data,
        })
    };
    let mirror = if rt.maps_nothing() {
        None
    } else {
        lock(&rt.mapped).device_range(dst as usize, n)
    };
    if let Some(mirror) = mirror {
        return copy_to_mapped(rt, ctx, mirror, src, n, stream, asynchronous);
    }
    let in_heap = rt.in_heap(dst as usize, n);
    if asynchronous && stream != 0 && in_heap {
        // Registered with the backend's driver: it copies in place, in the
        // stream's time, and answers at once.
        rt.on_stream(ctx, stream, |_, _| {
            crate::trace::round_trip("CuMemcpyDtoH (async, page-locked heap)", || {
                rt.client.call_with_in(buf, request)
            })
            .map_err(cuda_status)
        })?;
        return rt.deferred();
    }
    if asynchronous
        && !in_heap
        && rt.is_pinned(dst as usize, n)
        && super::readback::start(rt, ctx, dst, src, n, stream)?
    {
        return Ok(());
    }
    // The backend waits for the stream (the NULL stream: a synchronous
    // copy), so the copy covers what the stream had before it.
    let (horizon, lands_here) = rt.on_stream(ctx, stream, |order, _| {
        Ok((
            order.stream_horizon(ctx, stream),
            order.pending_overlaps(dst as usize, n),
        ))
    })?;
    if lands_here {
        // Earlier copies into these bytes land first, so that this copy's
        // bytes are the ones left, as the stream order has it.
        let wait = Request::CuStreamSynchronize(CuStreamSynchronize { ctx, stream });
        super::readback::synchronize(rt, horizon.clone(), false, wait)?;
    }
    let signalled = match super::signal::signals(rt).filter(|_| in_heap && !asynchronous) {
        Some(signals) => copy_to_host_signalled(rt, signals, ctx, &mut *buf, src, stream)?,
        None => false,
    };
    if !signalled {
        crate::trace::round_trip("CuMemcpyDtoH", || rt.client.call_with_in(buf, request))
            .map_err(cuda_status)?;
    }
    rt.deferred()?;
    super::readback::reached(rt, &horizon)?;
    rt.mapped_to_host()
}

/// A copy into mapped host memory (`mapped.rs`): it goes to the range's
/// device copy, in the stream's order, and reaches the host with the
/// device's other writes after the next call that waits for the device,
/// the synchronous copy's own wait first. Landed in the host pages
/// directly, its bytes would be overwritten by the older device copy at
/// that wait.
fn copy_to_mapped(
    rt: &Runtime,
    ctx: u64,
    mirror: u64,
    src: u64,
    n: usize,
    stream: u64,
    asynchronous: bool,
) -> CuResult<()> {
    copy_on_device(mirror, src, n, stream)?;
    if asynchronous {
        return rt.deferred();
    }
    let horizon = lock(&rt.order).stream_horizon(ctx, stream);
    let wait = Request::CuStreamSynchronize(CuStreamSynchronize { ctx, stream });
    super::readback::synchronize(rt, horizon, false, wait)
}

/// A synchronous copy from page-locked heap memory, watched for its
/// signal (`signal.rs`); the NULL stream's earlier work goes first, as
/// the copy is on it. `false`: the backend does not know the message (an
/// older one), nothing was copied.
fn copy_to_device_signalled(
    rt: &Runtime,
    signals: &Signals,
    ctx: u64,
    dst: u64,
    data: &[u8],
) -> CuResult<bool> {
    let signal = signals.take();
    let reply = rt.on_stream(ctx, 0, |_, _| {
        crate::trace::round_trip("CuMemcpyHtoDSignalled", || {
            rt.client.call_with_out(data, |data, start| {
                Request::CuMemcpyHtoDSignalled(CuMemcpyHtoDSignalled {
                    ctx,
                    stream: 0,
                    dst: dst + start,
                    data,
                    signal_block: signal.block,
                    signal_offset: signal.offset,
                    value: signal.value,
                })
            })
        })
        .map_err(cuda_status)
    });
    if !super::signal::finish(rt, signals, signal, reply, ctx, 0)? {
        return Ok(false);
    }
    rt.deferred().map(|()| true)
}

/// A synchronous copy into page-locked heap memory, watched for its
/// signal (`signal.rs`); `false` as for `copy_to_device_signalled`. The
/// caller put it in the stream order and finishes it as any synchronous
/// copy to the host.
fn copy_to_host_signalled(
    rt: &Runtime,
    signals: &Signals,
    ctx: u64,
    buf: &mut [u8],
    src: u64,
    stream: u64,
) -> CuResult<bool> {
    let signal = signals.take();
    let reply = crate::trace::round_trip("CuMemcpyDtoHSignalled", || {
        rt.client.call_with_in(buf, |data, start| {
            Request::CuMemcpyDtoHSignalled(CuMemcpyDtoHSignalled {
                ctx,
                stream,
                src: src + start,
                data,
                signal_block: signal.block,
                signal_offset: signal.offset,
                value: signal.value,
            })
        })
    })
    .map_err(cuda_status);
    super::signal::finish(rt, signals, signal, reply, ctx, stream)
}

pub(crate) fn copy_on_device(dst: u64, src: u64, n: usize, stream: u64) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    rt.on_stream(ctx, stream, |_, _| {
        rt.defer(Request::CuMemcpyDtoD(CuMemcpyDtoD {
            ctx,
            stream,
            dst,
            src,
            size: n as u64,
        }))
    })
}

fn memset(dst: u64, value: u32, elem_size: u32, count: usize, stream: u64) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    rt.on_stream(ctx, stream, |_, _| {
        rt.defer(Request::CuMemset(CuMemset {
            ctx,
            stream,
            dst,
            value,
            elem_size,
            count: count as u64,
        }))
    })
}

/// `cuMemsetD2D*`: `height` rows of `width` elements, `pitch` bytes apart.
fn memset_2d(
    dst: u64,
    pitch: usize,
    value: u32,
    elem_size: u32,
    (width, height): (usize, usize),
    stream: u64,
) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    rt.on_stream(ctx, stream, |_, _| {
        rt.defer(Request::CuMemsetD2D(CuMemsetD2D {
            ctx,
            stream,
            dst,
            pitch: pitch as u64,
            value,
            elem_size,
            width: width as u64,
            height: height as u64,
        }))
    })
}

/// `cuMemcpy` on unified addresses: device ranges are the library's own.
fn copy_any(dst: u64, src: u64, n: usize, stream: u64, asynchronous: bool) -> CuResult<()> {
    let rt = rt()?;
    match (rt.is_device(dst, n as u64), rt.is_device(src, n as u64)) {
        (true, true) => copy_on_device(dst, src, n, stream),
        (true, false) => {
            copy_to_device(dst, src as usize as *const c_void, n, stream, !asynchronous)
        }
        (false, true) => copy_to_host(dst as usize as *mut c_void, src, n, stream, asynchronous),
        (false, false) => {
            let from = bytes(src as usize as *const c_void, n)?.to_vec();
            bytes_mut(dst as usize as *mut c_void, n)?.copy_from_slice(&from);
            Ok(())
        }
    }
}

/// A device allocation of `size` bytes in `ctx`.
pub(crate) fn alloc_device(rt: &Runtime, ctx: u64, size: usize) -> CuResult<u64> {
    if size == 0 {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let reply: CuRangeReply = decode(&rt.call(Request::CuMemAlloc(CuMemAlloc {
        ctx,
        size: size as u64,
    }))?)?;
    lock(&rt.ranges).insert(reply.ptr, reply.size);
    super::pointer::allocated(reply.ptr, ctx);
    Ok(reply.ptr)
}

/// Frees a device allocation this library made.
pub(crate) fn free_device(rt: &Runtime, ptr: u64) -> CuResult<()> {
    if lock(&rt.ranges).remove(&ptr).is_none() {
        log::debug!("cuMemFree_v2: {ptr:#x} is no allocation's start");
        return Err(result::ERROR_INVALID_VALUE);
    }
    super::pointer::freed(ptr);
    rt.defer(Request::CuMemFree(CuMemFree { ptr }))
}

entry! {
    fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, size: usize) {
        let rt = rt()?;
        let ctx = require_context()?;
        put(dptr, alloc_device(rt, ctx, size)?)
    }
}

entry! {
    fn cuMemFree_v2(dptr: CUdeviceptr) {
        let rt = rt()?;
        if dptr == 0 {
            // cudart's `cudaFree(NULL)`, which cuBLAS calls in
            // `cublasCreate` to start its context: the driver answers
            // success, and cuBLAS fails to start on anything else.
            return Ok(());
        }
        if super::mem_pool::free_block(rt, dptr)? {
            return Ok(());
        }
        free_device(rt, dptr)
    }
}

entry! {
    fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) {
        let ctx = require_context()?;
        let reply: CuMemInfoReply =
            decode(&rt()?.call(Request::CuMemGetInfo(CuMemGetInfo { ctx }))?)?;
        put(free, reply.free as usize)?;
        put(total, reply.total as usize)
    }
}

entry! {
    fn cuMemGetAddressRange_v2(base: *mut CUdeviceptr, size: *mut usize, dptr: CUdeviceptr) {
        let rt = rt()?;
        let ranges = lock(&rt.ranges);
        match ranges.range(..=dptr).next_back() {
            Some((&start, &len)) if dptr < start + len.max(1) => {
                put_opt(base, start);
                put_opt(size, len as usize);
                Ok(())
            }
            _ => Err(result::ERROR_NOT_FOUND),
        }
    }
}

entry! {
    fn cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize) | cuMemcpyHtoD_v2_ptds {
        copy_to_device(dst, src, n, 0, true)
    }
}

entry! {
    fn cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, stream: Handle) | cuMemcpyHtoDAsync_v2_ptsz {
        copy_to_device(dst, src, n, stream_handle(handle(stream)), false)
    }
}

entry! {
    fn cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) | cuMemcpyDtoH_v2_ptds {
        copy_to_host(dst, src, n, 0, false)
    }
}

entry! {
    fn cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, stream: Handle) | cuMemcpyDtoHAsync_v2_ptsz {
        copy_to_host(dst, src, n, stream_handle(handle(stream)), true)
    }
}

entry! {
    fn cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) | cuMemcpyDtoD_v2_ptds {
        copy_on_device(dst, src, n, 0)
    }
}

entry! {
    fn cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: Handle) | cuMemcpyDtoDAsync_v2_ptsz {
        copy_on_device(dst, src, n, stream_handle(handle(stream)))
    }
}

entry! {
    fn cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: usize) | cuMemcpy_ptds {
        copy_any(dst, src, n, 0, false)
    }
}

entry! {
    fn cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: Handle) | cuMemcpyAsync_ptsz {
        copy_any(dst, src, n, stream_handle(handle(stream)), true)
    }
}

entry! {
    fn cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize) | cuMemsetD8_v2_ptds {
        memset(dst, value.into(), 1, n, 0)
    }
}

entry! {
    fn cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize) | cuMemsetD16_v2_ptds {
        memset(dst, value.into(), 2, n, 0)
    }
}

entry! {
    fn cuMemsetD32_v2(dst: CUdeviceptr, value: u32, n: usize) | cuMemsetD32_v2_ptds {
        memset(dst, value, 4, n, 0)
    }
}

entry! {
    fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, stream: Handle) | cuMemsetD8Async_ptsz {
        memset(dst, value.into(), 1, n, stream_handle(handle(stream)))
    }
}

entry! {
    fn cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, stream: Handle) | cuMemsetD16Async_ptsz {
        memset(dst, value.into(), 2, n, stream_handle(handle(stream)))
    }
}

entry! {
    fn cuMemsetD32Async(dst: CUdeviceptr, value: u32, n: usize, stream: Handle) | cuMemsetD32Async_ptsz {
        memset(dst, value, 4, n, stream_handle(handle(stream)))
    }
}

entry! {
    fn cuMemsetD2D8_v2(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize) | cuMemsetD2D8_v2_ptds {
        memset_2d(dst, pitch, value.into(), 1, (width, height), 0)
    }
}

entry! {
    fn cuMemsetD2D8Async(
        dst: CUdeviceptr,
        pitch: usize,
        value: u8,
        width: usize,
        height: usize,
        stream: Handle,
    ) | cuMemsetD2D8Async_ptsz {
        let stream = stream_handle(handle(stream));
        memset_2d(dst, pitch, value.into(), 1, (width, height), stream)
    }
}

entry! {
    fn cuMemsetD2D16_v2(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize) | cuMemsetD2D16_v2_ptds {
        memset_2d(dst, pitch, value.into(), 2, (width, height), 0)
    }
}

entry! {
    fn cuMemsetD2D16Async(
        dst: CUdeviceptr,
        pitch: usize,
        value: u16,
        width: usize,
        height: usize,
        stream: Handle,
    ) | cuMemsetD2D16Async_ptsz {
        let stream = stream_handle(handle(stream));
        memset_2d(dst, pitch, value.into(), 2, (width, height), stream)
    }
}

entry! {
    fn cuMemsetD2D32_v2(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize) | cuMemsetD2D32_v2_ptds {
        memset_2d(dst, pitch, value, 4, (width, height), 0)
    }
}

entry! {
    fn cuMemsetD2D32Async(
        dst: CUdeviceptr,
        pitch: usize,
        value: u32,
        width: usize,
        height: usize,
        stream: Handle,
    ) | cuMemsetD2D32Async_ptsz {
        let stream = stream_handle(handle(stream));
        memset_2d(dst, pitch, value, 4, (width, height), stream)
    }
}

fn host_alloc(pp: *mut *mut c_void, size: usize) -> CuResult<()> {
    let rt = rt()?;
    require_context()?;
    if size == 0 {
        return Err(result::ERROR_INVALID_VALUE);
    }
    if let Some((ptr, layout)) = super::pinned::alloc(rt, size) {
        lock(&rt.host_allocations).insert(ptr as usize, layout);
        lock(&rt.pinned).insert(ptr as usize, layout);
        return put(pp, ptr);
    }
    let layout = size
        .checked_next_multiple_of(PAGE)
        .ok_or(result::ERROR_OUT_OF_MEMORY)?;
    let mut ptr: *mut c_void = std::ptr::null_mut();
    // SAFETY: `ptr` is valid for writes; the alignment is a power of two
    // and a multiple of the pointer size.
    if unsafe { libc::posix_memalign(&mut ptr, PAGE, layout) } != 0 {
        return Err(result::ERROR_OUT_OF_MEMORY);
    }
    lock(&rt.host_allocations).insert(ptr as usize, layout);
    lock(&rt.pinned).insert(ptr as usize, layout);
    put(pp, ptr)
}

entry! {
    fn cuMemAllocHost_v2(pp: *mut *mut c_void, size: usize) {
        host_alloc(pp, size)
    }
}

/// `CU_MEMHOSTALLOC_DEVICEMAP`, `CU_MEMHOSTREGISTER_DEVICEMAP`.
const DEVICEMAP: c_uint = 0x02;

/// Gives `[host, host + size)` a device allocation that stands for it.
fn map_to_device(rt: &Runtime, host: usize, size: usize, owned: bool) -> CuResult<()> {
    let ctx = require_context()?;
    let device = alloc_device(rt, ctx, size)?;
    if rt.map_host(host, size, device, ctx, owned) {
        return Ok(());
    }
    free_device(rt, device)?;
    Err(result::ERROR_HOST_MEMORY_ALREADY_REGISTERED)
}

/// Drops the device allocation standing for the mapped range at `host`;
/// whether there was one.
fn unmap(rt: &Runtime, host: usize) -> CuResult<bool> {
    match rt.unmap_host(host) {
        Some(region) => free_device(rt, region.device).map(|()| true),
        None => Ok(false),
    }
}

entry! {
    fn cuMemHostAlloc(pp: *mut *mut c_void, size: usize, flags: c_uint) {
        host_alloc(pp, size)?;
        if flags & DEVICEMAP == 0 {
            return Ok(());
        }
        // SAFETY: `host_alloc` just wrote the pointer.
        let host = unsafe { *pp };
        let rt = rt()?;
        map_to_device(rt, host as usize, size, true).inspect_err(|_| {
            if lock(&rt.host_allocations).remove(&(host as usize)).is_some() {
                lock(&rt.pinned).remove(&(host as usize));
                super::pointer::host_released(host as usize);
                if super::pinned::free(rt, host).is_none() {
                    // SAFETY: allocated by `host_alloc` above, freed once.
                    unsafe { libc::free(host) };
                }
            }
        })
    }
}

entry! {
    /// The device pointer of mapped host memory (any address inside it).
    fn cuMemHostGetDevicePointer_v2(pdptr: *mut CUdeviceptr, p: *mut c_void, flags: c_uint) {
        let rt = rt()?;
        if flags != 0 {
            return Err(result::ERROR_INVALID_VALUE);
        }
        let device = lock(&rt.mapped).device_pointer(p as usize);
        put(pdptr, device.ok_or(result::ERROR_INVALID_VALUE)?)
    }
}

entry! {
    fn cuMemFreeHost(p: *mut c_void) {
        let rt = rt()?;
        if p.is_null() {
            // As the driver answers (measured: `results-runtime-h100.txt`).
            return Ok(());
        }
        if lock(&rt.host_allocations).remove(&(p as usize)).is_none() {
            return Err(result::ERROR_INVALID_VALUE);
        }
        lock(&rt.pinned).remove(&(p as usize));
        super::pointer::host_released(p as usize);
        unmap(rt, p as usize)?;
        if let Some(freed) = super::pinned::free(rt, p) {
            return freed;
        }
        // SAFETY: `p` came from `posix_memalign` in `host_alloc` and is
        // freed once (it was just removed from the table).
        unsafe { libc::free(p) };
        Ok(())
    }
}

entry! {
    /// Remembers the range as page-locked, so copies into it may return
    /// at once as CUDA's do; with `CU_MEMHOSTREGISTER_DEVICEMAP` the range
    /// is also mapped as `cuMemHostAlloc`'s is.
    fn cuMemHostRegister_v2(p: *mut c_void, size: usize, flags: c_uint) | cuMemHostRegister {
        let rt = rt()?;
        if p.is_null() || size == 0 {
            return Err(result::ERROR_INVALID_VALUE);
        }
        if rt.is_pinned(p as usize, 1) || rt.is_pinned(p as usize + size - 1, 1) {
            return Err(result::ERROR_HOST_MEMORY_ALREADY_REGISTERED);
        }
        if flags & DEVICEMAP != 0 {
            // The program's memory stays readable and writable until it
            // unregisters it, as the driver requires.
            map_to_device(rt, p as usize, size, false)?;
        }
        lock(&rt.pinned).insert(p as usize, size);
        Ok(())
    }
}

entry! {
    fn cuMemHostUnregister(p: *mut c_void) {
        let rt = rt()?;
        if p.is_null() {
            return Err(result::ERROR_INVALID_VALUE);
        }
        if lock(&rt.host_allocations).contains_key(&(p as usize))
            || lock(&rt.pinned).remove(&(p as usize)).is_none()
        {
            // `cuMemHostAlloc`'s memory was never registered.
            return Err(result::ERROR_HOST_MEMORY_NOT_REGISTERED);
        }
        super::pointer::host_released(p as usize);
        unmap(rt, p as usize).map(drop)
    }
}
