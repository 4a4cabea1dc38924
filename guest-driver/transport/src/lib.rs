//! Guest side of the vgpu device.
//!
//! - [`Client`]: one protocol session: version negotiation, sequence numbers,
//!   batching of deferred calls, deferred-error reporting, splitting of bulk
//!   transfers to the transport's limit.
//! - [`Transport`]: moves one batch (request stream, out-data, reply stream,
//!   in-data) to the device and back. Two implementations:
//!   - `loopback`: this process is the vhost-user front-end of
//!     `vgpu-backend`'s socket (memfd guest memory, split vrings, eventfds);
//!     used when `VGPU_SOCKET` is set;
//!   - `devnode`: `/dev/vgpuN` of the guest kernel driver (the default in a
//!     VM), zero copy through pinned pages.
//!
//! API contract used by the guest libraries (the ICD and the CUDA library):
//!
//! ```ignore
//! let client = Client::from_env()?;             // VGPU_SOCKET → loopback, else /dev/vgpu0 (VGPU_DEVICE overrides)
//! client.defer(Request)?;                        // batched, no round trip; may submit when the batch is full
//! client.defer_with_out(&bytes, |data| Request)?; // batched, the bytes are copied into the batch
//! let payload = client.call(Request)?;           // submits pending + this call, waits, returns the reply payload
//! let payload = client.call_with_out(&bytes, |data| Request)?;      // bulk data to the device
//! let payload = client.call_with_in(&mut buf, |data| Request)?;     // bulk data from the device
//! client.flush()?;                               // submits pending; returns the first deferred error, if any
//! client.take_deferred_error();                  // Option<Status>: first error of a deferred call since the last take
//! client.new_handle();                           // fresh nonzero handle of this session's namespace
//! ```
//!
//! `call*` return `Err(status)` when the call itself failed; errors of deferred
//! calls are kept and returned by `flush` / `take_deferred_error` (the next
//! synchronization point). With `VGPU_STRICT=1` every `defer` is a `call`.

pub mod client;
pub mod devnode;
pub mod heap;
pub mod loopback;
pub mod vring;

pub use client::{Client, ClientError};

use std::io;

/// One batch's buffers.
pub struct Submission<'a> {
    /// The request stream (batch header and messages).
    pub request: &'a [u8],
    /// Bulk data to the device, concatenated in order (the out-data stream).
    pub out: &'a [&'a [u8]],
    /// Receives the reply stream; its length is the reply capacity.
    pub reply: &'a mut [u8],
    /// Receive bulk data from the device, in order (the in-data stream).
    pub in_: &'a mut [&'a mut [u8]],
}

/// Moves batches to the device.
pub trait Transport: Send {
    /// Submits one batch and waits for it; returns the reply-stream bytes
    /// the device wrote.
    fn submit(&mut self, submission: Submission<'_>) -> io::Result<usize>;

    /// Starts a batch of deferred calls (no in-data) and, where the
    /// transport can, returns before the device has run it: `Ok(None)`,
    /// and [`Transport::finish_posted`] later gives its reply. `Ok(Some(n))`
    /// when it ran to completion already (its reply is in `reply`). At most
    /// one batch is posted at a time, and nothing else is submitted before
    /// it is finished. The default runs it now.
    fn post(&mut self, submission: Submission<'_>) -> io::Result<Option<usize>> {
        self.submit(submission).map(Some)
    }

    /// Waits for the posted batch and copies its reply into `reply`;
    /// returns the bytes the device wrote.
    fn finish_posted(&mut self, _reply: &mut [u8]) -> io::Result<usize> {
        Err(io::Error::other("no batch was posted"))
    }

    /// Whether the posted batch has finished, so that
    /// [`Transport::finish_posted`] would not wait; never blocks. The
    /// default says yes (the caller then waits, as without it).
    fn posted_finished(&mut self) -> bool {
        true
    }

    /// The backend reads and writes this process's memory itself
    /// (`SESSION_FLAG_PEER_MEMORY`): the transport may name large data
    /// where it lies instead of copying it. The default ignores it.
    fn enable_peer_memory(&mut self) {}

    /// Largest out-data or in-data stream of one batch.
    fn max_data_len(&self) -> usize;

    /// Largest request stream of one batch.
    fn max_request_len(&self) -> usize;

    /// Which connection to the backend this is: it changes when the
    /// transport reconnects to a restarted backend, whose objects were
    /// rebuilt from a checkpoint (placed buffers became ordinary ones).
    fn connection(&self) -> u64 {
        0
    }

    /// Host addresses of this process's page-locked heap, if the transport
    /// has one: segments inside it travel in place (never copied, and
    /// without the data-size limit), so the device reads and writes them
    /// directly, also after the batch returned (asynchronous copies).
    fn shared_heap(&self) -> Option<std::ops::Range<usize>> {
        None
    }
}
