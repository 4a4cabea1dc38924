//! Pitched allocations and 2D copies (`cuMemAllocPitch`, `cuMemcpy2D*`),
//! and copies between contexts (`cuMemcpyPeer*`), built on the 1D copies
//! of `memory.rs`, which keep their stream order and synchronization rules.
//!
//! A 2D copy is one 1D copy where both sides are contiguous. Otherwise:
//! rows to the device go one by one (small rows travel in the batch), as
//! the bytes between the destination's rows must keep theirs; rows from
//! the device come in one copy of the span that covers them, scattered on
//! the host, unless the span is much larger than the rows or the host side
//! is memory that must be written through `memory.rs` (mapped, or awaiting
//! an earlier asynchronous copy), where they too go one by one. The
//! `Async` forms from the device return once the rows arrived (allowed:
//! CUDA only permits an earlier return). Arrays (`CU_MEMORYTYPE_ARRAY`)
//! are not supported.

use std::ffi::{c_uint, c_void};

use super::memory::{alloc_device, copy_on_device, copy_to_device, copy_to_host};
use crate::ffi::{
    bytes, bytes_mut, entry, get, handle, put, result, CUdeviceptr, CuResult, Handle,
};
use crate::runtime::{lock, require_context, rt, stream_handle, Runtime};

/// `CUmemorytype`.
const HOST: c_uint = 1;
const DEVICE: c_uint = 2;
const ARRAY: c_uint = 3;
const UNIFIED: c_uint = 4;

/// The row alignment `cuMemAllocPitch` gives (measured natively: the pitch
/// of a 100-byte row is 512).
const PITCH_ALIGNMENT: usize = 512;

/// A span read whole for its rows may be at most this many times the
/// rows' bytes, plus `SPAN_SLACK`; past that the rows go one by one.
const SPAN_FACTOR: usize = 4;
const SPAN_SLACK: usize = 64 << 10;

/// `CUDA_MEMCPY2D`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct CudaMemcpy2D {
    pub src_x_in_bytes: usize,
    pub src_y: usize,
    pub src_memory_type: c_uint,
    pub src_host: *const c_void,
    pub src_device: CUdeviceptr,
    pub src_array: *mut c_void,
    pub src_pitch: usize,
    pub dst_x_in_bytes: usize,
    pub dst_y: usize,
    pub dst_memory_type: c_uint,
    pub dst_host: *mut c_void,
    pub dst_device: CUdeviceptr,
    pub dst_array: *mut c_void,
    pub dst_pitch: usize,
    pub width_in_bytes: usize,
    pub height: usize,
}

/// Where one side of a copy starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Host(usize),
    Device(u64),
}

/// One side's first byte: its base, `y` rows of `pitch` and `x` bytes in.
fn side(
    rt: &Runtime,
    memory_type: c_uint,
    (host, device): (usize, u64),
    (x, y, pitch): (usize, usize, usize),
) -> CuResult<Side> {
    let offset = y
        .checked_mul(pitch)
        .and_then(|o| o.checked_add(x))
        .ok_or(result::ERROR_INVALID_VALUE)?;
    let at = |base: u64| {
        base.checked_add(offset as u64)
            .ok_or(result::ERROR_INVALID_VALUE)
    };
    match memory_type {
        HOST => Ok(Side::Host(at(host as u64)? as usize)),
        DEVICE => Ok(Side::Device(at(device)?)),
        // A unified address names either; the library knows its devices'.
        UNIFIED => {
            let address = at(device)?;
            Ok(if rt.is_device(address, 1) {
                Side::Device(address)
            } else {
                Side::Host(address as usize)
            })
        }
        ARRAY => Err(result::ERROR_NOT_SUPPORTED),
        _ => Err(result::ERROR_INVALID_VALUE),
    }
}

/// The bytes from the first row's start to the last row's end.
fn span(pitch: usize, width: usize, height: usize) -> CuResult<usize> {
    pitch
        .checked_mul(height - 1)
        .and_then(|s| s.checked_add(width))
        .ok_or(result::ERROR_INVALID_VALUE)
}

