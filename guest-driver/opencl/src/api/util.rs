//! Reading and writing application memory at the C boundary.
//!
//! Every raw pointer the application passes goes through these helpers.
//! The OpenCL specification makes the application responsible for each
//! non-NULL pointer being valid for the size it states; NULL is checked
//! here. Nothing else in the crate dereferences application pointers.

use std::ffi::{c_char, c_void, CStr};
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::Request;

use crate::core::event::Event;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::queue::Queue;

/// Longest property list read (pairs); longer lists are refused.
const MAX_PROPERTIES: usize = 256;

/// Writes `value` to `ptr` unless it is NULL.
pub(crate) fn write<T>(ptr: *mut T, value: T) {
    if !ptr.is_null() {
        // SAFETY: a non-NULL output pointer points at a `T` the application
        // owns (spec contract); unaligned writes are tolerated.
        unsafe { ptr.write_unaligned(value) }
    }
}

/// Reads a `T` from a non-NULL pointer.
pub(crate) fn read<T: Copy>(ptr: *const T) -> ClResult<T> {
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // SAFETY: non-NULL, and the application passes a readable `T`.
    Ok(unsafe { ptr.read_unaligned() })
}

/// The application's array `ptr[0..n]`; NULL with `n > 0` is
/// `CL_INVALID_VALUE`.
pub(crate) fn array<'a, T>(ptr: *const T, n: usize) -> ClResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    if !ptr.is_aligned() {
        return Err(CL_INVALID_VALUE);
    }
    // SAFETY: non-NULL, aligned, and the application passes `n` elements.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) })
}

/// The application's bytes `ptr[0..n]`.
pub(crate) fn bytes<'a>(ptr: *const c_void, n: usize) -> ClResult<&'a [u8]> {
    array(ptr as *const u8, n)
}

/// The application's writable bytes `ptr[0..n]`.
pub(crate) fn bytes_mut<'a>(ptr: *mut c_void, n: usize) -> ClResult<&'a mut [u8]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // SAFETY: non-NULL, and the application passes `n` writable bytes that
    // nothing else uses during the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr as *mut u8, n) })
}

/// A NUL-terminated string; NULL is `CL_INVALID_VALUE`.
pub(crate) fn c_str<'a>(ptr: *const c_char) -> ClResult<&'a CStr> {
    if ptr.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // SAFETY: non-NULL, and the application passes a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(ptr) })
}

/// An optional NUL-terminated string (NULL → empty).
pub(crate) fn opt_c_str(ptr: *const c_char) -> ClResult<Vec<u8>> {
    if ptr.is_null() {
        Ok(Vec::new())
    } else {
        Ok(c_str(ptr)?.to_bytes().to_vec())
    }
}

/// A `size_t[3]` (origins, regions).
pub(crate) fn triple(ptr: *const usize) -> ClResult<[u64; 3]> {
    let v = array(ptr, 3)?;
    Ok([v[0] as u64, v[1] as u64, v[2] as u64])
}

/// A zero-terminated property list, the terminator included; empty for
/// NULL. Lists without a terminator in `MAX_PROPERTIES` pairs are refused
/// with `invalid`.
pub(crate) fn properties<T: Copy + Default + PartialEq>(
    ptr: *const T,
    invalid: cl_int,
) -> ClResult<Vec<T>> {
    let mut list = Vec::new();
    if ptr.is_null() {
        return Ok(list);
    }
    for i in 0..MAX_PROPERTIES * 2 + 1 {
        // SAFETY: the application's list is readable up to its terminator,
        // which has not been reached yet.
        let value = unsafe { ptr.add(i).read_unaligned() };
        list.push(value);
        if i % 2 == 0 && value == T::default() {
            return Ok(list);
        }
    }
    Err(invalid)
}

/// The `param_value_size` / `param_value` / `param_value_size_ret`
/// protocol of every `clGet*Info`: `CL_INVALID_VALUE` if a non-NULL
/// `param_value` is smaller than the value.
pub(crate) fn write_info(
    value: &[u8],
    size: usize,
    out: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    if !out.is_null() {
        if size < value.len() {
            return Err(CL_INVALID_VALUE);
        }
        // SAFETY: `out` is non-NULL and the application says it holds `size`
        // bytes, at least `value.len()`.
        unsafe { std::ptr::copy_nonoverlapping(value.as_ptr(), out as *mut u8, value.len()) }
    }
    write(size_ret, value.len());
    Ok(())
}

/// An event wait list: `CL_INVALID_EVENT_WAIT_LIST` when the pointer and
/// count disagree or an entry is not a live event; `CL_INVALID_CONTEXT`
/// when an event belongs to another context than `queue`.
pub(crate) fn wait_list(
    queue: &Cl<Queue>,
    num: cl_uint,
    list: *const cl_event,
) -> ClResult<Vec<u64>> {
    Ok(wait_events(queue, num, list)?
        .iter()
        .map(|e| e.handle())
        .collect())
}

pub(crate) fn wait_events(
    queue: &Cl<Queue>,
    num: cl_uint,
    list: *const cl_event,
) -> ClResult<Vec<Arc<Cl<Event>>>> {
    if (num == 0) != list.is_null() {
        return Err(CL_INVALID_EVENT_WAIT_LIST);
    }
    let list = array(list, num as usize).map_err(|_| CL_INVALID_EVENT_WAIT_LIST)?;
    let mut events = Vec::with_capacity(list.len());
    for &ptr in list {
        let event = Cl::<Event>::get(ptr).map_err(|_| CL_INVALID_EVENT_WAIT_LIST)?;
        if !Arc::ptr_eq(&event.context, &queue.context) {
            return Err(CL_INVALID_CONTEXT);
        }
        events.push(event);
    }
    Ok(events)
}

/// The event an enqueue returns, when the application asked for one: its
/// handle travels with the command, and the object is published once the
/// command was accepted.
pub(crate) struct NewEvent {
    out: *mut cl_event,
    handle: u64,
    command_type: cl_command_type,
}

impl NewEvent {
    pub fn new(out: *mut cl_event, command_type: cl_command_type) -> ClResult<NewEvent> {
        let handle = if out.is_null() {
            0
        } else {
            platform::client()?.new_handle()
        };
        Ok(NewEvent {
            out,
            handle,
            command_type,
        })
    }

    /// The handle to send (0: no event).
    pub fn handle(&self) -> u64 {
        self.handle
    }

    /// Sends a batched command that carries this event, then publishes it.
    pub fn submit(self, queue: &Arc<Cl<Queue>>, request: Request) -> ClResult<()> {
        platform::client()?.defer(request).map_err(|s| s.0)?;
        self.publish(queue);
        Ok(())
    }

    /// Creates the event object and hands it to the application.
    pub fn publish(self, queue: &Arc<Cl<Queue>>) -> Option<Arc<Cl<Event>>> {
        if self.handle == 0 {
            return None;
        }
        let event = Cl::publish(self.handle, Event::of_command(queue, self.command_type));
        write(self.out, event.as_ptr());
        Some(event)
    }
}
