//! Events: recorded in batches, waited on and timed through the backend.
//! A wait or a query that found the event complete lands the
//! device-to-host copies it covered (`readback.rs`); a query of an event
//! that a synchronization already covered is answered here.

use std::ffi::c_uint;

use vgpu_protocol::cuda::CuElapsedReply;
use vgpu_protocol::messages::{
    CuEventCreate, CuEventDestroy, CuEventElapsedTime, CuEventQuery, CuEventRecord,
    CuEventSynchronize,
};
use vgpu_protocol::Request;

use crate::ffi::{entry, handle, put, result, to_ptr, CuResult, Handle};
use crate::runtime::{decode, lock, require_context, rt, stream_handle};

fn record(event: Handle, stream: Handle) -> CuResult<()> {
    let rt = rt()?;
    let (event, stream) = (handle(event), stream_handle(handle(stream)));
    // The NULL stream is the current context's.
    let ctx = if stream == 0 {
        require_context()?
    } else {
        crate::runtime::current_context()
    };
    let mut order = lock(&rt.order);
    order.record(event, ctx, stream);
    rt.defer(Request::CuEventRecord(CuEventRecord { event, stream }))
}

entry! {
    fn cuEventCreate(pevent: *mut Handle, flags: c_uint) {
        let rt = rt()?;
        let ctx = require_context()?;
        let event = rt.new_handle();
        rt.defer(Request::CuEventCreate(CuEventCreate { event, ctx, flags }))?;
        lock(&rt.order).create_event(event);
        put(pevent, to_ptr(event))
    }
}

entry! {
    fn cuEventDestroy_v2(event: Handle) | cuEventDestroy {
        let rt = rt()?;
        rt.defer(Request::CuEventDestroy(CuEventDestroy { event: handle(event) }))?;
        lock(&rt.order).destroy_event(handle(event));
        Ok(())
    }
}

entry! {
    fn cuEventRecord(event: Handle, stream: Handle) | cuEventRecord_ptsz {
        record(event, stream)
    }
}

entry! {
    /// Only the default flags are supported.
    fn cuEventRecordWithFlags(event: Handle, stream: Handle, flags: c_uint) | cuEventRecordWithFlags_ptsz {
        if flags != 0 {
            return Err(result::ERROR_NOT_SUPPORTED);
        }
        record(event, stream)
    }
}

entry! {
    fn cuEventSynchronize(event: Handle) {
        let rt = rt()?;
        let (horizon, done) = {
            let order = lock(&rt.order);
            (order.event_horizon(handle(event)), order.event_done(handle(event)))
        };
        let request = Request::CuEventSynchronize(CuEventSynchronize { event: handle(event) });
        super::readback::synchronize(rt, horizon, done, request)
    }
}

entry! {
    fn cuEventQuery(event: Handle) {
        let rt = rt()?;
        let horizon = {
            let order = lock(&rt.order);
            if order.event_done(handle(event)) {
                return rt.deferred();
            }
            order.event_horizon(handle(event))
        };
        rt.call(Request::CuEventQuery(CuEventQuery { event: handle(event) }))?;
        super::readback::reached(rt, &horizon)
    }
}

entry! {
    fn cuEventElapsedTime_v2(millis: *mut f32, start: Handle, end: Handle) | cuEventElapsedTime {
        let reply: CuElapsedReply = decode(&rt()?.call(Request::CuEventElapsedTime(CuEventElapsedTime {
            start: handle(start),
            end: handle(end),
        }))?)?;
        put(millis, f32::from_bits(reply.millis_bits))
    }
}