/// Whether host bytes may be written directly: not mapped to a device
/// copy and not awaited by an earlier asynchronous copy.
fn plain_host(rt: &Runtime, at: usize, len: usize) -> bool {
    (rt.maps_nothing() || lock(&rt.mapped).device_range(at, len).is_none())
        && !lock(&rt.order).pending_overlaps(at, len)
}

fn copy_2d(p: &CudaMemcpy2D, stream: u64, asynchronous: bool) -> CuResult<()> {
    let rt = rt()?;
    require_context()?;
    let (width, height) = (p.width_in_bytes, p.height);
    if width == 0 || height == 0 {
        return Ok(());
    }
    if height > 1 && (p.src_pitch < width || p.dst_pitch < width) {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let src = side(
        rt,
        p.src_memory_type,
        (p.src_host as usize, p.src_device),
        (p.src_x_in_bytes, p.src_y, p.src_pitch),
    )?;
    let dst = side(
        rt,
        p.dst_memory_type,
        (p.dst_host as usize, p.dst_device),
        (p.dst_x_in_bytes, p.dst_y, p.dst_pitch),
    )?;
    let (src_pitch, dst_pitch) = (p.src_pitch, p.dst_pitch);
    let src_span = span(src_pitch, width, height)?;
    let dst_span = span(dst_pitch, width, height)?;
    let contiguous = height == 1 || (src_pitch == width && dst_pitch == width);
    let total = width * height;
    let row = |r: usize, pitch: usize| r * pitch;
    match (src, dst) {
        (Side::Host(s), Side::Host(d)) => {
            for r in 0..height {
                let from = bytes((s + row(r, src_pitch)) as *const c_void, width)?.to_vec();
                bytes_mut((d + row(r, dst_pitch)) as *mut c_void, width)?.copy_from_slice(&from);
            }
            Ok(())
        }
        (Side::Host(s), Side::Device(d)) => {
            if contiguous {
                return copy_to_device(d, s as *const c_void, total, stream, !asynchronous);
            }
            if dst_pitch == width {
                let mut packed = Vec::with_capacity(total);
                for r in 0..height {
                    packed
                        .extend_from_slice(bytes((s + row(r, src_pitch)) as *const c_void, width)?);
                }
                return copy_to_device(d, packed.as_ptr().cast(), total, stream, !asynchronous);
            }
            for r in 0..height {
                let from = (s + row(r, src_pitch)) as *const c_void;
                copy_to_device(
                    d + row(r, dst_pitch) as u64,
                    from,
                    width,
                    stream,
                    !asynchronous,
                )?;
            }
            Ok(())
        }
        (Side::Device(s), Side::Host(d)) => {
            if contiguous {
                return copy_to_host(d as *mut c_void, s, total, stream, asynchronous);
            }
            if src_span <= total.saturating_mul(SPAN_FACTOR).saturating_add(SPAN_SLACK)
                && plain_host(rt, d, dst_span)
            {
                let mut rows = vec![0u8; src_span];
                copy_to_host(rows.as_mut_ptr().cast(), s, src_span, stream, false)?;
                for r in 0..height {
                    let from = &rows[row(r, src_pitch)..row(r, src_pitch) + width];
                    bytes_mut((d + row(r, dst_pitch)) as *mut c_void, width)?.copy_from_slice(from);
                }
                return Ok(());
            }
            for r in 0..height {
                let to = (d + row(r, dst_pitch)) as *mut c_void;
                copy_to_host(
                    to,
                    s + row(r, src_pitch) as u64,
                    width,
                    stream,
                    asynchronous,
                )?;
            }
            Ok(())
        }
        (Side::Device(s), Side::Device(d)) => {
            if contiguous {
                return copy_on_device(d, s, total, stream);
            }
            for r in 0..height {
                copy_on_device(
                    d + row(r, dst_pitch) as u64,
                    s + row(r, src_pitch) as u64,
                    width,
                    stream,
                )?;
            }
            Ok(())
        }
    }
}

/// `cuMemAllocPitch`'s pitch for rows of `width` bytes.
fn pitch_for(width: usize) -> CuResult<usize> {
    width
        .checked_next_multiple_of(PITCH_ALIGNMENT)
        .ok_or(result::ERROR_INVALID_VALUE)
}

entry! {
    fn cuMemAllocPitch_v2(dptr: *mut CUdeviceptr, pitch: *mut usize, width: usize, height: usize, element_size: c_uint) {
        let rt = rt()?;
        let ctx = require_context()?;
        if width == 0 || height == 0 || !matches!(element_size, 4 | 8 | 16) {
            return Err(result::ERROR_INVALID_VALUE);
        }
        let row = pitch_for(width)?;
        let size = row.checked_mul(height).ok_or(result::ERROR_INVALID_VALUE)?;
        let ptr = alloc_device(rt, ctx, size)?;
        put(pitch, row)?;
        put(dptr, ptr)
    }
}

entry! {
    fn cuMemcpy2D_v2(copy: *const CudaMemcpy2D) | cuMemcpy2D_v2_ptds {
        copy_2d(&get(copy)?, 0, false)
    }
}

entry! {
    fn cuMemcpy2DUnaligned_v2(copy: *const CudaMemcpy2D) | cuMemcpy2DUnaligned_v2_ptds {
        copy_2d(&get(copy)?, 0, false)
    }
}

entry! {
    fn cuMemcpy2DAsync_v2(copy: *const CudaMemcpy2D, stream: Handle) | cuMemcpy2DAsync_v2_ptsz {
        copy_2d(&get(copy)?, stream_handle(handle(stream)), true)
    }
}

entry! {
    /// One device: both contexts' memory is the session's, so a copy on it.
    fn cuMemcpyPeer(dst: CUdeviceptr, dst_ctx: Handle, src: CUdeviceptr, src_ctx: Handle, n: usize) | cuMemcpyPeer_ptds {
        let _ = (dst_ctx, src_ctx);
        copy_on_device(dst, src, n, 0)
    }
}

entry! {
    fn cuMemcpyPeerAsync(
        dst: CUdeviceptr,
        dst_ctx: Handle,
        src: CUdeviceptr,
        src_ctx: Handle,
        n: usize,
        stream: Handle,
    ) | cuMemcpyPeerAsync_ptsz {
        let _ = (dst_ctx, src_ctx);
        copy_on_device(dst, src, n, stream_handle(handle(stream)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pitches_round_rows_up_to_the_drivers_alignment() {
        assert_eq!(pitch_for(1), Ok(512));
        assert_eq!(pitch_for(100), Ok(512));
        assert_eq!(pitch_for(512), Ok(512));
        assert_eq!(pitch_for(513), Ok(1024));
        assert_eq!(pitch_for(usize::MAX), Err(result::ERROR_INVALID_VALUE));
    }

    #[test]
    fn spans_cover_every_row_and_refuse_overflow() {
        assert_eq!(span(512, 100, 1), Ok(100));
        assert_eq!(span(512, 100, 3), Ok(1124));
        assert_eq!(span(usize::MAX, 1, 3), Err(result::ERROR_INVALID_VALUE));
    }

    #[test]
    fn the_struct_has_the_drivers_layout() {
        // CUDA_MEMCPY2D: 16 eight-byte fields, the two memory types padded.
        assert_eq!(std::mem::size_of::<CudaMemcpy2D>(), 128);
        assert_eq!(std::mem::offset_of!(CudaMemcpy2D, src_host), 24);
        assert_eq!(std::mem::offset_of!(CudaMemcpy2D, dst_x_in_bytes), 56);
        assert_eq!(std::mem::offset_of!(CudaMemcpy2D, width_in_bytes), 112);
    }
}
