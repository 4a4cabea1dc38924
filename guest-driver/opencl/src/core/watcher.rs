//! Event callbacks (`clSetEventCallback`). A watcher thread polls the
//! status of events that have callbacks, with backoff; synchronization
//! points poll too. Each registration fires exactly once, when the status
//! reaches its level (or fails).

use std::ffi::c_void;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once};
use std::time::Duration;

use opencl_sys::{cl_event, cl_int};

use crate::core::event::Event;
use crate::core::object::{Cl, RawPtr};

/// `void (CL_CALLBACK *)(cl_event, cl_int, void *)`.
pub type EventFn = unsafe extern "C" fn(cl_event, cl_int, *mut c_void);

struct Registration {
    /// Keeps the event (and its backend handle) alive until it fired.
    event: Arc<Cl<Event>>,
    level: cl_int,
    pfn: EventFn,
    data: RawPtr,
}

static PENDING: Mutex<Vec<Registration>> = Mutex::new(Vec::new());
static WAKE: Condvar = Condvar::new();
static START: Once = Once::new();

fn pending() -> MutexGuard<'static, Vec<Registration>> {
    // Registrations are pushed and removed whole.
    PENDING.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn register(event: Arc<Cl<Event>>, level: cl_int, pfn: EventFn, data: RawPtr) {
    pending().push(Registration {
        event,
        level,
        pfn,
        data,
    });
    WAKE.notify_all();
    START.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("vgpu-events".into())
            .spawn(run);
        if let Err(e) = spawned {
            log::error!("cannot start the event watcher: {e}");
        }
    });
}

/// Fires every registration whose event reached its level; returns whether
/// registrations remain.
pub fn poll() -> bool {
    let events: Vec<Arc<Cl<Event>>> = {
        let pending = pending();
        if pending.is_empty() {
            return false;
        }
        let mut events: Vec<Arc<Cl<Event>>> = Vec::new();
        for r in pending.iter() {
            if !events.iter().any(|e| Arc::ptr_eq(e, &r.event)) {
                events.push(r.event.clone());
            }
        }
        events
    };
    // Status queries happen without the lock; a failed query counts as a
    // failure of the command, so that a callback never waits forever.
    let statuses: Vec<(Arc<Cl<Event>>, cl_int)> = events
        .into_iter()
        .map(|e| {
            let s = e.status().unwrap_or_else(|err| err);
            (e, s)
        })
        .collect();
    let ready: Vec<Registration> = {
        let mut pending = pending();
        let (ready, rest): (Vec<_>, Vec<_>) = pending.drain(..).partition(|r| {
            statuses
                .iter()
                .find(|(e, _)| Arc::ptr_eq(e, &r.event))
                .is_some_and(|(_, status)| *status <= r.level)
        });
        *pending = rest;
        ready
    };
    for r in &ready {
        let status = statuses
            .iter()
            .find(|(e, _)| Arc::ptr_eq(e, &r.event))
            .map_or(r.level, |(_, s)| if *s < 0 { *s } else { r.level });
        // SAFETY: the application registered `pfn` with this signature and
        // keeps `data` valid until the callback has run.
        unsafe { (r.pfn)(r.event.as_ptr(), status, r.data.get()) }
    }
    !pending().is_empty()
}

fn run() {
    let mut delay = Duration::from_micros(50);
    loop {
        {
            let mut pending = pending();
            while pending.is_empty() {
                pending = WAKE.wait(pending).unwrap_or_else(|e| e.into_inner());
                delay = Duration::from_micros(50);
            }
        }
        if poll() {
            let pending = pending();
            let _ = WAKE.wait_timeout(pending, delay);
            delay = (delay * 2).min(Duration::from_millis(10));
        }
    }
}
