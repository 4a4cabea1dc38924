//! Contexts: one device; remembers the properties the application gave.

use std::ffi::c_void;
use std::sync::{Arc, OnceLock};

use opencl_sys::CL_INVALID_CONTEXT;
use vgpu_protocol::messages::{CreateQueue, Release};
use vgpu_protocol::ObjectKind;

use crate::core::callback::Destructors;
use crate::core::device::Device;
use crate::core::object::{kind, Cl, ClResult};
use crate::core::platform;

pub struct Context {
    pub device: Arc<Cl<Device>>,
    /// `CL_CONTEXT_PROPERTIES`: the application's list with its terminator,
    /// empty when it passed NULL.
    pub properties: Vec<isize>,
    pub destructors: Destructors,
    /// A queue of the backend only, for transfers that have no queue of
    /// their own (large `COPY_HOST_PTR` initial data).
    internal_queue: OnceLock<u64>,
}

kind!(
    Context,
    CL_INVALID_CONTEXT,
    Some(ObjectKind::Context),
    destroyed = Context::destroyed
);

impl Context {
    pub fn new(device: Arc<Cl<Device>>, properties: Vec<isize>) -> Context {
        Context {
            device,
            properties,
            destructors: Destructors::default(),
            internal_queue: OnceLock::new(),
        }
    }

    fn destroyed(&self, ptr: *mut c_void) {
        if let (Some(&queue), Some(client)) = (self.internal_queue.get(), platform::client_opt()) {
            let release = Release {
                kind: ObjectKind::Queue as u32,
                handle: queue,
            };
            let _ = client.defer(release.into());
        }
        self.destructors.run(ptr);
    }
}

impl Cl<Context> {
    /// The backend-only queue of this context, created (deferred) on first
    /// use.
    pub fn internal_queue(&self) -> ClResult<u64> {
        if let Some(&queue) = self.internal_queue.get() {
            return Ok(queue);
        }
        let client = platform::client()?;
        let queue = client.new_handle();
        let create = CreateQueue {
            queue,
            context: self.handle(),
            properties: Vec::new(),
        };
        client.defer(create.into()).map_err(|s| s.0)?;
        // Two threads may race here; the loser's queue is released again.
        if let Err(queue) = self.internal_queue.set(queue) {
            let release = Release {
                kind: ObjectKind::Queue as u32,
                handle: queue,
            };
            let _ = client.defer(release.into());
        }
        self.internal_queue
            .get()
            .copied()
            .ok_or(opencl_sys::CL_OUT_OF_HOST_MEMORY)
    }
}
