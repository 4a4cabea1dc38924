//! Placed buffers (`MEM_FLAG_PLACED`): a buffer whose storage is guest
//! memory the front-end named, for the buffer's whole life.
//!
//! A loopback program's blocking read or write otherwise costs a round
//! trip plus a cross-memory copy the kernel makes page by page (measured
//! here: 0.6× of `memcpy` at 1 MiB). With the buffer living in the shared
//! memfd, the guest library copies with one `memcpy` in the program, as a
//! native OpenCL library does. Only a CPU device works on host memory in
//! place (`CL_MEM_USE_HOST_PTR`); whether the driver really did is checked
//! once, by mapping the new buffer and comparing addresses, so the guest
//! never writes memory the device does not read.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use cl3::types::{cl_mem, CL_BLOCKING};
use vgpu_protocol::messages::{CreateBuffer, SetPlacementGate};
use vgpu_protocol::Status;

use super::objects::{ContextEntry, HostEvent, HostMem};
use super::session::OpenClSession;
use crate::chain::{GuestIo, GuestRam, Piece};
use crate::executor::SnapshotError;

impl OpenClSession {
    /// The buffer `m` asks for, over the one guest segment its `init`
    /// names; `INVALID_VALUE` when the device cannot work in place there.
    pub(super) fn new_placed_buffer(
        &mut self,
        context: Arc<ContextEntry>,
        m: &CreateBuffer,
        io: &mut GuestIo,
    ) -> Result<HostMem, Status> {
        if m.size == 0 || m.init.len != m.size {
            log::warn!("placed buffer: its storage must cover the whole buffer");
            return Err(Status::INVALID_VALUE);
        }
        if m.size > self.largest_allocation()? {
            return Err(Status::INVALID_BUFFER_SIZE);
        }
        if !self.placement_gate.as_ref().is_some_and(Gate::is_open) {
            log::warn!("placed buffer: no open placement gate");
            return Err(Status::INVALID_VALUE);
        }
        if context.devices.len() != 1 || !super::staging::is_cpu(&context) {
            log::warn!("placed buffer: only a one-device CPU context can place buffers");
            return Err(Status::INVALID_VALUE);
        }
        let storage = io.mem.clone().ok_or(Status::INVALID_VALUE)?;
        let segment = match io.out_pieces(m.init)?.as_slice() {
            [Piece::Local(segment)] => *segment,
            _ => {
                log::warn!("placed buffer: storage must be one range of shared memory");
                return Err(Status::INVALID_VALUE);
            }
        };
        let len = usize::try_from(m.size).map_err(|_| Status::INVALID_BUFFER_SIZE)?;
        let charge = self
            .quota
            .as_ref()
            .map(|q| q.charge_memory(m.size))
            .transpose()?;
        populate(segment.ptr, len);
        let host_flags = m.flags
            & !(cl3::memory::CL_MEM_COPY_HOST_PTR
                | cl3::memory::CL_MEM_ALLOC_HOST_PTR
                | vgpu_protocol::messages::MEM_FLAG_PLACED)
            | cl3::memory::CL_MEM_USE_HOST_PTR;
        // SAFETY: `segment` is `len` bytes of guest memory, kept mapped for
        // the buffer's life by `storage` (stored in the buffer below).
        let raw = unsafe {
            cl3::memory::create_buffer(context.ctx.0, host_flags, len, segment.ptr.cast())
        }
        .map_err(Status)?;
        let mem = HostMem {
            raw,
            size: m.size,
            flags: m.flags,
            context: context.clone(),
            parent: None,
            charge: std::sync::Mutex::new(charge),
            image: None,
            written: Default::default(),
            storage: Some(storage),
        };
        let queue = self.internal_queue(&context)?;
        match mapped_address(queue.queue.0, raw, len) {
            Ok(address) if address == segment.ptr as usize => Ok(mem),
            Ok(_) => {
                log::warn!("placed buffer: the device keeps a copy; refused");
                Err(Status::INVALID_VALUE)
            }
            Err(status) => Err(status),
        }
    }
}

/// Maps all of a placed buffer's storage into this process now, pages
/// made writable, contents unchanged: the memory is shared, so the
/// program's first touch of a page does not map it here, and each page
/// the device's kernels touched first cost a fault inside them (transpose
/// of a 64 MiB matrix, 5 iterations: 1.09-1.37x native, 0.89-0.97x with
/// this). As a GPU driver would, the buffer gets its memory when made.
/// Best effort: without `MADV_POPULATE_WRITE` (Linux < 5.14) or memory
/// to spare now, pages are mapped on first touch as before.
fn populate(ptr: *mut u8, len: usize) {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = ptr as usize & !(page - 1);
    let end = (ptr as usize).saturating_add(len).next_multiple_of(page);
    // SAFETY: `[ptr, ptr+len)` lies in a shared mapping this process holds
    // for the buffer's life, mapped in whole pages, so the rounded range
    // stays inside it; populating neither moves nor changes its contents.
    let done = unsafe {
        libc::madvise(
            start as *mut libc::c_void,
            end - start,
            libc::MADV_POPULATE_WRITE,
        )
    };
    if done != 0 {
        log::debug!(
            "placed buffer: pages mapped on first touch ({})",
            std::io::Error::last_os_error()
        );
    }
}

