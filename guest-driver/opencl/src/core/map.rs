//! Host-side areas returned by `clEnqueueMapBuffer`.

use std::alloc::{alloc, dealloc, Layout};
use std::ptr::NonNull;

use opencl_sys::{cl_map_flags, CL_MAP_WRITE, CL_MAP_WRITE_INVALIDATE_REGION};

/// Memory this library allocated for a mapping; freed on drop.
pub struct MapArea {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the area is plain heap memory owned by this value; the
// application accesses it between map and unmap as the spec allows.
unsafe impl Send for MapArea {}
// SAFETY: as above; the library itself only reads it during unmap.
unsafe impl Sync for MapArea {}

/// Alignment of mapped areas: at least any OpenCL C type and a cache line.
const MAP_ALIGN: usize = 128;

impl MapArea {
    pub fn new(size: usize) -> Option<MapArea> {
        let layout = Layout::from_size_align(size.max(1), MAP_ALIGN).ok()?;
        // SAFETY: the layout's size is nonzero.
        let ptr = NonNull::new(unsafe { alloc(layout) })?;
        Some(MapArea { ptr, layout })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
}

impl Drop for MapArea {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc` with this layout and is freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// One outstanding map of a buffer.
pub struct Mapping {
    /// What the application received.
    pub ptr: usize,
    pub offset: u64,
    pub size: u64,
    pub flags: cl_map_flags,
    /// The area, unless the pointer is the application's own
    /// (`CL_MEM_USE_HOST_PTR`).
    pub area: Option<MapArea>,
    /// For an image: the mapped region and how it lies at `ptr`.
    pub image: Option<ImageMap>,
}

/// The region of an image mapping.
pub struct ImageMap {
    pub origin: [u64; 3],
    pub region: [u64; 3],
    pub layout: crate::core::image::HostLayout,
}

impl Mapping {
    /// Whether unmapping must write the region back to the device.
    pub fn writes_back(&self) -> bool {
        self.flags & (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION) != 0
    }
}
