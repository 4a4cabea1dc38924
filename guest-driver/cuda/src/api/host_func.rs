//! Host functions in stream order (`cuLaunchHostFunc`,
//! `cuStreamAddCallback`) and what a stream was created with. A host
//! function runs once the stream's earlier work is done and before its
//! later work starts: here the call waits for the stream (landing the
//! copies that covers), runs the function on the calling thread and only
//! then returns, so later work is sent after it. Unlike the driver's own
//! thread this blocks the caller while the stream drains; a function that
//! waits for something the caller does next would wait forever.

use std::ffi::{c_int, c_uint, c_void};

use vgpu_protocol::cuda::CuIntReply;
use vgpu_protocol::messages::{CuCtxGetStreamPriorityRange, CuStreamSynchronize};
use vgpu_protocol::Request;

use crate::ffi::{entry, handle, put, result, to_ptr, CuResult, Handle};
use crate::runtime::{decode, lock, require_context, rt, stream_handle};

type HostFn = Option<unsafe extern "C" fn(*mut c_void)>;
type StreamCallback = Option<unsafe extern "C" fn(Handle, c_int, *mut c_void)>;

/// Waits for everything put on `stream` so far and lands its copies.
fn drain(stream: Handle) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    let stream = stream_handle(handle(stream));
    let horizon = lock(&rt.order).stream_horizon(ctx, stream);
    rt.call(Request::CuStreamSynchronize(CuStreamSynchronize {
        ctx,
        stream,
    }))?;
    super::readback::reached(rt, &horizon)
}

entry! {
    fn cuLaunchHostFunc(stream: Handle, f: HostFn, data: *mut c_void) | cuLaunchHostFunc_ptsz {
        let f = f.ok_or(result::ERROR_INVALID_VALUE)?;
        drain(stream)?;
        // SAFETY: the program asked for `f(data)` once the stream's earlier
        // work finished, which it has.
        unsafe { f(data) };
        Ok(())
    }
}

entry! {
    /// `flags` must be 0, as the driver requires.
    fn cuStreamAddCallback(stream: Handle, f: StreamCallback, data: *mut c_void, flags: c_uint) | cuStreamAddCallback_ptsz {
        let f = f.ok_or(result::ERROR_INVALID_VALUE)?;
        if flags != 0 {
            return Err(result::ERROR_INVALID_VALUE);
        }
        // An error of the stream's work is the callback's status, as the
        // driver passes it.
        let status = match drain(stream) {
            Ok(()) => 0,
            Err(code) => code,
        };
        // SAFETY: as for `cuLaunchHostFunc`; the stream handle is the
        // program's own.
        unsafe { f(stream, status, data) };
        Ok(())
    }
}

entry! {
    fn cuStreamGetFlags(stream: Handle, flags: *mut c_uint) | cuStreamGetFlags_ptsz {
        let rt = rt()?;
        let info = match stream_handle(handle(stream)) {
            0 => None,
            s => Some(lock(&rt.order).stream_info(s).ok_or(result::ERROR_INVALID_HANDLE)?),
        };
        put(flags, info.map_or(0, |(_, f, _)| f))
    }
}

entry! {
    /// The priority as the device holds it: the one asked for, within the
    /// device's range.
    fn cuStreamGetPriority(stream: Handle, priority: *mut c_int) | cuStreamGetPriority_ptsz {
        let rt = rt()?;
        let asked = match stream_handle(handle(stream)) {
            0 => 0,
            s => lock(&rt.order).stream_info(s).ok_or(result::ERROR_INVALID_HANDLE)?.2,
        };
        let ctx = require_context()?;
        let range: CuIntReply = decode(&rt.call(Request::CuCtxGetStreamPriorityRange(
            CuCtxGetStreamPriorityRange { ctx },
        ))?)?;
        // Numerically lower is higher: `second` (greatest) <= `value` (least).
        put(priority, asked.clamp(range.second, range.value.max(range.second)))
    }
}

entry! {
    fn cuStreamGetCtx(stream: Handle, pctx: *mut Handle) | cuStreamGetCtx_ptsz {
        let rt = rt()?;
        let ctx = match stream_handle(handle(stream)) {
            0 => require_context()?,
            s => lock(&rt.order).stream_info(s).ok_or(result::ERROR_INVALID_HANDLE)?.0,
        };
        put(pctx, to_ptr(ctx))
    }
}
