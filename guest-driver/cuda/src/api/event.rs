//! Events: recorded in batches, waited on and timed through the backend.

use std::ffi::c_uint;

use vgpu_protocol::cuda::CuElapsedReply;
use vgpu_protocol::messages::{
    CuEventCreate, CuEventDestroy, CuEventElapsedTime, CuEventQuery, CuEventRecord,
    CuEventSynchronize,
};
use vgpu_protocol::Request;

use crate::ffi::{entry, handle, put, result, to_ptr, Handle};
use crate::runtime::{decode, require_context, rt, stream_handle};

entry! {
    fn cuEventCreate(pevent: *mut Handle, flags: c_uint) {
        let rt = rt()?;
        let ctx = require_context()?;
        let event = rt.new_handle();
        rt.defer(Request::CuEventCreate(CuEventCreate { event, ctx, flags }))?;
        put(pevent, to_ptr(event))
    }
}

entry! {
    fn cuEventDestroy_v2(event: Handle) | cuEventDestroy {
        rt()?.defer(Request::CuEventDestroy(CuEventDestroy { event: handle(event) }))
    }
}

entry! {
    fn cuEventRecord(event: Handle, stream: Handle) | cuEventRecord_ptsz {
        rt()?.defer(Request::CuEventRecord(CuEventRecord {
            event: handle(event),
            stream: stream_handle(handle(stream)),
        }))
    }
}

entry! {
    /// Only the default flags are supported.
    fn cuEventRecordWithFlags(event: Handle, stream: Handle, flags: c_uint) | cuEventRecordWithFlags_ptsz {
        if flags != 0 {
            return Err(result::ERROR_NOT_SUPPORTED);
        }
        rt()?.defer(Request::CuEventRecord(CuEventRecord {
            event: handle(event),
            stream: stream_handle(handle(stream)),
        }))
    }
}

entry! {
    fn cuEventSynchronize(event: Handle) {
        rt()?.call(Request::CuEventSynchronize(CuEventSynchronize { event: handle(event) })).map(drop)
    }
}

entry! {
    fn cuEventQuery(event: Handle) {
        rt()?.call(Request::CuEventQuery(CuEventQuery { event: handle(event) })).map(drop)
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
