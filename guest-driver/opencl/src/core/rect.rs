//! Geometry of the `*BufferRect` commands.

use opencl_sys::{cl_int, CL_INVALID_VALUE};

use crate::core::object::ClResult;

/// One side of a rectangular transfer: where it starts and how rows and
/// slices are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub origin: [u64; 3],
    pub row_pitch: u64,
    pub slice_pitch: u64,
}

/// The rows and slices a region covers under a layout.
impl Layout {
    /// Applies the spec's defaults (0 = tightly packed) and checks:
    /// CL_INVALID_VALUE if a row pitch is not 0 and less than region[0],
    /// or a slice pitch is not 0 and less than region[1] * row pitch or not
    /// a multiple of the row pitch.
    pub fn new(
        origin: [u64; 3],
        region: [u64; 3],
        row_pitch: u64,
        slice_pitch: u64,
    ) -> ClResult<Layout> {
        let row_pitch = match row_pitch {
            0 => region[0],
            p if p < region[0] => return Err(CL_INVALID_VALUE),
            p => p,
        };
        let min_slice = region[1].checked_mul(row_pitch).ok_or(CL_INVALID_VALUE)?;
        let slice_pitch = match slice_pitch {
            0 => min_slice,
            p if p < min_slice || p % row_pitch != 0 => return Err(CL_INVALID_VALUE),
            p => p,
        };
        Ok(Layout {
            origin,
            row_pitch,
            slice_pitch,
        })
    }

    /// Offset of the element `(x, y, z)` of the region.
    pub fn offset(&self, at: [u64; 3]) -> ClResult<u64> {
        let x = self.origin[0].checked_add(at[0]);
        let y = self.origin[1]
            .checked_add(at[1])
            .and_then(|y| y.checked_mul(self.row_pitch));
        let z = self.origin[2]
            .checked_add(at[2])
            .and_then(|z| z.checked_mul(self.slice_pitch));
        x.zip(y)
            .zip(z)
            .and_then(|((x, y), z)| x.checked_add(y)?.checked_add(z))
            .ok_or(CL_INVALID_VALUE)
    }

    /// `[first, last + 1)` byte offsets the region touches.
    pub fn extent(&self, region: [u64; 3]) -> ClResult<(u64, u64)> {
        let start = self.offset([0, 0, 0])?;
        let end = self.offset([region[0] - 1, region[1] - 1, region[2] - 1])? + 1;
        Ok((start, end))
    }
}

/// CL_INVALID_VALUE if any region element is 0.
pub fn check_region(region: [u64; 3]) -> Result<(), cl_int> {
    if region.contains(&0) {
        Err(CL_INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// A part of a region small enough for one message: `at` is its corner
/// inside the region, `size` its extent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub at: [u64; 3],
    pub size: [u64; 3],
}

/// Splits a region so that each piece's host extent (under `host`) stays
/// within `limit` bytes: whole region, else slices, else groups of rows,
/// else parts of rows.
pub fn pieces(region: [u64; 3], host: &Layout, limit: u64) -> Vec<Piece> {
    let whole = (region[2] - 1) * host.slice_pitch + (region[1] - 1) * host.row_pitch + region[0];
    if whole <= limit {
        return vec![Piece {
            at: [0, 0, 0],
            size: region,
        }];
    }
    let mut out = Vec::new();
    for z in 0..region[2] {
        if region[0] > limit {
            for y in 0..region[1] {
                let mut x = 0;
                while x < region[0] {
                    let w = limit.min(region[0] - x);
                    out.push(Piece {
                        at: [x, y, z],
                        size: [w, 1, 1],
                    });
                    x += w;
                }
            }
        } else {
            let rows = ((limit - region[0]) / host.row_pitch.max(1) + 1).max(1);
            let mut y = 0;
            while y < region[1] {
                let h = rows.min(region[1] - y);
                out.push(Piece {
                    at: [0, y, z],
                    size: [region[0], h, 1],
                });
                y += h;
            }
        }
    }
    out
}

/// Whether two rectangles of the same buffer overlap (`CL_MEM_COPY_OVERLAP`):
/// exact when both sides use the same pitches, else by byte extents.
pub fn overlap(a: &Layout, b: &Layout, region: [u64; 3]) -> ClResult<bool> {
    if a.row_pitch == b.row_pitch && a.slice_pitch == b.slice_pitch {
        return Ok((0..3).all(|d| {
            a.origin[d] < b.origin[d] + region[d] && b.origin[d] < a.origin[d] + region[d]
        }));
    }
    let (a0, a1) = a.extent(region)?;
    let (b0, b1) = b.extent(region)?;
    Ok(a0 < b1 && b0 < a1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_defaults_to_tight_packing() {
        let l = Layout::new([1, 2, 3], [4, 5, 6], 0, 0).unwrap();
        assert_eq!((l.row_pitch, l.slice_pitch), (4, 20));
        assert_eq!(l.offset([0, 0, 0]).unwrap(), 1 + 2 * 4 + 3 * 20);
    }

    #[test]
    fn layout_rejects_short_pitches() {
        assert_eq!(Layout::new([0; 3], [4, 5, 6], 3, 0), Err(CL_INVALID_VALUE));
        assert_eq!(Layout::new([0; 3], [4, 5, 6], 4, 19), Err(CL_INVALID_VALUE));
        assert_eq!(Layout::new([0; 3], [4, 5, 6], 4, 22), Err(CL_INVALID_VALUE));
    }

    #[test]
    fn pieces_cover_the_region_exactly_once() {
        let host = Layout::new([0; 3], [100, 50, 3], 128, 0).unwrap();
        for limit in [1 << 20, 1000, 300, 64, 7] {
            let mut seen = vec![0u8; 100 * 50 * 3];
            for p in pieces([100, 50, 3], &host, limit) {
                let extent = (p.size[1] - 1) * host.row_pitch + p.size[0];
                assert!(extent <= limit.max(100) || p.size[1] == 1);
                for z in 0..p.size[2] {
                    for y in 0..p.size[1] {
                        for x in 0..p.size[0] {
                            let (x, y, z) = (p.at[0] + x, p.at[1] + y, p.at[2] + z);
                            seen[(z * 5000 + y * 100 + x) as usize] += 1;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "limit {limit}");
        }
    }

    #[test]
    fn overlap_is_exact_for_equal_pitches() {
        let a = Layout::new([0, 0, 0], [4, 4, 1], 16, 0).unwrap();
        let b = Layout::new([8, 0, 0], [4, 4, 1], 16, 0).unwrap();
        assert!(!overlap(&a, &b, [4, 4, 1]).unwrap());
        let c = Layout::new([2, 1, 0], [4, 4, 1], 16, 0).unwrap();
        assert!(overlap(&a, &c, [4, 4, 1]).unwrap());
    }
}
