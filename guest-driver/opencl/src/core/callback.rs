//! Application callbacks of the `(object, user_data)` shape: context and
//! memory-object destructors, program build notifications.

use std::ffi::c_void;
use std::sync::Mutex;

use crate::core::object::RawPtr;

/// `void (CL_CALLBACK *)(cl_xxx, void *user_data)`.
pub type ObjectFn = unsafe extern "C" fn(*mut c_void, *mut c_void);

#[derive(Clone, Copy)]
pub struct ObjectCallback {
    pub pfn: ObjectFn,
    pub data: RawPtr,
}

impl ObjectCallback {
    pub fn call(&self, object: *mut c_void) {
        // SAFETY: the application registered `pfn` for exactly this call
        // shape and keeps `data` valid until the callback has run.
        unsafe { (self.pfn)(object, self.data.get()) }
    }
}

/// Destructor callbacks of one object, run once in reverse order of
/// registration (the spec's order for memory objects and contexts).
#[derive(Default)]
pub struct Destructors {
    list: Mutex<Vec<ObjectCallback>>,
}

impl Destructors {
    pub fn push(&self, callback: ObjectCallback) {
        self.list
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(callback);
    }

    pub fn run(&self, object: *mut c_void) {
        let list = std::mem::take(&mut *self.list.lock().unwrap_or_else(|e| e.into_inner()));
        for callback in list.iter().rev() {
            callback.call(object);
        }
    }
}
