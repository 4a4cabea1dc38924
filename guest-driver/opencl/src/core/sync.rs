//! Synchronization points: where deferred errors surface, and how waits
//! are done.

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use opencl_sys::*;
use vgpu_protocol::messages::{EnqueueMarker, Finish, Release, WaitForEvents};
use vgpu_protocol::{InfoTarget, ObjectKind};

use crate::core::event::{self, Event};
use crate::core::info;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::queue::Queue;
use crate::core::staged;
use crate::core::watcher;

/// The last deferred error reported to the application: the status of
/// commands the backend never saw.
static LAST_DEFERRED: AtomicI32 = AtomicI32::new(0);

fn note(status: cl_int) -> cl_int {
    LAST_DEFERRED.store(status, Ordering::Relaxed);
    status
}

/// The first error of a deferred call since the last synchronization point.
pub fn take_deferred() -> Option<cl_int> {
    platform::client_opt()?
        .take_deferred_error()
        .map(|s| note(s.0))
}

/// A pending deferred error, else the last one reported.
pub fn last_deferred_error() -> Option<cl_int> {
    take_deferred().or(match LAST_DEFERRED.load(Ordering::Relaxed) {
        0 => None,
        status => Some(status),
    })
}

/// Submits everything pending; reports the first deferred error.
pub fn flush() -> ClResult<()> {
    platform::client()?.flush().map_err(|s| note(s.0))
}

/// `Err(deferred error)` if one is pending, else `result`.
fn with_deferred<T>(result: ClResult<T>) -> ClResult<T> {
    match take_deferred() {
        Some(status) => Err(status),
        None => result,
    }
}

/// `clWaitForEvents`.
pub fn wait(events: &[Arc<Cl<Event>>]) -> ClResult<()> {
    let result = if event::unset_user_events() {
        flush().and_then(|()| poll_until_settled(events))
    } else {
        let events: Vec<u64> = events
            .iter()
            .filter(|e| !e.is_user())
            .map(|e| e.handle())
            .collect();
        if events.is_empty() {
            Ok(())
        } else {
            let client = platform::client()?;
            client
                .call(WaitForEvents { events }.into())
                .map(drop)
                .map_err(|s| s.0)
        }
    };
    let result = with_deferred(result);
    staged::settle_ready();
    watcher::poll();
    result
}

/// Waits, without holding the session, until every event is complete or
/// failed; `CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST` if one failed.
fn poll_until_settled(events: &[Arc<Cl<Event>>]) -> ClResult<()> {
    let mut failed = false;
    for event in events {
        let mut backoff = Backoff::new();
        loop {
            let status = event.status()?;
            if status <= CL_COMPLETE {
                failed |= status < 0;
                break;
            }
            backoff.sleep();
        }
    }
    if failed {
        Err(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    } else {
        Ok(())
    }
}

/// `clFinish`.
pub fn finish(queue: &Cl<Queue>) -> ClResult<()> {
    let client = platform::client()?;
    // A queue drained at the session's quiet mark is still empty while the
    // session has sent nothing since: no round trip.
    let drained_at = queue.drained_at.load(std::sync::atomic::Ordering::Acquire);
    let result = if client
        .run_if_quiet(drained_at, client.connection(), || ())
        .is_some()
    {
        Ok(())
    } else if event::unset_user_events() {
        // A marker's event completes when everything before it has; poll
        // it so that other threads can still set user event statuses.
        let marker = client.new_handle();
        let enqueue = EnqueueMarker {
            queue: queue.handle(),
            wait: Vec::new(),
            event: marker,
        };
        let result = client
            .defer(enqueue.into())
            .map_err(|s| s.0)
            .and_then(|()| {
                let mut backoff = Backoff::new();
                loop {
                    let bytes = info::remote(
                        InfoTarget::Event,
                        marker,
                        0,
                        CL_EVENT_COMMAND_EXECUTION_STATUS,
                    )?;
                    if info::le_number(&bytes) as u32 as cl_int <= CL_COMPLETE {
                        return Ok(());
                    }
                    backoff.sleep();
                }
            });
        let _ = client.defer(
            Release {
                kind: ObjectKind::Event as u32,
                handle: marker,
            }
            .into(),
        );
        result
    } else {
        // The queue is drained now: placed buffers' transfers need no
        // round trip until the session sends something else.
        client
            .call_then(
                Finish {
                    queue: queue.handle(),
                }
                .into(),
                client.connection(),
                || (),
            )
            .map(|(_, _, mark)| crate::core::placed::note_drained(queue, mark))
            .map_err(|s| s.0)
    };
    let result = with_deferred(result);
    if result.is_ok() {
        staged::settle_queue(queue.handle());
    }
    watcher::poll();
    result
}

/// Sleeps growing from 20 µs to 5 ms.
pub struct Backoff(Duration);

impl Backoff {
    pub fn new() -> Backoff {
        Backoff(Duration::from_micros(20))
    }

    pub fn sleep(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(Duration::from_millis(5));
    }
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new()
    }
}
