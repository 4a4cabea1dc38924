//! Events: of a command (created by the backend with the enqueue that names
//! it) or user events. The execution status is the backend's, except where
//! this library knows better: a user event's status it set itself, and a
//! command that never reached the device (its deferred enqueue failed).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use opencl_sys::*;
use vgpu_protocol::{InfoTarget, ObjectKind};

use crate::core::context::Context;
use crate::core::info;
use crate::core::object::{kind, Cl, ClResult};
use crate::core::queue::Queue;
use crate::core::sync;

pub struct Event {
    pub context: Arc<Cl<Context>>,
    /// `None` for user events.
    pub queue: Option<Arc<Cl<Queue>>>,
    pub command_type: cl_command_type,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// A user event's status, once set.
    user_status: Option<cl_int>,
    /// A final status known here (complete, or an error).
    settled: Option<cl_int>,
}

kind!(Event, CL_INVALID_EVENT, Some(ObjectKind::Event));

/// User events whose status is not set yet. While there are any, waits are
/// done by polling: a blocking wait in the backend would hold the session
/// while another application thread needs it to set the status.
static UNSET_USER_EVENTS: AtomicUsize = AtomicUsize::new(0);

pub fn unset_user_events() -> bool {
    UNSET_USER_EVENTS.load(Ordering::Acquire) > 0
}

impl Event {
    pub fn of_command(queue: &Arc<Cl<Queue>>, command_type: cl_command_type) -> Event {
        Event {
            context: queue.context.clone(),
            queue: Some(queue.clone()),
            command_type,
            state: Mutex::new(State::default()),
        }
    }

    pub fn user(context: Arc<Cl<Context>>) -> Event {
        UNSET_USER_EVENTS.fetch_add(1, Ordering::AcqRel);
        Event {
            context,
            queue: None,
            command_type: CL_COMMAND_USER,
            state: Mutex::new(State::default()),
        }
    }

    pub fn is_user(&self) -> bool {
        self.queue.is_none()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Two options, each written whole.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a user event's status; false when it was set before
    /// (`CL_INVALID_OPERATION`).
    pub fn set_user_status(&self, status: cl_int) -> bool {
        let mut state = self.state();
        if state.user_status.is_some() {
            return false;
        }
        state.user_status = Some(status);
        state.settled = Some(status);
        UNSET_USER_EVENTS.fetch_sub(1, Ordering::AcqRel);
        true
    }
}

impl Cl<Event> {
    /// `CL_EVENT_COMMAND_EXECUTION_STATUS`.
    pub fn status(&self) -> ClResult<cl_int> {
        {
            let state = self.state();
            if let Some(status) = state.settled {
                return Ok(status);
            }
            if self.is_user() {
                return Ok(CL_SUBMITTED);
            }
        }
        let status = match info::remote(
            InfoTarget::Event,
            self.handle(),
            0,
            CL_EVENT_COMMAND_EXECUTION_STATUS,
        ) {
            Ok(bytes) => info::le_number(&bytes) as u32 as cl_int,
            // The backend never created it: the enqueue that names it failed
            // after it was deferred. Its error is the command's status.
            Err(CL_INVALID_EVENT) => sync::last_deferred_error().ok_or(CL_INVALID_EVENT)?,
            Err(e) => return Err(e),
        };
        if status <= CL_COMPLETE {
            // A staged read's data is in place before anyone hears of it.
            crate::core::staged::settle_event(self.handle());
            self.state().settled = Some(status);
        }
        Ok(status)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.is_user() && self.state().user_status.is_none() {
            UNSET_USER_EVENTS.fetch_sub(1, Ordering::AcqRel);
        }
    }
}
