//! Contexts: one device; remembers the properties the application gave.

use std::ffi::c_void;
use std::sync::Arc;

use opencl_sys::CL_INVALID_CONTEXT;
use vgpu_protocol::ObjectKind;

use crate::core::callback::Destructors;
use crate::core::device::Device;
use crate::core::object::{kind, Cl};

pub struct Context {
    pub device: Arc<Cl<Device>>,
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
    pub fn new(device: Arc<Cl<Device>>, properties: Vec<isize>) -> Context {
        Context {
            device,
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
