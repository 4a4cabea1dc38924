//! Enqueued commands. Transfers move data straight between guest memory and
//! the device; they complete before the chain is returned, because the guest
//! pages they touch are only lent for the chain's lifetime.

use std::sync::Arc;

use cl3::types::{cl_event, CL_BLOCKING};
use vgpu_protocol::messages::*;
use vgpu_protocol::Status;

use super::objects::{ArgRecord, EventEntry, HostEvent, HostMem, QueueEntry};
use super::session::OpenClSession;
use crate::chain::{GuestIo, Piece, Segment};
use crate::peer::PeerMemory;

mod rect;

/// More pieces than this and a transfer goes through one map of the buffer
/// instead of one device call per piece.
const MAX_DIRECT_PIECES: usize = 8;

/// Host events a command waits on; the entries keep them alive meanwhile.
pub(super) struct WaitList {
    _held: Vec<Arc<EventEntry>>,
    raw: Vec<cl_event>,
}

impl WaitList {
    pub(super) fn len(&self) -> u32 {
        self.raw.len() as u32
    }

    pub(super) fn raw(&self) -> &[cl_event] {
        &self.raw
    }

    pub(super) fn ptr(&self) -> *const cl_event {
        if self.raw.is_empty() {
            std::ptr::null()
        } else {
            self.raw.as_ptr()
        }
    }
}

fn to_usize(v: u64) -> Result<usize, Status> {
    usize::try_from(v).map_err(|_| Status::INVALID_VALUE)
}

fn sizes3(v: &[u64; 3]) -> Result<[usize; 3], Status> {
    Ok([to_usize(v[0])?, to_usize(v[1])?, to_usize(v[2])?])
}

/// Bytes a rectangle spans in linear memory (the spec's pitch rules, with
/// overflow checked), so the guest side of a rect transfer can be bounded.
pub(super) fn rect_extent(
    origin: &[u64; 3],
    region: &[u64; 3],
    row_pitch: u64,
    slice_pitch: u64,
) -> Result<u64, Status> {
    if region.contains(&0) {
        return Err(Status::INVALID_VALUE);
    }
    let row = if row_pitch == 0 { region[0] } else { row_pitch };
    let slice = if slice_pitch == 0 {
        region[1].checked_mul(row).ok_or(Status::INVALID_VALUE)?
    } else {
        slice_pitch
    };
    let last = |o: u64, r: u64| o.checked_add(r - 1).ok_or(Status::INVALID_VALUE);
    last(origin[2], region[2])?
        .checked_mul(slice)
        .and_then(|a| {
            last(origin[1], region[1])
                .ok()?
                .checked_mul(row)?
                .checked_add(a)
        })
        .and_then(|a| origin[0].checked_add(region[0])?.checked_add(a))
        .ok_or(Status::INVALID_VALUE)
}

impl OpenClSession {
    pub(super) fn queue(&self, handle: u64) -> Result<Arc<QueueEntry>, Status> {
        self.queues.get(handle).cloned()
    }

    pub(super) fn mem(&self, handle: u64) -> Result<Arc<HostMem>, Status> {
        self.mems.get(handle).cloned()
    }

    /// A memory object that is no image: buffer commands never reach an
    /// image's storage (PoCL would run them).
    fn buffer(&self, handle: u64) -> Result<Arc<HostMem>, Status> {
        let mem = self.mem(handle)?;
        match mem.image {
            Some(_) => Err(Status::INVALID_MEM_OBJECT),
            None => Ok(mem),
        }
    }

    pub(super) fn wait_list(&self, handles: &[u64]) -> Result<WaitList, Status> {
        let held = self
            .events
            .get_all(handles, Status::INVALID_EVENT_WAIT_LIST)?;
        let raw = held.iter().map(|e| e.event.0).collect();
        Ok(WaitList { _held: held, raw })
    }

