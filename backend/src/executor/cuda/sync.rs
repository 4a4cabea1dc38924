//! Streams and events. Waits run on the session's own thread, so a guest
//! that waits only stalls itself.

use cudarc::driver::sys;
use vgpu_protocol::cuda::CuElapsedReply;
use vgpu_protocol::messages::{
    CuEventCreate, CuEventElapsedTime, CuEventRecord, CuStreamCreate, CuStreamWaitEvent,
};
use vgpu_protocol::{Status, Wire};

use super::driver::check;
use super::objects::{HostEvent, HostStream};
use super::session::CudaSession;

impl CudaSession {
    pub(super) fn create_stream(&mut self, m: &CuStreamCreate) -> Result<(), Status> {
        let ctx = self.enter(m.ctx)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is valid for writes; a context is current.
        check(unsafe { sys::cuStreamCreateWithPriority(&mut raw, m.flags, m.priority) })?;
        let stream = HostStream {
            raw,
            flags: m.flags,
            priority: m.priority,
            ctx,
        };
        self.streams.insert(m.stream, stream)?;
        Ok(())
    }

    pub(super) fn stream_synchronize(&mut self, ctx: u64, stream: u64) -> Result<(), Status> {
        let raw = self.stream(ctx, stream)?;
        // SAFETY: a live stream (or the current context's NULL stream).
        check(unsafe { sys::cuStreamSynchronize(raw) })
    }

    pub(super) fn stream_query(&mut self, ctx: u64, stream: u64) -> Result<(), Status> {
        let raw = self.stream(ctx, stream)?;
        // SAFETY: as above.
        check(unsafe { sys::cuStreamQuery(raw) })
    }

    pub(super) fn stream_wait_event(&mut self, m: &CuStreamWaitEvent) -> Result<(), Status> {
        let event = self.events.get(m.event)?.clone();
        let raw = self.stream(m.ctx, m.stream)?;
        // SAFETY: the stream and the event are live.
        check(unsafe { sys::cuStreamWaitEvent(raw, event.raw, m.flags) })
    }

    pub(super) fn create_event(&mut self, m: &CuEventCreate) -> Result<(), Status> {
        let ctx = self.enter(m.ctx)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is valid for writes; a context is current.
        check(unsafe { sys::cuEventCreate(&mut raw, m.flags) })?;
        let event = HostEvent {
            raw,
            flags: m.flags,
            ctx,
            recorded: false.into(),
        };
        self.events.insert(m.event, event)?;
        Ok(())
    }

    pub(super) fn record_event(&mut self, m: &CuEventRecord) -> Result<(), Status> {
        let event = self.events.get(m.event)?.clone();
        let stream = if m.stream == 0 {
            self.make_current(event.ctx.raw)?;
            std::ptr::null_mut()
        } else {
            let stream = self.streams.get(m.stream)?.clone();
            self.make_current(stream.ctx.raw)?;
            stream.raw
        };
        // SAFETY: the event and the stream are live.
        check(unsafe { sys::cuEventRecord(event.raw, stream) })?;
        event
            .recorded
            .store(true, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    pub(super) fn event_synchronize(&mut self, handle: u64) -> Result<(), Status> {
        let event = self.events.get(handle)?.clone();
        // SAFETY: the event is live.
        check(unsafe { sys::cuEventSynchronize(event.raw) })
    }

    pub(super) fn event_query(&mut self, handle: u64) -> Result<(), Status> {
        let event = self.events.get(handle)?.clone();
        // SAFETY: the event is live.
        check(unsafe { sys::cuEventQuery(event.raw) })
    }

    pub(super) fn elapsed_time(&mut self, m: &CuEventElapsedTime) -> Result<Vec<u8>, Status> {
        let start = self.events.get(m.start)?.clone();
        let end = self.events.get(m.end)?.clone();
        let mut millis = 0f32;
        // SAFETY: both events are live; `millis` is valid for writes.
        check(unsafe { sys::cuEventElapsedTime_v2(&mut millis, start.raw, end.raw) })?;
        Ok(CuElapsedReply {
            millis_bits: millis.to_bits(),
        }
        .to_bytes())
    }
}
