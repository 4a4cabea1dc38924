//! Placed buffers: a buffer whose storage lies in the transport's shared
//! heap, memory this process and the backend both map, so that a blocking
//! read or write is one `memcpy` here, as in a native OpenCL library.
//!
//! Through the loopback transport a blocking transfer otherwise costs a
//! round trip and a copy the kernel makes page by page between two
//! processes (cross-memory attach), about half of what `memcpy` moves.
//! The backend takes a placed buffer only where its device computes on
//! that memory in place (a CPU; `MEM_FLAG_PLACED`), and says no otherwise:
//! the buffer is then made the ordinary way.
//!
//! Ordering: a blocking transfer may touch the storage only once every
//! command before it on its queue has run. A queue is known drained after
//! a `Finish` (or `clFinish`) and stays so while the session sends nothing
//! at all: the client's quiet mark (`Client::run_if_quiet`) says so, and
//! the copy runs under the session's hold, so no other thread's command
//! comes between. Otherwise the transfer first drains its queue with one
//! `Finish` call. Transfers with a wait list or an event go the ordinary
//! way (through the backend, which reaches the same storage).
//!
//! A placed buffer's storage is given back only after every queue has
//! drained, since commands enqueued before its release may still use it.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use opencl_sys::*;
use vgpu_protocol::messages::{CreateBuffer, Finish, MEM_FLAG_PLACED, SESSION_FLAG_PLACED_BUFFERS};
use vgpu_transport::heap::Heap;
use vgpu_transport::Client;

use crate::core::context::Context;
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult, Kind};
use crate::core::platform;
use crate::core::queue::Queue;

/// Environment variable: `0` turns placed buffers off.
pub const PLACED_ENV: &str = "VGPU_PLACED_BUFFERS";

/// A placed buffer's block of the shared heap.
pub struct Placement {
    addr: usize,
    len: usize,
    /// The transport connection the backend placed it on: a backend
    /// restored from a checkpoint rebuilt it as an ordinary buffer.
    connection: u64,
}

impl Placement {
    /// The address of byte `offset` and the placement's connection.
    pub fn at(&self, offset: u64) -> Option<(usize, u64)> {
        let offset = usize::try_from(offset).ok().filter(|&o| o <= self.len)?;
        Some((self.addr + offset, self.connection))
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        // The buffer's release is batched already; commands before it may
        // still use the storage until their queues drain.
        if let Some(client) = platform::client_opt() {
            for queue in Queue::registry().live() {
                if let Err(status) = drain(client, &queue, None::<(u64, fn())>) {
                    log::debug!("draining a queue before freeing storage failed: {status}");
                }
            }
        }
        if let Some(heap) = heap() {
            lock(heap).free(self.addr);
        }
    }
}

fn lock(heap: &Mutex<Heap>) -> std::sync::MutexGuard<'_, Heap> {
    // Heap updates are single map operations.
    heap.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared heap, when the transport has one and the backend places
/// buffers.
fn heap() -> Option<&'static Mutex<Heap>> {
    static HEAP: OnceLock<Option<Mutex<Heap>>> = OnceLock::new();
    HEAP.get_or_init(|| {
        if std::env::var_os(PLACED_ENV).is_some_and(|v| v == "0") {
            return None;
        }
        let client = platform::client_opt()?;
        if client.session_info().flags & SESSION_FLAG_PLACED_BUFFERS == 0 {
            return None;
        }
        client
            .shared_heap()
            .map(|range| Mutex::new(Heap::new(range)))
    })
    .as_ref()
}

