//! Non-blocking reads, maps and large writes while a user event is unset.
//!
//! A read moves its data inside the call that carries it, so the backend
//! runs it to completion: a read waiting for a user event that another
//! thread sets later would hold the session, and the program, forever.
//! While a user event is unset, a non-blocking transfer is therefore split:
//!
//! - read (and map): the queue copies the region into a staging buffer of
//!   the backend (batched, in queue order, with the application's wait list
//!   and event); once that copy's event is complete, the staging buffer is
//!   read into the application's memory through a queue of this library's
//!   own. The application learns of completion only through this library
//!   (event status, waits, `clFinish`, callbacks, later blocking calls),
//!   and each of those first finishes the reads whose copy is done, so the
//!   data is there whenever the application may look.
//! - write: the data goes to a staging buffer at once (that never waits),
//!   then the queue copies it into the buffer (batched).
//! - image read: as a read, the queue copying the image's region into the
//!   staging buffer tightly packed; the rows are laid out with the
//!   application's pitches when they are moved into its memory.
//! - image write: the rows, packed, go to a staging buffer at once, then
//!   the queue copies them into the image.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use opencl_sys::*;
use vgpu_protocol::messages::{
    CreateBuffer, CreateQueue, EnqueueCopyBuffer, EnqueueCopyBufferToImage,
    EnqueueCopyImageToBuffer, InitBuffer, Release,
};
use vgpu_protocol::{DataRef, InfoTarget, ObjectKind, Request};

use crate::core::context::Context;
use crate::core::event::{self, Event};
use crate::core::info;
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult, RawPtr};
use crate::core::platform;
use crate::core::queue::Queue;
use crate::core::transfer::Transfer;

/// A read whose data still waits in a staging buffer.
struct Pending {
    queue: u64,
    context: Arc<Cl<Context>>,
    /// The copy's event: the application's, or one of this library's.
    event: u64,
    internal_event: bool,
    /// Keeps the application's event (and so its backend handle) alive.
    keep: Option<Arc<Cl<Event>>>,
    staging: u64,
    target: RawPtr,
    len: usize,
    /// Where the packed rows go in the application's memory (image reads
    /// with pitches); `None`: the bytes go as they are.
    rows: Option<Rows>,
}

/// Packed rows of an image region and the application's pitches.
#[derive(Debug, Clone, Copy)]
pub struct Rows {
    pub row_bytes: usize,
    pub rows: usize,
    pub slices: usize,
    pub row_pitch: usize,
    pub slice_pitch: usize,
}

impl Rows {
    fn packed_len(&self) -> usize {
        self.row_bytes * self.rows * self.slices
    }

    /// Where row `i` (counted over all slices) starts in the application's
    /// memory.
    fn row_at(&self, i: usize) -> usize {
        (i / self.rows) * self.slice_pitch + (i % self.rows) * self.row_pitch
    }

    /// Lays `packed` out in `target` with the pitches.
    fn scatter(&self, packed: &[u8], target: &mut [u8]) {
        for (i, row) in packed.chunks_exact(self.row_bytes).enumerate() {
            let at = self.row_at(i);
            target[at..at + self.row_bytes].copy_from_slice(row);
        }
    }

    /// The rows of `source`, laid out with the pitches, packed.
    fn gather(&self, source: &[u8]) -> Vec<u8> {
        let mut packed = Vec::with_capacity(self.packed_len());
        for i in 0..self.rows * self.slices {
            let at = self.row_at(i);
            packed.extend_from_slice(&source[at..at + self.row_bytes]);
        }
        packed
    }
}

static PENDING: Mutex<Vec<Pending>> = Mutex::new(Vec::new());
static COUNT: AtomicUsize = AtomicUsize::new(0);
/// Held while a pending read is finished, so that a second thread asking
/// about the same event waits until the data is there.
static SETTLING: Mutex<()> = Mutex::new(());
/// This library's queue per context (by the context object's address).
static SIDE_QUEUES: Mutex<Option<HashMap<usize, u64>>> = Mutex::new(None);

fn pending() -> MutexGuard<'static, Vec<Pending>> {
    // Entries are pushed and removed whole.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a non-blocking transfer must not wait in the backend now.
pub fn must_stage(blocking: cl_bool) -> bool {
    blocking == CL_FALSE && event::unset_user_events()
}

fn release(kind: ObjectKind, handle: u64) -> ClResult<()> {
    let release = Release {
        kind: kind as u32,
        handle,
    };
    platform::client()?.defer(release.into()).map_err(|s| s.0)
}

/// The queue of `context` this library reads staging buffers through.
fn side_queue(context: &Arc<Cl<Context>>) -> ClResult<u64> {
    let mut queues = SIDE_QUEUES.lock().unwrap_or_else(|e| e.into_inner());
    let queues = queues.get_or_insert_with(HashMap::new);
    let key = Arc::as_ptr(context) as usize;
    if let Some(&queue) = queues.get(&key) {
        return Ok(queue);
    }
    let client = platform::client()?;
    let queue = client.new_handle();
    let create = CreateQueue {
        queue,
        context: context.handle(),
        properties: Vec::new(),
    };
    client.defer(create.into()).map_err(|s| s.0)?;
    queues.insert(key, queue);
    Ok(queue)
}

