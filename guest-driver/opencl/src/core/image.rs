//! Images and samplers as the application sees them. An image is a `Mem`
//! with an `ImageDesc`; its contents live in the backend. Pixel data moves
//! tightly packed on the wire: this library applies the application's row
//! and slice pitches on its side, so the backend bounds every transfer by
//! the region and the pixel size alone.

use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::image as img;
use vgpu_protocol::ObjectKind;

use crate::core::context::Context;
use crate::core::memory::Mem;
use crate::core::object::{kind, Cl, ClResult};

/// What makes a memory object an image.
pub struct ImageDesc {
    pub format: cl_image_format,
    pub image_type: cl_mem_object_type,
    /// Width, height, depth as given (0 where the type has none).
    pub dims: [u64; 3],
    pub array_size: u64,
    /// Bytes of one pixel.
    pub elem: u64,
    /// `CL_IMAGE_ROW_PITCH` / `CL_IMAGE_SLICE_PITCH`: the application's
    /// for `CL_MEM_USE_HOST_PTR` images, else tightly packed.
    pub row_pitch: u64,
    pub slice_pitch: u64,
    /// The buffer of a 1D buffer image.
    pub buffer: Option<Arc<Cl<Mem>>>,
}

// SAFETY: `cl_image_format` is two integers; the rest is Send + Sync.
unsafe impl Send for ImageDesc {}
// SAFETY: as above.
unsafe impl Sync for ImageDesc {}

impl ImageDesc {
    /// The extent in pixels as origins and regions index it.
    pub fn extent(&self) -> [u64; 3] {
        img::extent(self.image_type, self.dims, self.array_size).unwrap_or([0; 3])
    }

    /// CL_INVALID_VALUE unless `[origin, origin + region)` lies inside the
    /// image (entries the type lacks must be origin 0, region 1).
    pub fn check_region(&self, origin: [u64; 3], region: [u64; 3]) -> ClResult<()> {
        if img::region_inside(origin, region, self.extent()) {
            Ok(())
        } else {
            Err(CL_INVALID_VALUE)
        }
    }

    /// The application's layout of a host area for `region` of this image,
    /// from the pitches a transfer or creation passes (0 = packed).
    pub fn host_layout(
        &self,
        region: [u64; 3],
        row_pitch: u64,
        slice_pitch: u64,
    ) -> ClResult<HostLayout> {
        let row_bytes = region[0].checked_mul(self.elem).ok_or(CL_INVALID_VALUE)?;
        let row = match row_pitch {
            0 => row_bytes,
            p if p < row_bytes => return Err(CL_INVALID_VALUE),
            p => p,
        };
        // A 1D array's layers step by the slice pitch, along region[1].
        if self.image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY {
            let layer = match slice_pitch {
                0 => row,
                p if p < row => return Err(CL_INVALID_VALUE),
                p => p,
            };
            return Ok(HostLayout {
                elem: self.elem,
                row: layer,
                slice: layer.checked_mul(region[1]).ok_or(CL_INVALID_VALUE)?,
            });
        }
        let min_slice = row.checked_mul(region[1]).ok_or(CL_INVALID_VALUE)?;
        let slice = match slice_pitch {
            0 => min_slice,
            _ if region[2] == 1 => min_slice,
            p if p < min_slice => return Err(CL_INVALID_VALUE),
            p => p,
        };
        Ok(HostLayout {
            elem: self.elem,
            row,
            slice,
        })
    }
}

/// How a region's pixels lie in application memory: pixel `(x, y, z)` of
/// the region at `z * slice + y * row + x * elem`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostLayout {
    pub elem: u64,
    pub row: u64,
    pub slice: u64,
}

impl HostLayout {
    pub fn offset(&self, at: [u64; 3]) -> ClResult<u64> {
        at[2]
            .checked_mul(self.slice)
            .and_then(|z| z.checked_add(at[1].checked_mul(self.row)?))
            .and_then(|a| a.checked_add(at[0].checked_mul(self.elem)?))
            .ok_or(CL_INVALID_VALUE)
    }

    /// Bytes from the region's first pixel to just past its last.
    pub fn extent(&self, region: [u64; 3]) -> ClResult<u64> {
        let last = self.offset([region[0] - 1, region[1] - 1, region[2] - 1])?;
        last.checked_add(self.elem).ok_or(CL_INVALID_VALUE)
    }
}

/// A sampler: its state is all the application can ask about, so info
/// queries are answered here.
pub struct Sampler {
    pub context: Arc<Cl<Context>>,
    pub normalized: bool,
    pub addressing: cl_addressing_mode,
    pub filter: cl_filter_mode,
    /// `CL_SAMPLER_PROPERTIES`: the list as given (empty for `clCreateSampler`).
    pub properties: Vec<cl_sampler_properties>,
}

kind!(Sampler, CL_INVALID_SAMPLER, Some(ObjectKind::Sampler));

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(ty: cl_mem_object_type) -> ImageDesc {
        ImageDesc {
            format: cl_image_format {
                image_channel_order: CL_RGBA,
                image_channel_data_type: CL_FLOAT,
            },
            image_type: ty,
            dims: [8, 4, 2],
            array_size: 3,
            elem: 16,
            row_pitch: 128,
            slice_pitch: 512,
            buffer: None,
        }
    }

    #[test]
    fn host_layouts_follow_the_pitches_and_refuse_short_ones() {
        let d = desc(CL_MEM_OBJECT_IMAGE3D);
        let l = d.host_layout([4, 2, 2], 0, 0).unwrap();
        assert_eq!((l.row, l.slice), (64, 128));
        assert_eq!(l.extent([4, 2, 2]).unwrap(), 256);
        assert_eq!(d.host_layout([4, 2, 2], 32, 0), Err(CL_INVALID_VALUE));
        assert_eq!(d.host_layout([4, 2, 2], 0, 100), Err(CL_INVALID_VALUE));
        let a = desc(CL_MEM_OBJECT_IMAGE1D_ARRAY);
        let l = a.host_layout([8, 3, 1], 0, 256).unwrap();
        assert_eq!(l.row, 256);
    }

    #[test]
    fn regions_beyond_the_image_are_refused() {
        let d = desc(CL_MEM_OBJECT_IMAGE2D);
        assert!(d.check_region([0, 0, 0], [8, 4, 1]).is_ok());
        assert_eq!(d.check_region([0, 0, 1], [8, 4, 1]), Err(CL_INVALID_VALUE));
        assert_eq!(
            d.check_region([usize::MAX as u64, 0, 0], [2, 1, 1]),
            Err(CL_INVALID_VALUE)
        );
    }
}