    /// Bounds the queue's depth: with N set, at most N commands run ahead of
    /// completion, so a drain (before a snapshot) waits for at most N.
    fn bound_depth(&mut self, queue: &QueueEntry, raw: cl_event) {
        if self.limits.queue_depth == 0 {
            return;
        }
        // SAFETY: `raw` is a live event just returned by an enqueue; the
        // extra reference is released by the HostEvent below.
        if unsafe { cl3::event::retain_event(raw) }.is_err() {
            return;
        }
        let mut in_flight = queue.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        in_flight.push_back(HostEvent(raw));
        while in_flight.len() > self.limits.queue_depth {
            let oldest = in_flight.pop_front().expect("longer than the bound");
            let started = std::time::Instant::now();
            let _ = cl3::event::wait_for_events(&[oldest.0]);
            self.limits.depth_wait += started.elapsed();
        }
    }

    /// Gives the command's host event the guest's handle, or drops it.
    pub(super) fn keep_event(
        &mut self,
        queue: &QueueEntry,
        handle: u64,
        raw: cl_event,
    ) -> Result<(), Status> {
        self.bound_depth(queue, raw);
        let event = HostEvent(raw);
        if handle != 0 {
            self.events.insert(
                handle,
                EventEntry {
                    event,
                    context: queue.context.clone(),
                    user: None,
                },
            )?;
        }
        Ok(())
    }

    fn check_range(mem: &HostMem, offset: u64, len: u64) -> Result<(), Status> {
        match offset.checked_add(len) {
            Some(end) if end <= mem.size && len > 0 => Ok(()),
            _ => Err(Status::INVALID_VALUE),
        }
    }

    /// Moves `data` between guest pieces and `[offset, offset+len)` of the
    /// buffer: one device call per piece, or one map for many pieces.
    fn transfer(
        &mut self,
        queue: &QueueEntry,
        mem: &HostMem,
        offset: u64,
        pieces: &[Segment],
        wait: &WaitList,
        to_device: bool,
    ) -> Result<cl_event, Status> {
        if to_device {
            self.before_write(queue.queue.0, mem);
        }
        if pieces.len() > MAX_DIRECT_PIECES {
            let pieces: Vec<Piece> = pieces.iter().map(|&s| Piece::Local(s)).collect();
            return self.transfer_mapped(queue, mem, offset, &pieces, None, wait, to_device);
        }
        let mut at = offset;
        let mut last: cl_event = std::ptr::null_mut();
        for (i, piece) in pieces.iter().enumerate() {
            let (n, list) = if i == 0 {
                (wait.len(), wait.ptr())
            } else {
                (0, std::ptr::null())
            };
            if !last.is_null() {
                drop(HostEvent(last));
            }
            // SAFETY: `piece` is live guest memory of `piece.len` bytes (the
            // chain holds the mapping); the range was checked against the
            // buffer size; the call is blocking, so nothing outlives it.
            last = unsafe {
                if to_device {
                    cl3::command_queue::enqueue_write_buffer(
                        queue.queue.0,
                        mem.raw,
                        CL_BLOCKING,
                        to_usize(at)?,
                        piece.len,
                        piece.ptr as *const _,
                        n,
                        list,
                    )
                } else {
                    cl3::command_queue::enqueue_read_buffer(
                        queue.queue.0,
                        mem.raw,
                        CL_BLOCKING,
                        to_usize(at)?,
                        piece.len,
                        piece.ptr as *mut _,
                        n,
                        list,
                    )
                }
            }
            .map_err(Status)?;
            at += piece.len as u64;
        }
        Ok(last)
    }

