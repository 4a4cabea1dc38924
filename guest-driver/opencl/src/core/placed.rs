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
//!
//! The copies made here bypass the backend, so before the backend reads
//! buffers for a checkpoint, a live checkpoint's rounds or a move to
//! another device, it closes the session's placement gate (two words of
//! shared memory, `SetPlacementGate`) and waits for a copy under way;
//! transfers then go through the backend for the rest of the session.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use opencl_sys::*;
use vgpu_protocol::messages::{
    CreateBuffer, Finish, SetPlacementGate, MEM_FLAG_PLACED, SESSION_FLAG_PLACED_BUFFERS,
};
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
        let Some(placer) = placer() else {
            return;
        };
        // The buffer's release is batched already; commands before it may
        // still use the storage until their queues drain. A queue may wait
        // for a user event this thread is yet to set: then the storage
        // waits, and goes with the next release that can drain.
        lock(&placer.retired).push(self.addr);
        if crate::core::event::unset_user_events() {
            return;
        }
        if let Some(client) = platform::client_opt() {
            for queue in Queue::registry().live() {
                if let Err(status) = drain(client, &queue, None::<(u64, fn() -> bool)>) {
                    log::debug!("draining a queue before freeing storage failed: {status}");
                }
            }
        }
        let retired = std::mem::take(&mut *lock(&placer.retired));
        let mut heap = placer.heap();
        for addr in retired {
            heap.free(addr);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Lists and maps updated in single operations.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared heap and the session's placement gate.
struct Placer {
    heap: Mutex<Heap>,
    /// Word 0: a copy is under way here; word 1: the backend closed the
    /// gate. In the heap, so the backend maps them too.
    gate: &'static [AtomicU32; 2],
    /// Whether a copy found the gate closed (logged once).
    closed_seen: AtomicBool,
    /// Storage of released buffers not freed yet (see `Placement`'s drop).
    retired: Mutex<Vec<usize>>,
}

impl Placer {
    fn heap(&self) -> std::sync::MutexGuard<'_, Heap> {
        lock(&self.heap)
    }

    /// Runs `copy` unless the backend closed the gate; whether it ran.
    /// The two sides each set their word and then read the other's, both
    /// sequentially consistent: at least one of them sees the other.
    fn through_gate(&self, copy: impl FnOnce()) -> bool {
        let [copying, closed] = self.gate;
        copying.store(1, Ordering::SeqCst);
        let open = closed.load(Ordering::SeqCst) == 0;
        if open {
            copy();
        }
        copying.store(0, Ordering::SeqCst);
        if !open && !self.closed_seen.swap(true, Ordering::Relaxed) {
            log::debug!("the backend closed the placement gate: transfers go through it now");
        }
        open
    }
}

/// The placer, when the transport has a shared heap and the backend
/// places buffers (and took the gate).
fn placer() -> Option<&'static Placer> {
    static PLACER: OnceLock<Option<Placer>> = OnceLock::new();
    PLACER
        .get_or_init(|| {
            if std::env::var_os(PLACED_ENV).is_some_and(|v| v == "0") {
                return None;
            }
            let client = platform::client_opt()?;
            if client.session_info().flags & SESSION_FLAG_PLACED_BUFFERS == 0 {
                return None;
            }
            let mut heap = Heap::new(client.shared_heap()?);
            let (addr, _) = heap.alloc(8)?;
            // SAFETY: a fresh page-aligned block of the heap's mapping,
            // this library's alone (and the backend's, told below) for the
            // process's life; fresh memfd pages read as two zero words.
            let gate: &'static [AtomicU32; 2] = unsafe { &*(addr as *const [AtomicU32; 2]) };
            // SAFETY: as above; the bytes are only named, never read, here.
            let bytes = unsafe { std::slice::from_raw_parts(addr as *const u8, 8) };
            let told = client.call_with_out(bytes, |gate, _| SetPlacementGate { gate }.into());
            if let Err(status) = told {
                log::debug!("the backend took no placement gate ({status}): no placed buffers");
                return None;
            }
            Some(Placer {
                heap: Mutex::new(heap),
                gate,
                closed_seen: AtomicBool::new(false),
                retired: Mutex::new(Vec::new()),
            })
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
    let Some(placer) = placer() else {
        return Ok(None);
    };
    if context.devices.len() != 1
        || context.device.number(CL_DEVICE_TYPE)? & CL_DEVICE_TYPE_CPU == 0
    {
        return Ok(None);
    }
    let Some((addr, len)) = placer.heap().alloc(size) else {
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
        Ok(_) => {
            log::debug!("buffer {mem} placed in shared memory ({size} bytes)");
            Ok(Some(Placement {
                addr,
                len,
                connection,
            }))
        }
        Err(status) => {
            placer.heap().free(addr);
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

/// What a transfer does when its queue is not known drained.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum WhenBusy {
    /// Drains the queue with one `Finish`, then copies.
    Drain,
    /// Leaves the transfer to the ordinary way (a non-blocking write,
    /// which the batch carries without a round trip).
    GiveUp,
}

/// A transfer of `len` bytes between `host` and `mem` at `offset` done
/// here, complete on return, when `mem` is placed; `Ok(false)` when it
/// must go the ordinary way. The caller checked the range against the
/// buffer.
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
    when_busy: WhenBusy,
) -> ClResult<bool> {
    let (Some((storage, connection)), Some(placer)) = (mem.placed_at(offset), placer()) else {
        return Ok(false);
    };
    let copy = || {
        placer.through_gate(|| {
            // SAFETY: `storage` is `len` bytes inside the buffer's block
            // (the caller checked the range); `host` as the caller promised.
            unsafe {
                match direction {
                    Direction::ToBuffer => {
                        std::ptr::copy_nonoverlapping(host, storage as *mut u8, len)
                    }
                    Direction::FromBuffer => {
                        std::ptr::copy_nonoverlapping(storage as *const u8, host, len)
                    }
                }
            }
        })
    };
    let client = platform::client()?;
    let mark = queue.drained_at.load(Ordering::Acquire);
    if let Some(copied) = client.run_if_quiet(mark, connection, copy) {
        return Ok(copied);
    }
    match when_busy {
        WhenBusy::Drain => drain(client, queue, Some((connection, copy))),
        WhenBusy::GiveUp => Ok(false),
    }
}

/// Sends `Finish` for `queue` unless it is known drained; then runs
/// `then` (if its connection still holds) before any other request.
/// Returns what `then` returned (false when it did not run).
fn drain(
    client: &Client,
    queue: &Cl<Queue>,
    then: Option<(u64, impl FnOnce() -> bool)>,
) -> ClResult<bool> {
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
    Ok(ran.flatten().unwrap_or(false))
}

/// Notes that `queue` drained (a `clFinish` returned) at the quiet mark
/// `mark`.
pub fn note_drained(queue: &Cl<Queue>, mark: u64) {
    queue.drained_at.store(mark, Ordering::Release);
}
