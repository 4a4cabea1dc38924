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

use std::sync::Arc;

use cl3::types::{cl_mem, CL_BLOCKING};
use vgpu_protocol::messages::CreateBuffer;
use vgpu_protocol::Status;

use super::objects::{ContextEntry, HostEvent, HostMem};
use super::session::OpenClSession;
use crate::chain::{GuestIo, Piece};

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
