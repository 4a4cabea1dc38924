//! Streams. Creation and destruction are batched (the library picks the
//! handle); waits go to the backend and report earlier deferred errors,
//! then land the device-to-host copies they covered (`readback.rs`). A
//! query of a stream with nothing put on it since a synchronization covered
//! its work is answered here, without a round trip.

use std::ffi::{c_int, c_uint};

use vgpu_protocol::messages::{
    CuStreamCreate, CuStreamDestroy, CuStreamQuery, CuStreamSynchronize, CuStreamWaitEvent,
};
use vgpu_protocol::Request;

use crate::ffi::{entry, handle, put, CuResult, Handle};
use crate::runtime::{lock, require_context, rt, stream_handle};

fn create(pstream: *mut Handle, flags: c_uint, priority: c_int) -> CuResult<()> {
    let rt = rt()?;
    let ctx = require_context()?;
    let stream = rt.new_handle();
    rt.defer(Request::CuStreamCreate(CuStreamCreate {
        stream,
        ctx,
        flags,
        priority,
    }))?;
    lock(&rt.order).create_stream(ctx, stream, flags, priority);
    put(pstream, crate::ffi::to_ptr(stream))
}

entry! {
    fn cuStreamCreate(pstream: *mut Handle, flags: c_uint) {
        create(pstream, flags, 0)
    }
}

entry! {
    fn cuStreamCreateWithPriority(pstream: *mut Handle, flags: c_uint, priority: c_int) {
        create(pstream, flags, priority)
    }
}

entry! {
    fn cuStreamDestroy_v2(stream: Handle) | cuStreamDestroy {
        let rt = rt()?;
        rt.defer(Request::CuStreamDestroy(CuStreamDestroy { stream: handle(stream) }))?;
        lock(&rt.order).destroy_stream(handle(stream));
        Ok(())
    }
}

entry! {
    fn cuStreamSynchronize(stream: Handle) | cuStreamSynchronize_ptsz {
        let rt = rt()?;
        let ctx = require_context()?;
        let stream = stream_handle(handle(stream));
        // Idle as a query finds it (the NULL stream with its context's
        // blocking streams).
        let (horizon, done) = {
            let order = lock(&rt.order);
            (order.stream_horizon(ctx, stream), order.stream_idle(ctx, stream))
        };
        let request = Request::CuStreamSynchronize(CuStreamSynchronize { ctx, stream });
        super::readback::synchronize(rt, horizon, done, request)?;
        super::mem_pool::synchronized(ctx, Some(stream))
    }
}

entry! {
    fn cuStreamQuery(stream: Handle) | cuStreamQuery_ptsz {
        let rt = rt()?;
        let ctx = require_context()?;
        let stream = stream_handle(handle(stream));
        let horizon = {
            let order = lock(&rt.order);
            if order.stream_idle(ctx, stream) {
                return rt.deferred();
            }
            order.stream_horizon(ctx, stream)
        };
        rt.call(Request::CuStreamQuery(CuStreamQuery { ctx, stream }))?;
        super::readback::reached(rt, &horizon)
    }
}

entry! {
    fn cuStreamWaitEvent(stream: Handle, event: Handle, flags: c_uint) | cuStreamWaitEvent_ptsz {
        let rt = rt()?;
        let ctx = require_context()?;
        let (stream, event) = (stream_handle(handle(stream)), handle(event));
        let mut order = lock(&rt.order);
        order.wait(ctx, stream, event);
        rt.defer(Request::CuStreamWaitEvent(CuStreamWaitEvent {
            ctx,
            stream,
            event,
            flags,
        }))
    }
}

/// `CU_STREAM_CAPTURE_STATUS_NONE`: stream capture is not forwarded
/// (`cuStreamBeginCapture` answers `CUDA_ERROR_NOT_SUPPORTED`), so no
/// stream is ever capturing.
const CAPTURE_STATUS_NONE: c_int = 0;

entry! {
    fn cuStreamIsCapturing(_stream: Handle, status: *mut c_int) | cuStreamIsCapturing_ptsz {
        rt()?;
        put(status, CAPTURE_STATUS_NONE)
    }
}

fn capture_info(
    status: *mut c_int,
    id: *mut u64,
    graph: *mut Handle,
    deps: *mut *const Handle,
    edges: *mut *const std::ffi::c_void,
    count: *mut usize,
) -> CuResult<()> {
    rt()?;
    put(status, CAPTURE_STATUS_NONE)?;
    crate::ffi::put_opt(id, 0);
    crate::ffi::put_opt(graph, std::ptr::null_mut());
    crate::ffi::put_opt(deps, std::ptr::null());
    crate::ffi::put_opt(edges, std::ptr::null());
    crate::ffi::put_opt(count, 0);
    Ok(())
}

entry! {
    fn cuStreamGetCaptureInfo_v2(_stream: Handle, status: *mut c_int, id: *mut u64, graph: *mut Handle, deps: *mut *const Handle, count: *mut usize) | cuStreamGetCaptureInfo_v2_ptsz {
        capture_info(status, id, graph, deps, std::ptr::null_mut(), count)
    }
}

entry! {
    fn cuStreamGetCaptureInfo_v3(_stream: Handle, status: *mut c_int, id: *mut u64, graph: *mut Handle, deps: *mut *const Handle, edges: *mut *const std::ffi::c_void, count: *mut usize) | cuStreamGetCaptureInfo_v3_ptsz {
        capture_info(status, id, graph, deps, edges, count)
    }
}
