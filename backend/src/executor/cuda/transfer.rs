//! Allocation, copies and fills. Every device address a guest names must
//! lie inside one of its own ranges; host data moves straight between guest
//! memory and the device. Copies from guest memory are complete (staged by
//! the driver, as for any pageable memory) before the call returns, and
//! copies into it are synchronized, because the guest pages are only lent
//! for the chain's lifetime, except in guest memory registered with the
//! driver (`pinned.rs`): that is the program's own page-locked memory, and
//! copies there run as DMA in the stream's time, as CUDA's do.

use std::ffi::c_void;

use cudarc::driver::sys;
use vgpu_protocol::cuda::{result, CuRangeReply};
use vgpu_protocol::messages::{
    CuMemAlloc, CuMemcpyCollect, CuMemcpyDtoD, CuMemcpyDtoH, CuMemcpyDtoHStart, CuMemcpyHtoD,
    CuMemset, CuMemsetD2D,
};
use vgpu_protocol::{Status, Wire};

use super::driver::check;
use super::session::{cuda, CudaSession};
use crate::chain::{GuestIo, Piece, Segment};
use crate::executor::staged;

/// Whether any piece lies in a loopback peer's memory: such copies go
/// through the context's page-locked staging (`peer_staging.rs`).
/// Bytes from the first row's start to the last row's end of `height`
/// rows of `row` bytes, `pitch` apart (`height` > 0); `None` where rows
/// overlap or the span overflows.
fn pitched_span(row: u64, pitch: u64, height: u64) -> Option<u64> {
    if row > pitch {
        return None;
    }
    pitch.checked_mul(height - 1)?.checked_add(row)
}

fn has_peer(pieces: &[Piece]) -> bool {
    pieces.iter().any(|p| matches!(p, Piece::Peer(_)))
}

/// The pieces of a stream without peer memory, as segments.
fn local(pieces: Vec<Piece>) -> Vec<Segment> {
    pieces
        .into_iter()
        .filter_map(|p| match p {
            Piece::Local(segment) => Some(segment),
            Piece::Peer(_) => None,
        })
        .collect()
}

fn invalid() -> Status {
    cuda(result::ERROR_INVALID_VALUE)
}

impl CudaSession {
    /// Fails unless `[ptr, ptr+len)` is inside one of the session's ranges.
    pub(super) fn check_range(&self, ptr: u64, len: u64) -> Result<(), Status> {
        if self.ranges.covers(ptr, len) {
            Ok(())
        } else {
            Err(invalid())
        }
    }

    pub(super) fn alloc(&mut self, m: &CuMemAlloc) -> Result<Vec<u8>, Status> {
        self.enter(m.ctx)?;
        let charge = self.memory.charge(m.size)?;
        let allocation = self.shared.arena.allocate(m.size)?;
        self.memory.hold(allocation.addr, charge);
        let reply = CuRangeReply {
            ptr: allocation.addr,
            size: allocation.size,
        };
        self.ranges
            .insert_mapped(allocation.addr, allocation.size, allocation.mapped);
        self.allocations
            .insert(allocation.addr, std::sync::Arc::new(allocation));
        Ok(reply.to_bytes())
    }

    /// `cuMemFree`: waits for the session's work (a kernel may still use
    /// the memory), then unmaps it.
    pub(super) fn free(&mut self, ptr: u64) -> Result<(), Status> {
        if !self.allocations.contains_key(&ptr) {
            return Err(invalid());
        }
        let contexts: Vec<_> = self.contexts.values().map(|c| c.raw).collect();
        for raw in contexts {
            self.make_current(raw)?;
            // SAFETY: a context is current.
            check(unsafe { sys::cuCtxSynchronize() })?;
        }
        self.ranges.remove(ptr);
        self.allocations.remove(&ptr);
        self.memory.release(ptr);
        Ok(())
    }

