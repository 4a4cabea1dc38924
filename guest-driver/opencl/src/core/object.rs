//! The object every `cl_*` handle points at, and the registry of live ones.
//!
//! An application hands us back arbitrary pointers. Before one is
//! dereferenced it is looked up in the registry of its kind, so a forged,
//! released or wrong-kind pointer gets the kind's `CL_INVALID_*` code instead
//! of a crash. Lookups return an `Arc`, so an object stays valid for the
//! duration of a call even when another thread releases it meanwhile.
//! Objects hold `Arc`s of the objects they depend on (a queue its context,
//! a kernel its program), which keeps those valid after the application
//! released them, as the spec requires.

use std::collections::BTreeMap;
use std::ffi::c_void;
use std::ops::Deref;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::cl_int;
use vgpu_protocol::ObjectKind;

use crate::api::icd::DISPATCH;
use crate::core::platform;

pub type ClResult<T> = Result<T, cl_int>;

/// One kind of object: its error code and its registry.
pub trait Kind: Sized + Send + Sync + 'static {
    /// The spec's `CL_INVALID_<KIND>` code.
    const INVALID: cl_int;
    /// The backend's handle table of this kind; `None` for objects that
    /// exist only in this library (platform, device).
    const REMOTE: Option<ObjectKind>;

    fn registry() -> &'static Registry<Self>;

    /// Runs when the last reference is gone, before the backend's
    /// `Release`; `ptr` is the pointer the application knew (destructor
    /// callbacks receive it).
    fn destroyed(&self, _ptr: *mut c_void) {}
}

/// A heap object handed to the application. `#[repr(C)]` with the dispatch
/// table first: ICD loaders read that pointer to route every call.
#[repr(C)]
pub struct Cl<T: Kind> {
    dispatch: &'static cl_icd_dispatch,
    /// The application's reference count.
    refs: AtomicU32,
    /// The backend's name for the object (0 for local-only objects).
    handle: u64,
    inner: T,
}

impl<T: Kind> Cl<T> {
    /// Registers a new object with one application reference and returns it.
    pub fn publish(handle: u64, inner: T) -> Arc<Cl<T>> {
        let object = Arc::new(Cl {
            dispatch: &DISPATCH,
            refs: AtomicU32::new(1),
            handle,
            inner,
        });
        let entry = Entry {
            object: Arc::downgrade(&object),
            held: Some(object.clone()),
        };
        T::registry().lock().insert(object.addr(), entry);
        object
    }

    /// The live object `ptr` names, or the kind's error code.
    pub fn get(ptr: *mut c_void) -> ClResult<Arc<Cl<T>>> {
        if ptr.is_null() {
            return Err(T::INVALID);
        }
        T::registry()
            .lock()
            .get(&(ptr as usize))
            .and_then(|entry| entry.object.upgrade())
            .ok_or(T::INVALID)
    }

    /// Whether `ptr` names a live object of this kind.
    pub fn is_live(ptr: *mut c_void) -> bool {
        Self::get(ptr).is_ok()
    }

    /// `clRetain*`.
    pub fn retain(ptr: *mut c_void) -> ClResult<()> {
        let mut live = T::registry().lock();
        let entry = live.get_mut(&(ptr as usize)).ok_or(T::INVALID)?;
        let object = entry.object.upgrade().ok_or(T::INVALID)?;
        object.refs.fetch_add(1, Ordering::Relaxed);
        entry.held.get_or_insert(object);
        Ok(())
    }

    /// `clRelease*`. At zero the application's hold ends; the object stays
    /// valid while other objects need it (a kernel its program, a queue its
    /// context, as the spec says), and is deleted, leaving the registry and
    /// releasing its backend handle, with the last of those (see `Drop`).
    pub fn release(ptr: *mut c_void) -> ClResult<()> {
        let released = {
            let mut live = T::registry().lock();
            let entry = live.get_mut(&(ptr as usize)).ok_or(T::INVALID)?;
            let object = entry.held.as_ref().ok_or(T::INVALID)?;
            if object.refs.fetch_sub(1, Ordering::AcqRel) == 1 {
                entry.held.take()
            } else {
                None
            }
        };
        // Dropped here, outside the registry lock: destructors may run
        // application callbacks that call back into the library.
        drop(released);
        Ok(())
    }