/// A context is going: its queue goes first.
pub fn context_destroyed(ptr: usize) {
    let queue = SIDE_QUEUES
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_mut()
        .and_then(|q| q.remove(&ptr));
    if let Some(queue) = queue {
        let _ = release(ObjectKind::Queue, queue);
    }
}

/// The parts of a staged transfer.
pub struct Staged<'a> {
    pub queue: u64,
    pub context: &'a Arc<Cl<Context>>,
    pub mem: u64,
    pub offset: u64,
    pub wait: Vec<u64>,
    /// The application's event handle (0: none).
    pub event: u64,
}

impl<'a> Staged<'a> {
    /// A staged transfer of `mem` from `offset`, on `queue` after `wait`.
    pub fn new(
        queue: &'a Cl<Queue>,
        mem: &Cl<Mem>,
        offset: u64,
        wait: Vec<u64>,
        event: u64,
    ) -> Self {
        Staged {
            queue: queue.handle(),
            context: &queue.context,
            mem: mem.handle(),
            offset,
            wait,
            event,
        }
    }
}

impl Staged<'_> {
    fn staging_buffer(&self, len: usize, init: Option<&[u8]>) -> ClResult<u64> {
        let client = platform::client()?;
        let staging = client.new_handle();
        let context = self.context.handle();
        match init {
            None => {
                let create = CreateBuffer {
                    mem: staging,
                    context,
                    flags: CL_MEM_READ_WRITE,
                    size: len as u64,
                    init: DataRef::NONE,
                };
                client.defer(create.into()).map_err(|s| s.0)?;
            }
            Some(data) => client
                .defer_with_out(data, |chunk, start| -> Request {
                    if start == 0 {
                        CreateBuffer {
                            mem: staging,
                            context,
                            flags: CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                            size: len as u64,
                            init: chunk,
                        }
                        .into()
                    } else {
                        InitBuffer {
                            mem: staging,
                            offset: start,
                            data: chunk,
                        }
                        .into()
                    }
                })
                .map_err(|s| s.0)?,
        }
        Ok(staging)
    }

    /// Starts a read of `len` bytes into `target`, which must stay valid
    /// until the read's event completes (as OpenCL asks of the
    /// application). Call [`keep`] with the application's event after
    /// publishing it.
    pub fn read(self, target: *mut u8, len: usize) -> ClResult<()> {
        let (mem, offset) = (self.mem, self.offset);
        self.start_read(len, None, target, len, |queue, staging, wait, event| {
            EnqueueCopyBuffer {
                queue,
                src: mem,
                dst: staging,
                src_offset: offset,
                dst_offset: 0,
                size: len as u64,
                wait,
                event,
            }
            .into()
        })
    }

    /// Starts a read of the image `self.mem`'s `region` at `origin` into
    /// `target` (`len` bytes the application gave, laid out as `rows`
    /// says), which must stay valid until the read's event completes.
    pub fn read_image(
        self,
        origin: [u64; 3],
        region: [u64; 3],
        rows: Rows,
        target: *mut u8,
        len: usize,
    ) -> ClResult<()> {
        let mem = self.mem;
        let packed = rows.packed_len();
        self.start_read(
            packed,
            Some(rows),
            target,
            len,
            |queue, staging, wait, event| {
                EnqueueCopyImageToBuffer {
                    queue,
                    src: mem,
                    dst: staging,
                    src_origin: origin,
                    region,
                    dst_offset: 0,
                    wait,
                    event,
                }
                .into()
            },
        )
    }

    /// Enqueues `copy` (queue, staging buffer, wait list, event) into a
    /// staging buffer of `staged` bytes and records the pending read that
    /// moves it into `target` once the copy is complete.
    fn start_read(
        self,
        staged: usize,
        rows: Option<Rows>,
        target: *mut u8,
        len: usize,
        copy: impl FnOnce(u64, u64, Vec<u64>, u64) -> Request,
    ) -> ClResult<()> {
        let client = platform::client()?;
        let staging = self.staging_buffer(staged, None)?;
        let (event, internal_event) = match self.event {
            0 => (client.new_handle(), true),
            event => (event, false),
        };
        client
            .defer(copy(self.queue, staging, self.wait, event))
            .map_err(|s| s.0)?;
        pending().push(Pending {
            queue: self.queue,
            context: self.context.clone(),
            event,
            internal_event,
            keep: None,
            staging,
            target: RawPtr::new(target),
            len,
            rows,
        });
        COUNT.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Writes the rows of `source` (laid out as `rows` says) into the image
    /// `self.mem`'s `region` at `origin`: packed into a staging buffer now,
    /// into the image in queue order.
    pub fn write_image(
        self,
        origin: [u64; 3],
        region: [u64; 3],
        rows: Rows,
        source: &[u8],
    ) -> ClResult<()> {
        let staging = self.staging_buffer(rows.packed_len(), Some(&rows.gather(source)))?;
        let copy = EnqueueCopyBufferToImage {
            queue: self.queue,
            src: staging,
            dst: self.mem,
            src_offset: 0,
            dst_origin: origin,
            region,
            wait: self.wait,
            event: self.event,
        };
        platform::client()?.defer(copy.into()).map_err(|s| s.0)?;
        // The enqueued copy holds the staging buffer until it ran.
        release(ObjectKind::Mem, staging)
    }

    /// Writes `data`: copied to a staging buffer now, into the buffer in
    /// queue order.
    pub fn write(self, data: &[u8]) -> ClResult<()> {
        let staging = self.staging_buffer(data.len(), Some(data))?;
        let copy = EnqueueCopyBuffer {
            queue: self.queue,
            src: staging,
            dst: self.mem,
            src_offset: 0,
            dst_offset: self.offset,
            size: data.len() as u64,
            wait: self.wait,
            event: self.event,
        };
        platform::client()?.defer(copy.into()).map_err(|s| s.0)?;
        // The enqueued copy holds the staging buffer until it ran.
        release(ObjectKind::Mem, staging)
    }
}

