//! Buffers and sub-buffers. The device copy lives in the backend; a
//! `CL_MEM_USE_HOST_PTR` buffer also remembers the application's pointer,
//! which maps return (after reading the device copy back into it).

use std::ffi::c_void;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard};

use opencl_sys::*;
use vgpu_protocol::ObjectKind;

use crate::core::callback::Destructors;
use crate::core::context::Context;
use crate::core::map::Mapping;
use crate::core::object::{kind, Cl, RawPtr};

pub struct Mem {
    pub context: Arc<Cl<Context>>,
    /// The flags as the application gave them (sub-buffers: with the
    /// inherited ones).
    pub flags: cl_mem_flags,
    pub size: u64,
    /// `CL_MEM_HOST_PTR`: the application's memory for `USE_HOST_PTR`
    /// buffers (sub-buffers: the parent's plus `origin`), else NULL.
    pub host_ptr: RawPtr,
    /// The parent of a sub-buffer and the sub-buffer's offset in it.
    pub parent: Option<Arc<Cl<Mem>>>,
    pub origin: u64,
    maps: Mutex<Vec<Mapping>>,
    pub destructors: Destructors,
    /// Created by `clCreateBufferWithProperties` with a non-NULL (empty)
    /// property list.
    pub properties_listed: AtomicBool,
    /// Created with `CL_MEM_USE_HOST_PTR` over SVM (`CL_MEM_USES_SVM_POINTER`).
    pub uses_svm: AtomicBool,
    /// Set for images.
    pub image: Option<Box<crate::core::image::ImageDesc>>,
    /// Where a placed buffer's storage lies in shared memory.
    pub placement: Option<crate::core::placed::Placement>,
}

kind!(
    Mem,
    CL_INVALID_MEM_OBJECT,
    Some(ObjectKind::Mem),
    destroyed = Mem::destroyed
);

/// Flags that say how the application may touch a buffer from the host.
pub const HOST_ACCESS: cl_mem_flags =
    CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS;
const DEVICE_ACCESS: cl_mem_flags = CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY;
const HOST_PTR_FLAGS: cl_mem_flags =
    CL_MEM_USE_HOST_PTR | CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR;
const ALL_FLAGS: cl_mem_flags =
    HOST_ACCESS | DEVICE_ACCESS | HOST_PTR_FLAGS | CL_MEM_KERNEL_READ_AND_WRITE;

/// Why a set of buffer flags is refused (`CL_INVALID_VALUE` in every case).
pub fn check_flags(flags: cl_mem_flags) -> bool {
    flags & !ALL_FLAGS == 0
        && (flags & DEVICE_ACCESS).count_ones() <= 1
        && (flags & HOST_ACCESS).count_ones() <= 1
        && !(flags & CL_MEM_USE_HOST_PTR != 0
            && flags & (CL_MEM_ALLOC_HOST_PTR | CL_MEM_COPY_HOST_PTR) != 0)
}

/// A sub-buffer's flags: its own access flags, else the parent's; host
/// pointer flags always the parent's. `None` when they conflict with the
/// parent's (`CL_INVALID_VALUE`).
pub fn sub_buffer_flags(parent: cl_mem_flags, own: cl_mem_flags) -> Option<cl_mem_flags> {
    if own & HOST_PTR_FLAGS != 0 || !check_flags(own) {
        return None;
    }
    let parent_device = parent & DEVICE_ACCESS;
    let own_device = own & DEVICE_ACCESS;
    let device = if own_device == 0 {
        parent_device
    } else {
        own_device
    };
    if parent_device & CL_MEM_WRITE_ONLY != 0
        && own_device & (CL_MEM_READ_WRITE | CL_MEM_READ_ONLY) != 0
        || parent_device & CL_MEM_READ_ONLY != 0
            && own_device & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY) != 0
    {
        return None;
    }
    let parent_host = parent & HOST_ACCESS;
    let own_host = own & HOST_ACCESS;
    let host = if own_host == 0 { parent_host } else { own_host };
    if parent_host & CL_MEM_HOST_WRITE_ONLY != 0 && own_host & CL_MEM_HOST_READ_ONLY != 0
        || parent_host & CL_MEM_HOST_READ_ONLY != 0 && own_host & CL_MEM_HOST_WRITE_ONLY != 0
        || parent_host & CL_MEM_HOST_NO_ACCESS != 0
            && own_host & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_WRITE_ONLY) != 0
    {
        return None;
    }
    Some(device | host | (parent & HOST_PTR_FLAGS))
}

impl Mem {
    pub fn new(
        context: Arc<Cl<Context>>,
        flags: cl_mem_flags,
        size: u64,
        host_ptr: RawPtr,
        parent: Option<(Arc<Cl<Mem>>, u64)>,
    ) -> Mem {
        let (parent, origin) = match parent {
            Some((parent, origin)) => (Some(parent), origin),
            None => (None, 0),
        };
        Mem {
            context,
            flags,
            size,
            host_ptr,
            parent,
            origin,
            maps: Mutex::new(Vec::new()),
            destructors: Destructors::default(),
            properties_listed: AtomicBool::new(false),
            uses_svm: AtomicBool::new(false),
            image: None,
            placement: None,
        }
    }

    /// The same buffer, its storage placed in shared memory.
    pub fn with_placement(self, placement: crate::core::placed::Placement) -> Mem {
        Mem {
            placement: Some(placement),
            ..self
        }
    }

    /// The address of byte `offset` of this buffer in shared memory, and
    /// the connection its placement belongs to, when its storage is placed
    /// (sub-buffers: inside their parent's).
    pub fn placed_at(&self, offset: u64) -> Option<(usize, u64)> {
        match &self.parent {
            Some(parent) if self.image.is_none() => parent.placed_at(self.origin + offset),
            Some(_) => None,
            None => self.placement.as_ref()?.at(offset),
        }
    }

    /// The same object as an image.
    pub fn with_image(self, image: crate::core::image::ImageDesc) -> Mem {
        Mem {
            image: Some(Box::new(image)),
            ..self
        }
    }

    /// Whether the host may read it (`CL_MEM_HOST_WRITE_ONLY` and
    /// `CL_MEM_HOST_NO_ACCESS` forbid it).
    pub fn host_readable(&self) -> bool {
        self.flags & (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_NO_ACCESS) == 0
    }

    pub fn host_writable(&self) -> bool {
        self.flags & (CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS) == 0
    }

    /// Whether `[offset, offset + size)` lies inside the buffer.
    pub fn contains(&self, offset: u64, size: u64) -> bool {
        offset.checked_add(size).is_some_and(|end| end <= self.size)
    }

    pub fn maps(&self) -> MutexGuard<'_, Vec<Mapping>> {
        // Map records are pushed and removed whole.
        self.maps.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn destroyed(&self, ptr: *mut c_void) {
        self.maps().clear();
        self.destructors.run(ptr);
    }
}