    /// As [`Self::transfer`], for pieces that may lie in a loopback peer's
    /// memory: those are copied straight between its pages and the mapped
    /// buffer, the only copy the bytes see.
    #[allow(clippy::too_many_arguments)]
    fn transfer_pieces(
        &mut self,
        queue: &QueueEntry,
        mem: &HostMem,
        offset: u64,
        pieces: &[Piece],
        peer: Option<&PeerMemory>,
        wait: &WaitList,
        to_device: bool,
    ) -> Result<cl_event, Status> {
        if to_device {
            // Peer transfers bypass `transfer`: live checkpoints must see them.
            self.before_write(queue.queue.0, mem);
        }
        if let Some(peer) = peer.filter(|_| pieces.iter().any(|p| matches!(p, Piece::Peer(_)))) {
            if super::staging::wanted(&mem.context) {
                return self.transfer_staged(queue, mem, offset, pieces, peer, wait, to_device);
            }
            return self.transfer_mapped(queue, mem, offset, pieces, Some(peer), wait, to_device);
        }
        let local: Vec<Segment> = pieces
            .iter()
            .map(|piece| match piece {
                Piece::Local(segment) => Ok(*segment),
                Piece::Peer(_) => Err(Status::INVALID_VALUE),
            })
            .collect::<Result<_, _>>()?;
        self.transfer(queue, mem, offset, &local, wait, to_device)
    }

    /// The context's staging buffer (made on first use).
    pub(super) fn staging_for(
        &mut self,
        context: &Arc<super::objects::ContextEntry>,
    ) -> Result<&mut super::staging::Staging, Status> {
        let found = self
            .staging
            .iter()
            .position(|s| Arc::ptr_eq(&s.context, context));
        let index = match found {
            Some(i) => i,
            None => {
                let queue = self.internal_queue(context)?;
                let staging = super::staging::Staging::new(context.clone(), queue)?;
                self.staging.push(staging);
                self.staging.len() - 1
            }
        };
        Ok(&mut self.staging[index])
    }

    /// Peer transfers through the context's pinned staging buffer: each
    /// chunk copied between the peer and a staging slot (the one CPU copy)
    /// while the device moves the other slot (`executor::staged`).
    #[allow(clippy::too_many_arguments)]
    fn transfer_staged(
        &mut self,
        queue: &QueueEntry,
        mem: &HostMem,
        offset: u64,
        pieces: &[Piece],
        peer: &PeerMemory,
        wait: &WaitList,
        to_device: bool,
    ) -> Result<cl_event, Status> {
        let offset = to_usize(offset)?;
        let staging = self.staging_for(&mem.context)?;
        let mut moves = staging.moves(queue, mem.raw, offset, (wait.len(), wait.ptr()));
        let moved = if to_device {
            crate::executor::staged::to_device(&mut moves, pieces, Some(peer))
        } else {
            crate::executor::staged::to_host(&mut moves, pieces, Some(peer))
        };
        let done = moves.finish();
        match (moved, done) {
            (Ok(()), done) => done,
            (Err(status), Ok(event)) => {
                drop(HostEvent(event));
                Err(status)
            }
            (Err(status), Err(_)) => Err(status),
        }
    }