/// Creates buffer `mem` placed in the shared heap, filled from `init`,
/// when the context's device can work there; `Ok(None)` when the buffer
/// must be made the ordinary way.
pub fn create(
    context: &Cl<Context>,
    mem: u64,
    flags: cl_mem_flags,
    size: usize,
    init: Option<&[u8]>,
) -> ClResult<Option<Placement>> {
    let Some(heap) = heap() else {
        return Ok(None);
    };
    if context.devices.len() != 1
        || context.device.number(CL_DEVICE_TYPE)? & CL_DEVICE_TYPE_CPU == 0
    {
        return Ok(None);
    }
    let Some((addr, len)) = lock(heap).alloc(size) else {
        return Ok(None);
    };
    // SAFETY: the block is `len >= size` bytes of the heap's mapping,
    // handed out to this buffer alone.
    let storage = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, size) };
    if let Some(init) = init {
        storage.copy_from_slice(init);
    }
    let client = platform::client()?;
    let connection = client.connection();
    let created = client.call_with_out(storage, |data, _| {
        CreateBuffer {
            mem,
            context: context.handle(),
            flags: flags | MEM_FLAG_PLACED,
            size: size as u64,
            init: data,
        }
        .into()
    });
    match created {
        Ok(_) => Ok(Some(Placement {
            addr,
            len,
            connection,
        })),
        Err(status) => {
            lock(heap).free(addr);
            if status.0 == CL_INVALID_VALUE {
                log::debug!("the backend does not place this buffer; an ordinary one instead");
                Ok(None)
            } else {
                Err(status.0)
            }
        }
    }
}

/// Which way a transfer goes.
#[derive(Clone, Copy)]
pub enum Direction {
    ToBuffer,
    FromBuffer,
}

/// A blocking transfer of `len` bytes between `host` and `mem` at `offset`
/// done here, when `mem` is placed; `Ok(false)` when it must go the
/// ordinary way. The caller checked the range against the buffer.
///
/// # Safety
/// `host` must be valid for `len` bytes of reads (`ToBuffer`) or writes
/// (`FromBuffer`), and not overlap the buffer's storage.
pub unsafe fn transfer(
    queue: &Cl<Queue>,
    mem: &Cl<Mem>,
    offset: u64,
    host: *mut u8,
    len: usize,
    direction: Direction,
) -> ClResult<bool> {
    let Some((storage, connection)) = mem.placed_at(offset) else {
        return Ok(false);
    };
    let copy = || {
        // SAFETY: `storage` is `len` bytes inside the buffer's block (the
        // caller checked the range); `host` as the caller promised.
        unsafe {
            match direction {
                Direction::ToBuffer => std::ptr::copy_nonoverlapping(host, storage as *mut u8, len),
                Direction::FromBuffer => {
                    std::ptr::copy_nonoverlapping(storage as *const u8, host, len)
                }
            }
        }
    };
    let client = platform::client()?;
    let mark = queue.drained_at.load(Ordering::Acquire);
    if client.run_if_quiet(mark, connection, copy).is_some() {
        return Ok(true);
    }
    drain(client, queue, Some((connection, copy)))
}

/// Sends `Finish` for `queue` unless it is known drained; then runs
/// `then` (if its connection still holds) before any other request.
/// Returns whether `then` ran.
fn drain(client: &Client, queue: &Cl<Queue>, then: Option<(u64, impl FnOnce())>) -> ClResult<bool> {
    let finish = Finish {
        queue: queue.handle(),
    };
    let (connection, then) = match then {
        Some((connection, then)) => (connection, Some(then)),
        None => {
            let mark = queue.drained_at.load(Ordering::Acquire);
            if client
                .run_if_quiet(mark, client.connection(), || ())
                .is_some()
            {
                return Ok(false);
            }
            (client.connection(), None)
        }
    };
    let (_, ran, mark) = client
        .call_then(finish.into(), connection, || then.map(|f| f()))
        .map_err(|s| s.0)?;
    queue.drained_at.store(mark, Ordering::Release);
    Ok(ran.flatten().is_some())
}

/// Notes that `queue` drained (a `clFinish` returned) at the quiet mark
/// `mark`.
pub fn note_drained(queue: &Cl<Queue>, mark: u64) {
    queue.drained_at.store(mark, Ordering::Release);
}
