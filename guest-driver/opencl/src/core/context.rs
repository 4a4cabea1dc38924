//! Contexts: the root device or sub-devices of it; remembers the
//! properties the application gave.

use std::ffi::c_void;
use std::sync::Arc;

use opencl_sys::CL_INVALID_CONTEXT;
use vgpu_protocol::ObjectKind;

use crate::core::callback::Destructors;
use crate::core::device::Device;
use crate::core::object::{kind, Cl};

pub struct Context {
    /// The first of `devices`: every device of a context is the backend's
    /// device or a part of it, so it answers the capability queries.
    pub device: Arc<Cl<Device>>,
    /// `CL_CONTEXT_DEVICES`, each once.
    pub devices: Vec<Arc<Cl<Device>>>,
    /// `CL_CONTEXT_PROPERTIES`: the application's list with its terminator,
    /// empty when it passed NULL.
    pub properties: Vec<isize>,
    pub destructors: Destructors,
}

kind!(
    Context,
    CL_INVALID_CONTEXT,
    Some(ObjectKind::Context),
    destroyed = Context::destroyed
);

impl Context {
    /// A context on `devices` (not empty).
    pub fn new(devices: Vec<Arc<Cl<Device>>>, properties: Vec<isize>) -> Context {
        Context {
            device: devices[0].clone(),
            devices,
            properties,
            destructors: Destructors::default(),
        }
    }

    fn destroyed(&self, ptr: *mut c_void) {
        crate::core::staged::context_destroyed(ptr as usize);
        crate::core::svm::context_destroyed(ptr as usize);
        self.destructors.run(ptr);
    }
}

impl Context {
    /// The context's device that `ptr` names, or `CL_INVALID_DEVICE`.
    pub fn member(&self, ptr: *mut c_void) -> crate::core::object::ClResult<Arc<Cl<Device>>> {
        let device = Cl::<Device>::get(ptr)?;
        if self.devices.iter().any(|d| Arc::ptr_eq(d, &device)) {
            Ok(device)
        } else {
            Err(opencl_sys::CL_INVALID_DEVICE)
        }
    }
}
