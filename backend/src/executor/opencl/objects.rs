//! Host OpenCL objects, released when the last holder lets go. Each also
//! records what a snapshot needs to build it again elsewhere.
// The records are read by the snapshot code.
#![allow(dead_code)]

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

/// A context and the properties the guest created it with.
#[derive(Debug)]
pub struct ContextEntry {
    pub ctx: HostContext,
    /// Guest properties (platform entries name the guest's platform).
    pub properties: Vec<u64>,
    /// The devices it was created on (the root device, or sub-devices).
    pub devices: Vec<super::subdevice::DeviceRef>,
}

impl ContextEntry {
    /// The host ids of its devices, for calls that take a device list.
    pub fn device_ids(&self) -> Vec<cl3::types::cl_device_id> {
        self.devices.iter().map(|d| d.raw.0).collect()
    }

    /// The device queries about its programs and kernels ask (all of a
    /// context's devices are the same device or equal parts of it).
    pub fn first_device(&self) -> cl3::types::cl_device_id {
        self.devices[0].raw.0
    }
}

/// A buffer or sub-buffer.
#[derive(Debug)]
pub struct HostMem {
    pub raw: cl_mem,
    pub size: u64,
    /// Flags as the guest gave them.
    pub flags: u64,
    pub context: Arc<ContextEntry>,
    /// A sub-buffer keeps its parent alive; `origin` is its offset there.
    pub parent: Option<(Arc<HostMem>, u64)>,
    /// Device memory charged to the VM's quota (top-level buffers).
    pub charge: std::sync::Mutex<Option<crate::quota::Charge>>,
    /// Set when the object is an image.
    pub image: Option<Box<super::image::ImageRecord>>,
    /// When its storage was last written: shared by sub-buffers and
    /// images with their buffer, since they write the same storage.
    pub written: Arc<crate::executor::written::WriteMark>,
    /// A placed buffer's storage is guest memory (`MEM_FLAG_PLACED`): the
    /// mapping it lies in stays mapped while the buffer lives.
    pub storage: Option<Arc<crate::chain::GuestRam>>,
}

impl HostMem {
    /// Records that a command issued now may write the object.
    pub fn mark_written(&self) {
        self.written.mark();
    }
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

/// Where a program came from: what a restore on another device rebuilds it from.
#[derive(Debug, Clone)]
pub enum ProgramOrigin {
    Source(Vec<u8>),
    Il(Vec<u8>),
    Binary(Vec<u8>),
    /// `clLinkProgram` of these inputs with these options.
    Linked {
        inputs: Vec<Arc<ProgramEntry>>,
        options: Vec<u8>,
    },
}

/// What was done to a program since it was created.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum BuildRecord {
    #[default]
    None,
    Built {
        options: Vec<u8>,
    },
    Compiled {
        options: Vec<u8>,
    },
    /// The last build or compile failed (so a restore repeats it, and the
    /// guest sees the same build status).
    Failed {
        options: Vec<u8>,
        compile_only: bool,
    },
}

#[derive(Debug)]
pub struct ProgramEntry {
    pub program: HostProgram,
    pub context: Arc<ContextEntry>,
    pub origin: ProgramOrigin,
    pub build: std::sync::Mutex<BuildRecord>,
}

impl ProgramEntry {
    /// The options the guest built with (without what the backend adds),
    /// NUL-terminated as `CL_PROGRAM_BUILD_OPTIONS` answers them.
    pub fn guest_build_options(&self) -> Vec<u8> {
        let mut out = match &*self.build.lock().unwrap_or_else(|e| e.into_inner()) {
            BuildRecord::None => Vec::new(),
            BuildRecord::Built { options }
            | BuildRecord::Compiled { options }
            | BuildRecord::Failed { options, .. } => options.clone(),
        };
        out.push(0);
        out
    }
}

/// A kernel argument as last set.
#[derive(Debug, Clone, Default)]
pub enum ArgRecord {
    #[default]
    Unset,
    Value(Vec<u8>),
    /// Held, so a guest that releases a buffer still set as an argument
    /// cannot make the device use freed memory.
    Mem(Arc<HostMem>),
    Local(u64),
    NullMem,
    /// Held like buffers.
    Sampler(Arc<super::image::HostSampler>),
    /// An address inside an SVM allocation, which is held like buffers.
    Svm(Arc<super::svm::SvmAllocation>, u64),
}

/// A kernel and its current arguments.
#[derive(Debug)]
pub struct HostKernel {
    pub raw: cl_kernel,
    pub num_args: u32,
    pub name: Vec<u8>,
    pub program: Arc<ProgramEntry>,
    /// What each argument may be given.
    pub classes: Vec<super::args::ArgClass>,
    pub args: std::sync::Mutex<Vec<ArgRecord>>,
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
    pub context: Arc<ContextEntry>,
    /// The device it runs on.
    pub device: super::subdevice::DeviceRef,
    /// Properties as the guest gave them (zero-terminated list).
    pub properties: Vec<u64>,
    /// Commands issued and maybe not complete yet, oldest first, when the
    /// queue depth is bounded.
    pub in_flight: std::sync::Mutex<std::collections::VecDeque<HostEvent>>,
}

/// An event. User events are remembered so a closing session can fail them
/// and unblock whatever waits on them.
#[derive(Debug)]
pub struct EventEntry {
    pub event: HostEvent,
    pub context: Arc<ContextEntry>,
    /// For user events: the status the guest set, if any.
    pub user: Option<std::sync::Mutex<Option<i32>>>,
}
