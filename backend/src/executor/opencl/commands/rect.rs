//! Rect transfers (`clEnqueue{Read,Write}BufferRect`). The guest side of a
//! rect may span many descriptors, and its length is the guest's to choose
//! (up to 2^40, over descriptors that may all alias the same pages), so it
//! is never staged whole: rows go through a staging area of at most
//! `RECT_CHUNK` bytes, one device call per chunk. What a transfer touches
//! is bounded by the buffer, which the VM's memory quota bounds.

use cl3::types::{cl_event, CL_BLOCKING};
use vgpu_protocol::{DataRef, Status};

use super::{rect_extent, sizes3, to_usize, WaitList};
use crate::chain::GuestIo;
use crate::executor::opencl::objects::{HostEvent, HostMem, QueueEntry};
use crate::executor::opencl::session::OpenClSession;

/// The most host memory one rect transfer stages, whatever the guest says.
pub(in crate::executor::opencl) const RECT_CHUNK: usize = 1 << 20;

/// The geometry of a rect transfer, as the guest gave it.
pub(super) struct Rect {
    pub buffer_origin: [u64; 3],
    pub host_origin: [u64; 3],
    pub region: [u64; 3],
    pub buffer_row_pitch: u64,
    pub buffer_slice_pitch: u64,
    pub host_row_pitch: u64,
    pub host_slice_pitch: u64,
}

/// Row and slice pitches with the spec's defaults filled in, checked as the
/// spec says (`CL_INVALID_VALUE`).
fn pitches(region: &[u64; 3], row: u64, slice: u64) -> Result<(u64, u64), Status> {
    let row = match row {
        0 => region[0],
        r if r < region[0] => return Err(Status::INVALID_VALUE),
        r => r,
    };
    let least = region[1].checked_mul(row).ok_or(Status::INVALID_VALUE)?;
    let slice = match slice {
        0 => least,
        s if s < least || s % row != 0 => return Err(Status::INVALID_VALUE),
        s => s,
    };
    Ok((row, slice))
}

/// Where the rect's bytes lie on both sides, checked before anything moves.
struct Layout {
    region: [u64; 3],
    buffer_pitches: (u64, u64),
    host_pitches: (u64, u64),
}

impl Rect {
    fn layout(&self, buffer_size: u64, data: DataRef) -> Result<Layout, Status> {
        let buffer_pitches = pitches(&self.region, self.buffer_row_pitch, self.buffer_slice_pitch)?;
        let host_pitches = pitches(&self.region, self.host_row_pitch, self.host_slice_pitch)?;
        let on_buffer = rect_extent(
            &self.buffer_origin,
            &self.region,
            buffer_pitches.0,
            buffer_pitches.1,
        )?;
        let on_host = rect_extent(
            &self.host_origin,
            &self.region,
            host_pitches.0,
            host_pitches.1,
        )?;
        if on_buffer > buffer_size || on_host > data.len {
            return Err(Status::INVALID_VALUE);
        }
        Ok(Layout {
            region: self.region,
            buffer_pitches,
            host_pitches,
        })
    }

    /// Offset in the guest data of row `y` of slice `z`, from column `x`
    /// (inside the extent checked by `layout`, so it cannot overflow).
    fn host_offset(&self, layout: &Layout, x: u64, y: u64, z: u64) -> u64 {
        self.host_origin[0]
            + x
            + (self.host_origin[1] + y) * layout.host_pitches.0
            + (self.host_origin[2] + z) * layout.host_pitches.1
    }
}

/// One piece of a chunked rect: `[width, rows, slices]` from `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Piece {
    at: [u64; 3],
    size: [u64; 3],
}