    /// The pointer the application sees.
    pub fn as_ptr(self: &Arc<Self>) -> *mut c_void {
        Arc::as_ptr(self) as *mut c_void
    }

    fn addr(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// The application's reference count (`CL_*_REFERENCE_COUNT`).
    pub fn ref_count(&self) -> u32 {
        self.refs.load(Ordering::Relaxed)
    }
}

impl<T: Kind> Deref for Cl<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: Kind> Drop for Cl<T> {
    fn drop(&mut self) {
        let ptr = self as *mut Cl<T> as *mut c_void;
        // The address is still this object's until the memory is freed, so
        // the entry there is this object's.
        let entry = T::registry().lock().remove(&(ptr as usize));
        drop(entry);
        self.inner.destroyed(ptr);
        // Handle 0 names objects the backend never created (the root device).
        let remote = T::REMOTE.filter(|_| self.handle != 0);
        if let (Some(kind), Some(client)) = (remote, platform::client_opt()) {
            let release = vgpu_protocol::messages::Release {
                kind: kind as u32,
                handle: self.handle,
            };
            if let Err(status) = client.defer(release.into()) {
                log::debug!("release of {kind:?} {} failed: {status}", self.handle);
            }
        }
    }
}

/// Objects of one kind that are not deleted yet, by address.
pub struct Registry<T: Kind> {
    live: Mutex<BTreeMap<usize, Entry<T>>>,
}

struct Entry<T: Kind> {
    object: Weak<Cl<T>>,
    /// The application's hold, while its reference count is above zero.
    held: Option<Arc<Cl<T>>>,
}

impl<T: Kind> Registry<T> {
    pub const fn new() -> Self {
        Registry {
            live: Mutex::new(BTreeMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, Entry<T>>> {
        // Registry updates are single map operations; a panic elsewhere
        // cannot leave the map half-updated.
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The live objects.
    pub fn live(&self) -> Vec<Arc<Cl<T>>> {
        self.lock()
            .values()
            .filter_map(|entry| entry.object.upgrade())
            .collect()
    }

    /// Number of live objects (tests, statistics).
    pub fn len(&self) -> usize {
        self.lock().len()
    }
}

impl<T: Kind> Default for Registry<T> {
    fn default() -> Self {
        Registry::new()
    }
}

/// Declares `Kind` for an object type with its own static registry.
macro_rules! kind {
    ($ty:ty, $invalid:expr, $remote:expr $(, destroyed = $destroyed:path)?) => {
        impl $crate::core::object::Kind for $ty {
            const INVALID: opencl_sys::cl_int = $invalid;
            const REMOTE: Option<vgpu_protocol::ObjectKind> = $remote;

            fn registry() -> &'static $crate::core::object::Registry<Self> {
                static REGISTRY: $crate::core::object::Registry<$ty> =
                    $crate::core::object::Registry::new();
                &REGISTRY
            }

            $(fn destroyed(&self, ptr: *mut std::ffi::c_void) {
                $destroyed(self, ptr)
            })?
        }
    };
}
pub(crate) use kind;

/// A raw pointer stored in an object (application memory, callback data).
/// The library never dereferences it except where the spec says the
/// application keeps it valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawPtr(pub usize);

impl RawPtr {
    pub fn new<T>(ptr: *const T) -> Self {
        RawPtr(ptr as usize)
    }

    pub fn get(self) -> *mut c_void {
        self.0 as *mut c_void
    }

    pub fn is_null(self) -> bool {
        self.0 == 0
    }
}

/// Objects the application holds, per kind (tests and diagnostics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveObjects {
    pub contexts: usize,
    pub queues: usize,
    pub mems: usize,
    pub programs: usize,
    pub kernels: usize,
    pub events: usize,
}

pub fn live_objects() -> LiveObjects {
    use crate::core::{context::Context, event::Event, kernel::Kernel, memory::Mem};
    use crate::core::{program::Program, queue::Queue};
    LiveObjects {
        contexts: Context::registry().len(),
        queues: Queue::registry().len(),
        mems: Mem::registry().len(),
        programs: Program::registry().len(),
        kernels: Kernel::registry().len(),
        events: Event::registry().len(),
    }
}
