//! Moving bytes between application memory and a buffer.
//!
//! Copies: the transport carries the application's own slice. Through the
//! loopback transport that is one copy each way (application memory ⇄ the
//! shared memfd); through `/dev/vgpuN` none (the device reads and writes the
//! application's pinned pages). Non-blocking writes of at most 64 KiB are
//! copied into the batch once more, so the application may reuse its memory
//! at once and the write needs no round trip.

use vgpu_protocol::messages::{EnqueueReadBuffer, EnqueueWriteBuffer};
use vgpu_protocol::Request;

use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::queue::Queue;

/// A read or write command's fixed parts.
pub struct Transfer {
    pub queue: u64,
    pub mem: u64,
    pub offset: u64,
    pub wait: Vec<u64>,
    /// Attached to the last chunk only (0: none).
    pub event: u64,
}

/// Whether the chunk `[start, start + len)` of `total` bytes is the last.
fn last(start: u64, len: u64, total: u64) -> bool {
    start + len >= total
}

impl Transfer {
    /// A transfer of `mem` from `offset`, on `queue` after `wait`.
    pub fn new(queue: &Cl<Queue>, mem: &Cl<Mem>, offset: u64, wait: Vec<u64>, event: u64) -> Self {
        Transfer {
            queue: queue.handle(),
            mem: mem.handle(),
            offset,
            wait,
            event,
        }
    }

    /// Reads into `buf`; returns when the data is there.
    pub fn read(&self, buf: &mut [u8]) -> ClResult<()> {
        let total = buf.len() as u64;
        platform::client()?
            .call_with_in(buf, |data, start| -> Request {
                EnqueueReadBuffer {
                    queue: self.queue,
                    mem: self.mem,
                    offset: self.offset + start,
                    data,
                    wait: self.wait.clone(),
                    event: if last(start, data.len, total) {
                        self.event
                    } else {
                        0
                    },
                }
                .into()
            })
            .map(drop)
            .map_err(|s| s.0)
    }

    /// Writes `bytes`: at once when `blocking` (or large), else batched.
    pub fn write(&self, bytes: &[u8], blocking: bool) -> ClResult<()> {
        let total = bytes.len() as u64;
        let make = |data: vgpu_protocol::DataRef, start: u64| -> Request {
            EnqueueWriteBuffer {
                queue: self.queue,
                mem: self.mem,
                offset: self.offset + start,
                data,
                wait: self.wait.clone(),
                event: if last(start, data.len, total) {
                    self.event
                } else {
                    0
                },
            }
            .into()
        };
        let client = platform::client()?;
        let result = if blocking {
            client.call_with_out(bytes, make).map(drop)
        } else {
            client.defer_with_out(bytes, make)
        };
        result.map_err(|s| s.0)
    }
}