/// The pieces of `region`, in order, each at most `chunk` bytes: whole
/// slices where a slice fits, else whole rows, else parts of a row.
fn pieces(region: [u64; 3], chunk: u64) -> impl Iterator<Item = Piece> {
    let [w, h, d] = region;
    let mut at = [0u64; 3];
    std::iter::from_fn(move || {
        if at[2] >= d {
            return None;
        }
        let size = if w.saturating_mul(h) <= chunk {
            [w, h, (chunk / (w * h)).min(d - at[2])]
        } else if w <= chunk {
            [w, (chunk / w).min(h - at[1]), 1]
        } else {
            [chunk.min(w - at[0]), 1, 1]
        };
        let piece = Piece { at, size };
        at[0] += size[0];
        if at[0] >= w {
            at[0] = 0;
            at[1] += size[1];
            if at[1] >= h {
                at[1] = 0;
                at[2] += size[2];
            }
        }
        Some(piece)
    })
}

impl OpenClSession {
    /// Moves a rect between guest memory (`data`) and the buffer.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rect_transfer(
        &mut self,
        queue: &QueueEntry,
        mem: &HostMem,
        rect: &Rect,
        data: DataRef,
        io: &mut GuestIo,
        wait: &WaitList,
        to_device: bool,
    ) -> Result<cl_event, Status> {
        let layout = rect.layout(mem.size, data)?;
        if to_device {
            self.before_write(queue.queue.0, mem);
        }
        let segments = if to_device {
            io.out_slices(data)?
        } else {
            io.in_slices(data)?
        };
        if let [only] = segments.as_slice() {
            // Contiguous guest memory: the driver reads or writes it in place.
            // SAFETY: `only` spans `data.len` bytes of live guest memory,
            // at least the host-side extent checked by `layout`; the call is
            // blocking.
            return unsafe {
                rect_call(
                    queue,
                    mem,
                    &sizes3(&rect.buffer_origin)?,
                    &sizes3(&rect.host_origin)?,
                    &sizes3(&rect.region)?,
                    layout.buffer_pitches,
                    layout.host_pitches,
                    only.ptr,
                    wait,
                    to_device,
                )
            };
        }
        let total = layout.region.iter().product::<u64>();
        let mut staging = vec![0u8; to_usize(total.min(RECT_CHUNK as u64))?];
        let mut last: cl_event = std::ptr::null_mut();
        for piece in pieces(layout.region, RECT_CHUNK as u64) {
            let [w, h, d] = piece.size;
            let row = to_usize(w)?;
            let rows = (0..d).flat_map(|z| (0..h).map(move |y| (y, z)));
            let guest_rows = rows.map(|(y, z)| {
                rect.host_offset(&layout, piece.at[0], piece.at[1] + y, piece.at[2] + z)
                    + data.offset
            });
            if to_device {
                for (i, at) in guest_rows.clone().enumerate() {
                    io.out.read(at, &mut staging[i * row..(i + 1) * row])?;
                }
            }
            let origin = [
                rect.buffer_origin[0] + piece.at[0],
                rect.buffer_origin[1] + piece.at[1],
                rect.buffer_origin[2] + piece.at[2],
            ];
            let no_wait = WaitList {
                _held: Vec::new(),
                raw: Vec::new(),
            };
            // SAFETY: `staging` holds at least `w * h * d` bytes (a piece is
            // at most `RECT_CHUNK` and at most the whole region), packed
            // with the host pitches given; the call is blocking.
            let event = unsafe {
                rect_call(
                    queue,
                    mem,
                    &sizes3(&origin)?,
                    &[0, 0, 0],
                    &sizes3(&piece.size)?,
                    layout.buffer_pitches,
                    (w, w * h),
                    staging.as_mut_ptr(),
                    if last.is_null() { wait } else { &no_wait },
                    to_device,
                )
            }?;
            if !last.is_null() {
                drop(HostEvent(last));
            }
            last = event;
            if !to_device {
                for (i, at) in guest_rows.enumerate() {
                    io.in_.write(at, &staging[i * row..(i + 1) * row])?;
                }
            }
        }
        // A region has at least one piece (`layout` refuses empty ones).
        Ok(last)
    }
}