    pub(super) fn copy_to_device(&mut self, m: &CuMemcpyHtoD, io: &GuestIo) -> Result<(), Status> {
        self.copy_to_device_in(m, io, false).map(drop)
    }

    /// `copy_to_device`; with `null_in_stream_time`, a copy from registered
    /// memory on the NULL stream runs in the stream's time too. Whether
    /// the copy may still be running when this returns.
    pub(super) fn copy_to_device_in(
        &mut self,
        m: &CuMemcpyHtoD,
        io: &GuestIo,
        null_in_stream_time: bool,
    ) -> Result<bool, Status> {
        if m.data.len == 0 {
            return Ok(false);
        }
        self.check_range(m.dst, m.data.len)?;
        let stream = self.stream(m.ctx, m.stream)?;
        self.mark_written(m.dst);
        let mut at = self.host_ptr(m.dst);
        let pieces = io.out_pieces(m.data)?;
        if has_peer(&pieces) {
            let peer = io.peer_memory()?;
            let staging = self.peer_staging_for(m.ctx, m.stream)?;
            return staged::to_device(&mut staging.moves(at, stream), &pieces, Some(peer))
                .map(|()| false);
        }
        let pieces = local(pieces);
        let pinned = self.pinned.covers(&pieces);
        let in_stream_time = m.stream != 0 || (null_in_stream_time && pinned);
        for piece in &pieces {
            let src = piece.ptr as *const c_void;
            // SAFETY: `piece` is live guest memory of `piece.len` bytes for
            // the chain's lifetime, and a pageable source is staged before
            // the call returns (registered memory stays until unregistered,
            // after a synchronization); the device range was checked above.
            check(unsafe {
                if in_stream_time {
                    sys::cuMemcpyHtoDAsync_v2(at, src, piece.len, stream)
                } else {
                    sys::cuMemcpyHtoD_v2(at, src, piece.len)
                }
            })?;
            at += piece.len as u64;
        }
        Ok(in_stream_time && pinned)
    }

    pub(super) fn copy_from_device(
        &mut self,
        m: &CuMemcpyDtoH,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        self.copy_from_device_in(m, io, false).map(drop)
    }

    /// `copy_from_device`; with `null_in_stream_time`, a copy into
    /// registered memory on the NULL stream runs in the stream's time too.
    /// Whether the copy may still be running when this returns.
    pub(super) fn copy_from_device_in(
        &mut self,
        m: &CuMemcpyDtoH,
        io: &mut GuestIo,
        null_in_stream_time: bool,
    ) -> Result<bool, Status> {
        if m.data.len == 0 {
            return Ok(false);
        }
        self.check_range(m.src, m.data.len)?;
        let stream = self.stream(m.ctx, m.stream)?;
        let mut at = self.host_ptr(m.src);
        let pieces = io.in_pieces(m.data)?;
        if has_peer(&pieces) {
            let peer = *io.peer_memory()?;
            let staging = self.peer_staging_for(m.ctx, m.stream)?;
            return staged::to_host(&mut staging.moves(at, stream), &pieces, Some(&peer))
                .map(|()| false);
        }
        let pieces = local(pieces);
        let pinned = self.pinned.covers(&pieces);
        let in_stream_time = m.stream != 0 || (null_in_stream_time && pinned);
        for piece in &pieces {
            let dst = piece.ptr as *mut c_void;
            // SAFETY: `piece` is writable guest memory of `piece.len` bytes;
            // the copy completes before the chain is returned (synchronized
            // below), or it lies in guest memory registered with the driver
            // (pages held until unregistered, after a synchronization); the
            // device range was checked above.
            check(unsafe {
                if in_stream_time {
                    sys::cuMemcpyDtoHAsync_v2(dst, at, piece.len, stream)
                } else {
                    sys::cuMemcpyDtoH_v2(dst, at, piece.len)
                }
            })?;
            at += piece.len as u64;
        }
        if in_stream_time && !pinned {
            // SAFETY: `stream` is a live stream of the current context.
            check(unsafe { sys::cuStreamSynchronize(stream) })?;
        }
        Ok(in_stream_time && pinned)
    }

