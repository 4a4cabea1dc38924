//! The application's memory of a read or a write. Read and write entry
//! points differ only in the direction the bytes go, so each pair shares
//! one implementation that takes the direction as this pointer. The C
//! signature itself says which it is: a read's `ptr` is `void *`, a
//! write's `const void *`, and each converts into its own variant.

use std::ffi::c_void;

use opencl_sys::cl_command_type;

use crate::core::memory::Mem;

/// `Into`: a read lands in the application's memory; `From`: a write
/// takes the application's memory.
#[derive(Clone, Copy)]
pub(crate) enum HostPtr {
    Into(*mut c_void),
    From(*const c_void),
}

impl From<*mut c_void> for HostPtr {
    fn from(ptr: *mut c_void) -> Self {
        HostPtr::Into(ptr)
    }
}

impl From<*const c_void> for HostPtr {
    fn from(ptr: *const c_void) -> Self {
        HostPtr::From(ptr)
    }
}

impl HostPtr {
    pub fn is_null(self) -> bool {
        match self {
            HostPtr::Into(ptr) => ptr.is_null(),
            HostPtr::From(ptr) => ptr.is_null(),
        }
    }

    /// Whether `mem`'s host access flags allow this direction: a read
    /// needs neither CL_MEM_HOST_WRITE_ONLY nor CL_MEM_HOST_NO_ACCESS, a
    /// write neither CL_MEM_HOST_READ_ONLY nor CL_MEM_HOST_NO_ACCESS.
    pub fn allowed_on(self, mem: &Mem) -> bool {
        match self {
            HostPtr::Into(_) => mem.host_readable(),
            HostPtr::From(_) => mem.host_writable(),
        }
    }

    /// The command type: `read` for `Into`, `write` for `From`.
    pub fn command(self, read: cl_command_type, write: cl_command_type) -> cl_command_type {
        match self {
            HostPtr::Into(_) => read,
            HostPtr::From(_) => write,
        }
    }
}