    /// One map of the buffer range, the pieces copied in or out of it,
    /// then the unmap. A peer piece whose address is not mapped in the
    /// peer fails the call (after the unmap).
    #[allow(clippy::too_many_arguments)]
    fn transfer_mapped(
        &mut self,
        queue: &QueueEntry,
        mem: &HostMem,
        offset: u64,
        pieces: &[Piece],
        peer: Option<&PeerMemory>,
        wait: &WaitList,
        to_device: bool,
    ) -> Result<cl_event, Status> {
        let len: u64 = pieces.iter().map(|p| p.len() as u64).sum();
        use cl3::memory::{CL_MAP_READ, CL_MAP_WRITE_INVALIDATE_REGION};
        let flags = if to_device {
            CL_MAP_WRITE_INVALIDATE_REGION
        } else {
            CL_MAP_READ
        };
        let mut mapped: cl3::types::cl_mem = std::ptr::null_mut();
        // SAFETY: the range was checked against the buffer; the map is
        // blocking and undone below before anything else touches it.
        let map_event = unsafe {
            cl3::command_queue::enqueue_map_buffer(
                queue.queue.0,
                mem.raw,
                CL_BLOCKING,
                flags,
                to_usize(offset)?,
                to_usize(len)?,
                &mut mapped,
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        drop(HostEvent(map_event));
        let base = mapped as *mut u8;
        let len = to_usize(len)?;
        // SAFETY: `base` maps the `len` bytes the pieces add up to, and only
        // this copy (its threads finish before it returns) touches the
        // mapping until the unmap.
        let copied = unsafe {
            if to_device {
                crate::piece_copy::gather(pieces, 0, base, len, peer)
            } else {
                crate::piece_copy::scatter(pieces, 0, base, len, peer)
            }
        };
        // SAFETY: `mapped` came from the map above.
        let unmap = unsafe {
            cl3::command_queue::enqueue_unmap_mem_object(
                queue.queue.0,
                mem.raw,
                mapped as *mut _,
                0,
                std::ptr::null(),
            )
        }
        .map_err(Status)?;
        // The bytes moved already; the queue orders the unmap before later
        // commands, so a peer transfer need not wait for it (one handoff to
        // the driver's thread less per call).
        if peer.is_none() || copied.is_err() {
            cl3::event::wait_for_events(&[unmap]).map_err(Status)?;
        }
        if let Err(status) = copied {
            drop(HostEvent(unmap));
            return Err(status);
        }
        Ok(unmap)
    }

    /// A queue of the backend's own on `context`, made on first use.
    pub(super) fn internal_queue(
        &mut self,
        context: &Arc<super::objects::ContextEntry>,
    ) -> Result<Arc<QueueEntry>, Status> {
        if let Some(queue) = self
            .internal_queues
            .iter()
            .find(|q| Arc::ptr_eq(&q.context, context))
        {
            return Ok(queue.clone());
        }
        let device = context.devices[0].clone();
        let queue = Arc::new(self.new_queue(context.clone(), device, &[])?);
        self.internal_queues.push(queue.clone());
        Ok(queue)
    }

    pub(super) fn init_buffer(&mut self, m: &InitBuffer, io: &mut GuestIo) -> Result<(), Status> {
        let mem = self.buffer(m.mem)?;
        Self::check_range(&mem, m.offset, m.data.len)?;
        let queue = self.internal_queue(&mem.context)?;
        let pieces = io.out_slices(m.data)?;
        let no_wait = WaitList {
            _held: Vec::new(),
            raw: Vec::new(),
        };
        let event = self.transfer(&queue, &mem, m.offset, &pieces, &no_wait, true)?;
        drop(HostEvent(event));
        Ok(())
    }

    pub(super) fn write_buffer(
        &mut self,
        m: &EnqueueWriteBuffer,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let mem = self.buffer(m.mem)?;
        Self::check_range(&mem, m.offset, m.data.len)?;
        let wait = self.wait_list(&m.wait)?;
        let pieces = io.out_pieces(m.data)?;
        let peer = io.peer;
        let event =
            self.transfer_pieces(&queue, &mem, m.offset, &pieces, peer.as_ref(), &wait, true)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn read_buffer(
        &mut self,
        m: &EnqueueReadBuffer,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let mem = self.buffer(m.mem)?;
        Self::check_range(&mem, m.offset, m.data.len)?;
        let wait = self.wait_list(&m.wait)?;
        let pieces = io.in_pieces(m.data)?;
        let peer = io.peer;
        let event =
            self.transfer_pieces(&queue, &mem, m.offset, &pieces, peer.as_ref(), &wait, false)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn write_buffer_rect(
        &mut self,
        m: &EnqueueWriteBufferRect,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let mem = self.buffer(m.mem)?;
        let wait = self.wait_list(&m.wait)?;
        let rect = rect::Rect {
            buffer_origin: m.buffer_origin,
            host_origin: m.host_origin,
            region: m.region,
            buffer_row_pitch: m.buffer_row_pitch,
            buffer_slice_pitch: m.buffer_slice_pitch,
            host_row_pitch: m.host_row_pitch,
            host_slice_pitch: m.host_slice_pitch,
        };
        let event = self.rect_transfer(&queue, &mem, &rect, m.data, io, &wait, true)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn read_buffer_rect(
        &mut self,
        m: &EnqueueReadBufferRect,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let mem = self.buffer(m.mem)?;
        let wait = self.wait_list(&m.wait)?;
        let rect = rect::Rect {
            buffer_origin: m.buffer_origin,
            host_origin: m.host_origin,
            region: m.region,
            buffer_row_pitch: m.buffer_row_pitch,
            buffer_slice_pitch: m.buffer_slice_pitch,
            host_row_pitch: m.host_row_pitch,
            host_slice_pitch: m.host_slice_pitch,
        };
        let event = self.rect_transfer(&queue, &mem, &rect, m.data, io, &wait, false)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn copy_buffer(&mut self, m: &EnqueueCopyBuffer) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let (src, dst) = (self.buffer(m.src)?, self.buffer(m.dst)?);
        let wait = self.wait_list(&m.wait)?;
        self.before_write(queue.queue.0, &dst);
        // SAFETY: live objects; OpenCL checks the ranges against the buffers.
        let event = unsafe {
            cl3::command_queue::enqueue_copy_buffer(
                queue.queue.0,
                src.raw,
                dst.raw,
                to_usize(m.src_offset)?,
                to_usize(m.dst_offset)?,
                to_usize(m.size)?,
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn fill_buffer(&mut self, m: &EnqueueFillBuffer) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let mem = self.buffer(m.mem)?;
        let wait = self.wait_list(&m.wait)?;
        if m.pattern.is_empty() {
            return Err(Status::INVALID_VALUE);
        }
        self.before_write(queue.queue.0, &mem);
        // SAFETY: the pattern outlives the call (OpenCL copies it).
        let event = unsafe {
            cl3::command_queue::enqueue_fill_buffer(
                queue.queue.0,
                mem.raw,
                m.pattern.as_ptr() as *const _,
                m.pattern.len(),
                to_usize(m.offset)?,
                to_usize(m.size)?,
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    pub(super) fn copy_buffer_rect(&mut self, m: &EnqueueCopyBufferRect) -> Result<(), Status> {
        let queue = self.queue(m.queue)?;
        let (src, dst) = (self.buffer(m.src)?, self.buffer(m.dst)?);
        let wait = self.wait_list(&m.wait)?;
        self.before_write(queue.queue.0, &dst);
        // SAFETY: device-side copy between live buffers; OpenCL checks the
        // geometry against both.
        let event = unsafe {
            cl3::command_queue::enqueue_copy_buffer_rect(
                queue.queue.0,
                src.raw,
                dst.raw,
                sizes3(&m.src_origin)?.as_ptr(),
                sizes3(&m.dst_origin)?.as_ptr(),
                sizes3(&m.region)?.as_ptr(),
                to_usize(m.src_row_pitch)?,
                to_usize(m.src_slice_pitch)?,
                to_usize(m.dst_row_pitch)?,
                to_usize(m.dst_slice_pitch)?,
                wait.len(),
                wait.ptr(),
            )
        }
        .map_err(Status)?;
        self.keep_event(&queue, m.event, event)
    }

    /// `clEnqueueNDRangeKernel`, call `call` of the batch: issued here, or,
    /// in a run of launches, handed to the session's launch thread
    /// (`launch_jobs.rs`) once checked.
    pub(super) fn nd_range(&mut self, m: &EnqueueNdRange, call: usize) -> Result<(), Status> {
        if !(1..=3).contains(&m.work_dim) {
            return Err(Status::INVALID_WORK_DIMENSION);
        }
        let queue = self.queue(m.queue)?;
        let kernel = self.kernels.get(m.kernel)?.clone();
        let wait = self.wait_list(&m.wait)?;
        // Copy-on-write debts enqueue copies on the queue from this thread
        // (`before_launch`): only launches that need none may leave it, and
        // only those whose event and waits the guest cannot look at.
        let may_hand_over = m.event == 0
            && m.wait.is_empty()
            && self.limits.queue_depth == 0
            && self.debts.is_empty();
        if !may_hand_over {
            self.drain_launches();
        }
        self.before_launch(queue.queue.0, &kernel);
        let dims = m.work_dim as usize;
        let offset = sizes3(&m.offset)?;
        let global = sizes3(&m.global)?;
        let local = sizes3(&m.local)?;
        let given_local = !local[..dims].iter().all(|&l| l == 0);
        super::guard::check_launch(dims, &global, given_local.then_some(&local))?;
        // Only kernels with `__local` arguments pay for the check.
        let local_args: Vec<u64> = {
            let args = kernel.args.lock().unwrap_or_else(|e| e.into_inner());
            let local = |a: &ArgRecord| match a {
                ArgRecord::Local(size) => Some(*size),
                _ => None,
            };
            if args.iter().any(|a| local(a).is_some()) {
                args.iter().filter_map(local).collect()
            } else {
                Vec::new()
            }
        };
        if !local_args.is_empty() {
            let device_local = super::profile::local_mem_size(queue.device.raw.0);
            super::guard::check_local_args(&local_args, device_local)?;
        }
        let local = given_local.then_some(local);
        let offset = (!offset[..dims].iter().all(|&o| o == 0)).then_some(offset);
        let to_thread = self.launches.takes_launch(super::launch_jobs::enabled());
        if may_hand_over && to_thread {
            let origin = self.launches.origin(call);
            self.launches.hand_over(
                super::launch_jobs::OpenClJob::Launch {
                    origin,
                    queue,
                    kernel,
                    work_dim: m.work_dim,
                    offset,
                    global,
                    local,
                },
                "opencl",
            );
            return Ok(());
        }
        // The driver makes an event only when the guest or the depth bound
        // will look at it.
        let wants_event = m.event != 0 || self.limits.queue_depth != 0;
        let mut event: cl_event = std::ptr::null_mut();
        super::launch_jobs::enqueue_kernel(
            &queue,
            &kernel,
            m.work_dim,
            offset.as_ref(),
            &global,
            local.as_ref(),
            wait.raw(),
            wants_event.then_some(&mut event),
        )?;
        if wants_event {
            self.keep_event(&queue, m.event, event)
        } else {
            Ok(())
        }
    }

    pub(super) fn marker(
        &mut self,
        queue: u64,
        wait: &[u64],
        event: u64,
        barrier: bool,
    ) -> Result<(), Status> {
        let queue = self.queue(queue)?;
        let wait = self.wait_list(wait)?;
        // SAFETY: the wait list holds live events for the call.
        let raw = unsafe {
            if barrier {
                cl3::command_queue::enqueue_barrier_with_wait_list(
                    queue.queue.0,
                    wait.len(),
                    wait.ptr(),
                )
            } else {
                cl3::command_queue::enqueue_marker_with_wait_list(
                    queue.queue.0,
                    wait.len(),
                    wait.ptr(),
                )
            }
        }
        .map_err(Status)?;
        self.keep_event(&queue, event, raw)
    }

    pub(super) fn flush(&mut self, queue: u64) -> Result<(), Status> {
        cl3::command_queue::flush(self.queue(queue)?.queue.0).map_err(Status)
    }

    pub(super) fn finish(&mut self, queue: u64) -> Result<(), Status> {
        cl3::command_queue::finish(self.queue(queue)?.queue.0).map_err(Status)
    }
}

#[cfg(test)]
mod tests {
    use super::rect_extent;

    #[test]
    fn rect_extent_follows_pitches() {
        assert_eq!(rect_extent(&[0, 0, 0], &[4, 2, 1], 0, 0), Ok(8));
        assert_eq!(rect_extent(&[1, 1, 0], &[2, 2, 1], 8, 0), Ok(1 + 8 + 8 + 2));
    }

    #[test]
    fn rect_extent_rejects_overflow_and_empty_regions() {
        assert!(rect_extent(&[u64::MAX, 0, 0], &[2, 1, 1], 0, 0).is_err());
        assert!(rect_extent(&[0, 0, 0], &[0, 1, 1], 0, 0).is_err());
        assert!(rect_extent(&[0, 0, u64::MAX / 2], &[1, 1, 4], 0, 1 << 40).is_err());
    }
}
