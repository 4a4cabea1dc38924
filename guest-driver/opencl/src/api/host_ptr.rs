//! The application's memory of a read or a write. Read and write entry
//! points differ only in the direction the bytes go, so each pair shares
//! one implementation that takes the direction as this pointer. The C
//! signature itself says which it is: a read's `ptr` is `void *`, a
//! write's `const void *`, and each converts into its own variant.

use std::ffi::c_void;

use opencl_sys::*;

use crate::api::util::{wait_list, NewEvent};
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::queue::Queue;

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

    /// The wait list and the event of a read (command type `read`) or a
    /// write (`write`) of `mem` on `queue`: CL_INVALID_OPERATION if the
    /// host access flags forbid the direction (a read needs neither
    /// CL_MEM_HOST_WRITE_ONLY nor CL_MEM_HOST_NO_ACCESS, a write neither
    /// CL_MEM_HOST_READ_ONLY nor CL_MEM_HOST_NO_ACCESS).
    pub fn wait_and_event(
        self,
        queue: &Cl<Queue>,
        mem: &Mem,
        (num_events, events): (cl_uint, *const cl_event),
        event: *mut cl_event,
        [read, write]: [cl_command_type; 2],
    ) -> ClResult<(Vec<u64>, NewEvent)> {
        let wait = wait_list(queue, num_events, events)?;
        let (allowed, command) = match self {
            HostPtr::Into(_) => (mem.host_readable(), read),
            HostPtr::From(_) => (mem.host_writable(), write),
        };
        if !allowed {
            return Err(CL_INVALID_OPERATION);
        }
        Ok((wait, NewEvent::new(event, command)?))
    }
}