/// Where the device keeps `mem`'s bytes: the address a map of all of it
/// returns (the map is undone before returning).
fn mapped_address(
    queue: cl3::types::cl_command_queue,
    mem: cl_mem,
    len: usize,
) -> Result<usize, Status> {
    let mut mapped: cl_mem = std::ptr::null_mut();
    // SAFETY: a live queue and buffer of `len` bytes; the map is blocking
    // and undone below.
    let event = unsafe {
        cl3::command_queue::enqueue_map_buffer(
            queue,
            mem,
            CL_BLOCKING,
            cl3::memory::CL_MAP_READ,
            0,
            len,
            &mut mapped,
            0,
            std::ptr::null(),
        )
    }
    .map_err(Status)?;
    drop(HostEvent(event));
    // SAFETY: `mapped` came from the map above.
    let unmap = unsafe {
        cl3::command_queue::enqueue_unmap_mem_object(queue, mem, mapped.cast(), 0, std::ptr::null())
    }
    .map_err(Status)?;
    let waited = cl3::event::wait_for_events(&[unmap]).map_err(Status);
    drop(HostEvent(unmap));
    waited.map(|()| mapped as usize)
}

/// Longest a checkpoint waits for a guest copy into a placed buffer to end.
const GATE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The session's placement gate (see `SetPlacementGate`): the guest's
/// own copies into placed buffers bypass the backend, so before anything
/// reads the buffers for a checkpoint or a move, the gate closes them for
/// good and the backend waits for a copy under way. After that the guest
/// sends its transfers here, which keeps write tracking and ordering exact.
pub(super) struct Gate {
    words: *const [AtomicU32; 2],
    /// Keeps the words' mapping alive.
    _mem: Arc<GuestRam>,
}

// SAFETY: the words are atomics in a mapping `_mem` keeps alive; only
// atomic operations touch them.
unsafe impl Send for Gate {}

impl Gate {
    fn copying(&self) -> &AtomicU32 {
        // SAFETY: `words` points at two aligned u32 in live shared memory
        // (checked in `set_placement_gate`).
        unsafe { &(*self.words)[0] }
    }

    fn closed(&self) -> &AtomicU32 {
        // SAFETY: as in `copying`.
        unsafe { &(*self.words)[1] }
    }

    fn is_open(&self) -> bool {
        self.closed().load(Ordering::SeqCst) == 0
    }

    /// Stops the guest's own copies; false when one did not end in time.
    fn close(&self) -> bool {
        self.closed().store(1, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + GATE_WAIT;
        while self.copying().load(Ordering::SeqCst) != 0 {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }
}

impl OpenClSession {
    /// `SetPlacementGate`: the words through which placed copies stop.
    pub(super) fn set_placement_gate(
        &mut self,
        m: &SetPlacementGate,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let mem = io.mem.clone().ok_or(Status::INVALID_VALUE)?;
        let segment = match io.out_pieces(m.gate)?.as_slice() {
            [Piece::Local(segment)] if segment.len == 8 => *segment,
            _ => {
                log::warn!("placement gate: it must be 8 bytes of shared memory");
                return Err(Status::INVALID_VALUE);
            }
        };
        if !(segment.ptr as usize).is_multiple_of(std::mem::align_of::<AtomicU32>()) {
            log::warn!("placement gate: misaligned");
            return Err(Status::INVALID_VALUE);
        }
        if self.placement_gate.is_some() {
            log::warn!("placement gate: set once per session");
            return Err(Status::INVALID_OPERATION);
        }
        self.placement_gate = Some(Gate {
            words: segment.ptr as *const [AtomicU32; 2],
            _mem: mem,
        });
        Ok(())
    }

    /// Closes the placement gate before buffers are read for a snapshot.
    pub(super) fn close_placement_gate(&mut self) -> Result<(), SnapshotError> {
        match &self.placement_gate {
            Some(gate) if !gate.close() => {
                log::warn!("placement gate: the guest's copy did not end within {GATE_WAIT:?}");
                Err(SnapshotError::device(
                    "stop the guest's copies into placed buffers",
                    Status::OUT_OF_RESOURCES,
                ))
            }
            _ => Ok(()),
        }
    }
}