    /// The staging for peer copies on `stream` (0: `ctx`'s NULL stream),
    /// made on first use in the stream's context, which is current.
    pub(super) fn peer_staging_for(
        &mut self,
        ctx: u64,
        stream: u64,
    ) -> Result<&mut super::peer_staging::PeerStaging, Status> {
        let context = if stream == 0 {
            self.contexts.get(ctx)?.clone()
        } else {
            self.streams.get(stream)?.ctx.clone()
        };
        let found = self
            .peer_staging
            .iter()
            .position(|s| std::sync::Arc::ptr_eq(&s.context, &context));
        let index = match found {
            Some(i) => i,
            None => {
                let staging = super::peer_staging::PeerStaging::new(context)?;
                self.peer_staging.push(staging);
                self.peer_staging.len() - 1
            }
        };
        Ok(&mut self.peer_staging[index])
    }

    /// `CuHostRegister`: page-locks the guest's allocation in place.
    pub(super) fn register_host(
        &mut self,
        m: &vgpu_protocol::messages::CuHostRegister,
        io: &GuestIo,
    ) -> Result<(), Status> {
        let pieces = io.out_slices(m.data)?;
        let pins = self
            .shared
            .guest_pins
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        self.pinned.register(m.block, &pieces, |p| {
            pins.as_ref()
                .is_some_and(|pins| pins.covers(p.ptr as usize, p.len))
        })
    }

    /// `CuHostUnregister`: waits for the work that may still use the memory
    /// (as `cuMemFreeHost` does), then unpins it.
    pub(super) fn unregister_host(&mut self, block: u64) -> Result<(), Status> {
        let contexts: Vec<_> = self.contexts.values().map(|c| c.raw).collect();
        for raw in contexts {
            self.make_current(raw)?;
            // SAFETY: a context is current.
            check(unsafe { sys::cuCtxSynchronize() })?;
        }
        self.pinned.unregister(block)
    }

    /// `cuMemcpyDtoHAsync` into page-locked guest memory: into staging,
    /// collected later (`readback.rs`).
    pub(super) fn start_readback(&mut self, m: &CuMemcpyDtoHStart) -> Result<(), Status> {
        self.check_range(m.src, m.size)?;
        let len = usize::try_from(m.size).map_err(|_| invalid())?;
        let stream = self.stream(m.ctx, m.stream)?;
        let src = self.host_ptr(m.src);
        self.readbacks.start(m.copy, src, len, stream)
    }

