//! Image formats and geometry both sides agree on: the bytes of one pixel
//! of a `cl_image_format`, and the pixel extent of each image type. Image
//! data on the wire is always tightly packed, so these are all either side
//! needs to bound a transfer.

/// `cl_mem_object_type` values of images.
pub mod image_type {
    pub const IMAGE2D: u32 = 0x10F1;
    pub const IMAGE3D: u32 = 0x10F2;
    pub const IMAGE2D_ARRAY: u32 = 0x10F3;
    pub const IMAGE1D: u32 = 0x10F4;
    pub const IMAGE1D_ARRAY: u32 = 0x10F5;
    pub const IMAGE1D_BUFFER: u32 = 0x10F6;
}

/// Channels of a `cl_channel_order`; `None` for an unknown order.
pub fn channels(order: u32) -> Option<u64> {
    Some(match order {
        // R, A, INTENSITY, LUMINANCE, DEPTH
        0x10B0 | 0x10B1 | 0x10B8 | 0x10B9 | 0x10BD => 1,
        // RG, RA, Rx, DEPTH_STENCIL
        0x10B2 | 0x10B3 | 0x10BA | 0x10BE => 2,
        // RGB, RGx, sRGB
        0x10B4 | 0x10BB | 0x10BF => 3,
        // RGBA, BGRA, ARGB, RGBx, sRGBx, sRGBA, sBGRA, ABGR
        0x10B5 | 0x10B6 | 0x10B7 | 0x10BC | 0x10C0 | 0x10C1 | 0x10C2 | 0x10C3 => 4,
        _ => return None,
    })
}

/// Bytes of one pixel of `(order, data_type)`; `None` when either is
/// unknown or the pair is not a valid format (a packed type with an order
/// it cannot hold).
pub fn element_size(order: u32, data_type: u32) -> Option<u64> {
    let n = channels(order)?;
    let packed = |size: u64, orders: &[u32]| orders.contains(&order).then_some(size);
    match data_type {
        // SNORM_INT8, UNORM_INT8, SIGNED_INT8, UNSIGNED_INT8
        0x10D0 | 0x10D2 | 0x10D7 | 0x10DA => Some(n),
        // SNORM_INT16, UNORM_INT16, SIGNED_INT16, UNSIGNED_INT16, HALF_FLOAT
        0x10D1 | 0x10D3 | 0x10D8 | 0x10DB | 0x10DD => Some(2 * n),
        // SIGNED_INT32, UNSIGNED_INT32, FLOAT
        0x10D9 | 0x10DC | 0x10DE => Some(4 * n),
        // UNORM_SHORT_565, UNORM_SHORT_555: RGB or RGBx
        0x10D4 | 0x10D5 => packed(2, &[0x10B4, 0x10BC]),
        // UNORM_INT_101010: RGB or RGBx; UNORM_INT_101010_2: RGBA
        0x10D6 => packed(4, &[0x10B4, 0x10BC]),
        0x10E0 => packed(4, &[0x10B5]),
        // UNORM_INT24: DEPTH or DEPTH_STENCIL, four bytes a pixel
        0x10DF => packed(4, &[0x10BD, 0x10BE]),
        _ => None,
    }
}

/// Dimensions an image type has: how many of `region`'s entries may exceed
/// 1 (1D: 1, 1D array and 2D: 2, 2D array and 3D: 3); `None` when `ty` is
/// not an image type.
pub fn dimensions(ty: u32) -> Option<usize> {
    use image_type::*;
    match ty {
        IMAGE1D | IMAGE1D_BUFFER => Some(1),
        IMAGE1D_ARRAY | IMAGE2D => Some(2),
        IMAGE2D_ARRAY | IMAGE3D => Some(3),
        _ => None,
    }
}

/// The extent of an image in pixels as the region/origin triple sees it:
/// array images count their layers in the last used dimension.
pub fn extent(ty: u32, dims: [u64; 3], array_size: u64) -> Option<[u64; 3]> {
    use image_type::*;
    let [w, h, d] = dims;
    Some(match ty {
        IMAGE1D | IMAGE1D_BUFFER => [w, 1, 1],
        IMAGE1D_ARRAY => [w, array_size, 1],
        IMAGE2D => [w, h, 1],
        IMAGE2D_ARRAY => [w, h, array_size],
        IMAGE3D => [w, h, d],
        _ => return None,
    })
}

/// Bytes of a tightly packed `region` of `elem`-byte pixels; `None` on an
/// empty region or overflow.
pub fn packed_len(region: [u64; 3], elem: u64) -> Option<u64> {
    if region.contains(&0) {
        return None;
    }
    region[0]
        .checked_mul(elem)?
        .checked_mul(region[1])?
        .checked_mul(region[2])
}

/// Whether `[origin, origin + region)` lies inside `extent`, with no
/// empty dimension.
pub fn region_inside(origin: [u64; 3], region: [u64; 3], extent: [u64; 3]) -> bool {
    (0..3).all(|d| {
        region[d] > 0
            && origin[d]
                .checked_add(region[d])
                .is_some_and(|end| end <= extent[d])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn element_sizes_follow_the_spec_table() {
        assert_eq!(element_size(0x10B5, 0x10DE), Some(16)); // RGBA FLOAT
        assert_eq!(element_size(0x10B0, 0x10DA), Some(1)); // R UINT8
        assert_eq!(element_size(0x10B4, 0x10D4), Some(2)); // RGB 565
        assert_eq!(element_size(0x10B5, 0x10D4), None); // RGBA 565
        assert_eq!(element_size(0x1234, 0x10DE), None);
        assert_eq!(element_size(0x10B5, 0x1234), None);
    }

    #[test]
    fn regions_are_bounded_and_overflow_is_refused() {
        let ext = extent(image_type::IMAGE2D, [4, 4, 0], 0).unwrap();
        assert!(region_inside([0, 0, 0], [4, 4, 1], ext));
        assert!(!region_inside([1, 0, 0], [4, 4, 1], ext));
        assert!(!region_inside([u64::MAX, 0, 0], [2, 1, 1], ext));
        assert!(!region_inside([0, 0, 0], [0, 1, 1], ext));
        assert_eq!(packed_len([u64::MAX, 2, 1], 16), None);
        assert_eq!(packed_len([2, 3, 4], 16), Some(384));
    }
}
