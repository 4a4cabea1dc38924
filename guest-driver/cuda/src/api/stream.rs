//! Streams. Creation and destruction are batched (the library picks the
//! handle); waits go to the backend and report earlier deferred errors.

use std::ffi::{c_int, c_uint};

use vgpu_protocol::messages::{
    CuStreamCreate, CuStreamDestroy, CuStreamQuery, CuStreamSynchronize, CuStreamWaitEvent,
};
use vgpu_protocol::Request;

use crate::ffi::{entry, handle, put, CuResult, Handle};
use crate::runtime::{require_context, rt, stream_handle};

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
        rt()?.defer(Request::CuStreamDestroy(CuStreamDestroy { stream: handle(stream) }))
    }
}

entry! {
    fn cuStreamSynchronize(stream: Handle) | cuStreamSynchronize_ptsz {
        let ctx = require_context()?;
        let stream = stream_handle(handle(stream));
        rt()?.call(Request::CuStreamSynchronize(CuStreamSynchronize { ctx, stream })).map(drop)
    }
}

entry! {
    fn cuStreamQuery(stream: Handle) | cuStreamQuery_ptsz {
        let ctx = require_context()?;
        let stream = stream_handle(handle(stream));
        rt()?.call(Request::CuStreamQuery(CuStreamQuery { ctx, stream })).map(drop)
    }
}

entry! {
    fn cuStreamWaitEvent(stream: Handle, event: Handle, flags: c_uint) | cuStreamWaitEvent_ptsz {
        let ctx = require_context()?;
        rt()?.defer(Request::CuStreamWaitEvent(CuStreamWaitEvent {
            ctx,
            stream: stream_handle(handle(stream)),
            event: handle(event),
            flags,
        }))
    }
}
