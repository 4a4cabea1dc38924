//! Host OpenCL objects, released when the last holder lets go.

use std::sync::Arc;

use cl3::types::{cl_command_queue, cl_context, cl_event, cl_kernel, cl_mem, cl_program};

macro_rules! host_object {
    ($(#[$meta:meta])* $name:ident($raw:ty), $release:path) => {
        $(#[$meta])*
        #[derive(Debug)]
        pub struct $name(pub $raw);

        // SAFETY: OpenCL objects are thread-safe handles (OpenCL 1.2 §A.2:
        // all API calls are thread-safe except clSetKernelArg on one kernel,
        // which the owning session serializes).
        unsafe impl Send for $name {}
        // SAFETY: as above.
        unsafe impl Sync for $name {}

        impl Drop for $name {
            fn drop(&mut self) {
                // SAFETY: this wrapper owns exactly one reference, taken when
                // the object was created, and gives it back once.
                if let Err(code) = unsafe { $release(self.0) } {
                    log::warn!("{} release failed: {}", stringify!($name), code);
                }
            }
        }
    };
}

host_object!(
    /// A host context.
    HostContext(cl_context),
    cl3::context::release_context
);
host_object!(
    /// A host command queue.
    HostQueue(cl_command_queue),
    cl3::command_queue::release_command_queue
);
host_object!(
    /// A host event.
    HostEvent(cl_event),
    cl3::event::release_event
);
host_object!(
    /// A host program.
    HostProgram(cl_program),
    cl3::program::release_program
);

/// A buffer or sub-buffer.
#[derive(Debug)]
pub struct HostMem {
    pub raw: cl_mem,
    pub size: u64,
    pub flags: u64,
    /// A sub-buffer keeps its parent alive.
    #[allow(dead_code)]
    pub parent: Option<Arc<HostMem>>,
}

// SAFETY: see `host_object!`.
unsafe impl Send for HostMem {}
// SAFETY: see `host_object!`.
unsafe impl Sync for HostMem {}

impl Drop for HostMem {
    fn drop(&mut self) {
        // SAFETY: this wrapper owns one reference to `raw`.
        if let Err(code) = unsafe { cl3::memory::release_mem_object(self.raw) } {
            log::warn!("mem release failed: {code}");
        }
    }
}

/// A kernel and the objects its arguments name, kept alive so a guest that
/// releases a buffer still set as an argument cannot make the device use
/// freed memory.
#[derive(Debug)]
pub struct HostKernel {
    pub raw: cl_kernel,
    pub num_args: u32,
    pub program: Arc<HostProgram>,
    pub arg_mems: std::sync::Mutex<Vec<Option<Arc<HostMem>>>>,
}

// SAFETY: see `host_object!`.
unsafe impl Send for HostKernel {}
// SAFETY: see `host_object!`.
unsafe impl Sync for HostKernel {}

impl Drop for HostKernel {
    fn drop(&mut self) {
        // SAFETY: this wrapper owns one reference to `raw`.
        if let Err(code) = unsafe { cl3::kernel::release_kernel(self.raw) } {
            log::warn!("kernel release failed: {code}");
        }
    }
}

/// A queue with the context it belongs to.
#[derive(Debug)]
pub struct QueueEntry {
    pub queue: HostQueue,
    /// Keeps the context alive as long as the queue.
    #[allow(dead_code)]
    pub context: Arc<HostContext>,
    /// Commands issued and maybe not complete yet, oldest first, when the
    /// queue depth is bounded.
    pub in_flight: std::sync::Mutex<std::collections::VecDeque<HostEvent>>,
}

/// An event; user events are remembered so a closing session can fail them
/// and unblock whatever waits on them.
#[derive(Debug)]
pub struct EventEntry {
    pub event: HostEvent,
    pub is_user: bool,
}