/// One blocking `clEnqueue{Read,Write}BufferRect`.
///
/// # Safety
///
/// `host` must point at memory that holds the host-side extent of the
/// geometry, readable (`to_device`) or writable, for the whole call.
#[allow(clippy::too_many_arguments)]
unsafe fn rect_call(
    queue: &QueueEntry,
    mem: &HostMem,
    buffer_origin: &[usize; 3],
    host_origin: &[usize; 3],
    region: &[usize; 3],
    buffer_pitches: (u64, u64),
    host_pitches: (u64, u64),
    host: *mut u8,
    wait: &WaitList,
    to_device: bool,
) -> Result<cl_event, Status> {
    let (brp, bsp) = (to_usize(buffer_pitches.0)?, to_usize(buffer_pitches.1)?);
    let (hrp, hsp) = (to_usize(host_pitches.0)?, to_usize(host_pitches.1)?);
    // SAFETY: the caller vouches for `host`; the arrays hold 3 elements;
    // queue and buffer are live objects of the session.
    unsafe {
        if to_device {
            cl3::command_queue::enqueue_write_buffer_rect(
                queue.queue.0,
                mem.raw,
                CL_BLOCKING,
                buffer_origin.as_ptr(),
                host_origin.as_ptr(),
                region.as_ptr(),
                brp,
                bsp,
                hrp,
                hsp,
                host as *const _,
                wait.len(),
                wait.ptr(),
            )
        } else {
            cl3::command_queue::enqueue_read_buffer_rect(
                queue.queue.0,
                mem.raw,
                CL_BLOCKING,
                buffer_origin.as_ptr(),
                host_origin.as_ptr(),
                region.as_ptr(),
                brp,
                bsp,
                hrp,
                hsp,
                host as *mut _,
                wait.len(),
                wait.ptr(),
            )
        }
    }
    .map_err(Status)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn covered(region: [u64; 3], chunk: u64) -> Vec<Piece> {
        let all: Vec<Piece> = pieces(region, chunk).collect();
        let bytes: u64 = all.iter().map(|p| p.size.iter().product::<u64>()).sum();
        assert_eq!(bytes, region.iter().product::<u64>(), "{region:?}");
        assert!(all.iter().all(|p| p.size.iter().product::<u64>() <= chunk));
        all
    }

    #[test]
    fn pieces_cover_the_region_within_the_chunk() {
        assert_eq!(covered([4, 4, 4], 64).len(), 1);
        assert_eq!(covered([4, 4, 4], 32).len(), 2);
        assert_eq!(covered([8, 5, 2], 16).len(), 6);
        assert_eq!(covered([10, 2, 1], 4).len(), 6);
        assert_eq!(
            covered([10, 1, 1], 4),
            vec![
                Piece {
                    at: [0, 0, 0],
                    size: [4, 1, 1]
                },
                Piece {
                    at: [4, 0, 0],
                    size: [4, 1, 1]
                },
                Piece {
                    at: [8, 0, 0],
                    size: [2, 1, 1]
                },
            ]
        );
        covered([3, 7, 5], 1 << 20);
        covered([1, 1, 1000], 7);
    }

    #[test]
    fn pitches_follow_the_spec() {
        assert_eq!(pitches(&[4, 2, 1], 0, 0), Ok((4, 8)));
        assert_eq!(pitches(&[4, 2, 1], 6, 0), Ok((6, 12)));
        assert_eq!(pitches(&[4, 2, 1], 3, 0), Err(Status::INVALID_VALUE));
        assert_eq!(pitches(&[4, 2, 1], 4, 10), Err(Status::INVALID_VALUE));
        assert_eq!(pitches(&[4, 2, 1], 4, 4), Err(Status::INVALID_VALUE));
        assert_eq!(pitches(&[4, 2, 1], 4, 16), Ok((4, 16)));
    }
}