    pub(super) fn collect_readback(
        &mut self,
        m: &CuMemcpyCollect,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let pieces = io.in_slices(m.data)?;
        self.readbacks
            .collect(m.copy, m.offset, m.data.len, |bytes| {
                let mut at = 0usize;
                for piece in &pieces {
                    let end = at + piece.len;
                    let from = bytes.get(at..end).ok_or_else(invalid)?;
                    // SAFETY: `piece` is writable guest memory of `piece.len`
                    // bytes for the chain's lifetime; `from` is as long.
                    unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), piece.ptr, piece.len) };
                    at = end;
                }
                Ok(())
            })
    }

    pub(super) fn copy_on_device(&mut self, m: &CuMemcpyDtoD) -> Result<(), Status> {
        if m.size == 0 {
            return Ok(());
        }
        self.check_range(m.src, m.size)?;
        self.check_range(m.dst, m.size)?;
        let stream = self.stream(m.ctx, m.stream)?;
        self.mark_written(m.dst);
        let size = usize::try_from(m.size).map_err(|_| invalid())?;
        let (dst, src) = (self.host_ptr(m.dst), self.host_ptr(m.src));
        // SAFETY: both ranges belong to the session (checked above).
        check(unsafe {
            if m.stream == 0 {
                sys::cuMemcpyDtoD_v2(dst, src, size)
            } else {
                sys::cuMemcpyDtoDAsync_v2(dst, src, size, stream)
            }
        })
    }

    /// `cuMemsetD2D*`: every byte from the first row's start to the last
    /// row's end must be the session's.
    pub(super) fn memset_2d(&mut self, m: &CuMemsetD2D) -> Result<(), Status> {
        let row = m
            .width
            .checked_mul(u64::from(m.elem_size))
            .ok_or_else(invalid)?;
        if row == 0 || m.height == 0 {
            return Ok(());
        }
        let span = pitched_span(row, m.pitch, m.height).ok_or_else(invalid)?;
        self.check_range(m.dst, span)?;
        let stream = self.stream(m.ctx, m.stream)?;
        self.mark_written(m.dst);
        let pitch = usize::try_from(m.pitch).map_err(|_| invalid())?;
        let width = usize::try_from(m.width).map_err(|_| invalid())?;
        let height = usize::try_from(m.height).map_err(|_| invalid())?;
        let asynchronous = m.stream != 0;
        let dst = self.host_ptr(m.dst);
        // SAFETY: the rows lie in the session's memory (checked above); the
        // value is truncated to the element size as the API defines.
        let code = unsafe {
            match (m.elem_size, asynchronous) {
                (1, false) => sys::cuMemsetD2D8_v2(dst, pitch, m.value as u8, width, height),
                (1, true) => {
                    sys::cuMemsetD2D8Async(dst, pitch, m.value as u8, width, height, stream)
                }
                (2, false) => sys::cuMemsetD2D16_v2(dst, pitch, m.value as u16, width, height),
                (2, true) => {
                    sys::cuMemsetD2D16Async(dst, pitch, m.value as u16, width, height, stream)
                }
                (4, false) => sys::cuMemsetD2D32_v2(dst, pitch, m.value, width, height),
                (4, true) => sys::cuMemsetD2D32Async(dst, pitch, m.value, width, height, stream),
                _ => return Err(invalid()),
            }
        };
        check(code)
    }

    pub(super) fn memset(&mut self, m: &CuMemset) -> Result<(), Status> {
        let len = m
            .count
            .checked_mul(u64::from(m.elem_size))
            .ok_or_else(invalid)?;
        if len == 0 {
            return Ok(());
        }
        self.check_range(m.dst, len)?;
        let stream = self.stream(m.ctx, m.stream)?;
        self.mark_written(m.dst);
        let count = usize::try_from(m.count).map_err(|_| invalid())?;
        let asynchronous = m.stream != 0;
        let dst = self.host_ptr(m.dst);
        // SAFETY: the range belongs to the session (checked above); the
        // value is truncated to the element size as the API defines.
        let code = unsafe {
            match (m.elem_size, asynchronous) {
                (1, false) => sys::cuMemsetD8_v2(dst, m.value as u8, count),
                (1, true) => sys::cuMemsetD8Async(dst, m.value as u8, count, stream),
                (2, false) => sys::cuMemsetD16_v2(dst, m.value as u16, count),
                (2, true) => sys::cuMemsetD16Async(dst, m.value as u16, count, stream),
                (4, false) => sys::cuMemsetD32_v2(dst, m.value, count),
                (4, true) => sys::cuMemsetD32Async(dst, m.value, count, stream),
                _ => return Err(invalid()),
            }
        };
        check(code)
    }
}

#[cfg(test)]
mod tests {
    use super::pitched_span;

    #[test]
    fn a_pitched_span_ends_with_the_last_row() {
        assert_eq!(pitched_span(100, 512, 1), Some(100));
        assert_eq!(pitched_span(100, 512, 40), Some(512 * 39 + 100));
        assert_eq!(pitched_span(512, 512, 2), Some(1024));
        assert_eq!(pitched_span(513, 512, 2), None, "rows overlap");
        assert_eq!(pitched_span(1, u64::MAX, 3), None, "overflows");
    }
}