/// Hands a pending read the application's event object, so that it stays
/// alive (and known to the backend) until the data is there.
pub fn keep(event: Option<Arc<Cl<Event>>>) {
    if let Some(event) = event {
        let handle = event.handle();
        if let Some(p) = pending().iter_mut().find(|p| p.event == handle) {
            p.keep = Some(event);
        }
    }
}

/// A mapping's memory is going (unmapped before its map completed): a
/// staged read into it is dropped, not finished.
pub fn forget_target(target: usize) {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let _settling = SETTLING.lock().unwrap_or_else(|e| e.into_inner());
    for p in take(|p| p.target.0 == target) {
        let _ = release(ObjectKind::Mem, p.staging);
        if p.internal_event {
            let _ = release(ObjectKind::Event, p.event);
        }
        COUNT.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Moves a pending read's data into place; its copy is complete or failed.
fn finish(p: Pending) {
    let Pending {
        context,
        event,
        internal_event,
        keep,
        staging,
        target,
        len,
        rows,
        ..
    } = p;
    let moved = side_queue(&context).and_then(|queue| {
        // SAFETY: the application keeps the target valid until the read's
        // event completes, which it cannot have seen yet: it learns of it
        // only after this returns.
        let target = unsafe { std::slice::from_raw_parts_mut(target.get() as *mut u8, len) };
        let transfer = Transfer {
            queue,
            mem: staging,
            offset: 0,
            wait: vec![event],
            event: 0,
        };
        match rows {
            None => transfer.read(target),
            Some(rows) => {
                let mut packed = vec![0u8; rows.packed_len()];
                transfer.read(&mut packed)?;
                rows.scatter(&packed, target);
                Ok(())
            }
        }
    });
    if let Err(status) = moved {
        // A failed copy fails the wait list: the event says so already.
        log::debug!("staged read of event {event} not moved: {status}");
    }
    let _ = release(ObjectKind::Mem, staging);
    if internal_event {
        let _ = release(ObjectKind::Event, event);
    }
    drop(keep);
    COUNT.fetch_sub(1, Ordering::AcqRel);
}

fn take(which: impl Fn(&Pending) -> bool) -> Vec<Pending> {
    let mut pending = pending();
    let (taken, rest): (Vec<_>, Vec<_>) = pending.drain(..).partition(|p| which(p));
    *pending = rest;
    taken
}

fn settle(which: impl Fn(&Pending) -> bool) {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let _settling = SETTLING.lock().unwrap_or_else(|e| e.into_inner());
    for p in take(which) {
        finish(p);
    }
}

/// Event `handle` is complete (or failed): its read, if any, finishes now.
pub fn settle_event(handle: u64) {
    settle(|p| p.event == handle);
}

/// Everything enqueued on `queue` is complete (after `clFinish`).
pub fn settle_queue(queue: u64) {
    settle(|p| p.queue == queue);
}

/// Finishes every pending read whose copy is done (after a blocking call,
/// a wait).
pub fn settle_ready() {
    if COUNT.load(Ordering::Acquire) == 0 {
        return;
    }
    let events: Vec<u64> = pending().iter().map(|p| p.event).collect();
    for event in events {
        let done = info::remote(
            InfoTarget::Event,
            event,
            0,
            CL_EVENT_COMMAND_EXECUTION_STATUS,
        )
        .map_or(true, |bytes| {
            info::le_number(&bytes) as u32 as cl_int <= CL_COMPLETE
        });
        if done {
            settle_event(event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rows;

    #[test]
    fn packed_rows_land_at_the_pitches_and_leave_the_padding() {
        let rows = Rows {
            row_bytes: 3,
            rows: 2,
            slices: 2,
            row_pitch: 4,
            slice_pitch: 10,
        };
        let packed: Vec<u8> = (1..=12).collect();
        let mut target = vec![0xEEu8; 17];
        rows.scatter(&packed, &mut target);
        assert_eq!(
            target,
            [1, 2, 3, 0xEE, 4, 5, 6, 0xEE, 0xEE, 0xEE, 7, 8, 9, 0xEE, 10, 11, 12]
        );
        assert_eq!(rows.gather(&target), packed);
    }
}
