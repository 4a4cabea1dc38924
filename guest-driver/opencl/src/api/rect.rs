//! Rectangular buffer read, write and copy entry points.
//!
//! The host side travels as its own geometry (pitches) with `data` covering
//! exactly the host bytes the rectangle touches, so the device copies rows
//! straight between the application's memory and the buffer. Large
//! rectangles go as several pieces of at most `PIECE_LIMIT` host bytes.

use std::ffi::c_void;

use opencl_sys::*;
use vgpu_protocol::messages::{
    EnqueueCopyBufferRect, EnqueueReadBufferRect, EnqueueWriteBufferRect,
};
use vgpu_protocol::{DataRef, Request};
use vgpu_transport::Client;

use crate::api::entry::status_entry;
use crate::api::host_ptr::HostPtr;
use crate::api::transfer::{finish_blocking, mem_in_context_of, queue_and_mem};
use crate::api::util::{bytes, bytes_mut, triple, wait_list, NewEvent};
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::rect::{check_region, overlap, pieces, Layout, Piece};

status_entry! {
    fn clEnqueueReadBufferRect(command_queue: cl_command_queue, buffer: cl_mem, blocking_read: cl_bool, buffer_origin: *const usize, host_origin: *const usize, region: *const usize, buffer_row_pitch: usize, buffer_slice_pitch: usize, host_row_pitch: usize, host_slice_pitch: usize, ptr: *mut c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => read_or_write_rect;
    fn clEnqueueWriteBufferRect(command_queue: cl_command_queue, buffer: cl_mem, blocking_write: cl_bool, buffer_origin: *const usize, host_origin: *const usize, region: *const usize, buffer_row_pitch: usize, buffer_slice_pitch: usize, host_row_pitch: usize, host_slice_pitch: usize, ptr: *const c_void, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => read_or_write_rect;
    fn clEnqueueCopyBufferRect(command_queue: cl_command_queue, src_buffer: cl_mem, dst_buffer: cl_mem, src_origin: *const usize, dst_origin: *const usize, region: *const usize, src_row_pitch: usize, src_slice_pitch: usize, dst_row_pitch: usize, dst_slice_pitch: usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_copy_buffer_rect;
}

/// Host bytes of one message at most; well under any transport's chunk.
const PIECE_LIMIT: u64 = 1 << 20;

/// Both sides of a host ⇄ buffer rectangle, checked.
struct HostRect {
    buffer: Layout,
    host: Layout,
    region: [u64; 3],
}

fn host_rect(
    mem: &Cl<Mem>,
    ptr_null: bool,
    buffer_origin: *const usize,
    host_origin: *const usize,
    region: *const usize,
    brp: usize,
    bsp: usize,
    hrp: usize,
    hsp: usize,
) -> ClResult<HostRect> {
    // CL_INVALID_VALUE if buffer_origin, host_origin, region or ptr is NULL,
    // if any region element is 0, if a pitch is invalid, or if the region
    // is out of the buffer's bounds.
    if ptr_null {
        return Err(CL_INVALID_VALUE);
    }
    let region = triple(region)?;
    check_region(region)?;
    let buffer = Layout::new(triple(buffer_origin)?, region, brp as u64, bsp as u64)?;
    let host = Layout::new(triple(host_origin)?, region, hrp as u64, hsp as u64)?;
    if buffer.extent(region)?.1 > mem.size {
        return Err(CL_INVALID_VALUE);
    }
    Ok(HostRect {
        buffer,
        host,
        region,
    })
}

impl HostRect {
    /// A piece's buffer origin, its host byte range, and its geometry
    /// relative to that range.
    fn piece(&self, p: &Piece) -> ClResult<([u64; 3], u64, u64)> {
        let buffer_origin = [0, 1, 2].map(|d| self.buffer.origin[d] + p.at[d]);
        let start = self.host.offset(p.at)?;
        let last = [0, 1, 2].map(|d| p.at[d] + p.size[d] - 1);
        let end = self.host.offset(last)? + 1;
        Ok((buffer_origin, start, end))
    }
}

/// A request for a chunk the client split further than a piece: refused by
/// the backend (unknown buffer) rather than misplacing bytes.
fn unsplittable(start: u64) -> bool {
    start != 0
}

/// `clEnqueueReadBufferRect` and `clEnqueueWriteBufferRect`: the same
/// checks, then the pieces go one way or the other.
fn read_or_write_rect(
    queue: cl_command_queue,
    buffer: cl_mem,
    blocking: cl_bool,
    buffer_origin: *const usize,
    host_origin: *const usize,
    region: *const usize,
    brp: usize,
    bsp: usize,
    hrp: usize,
    hsp: usize,
    ptr: impl Into<HostPtr>,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let ptr = ptr.into();
    let (queue, mem) = queue_and_mem(queue, buffer)?;
    let rect = host_rect(
        &mem,
        ptr.is_null(),
        buffer_origin,
        host_origin,
        region,
        brp,
        bsp,
        hrp,
        hsp,
    )?;
    let commands = [CL_COMMAND_READ_BUFFER_RECT, CL_COMMAND_WRITE_BUFFER_RECT];
    let (wait, new_event) =
        ptr.wait_and_event(&queue, &mem, (num_events, events), event, commands)?;
    let client = platform::client()?;
    let (_, host_end) = rect.host.extent(rect.region)?;
    let command = RectCommand {
        queue: queue.handle(),
        mem: mem.handle(),
        rect: &rect,
        wait,
        event: new_event.handle(),
    };
    match ptr {
        HostPtr::Into(ptr) => command.read(client, bytes_mut(ptr, host_end as usize)?)?,
        HostPtr::From(ptr) => {
            command.write(client, bytes(ptr, host_end as usize)?, blocking != CL_FALSE)?
        }
    }
    new_event.publish(&queue);
    finish_blocking(blocking)
}

/// A checked host ⇄ buffer rectangle command, ready to send in pieces.
struct RectCommand<'a> {
    queue: u64,
    mem: u64,
    rect: &'a HostRect,
    /// Sent with the first piece.
    wait: Vec<u64>,
    /// Sent with the last piece (0: none).
    event: u64,
}

/// What a piece's read and write messages both carry, but its data.
struct PieceFields {
    queue: u64,
    mem: u64,
    buffer_origin: [u64; 3],
    region: [u64; 3],
    buffer: Layout,
    host: Layout,
    wait: Vec<u64>,
    event: u64,
}

/// A piece's `EnqueueReadBufferRect` or `EnqueueWriteBufferRect`: two
/// messages with the same fields.
macro_rules! piece_message {
    ($message:ident, $fields:expr, $data:expr) => {{
        let f: PieceFields = $fields;
        $message {
            queue: f.queue,
            mem: f.mem,
            buffer_origin: f.buffer_origin,
            host_origin: [0, 0, 0],
            region: f.region,
            buffer_row_pitch: f.buffer.row_pitch,
            buffer_slice_pitch: f.buffer.slice_pitch,
            host_row_pitch: f.host.row_pitch,
            host_slice_pitch: f.host.slice_pitch,
            data: $data,
            wait: f.wait,
            event: f.event,
        }
        .into()
    }};
}

impl RectCommand<'_> {
    /// The fields of piece `i` (of `pieces`, at `buffer_origin` with
    /// `host` its data's geometry) for the transport's chunk at `chunk`:
    /// the wait list goes with the first piece, the event with the last.
    fn piece_fields(
        &self,
        (i, pieces): (usize, usize),
        buffer_origin: [u64; 3],
        region: [u64; 3],
        host: Layout,
        chunk: u64,
    ) -> PieceFields {
        PieceFields {
            queue: self.queue,
            mem: if unsplittable(chunk) { 0 } else { self.mem },
            buffer_origin,
            region,
            buffer: self.rect.buffer,
            host,
            wait: if i == 0 {
                self.wait.clone()
            } else {
                Vec::new()
            },
            event: if i + 1 == pieces { self.event } else { 0 },
        }
    }

    /// The buffer's rectangle into `host`, complete on return.
    fn read(&self, client: &Client, host: &mut [u8]) -> ClResult<()> {
        let rect = self.rect;
        let list = pieces(rect.region, &rect.host, PIECE_LIMIT);
        for (i, p) in list.iter().enumerate() {
            let (buffer_origin, start, end) = rect.piece(p)?;
            let n = (i, list.len());
            // A transport may write back the whole data range, so bytes
            // between the rows must not be part of it: rows with gaps are
            // read packed and placed here (one more copy, in this library).
            let packed = Layout::new([0; 3], p.size, 0, 0)?;
            let contiguous = (p.size[1] == 1 || rect.host.row_pitch == packed.row_pitch)
                && (p.size[2] == 1 || rect.host.slice_pitch == packed.slice_pitch);
            let (layout, mut staging) = if contiguous {
                (rect.host, Vec::new())
            } else {
                (
                    packed,
                    vec![0u8; (p.size[0] * p.size[1] * p.size[2]) as usize],
                )
            };
            let target: &mut [u8] = if contiguous {
                &mut host[start as usize..end as usize]
            } else {
                &mut staging
            };
            client
                .call_with_in(target, |data: DataRef, chunk: u64| -> Request {
                    let fields = self.piece_fields(n, buffer_origin, p.size, layout, chunk);
                    piece_message!(EnqueueReadBufferRect, fields, data)
                })
                .map_err(|s| s.0)?;
            if !contiguous {
                let row = p.size[0] as usize;
                for (n, chunk) in staging.chunks_exact(row).enumerate() {
                    let (y, z) = (n as u64 % p.size[1], n as u64 / p.size[1]);
                    let at = rect.host.offset([p.at[0], p.at[1] + y, p.at[2] + z])? as usize;
                    host[at..at + row].copy_from_slice(chunk);
                }
            }
        }
        Ok(())
    }

    /// `host` into the buffer's rectangle; batched unless `blocking`.
    fn write(&self, client: &Client, host: &[u8], blocking: bool) -> ClResult<()> {
        let rect = self.rect;
        let list = pieces(rect.region, &rect.host, PIECE_LIMIT);
        for (i, p) in list.iter().enumerate() {
            let (buffer_origin, start, end) = rect.piece(p)?;
            let n = (i, list.len());
            let make = |data: DataRef, chunk: u64| -> Request {
                let fields = self.piece_fields(n, buffer_origin, p.size, rect.host, chunk);
                piece_message!(EnqueueWriteBufferRect, fields, data)
            };
            let data = &host[start as usize..end as usize];
            let result = if blocking {
                client.call_with_out(data, make).map(drop)
            } else {
                client.defer_with_out(data, make)
            };
            result.map_err(|s| s.0)?;
        }
        Ok(())
    }
}

fn enqueue_copy_buffer_rect(
    queue: cl_command_queue,
    src: cl_mem,
    dst: cl_mem,
    src_origin: *const usize,
    dst_origin: *const usize,
    region: *const usize,
    srp: usize,
    ssp: usize,
    drp: usize,
    dsp: usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let (queue, src) = queue_and_mem(queue, src)?;
    let dst = mem_in_context_of(&queue, dst)?;
    let region = triple(region)?;
    check_region(region)?;
    let src_layout = Layout::new(triple(src_origin)?, region, srp as u64, ssp as u64)?;
    let dst_layout = Layout::new(triple(dst_origin)?, region, drp as u64, dsp as u64)?;
    if src_layout.extent(region)?.1 > src.size || dst_layout.extent(region)?.1 > dst.size {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_VALUE if src and dst are the same buffer and the pitches
    // differ; CL_MEM_COPY_OVERLAP if the regions overlap.
    if std::sync::Arc::ptr_eq(&src, &dst) {
        if srp != drp || ssp != dsp {
            return Err(CL_INVALID_VALUE);
        }
        if overlap(&src_layout, &dst_layout, region)? {
            return Err(CL_MEM_COPY_OVERLAP);
        }
    }
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_COPY_BUFFER_RECT)?;
    let copy = EnqueueCopyBufferRect {
        queue: queue.handle(),
        src: src.handle(),
        dst: dst.handle(),
        src_origin: src_layout.origin,
        dst_origin: dst_layout.origin,
        region,
        src_row_pitch: src_layout.row_pitch,
        src_slice_pitch: src_layout.slice_pitch,
        dst_row_pitch: dst_layout.row_pitch,
        dst_slice_pitch: dst_layout.slice_pitch,
        wait,
        event: new_event.handle(),
    };
    new_event.submit(&queue, copy.into())
}
