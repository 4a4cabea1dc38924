//! Event entry points.

use std::ffi::c_void;
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::messages::{CreateUserEvent, SetUserEventStatus};
use vgpu_protocol::InfoTarget;

use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{array, write_info};
use crate::core::context::Context;
use crate::core::event::Event;
use crate::core::info;
use crate::core::object::{Cl, ClResult, RawPtr};
use crate::core::platform;
use crate::core::sync;
use crate::core::watcher::{self, EventFn};

object_entry! {
    fn clCreateUserEvent(context: cl_context) -> cl_event => create_user_event;
}

status_entry! {
    fn clSetUserEventStatus(event: cl_event, execution_status: cl_int) => set_user_event_status;
    fn clWaitForEvents(num_events: cl_uint, event_list: *const cl_event) => wait_for_events;
    fn clGetEventInfo(event: cl_event, param_name: cl_event_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_event_info;
    fn clGetEventProfilingInfo(event: cl_event, param_name: cl_profiling_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_event_profiling_info;
    fn clRetainEvent(event: cl_event) => Cl::<Event>::retain;
    fn clReleaseEvent(event: cl_event) => Cl::<Event>::release;
    fn clSetEventCallback(event: cl_event, command_exec_callback_type: cl_int, pfn_notify: Option<EventFn>, user_data: *mut c_void) => set_event_callback;
}

fn create_user_event(context: cl_context) -> ClResult<cl_event> {
    let context = Cl::<Context>::get(context)?;
    let client = platform::client()?;
    let event = client.new_handle();
    client
        .defer(
            CreateUserEvent {
                event,
                context: context.handle(),
            }
            .into(),
        )
        .map_err(|s| s.0)?;
    Ok(Cl::publish(event, Event::user(context)).as_ptr())
}

fn set_user_event_status(event: cl_event, status: cl_int) -> ClResult<()> {
    let event = Cl::<Event>::get(event)?;
    // CL_INVALID_EVENT if event is not a user event.
    if !event.is_user() {
        return Err(CL_INVALID_EVENT);
    }
    // CL_INVALID_VALUE if execution_status is not CL_COMPLETE or a negative
    // integer value.
    if status > CL_COMPLETE {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_OPERATION if the status was already set.
    if !event.set_user_status(status) {
        return Err(CL_INVALID_OPERATION);
    }
    // Sent at once: commands waiting for it may be queued in the backend.
    let set = SetUserEventStatus {
        event: event.handle(),
        status,
    };
    platform::client()?.call(set.into()).map_err(|s| s.0)?;
    watcher::poll();
    Ok(())
}

fn wait_for_events(num: cl_uint, list: *const cl_event) -> ClResult<()> {
    // CL_INVALID_VALUE if num_events is zero or event_list is NULL.
    if num == 0 || list.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_EVENT if event objects in event_list are not valid;
    // CL_INVALID_CONTEXT if they do not belong to the same context.
    let mut events: Vec<Arc<Cl<Event>>> = Vec::with_capacity(num as usize);
    for &ptr in array(list, num as usize)? {
        let event = Cl::<Event>::get(ptr)?;
        if events
            .first()
            .is_some_and(|first| !Arc::ptr_eq(&first.context, &event.context))
        {
            return Err(CL_INVALID_CONTEXT);
        }
        events.push(event);
    }
    sync::wait(&events)
}

fn get_event_info(
    event: cl_event,
    param: cl_event_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let event = Cl::<Event>::get(event)?;
    let bytes = match param {
        CL_EVENT_COMMAND_QUEUE => info::ptr(
            event
                .queue
                .as_ref()
                .map_or(std::ptr::null_mut(), |q| q.as_ptr()),
        ),
        CL_EVENT_CONTEXT => info::ptr(event.context.as_ptr()),
        CL_EVENT_COMMAND_TYPE => info::u32(event.command_type),
        CL_EVENT_REFERENCE_COUNT => info::u32(event.ref_count()),
        CL_EVENT_COMMAND_EXECUTION_STATUS => {
            let status = event.status()?;
            watcher::poll();
            info::i32(status)
        }
        _ => return Err(CL_INVALID_VALUE),
    };
    write_info(&bytes, size, value, size_ret)
}

fn get_event_profiling_info(
    event: cl_event,
    param: cl_profiling_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let event = Cl::<Event>::get(event)?;
    // CL_PROFILING_INFO_NOT_AVAILABLE for user events and when the queue
    // was created without CL_QUEUE_PROFILING_ENABLE.
    if !event.queue.as_ref().is_some_and(|q| q.profiling()) {
        return Err(CL_PROFILING_INFO_NOT_AVAILABLE);
    }
    let bytes = info::remote(InfoTarget::EventProfiling, event.handle(), 0, param)?;
    write_info(&bytes, size, value, size_ret)
}

fn set_event_callback(
    event: cl_event,
    callback_type: cl_int,
    pfn_notify: Option<EventFn>,
    user_data: *mut c_void,
) -> ClResult<()> {
    let event = Cl::<Event>::get(event)?;
    // CL_INVALID_VALUE if pfn_event_notify is NULL or if
    // command_exec_callback_type is not CL_SUBMITTED, CL_RUNNING or
    // CL_COMPLETE.
    let pfn = pfn_notify.ok_or(CL_INVALID_VALUE)?;
    if ![CL_SUBMITTED, CL_RUNNING, CL_COMPLETE].contains(&callback_type) {
        return Err(CL_INVALID_VALUE);
    }
    watcher::register(event, callback_type, pfn, RawPtr::new(user_data));
    Ok(())
}
