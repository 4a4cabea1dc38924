//! Device-to-host copies into page-locked memory return at once, as CUDA's
//! do: the backend copies into its own staging on the stream, and the bytes
//! are fetched into the program's memory once a synchronization (or a
//! query that found the work complete) shows the stream reached the copy
//! (`order.rs` knows which). A program may only read such memory after
//! one, so it never sees the difference. Copies into pageable memory stay
//! synchronous, as CUDA defines them.

use std::ffi::c_void;

use vgpu_protocol::messages::{CuMemcpyCollect, CuMemcpyDtoHStart};
use vgpu_protocol::Request;

use crate::ffi::{bytes_mut, CuResult};
use crate::order::Horizon;
use crate::runtime::{cuda_status, lock, Runtime};

/// Bytes of copies not yet landed beyond which a copy waits instead (the
/// backend's staging is bounded too).
const MAX_PENDING_BYTES: usize = 512 << 20;
/// Copies not yet landed beyond which a copy waits instead.
const MAX_PENDING_COPIES: usize = 1024;

/// Starts `cuMemcpyDtoHAsync` of `n` bytes at `src` into page-locked `dst`
/// on `stream`; `Ok(false)` when it must be a waiting copy instead (the
/// limits above).
pub(crate) fn start(
    rt: &Runtime,
    ctx: u64,
    dst: *mut c_void,
    src: u64,
    n: usize,
    stream: u64,
) -> CuResult<bool> {
    {
        let order = lock(&rt.order);
        if order.pending_copies() >= MAX_PENDING_COPIES
            || order.pending_bytes() + n > MAX_PENDING_BYTES
        {
            return Ok(false);
        }
    }
    let copy = rt.new_handle();
    rt.on_stream(ctx, stream, |order, seq| {
        rt.defer(Request::CuMemcpyDtoHStart(CuMemcpyDtoHStart {
            ctx,
            stream,
            src,
            size: n as u64,
            copy,
        }))?;
        order.add_copy(ctx, stream, seq, copy, dst as usize, n);
        Ok(true)
    })
}

/// A synchronization of what `horizon` covers: answered here where the
/// caller found all it waits for `known_done` (an earlier synchronization
/// or query that returned covered it, so it failed nowhere; the driver
/// answers such a call from its own bookkeeping too), else `request` goes
/// to the device. Errors of batched calls come back either way.
pub(crate) fn synchronize(
    rt: &Runtime,
    horizon: Horizon,
    known_done: bool,
    request: Request,
) -> CuResult<()> {
    if known_done && rt.maps_nothing() {
        return rt.deferred();
    }
    rt.call(request)?;
    reached(rt, &horizon)
}

/// A synchronization that waited for `horizon` returned: fetches every
/// copy it covers. The first failure is reported after the others landed.
pub(crate) fn reached(rt: &Runtime, horizon: &Horizon) -> CuResult<()> {
    let landed = {
        let mut order = lock(&rt.order);
        order.reached(horizon);
        order.take_landed()
    };
    let mut first_error = Ok(());
    for copy in landed {
        let fetched = bytes_mut(copy.dst as *mut c_void, copy.len).and_then(|buf| {
            crate::trace::round_trip("CuMemcpyCollect", || {
                rt.client.call_with_in(buf, |data, start| {
                    Request::CuMemcpyCollect(CuMemcpyCollect {
                        copy: copy.copy,
                        offset: start,
                        data,
                    })
                })
            })
            .map(drop)
            .map_err(cuda_status)
        });
        if let Err(e) = fetched {
            log::warn!("a device-to-host copy of {} bytes was lost: {e}", copy.len);
            first_error = first_error.and(Err(e));
        }
    }
    first_error
}
