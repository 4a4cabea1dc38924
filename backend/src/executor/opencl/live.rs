//! What a checkpoint or migration copies while the guest keeps computing:
//! the session's buffers and images, read through the backend's own queues
//! once the guest's issued work on them has finished.

use std::time::{Duration, Instant};

use super::objects::HostEvent;
use super::session::OpenClSession;
use super::snapshot::DeviceBufferSource;
use crate::executor::{BufferSource, SnapshotError};

const EXECUTION_STATUS: u32 = 0x11D3; // CL_EVENT_COMMAND_EXECUTION_STATUS

impl OpenClSession {
    /// A source per top-level buffer and per image with storage of its
    /// own that the guest holds (objects only kernels still hold are
    /// read at the pause).
    pub(super) fn live_sources(&mut self) -> Result<Vec<Box<dyn BufferSource>>, SnapshotError> {
        let mems: Vec<_> = self
            .mems
            .entries()
            .map(|(_, mem, _)| mem.clone())
            .filter(|mem| mem.parent.is_none())
            .filter(|mem| mem.image.as_ref().is_none_or(|i| i.buffer.is_none()))
            .collect();
        let mut sources: Vec<Box<dyn BufferSource>> = Vec::with_capacity(mems.len());
        for mem in mems {
            let queue = self
                .internal_queue(&mem.context)
                .map_err(|s| SnapshotError::device("create a queue to read buffers", s))?;
            sources.push(match mem.image {
                Some(_) => Box::new(super::image::ImageContents::new(mem, queue)),
                None => Box::new(DeviceBufferSource { mem, queue }),
            });
        }
        Ok(sources)
    }

    /// Waits at most `limit` for every queue of the session to run what
    /// was issued. Unlike a quiesce it fails nothing: work behind a user
    /// event the guest has not set just makes the answer `false`.
    pub(super) fn settle_within(&mut self, limit: Duration) -> Result<bool, SnapshotError> {
        let device = |s| SnapshotError::device("wait for the session's queues", s);
        let queues: Vec<_> = self
            .queues
            .entries()
            .map(|(_, queue, _)| queue.queue.0)
            .collect();
        let deadline = Instant::now() + limit;
        for queue in queues {
            // SAFETY: a live queue of the session; no wait list.
            let marker = unsafe {
                cl3::command_queue::enqueue_marker_with_wait_list(queue, 0, std::ptr::null())
            }
            .map_err(|code| device(vgpu_protocol::Status(code)))?;
            let marker = HostEvent(marker);
            cl3::command_queue::flush(queue).map_err(|code| device(vgpu_protocol::Status(code)))?;
            loop {
                let status = cl3::event::get_event_data(marker.0, EXECUTION_STATUS)
                    .map_err(|code| device(vgpu_protocol::Status(code)))?;
                let status = status
                    .get(..4)
                    .and_then(|b| b.try_into().ok())
                    .map(i32::from_le_bytes)
                    .ok_or(device(vgpu_protocol::Status::OUT_OF_RESOURCES))?;
                match status {
                    // Complete, or failed with the commands it waited on:
                    // either way nothing of it runs any more.
                    s if s <= 0 => break,
                    _ if Instant::now() >= deadline => return Ok(false),
                    _ => std::thread::sleep(Duration::from_micros(200)),
                }
            }
        }
        Ok(true)
    }
}
