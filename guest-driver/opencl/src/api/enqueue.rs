//! Kernel launches, markers, barriers and migrations: all batched (no
//! round trip), after the checks the spec defines.

use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::messages::{EnqueueBarrier, EnqueueMarker, EnqueueNdRange};
use vgpu_protocol::Request;

use crate::api::entry::status_entry;
use crate::api::util::{array, wait_events, wait_list, NewEvent};
use crate::core::kernel::Kernel;
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::queue::Queue;

status_entry! {
    fn clEnqueueNDRangeKernel(command_queue: cl_command_queue, kernel: cl_kernel, work_dim: cl_uint, global_work_offset: *const usize, global_work_size: *const usize, local_work_size: *const usize, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_nd_range_kernel;
    fn clEnqueueTask(command_queue: cl_command_queue, kernel: cl_kernel, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_task;
    fn clEnqueueMarker(command_queue: cl_command_queue, event: *mut cl_event) => enqueue_marker;
    fn clEnqueueMarkerWithWaitList(command_queue: cl_command_queue, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_marker_with_wait_list;
    fn clEnqueueBarrier(command_queue: cl_command_queue) => enqueue_barrier;
    fn clEnqueueBarrierWithWaitList(command_queue: cl_command_queue, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_barrier_with_wait_list;
    fn clEnqueueWaitForEvents(command_queue: cl_command_queue, num_events: cl_uint, event_list: *const cl_event) => enqueue_wait_for_events;
    fn clEnqueueMigrateMemObjects(command_queue: cl_command_queue, num_mem_objects: cl_uint, mem_objects: *const cl_mem, flags: cl_mem_migration_flags, num_events_in_wait_list: cl_uint, event_wait_list: *const cl_event, event: *mut cl_event) => enqueue_migrate_mem_objects;
}

/// `dim` values of an optional `size_t[]`, padded to 3 with `pad`.
fn dims(ptr: *const usize, dim: usize, pad: u64) -> ClResult<Option<[u64; 3]>> {
    if ptr.is_null() {
        return Ok(None);
    }
    let mut out = [pad; 3];
    for (o, &v) in out.iter_mut().zip(array(ptr, dim)?) {
        *o = v as u64;
    }
    Ok(Some(out))
}

/// How a launch may be sent: batched when every check the device would
/// make was made here, or waiting for the device's own answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Launch {
    Batched,
    DeviceDecides,
}

/// The local size checks that need device and kernel limits, in the
/// spec's order: CL_INVALID_WORK_GROUP_SIZE if a local size is 0;
/// CL_INVALID_WORK_ITEM_SIZE if a local size exceeds
/// CL_DEVICE_MAX_WORK_ITEM_SIZES. A product above CL_KERNEL_WORK_GROUP_SIZE
/// is CL_INVALID_WORK_GROUP_SIZE by the spec, but NVIDIA's driver (580)
/// reports 256 for kernels it runs with 1024 work-items per group (OpenCV's
/// canny and matchTemplate kernels, natively): such a launch is left to the
/// device, with every other local-size check, and its answer is the call's
/// (PoCL refuses it, NVIDIA runs it).
fn check_local(kernel: &Cl<Kernel>, local: &[u64; 3], dim: usize) -> ClResult<Launch> {
    if local[..dim].contains(&0) {
        return Err(CL_INVALID_WORK_GROUP_SIZE);
    }
    let max_group = kernel.max_group()?;
    let product = local[..dim]
        .iter()
        .try_fold(1u64, |acc, l| acc.checked_mul(*l));
    let Some(product) = product else {
        return Err(CL_INVALID_WORK_GROUP_SIZE);
    };
    if product > max_group {
        return Ok(Launch::DeviceDecides);
    }
    let max_items = kernel.program.context.device.max_work_item_sizes()?;
    if local[..dim].iter().zip(&max_items).any(|(l, m)| l > m) {
        return Err(CL_INVALID_WORK_ITEM_SIZE);
    }
    Ok(Launch::Batched)
}

fn enqueue_nd_range_kernel(
    queue: cl_command_queue,
    kernel: cl_kernel,
    work_dim: cl_uint,
    offset: *const usize,
    global: *const usize,
    local: *const usize,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    let kernel = Cl::<Kernel>::get(kernel)?;
    // CL_INVALID_CONTEXT if the context of command_queue and kernel differ.
    if !Arc::ptr_eq(&queue.context, &kernel.program.context) {
        return Err(CL_INVALID_CONTEXT);
    }
    // CL_INVALID_WORK_DIMENSION if work_dim is not between 1 and
    // CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS.
    let max_dim = queue.context.device.max_work_item_dims()?;
    if work_dim == 0 || u64::from(work_dim) > max_dim {
        return Err(CL_INVALID_WORK_DIMENSION);
    }
    let dim = work_dim as usize;
    // OpenCL 3.0: "If global_work_size is NULL, or the value in any passed
    // dimension is 0 then the kernel command will trivially succeed after
    // its event dependencies are satisfied" (earlier versions answered
    // CL_INVALID_GLOBAL_WORK_SIZE for NULL). Sent as a zero size, which the
    // device runs as that no-op.
    let global = dims(global, dim, 1)?.unwrap_or([0, 1, 1]);
    let offset = dims(offset, dim, 0)?.unwrap_or([0; 3]);
    // CL_INVALID_GLOBAL_OFFSET if global_work_size + global_work_offset
    // overflows a size_t.
    if (0..dim).any(|d| {
        global[d]
            .checked_add(offset[d])
            .is_none_or(|e| e > usize::MAX as u64)
    }) {
        return Err(CL_INVALID_GLOBAL_OFFSET);
    }
    // CL_INVALID_KERNEL_ARGS if the kernel argument values have not been
    // specified.
    if !kernel.all_args_set(kernel.num_args()?) {
        return Err(CL_INVALID_KERNEL_ARGS);
    }
    let local = dims(local, dim, 1)?;
    let mut launch = match &local {
        Some(local) => check_local(&kernel, local, dim)?,
        None => Launch::Batched,
    };
    // CL_INVALID_WORK_GROUP_SIZE if the kernel has a
    // reqd_work_group_size and local_work_size is NULL or differs from it.
    let required = kernel.required_group()?;
    if required.iter().any(|&r| r != 0) {
        let matches = local.is_some_and(|l| (0..3).all(|d| required[d] == l[d]));
        if !matches {
            return Err(CL_INVALID_WORK_GROUP_SIZE);
        }
    }
    let wait = wait_list(&queue, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_NDRANGE_KERNEL)?;
    let command = EnqueueNdRange {
        queue: queue.handle(),
        kernel: kernel.handle(),
        work_dim,
        offset,
        global,
        local: local.unwrap_or([0; 3]),
        wait,
        event: new_event.handle(),
    };
    // Whether a non-uniform work-group is allowed depends on how the program
    // was built: let the backend answer that one at once.
    let uniform = local.is_none_or(|l| (0..dim).all(|d| global[d] % l[d] == 0));
    if !uniform {
        launch = Launch::DeviceDecides;
    }
    match launch {
        Launch::Batched => new_event.submit(&queue, command.into()),
        Launch::DeviceDecides => {
            platform::client()?.call(command.into()).map_err(|s| s.0)?;
            new_event.publish(&queue);
            Ok(())
        }
    }
}

fn enqueue_task(
    queue: cl_command_queue,
    kernel: cl_kernel,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let one = [1usize];
    enqueue_nd_range_kernel(
        queue,
        kernel,
        1,
        std::ptr::null(),
        one.as_ptr(),
        one.as_ptr(),
        num_events,
        events,
        event,
    )
}

fn marker(
    queue: cl_command_queue,
    wait: Option<(cl_uint, *const cl_event)>,
    event: *mut cl_event,
    barrier: bool,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    let wait = match wait {
        Some((num, list)) => wait_list(&queue, num, list)?,
        None => Vec::new(),
    };
    let command = if barrier {
        CL_COMMAND_BARRIER
    } else {
        CL_COMMAND_MARKER
    };
    let new_event = NewEvent::new(event, command)?;
    let (queue_handle, event_handle) = (queue.handle(), new_event.handle());
    let request: Request = if barrier {
        EnqueueBarrier {
            queue: queue_handle,
            wait,
            event: event_handle,
        }
        .into()
    } else {
        EnqueueMarker {
            queue: queue_handle,
            wait,
            event: event_handle,
        }
        .into()
    };
    new_event.submit(&queue, request)
}

fn enqueue_marker(queue: cl_command_queue, event: *mut cl_event) -> ClResult<()> {
    Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if event is NULL.
    if event.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    marker(queue, None, event, false)
}

fn enqueue_marker_with_wait_list(
    queue: cl_command_queue,
    num: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    marker(queue, Some((num, list)), event, false)
}

fn enqueue_barrier(queue: cl_command_queue) -> ClResult<()> {
    marker(queue, None, std::ptr::null_mut(), true)
}

fn enqueue_barrier_with_wait_list(
    queue: cl_command_queue,
    num: cl_uint,
    list: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    marker(queue, Some((num, list)), event, true)
}

fn enqueue_wait_for_events(
    queue: cl_command_queue,
    num: cl_uint,
    list: *const cl_event,
) -> ClResult<()> {
    let q = Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if num_events is zero or event_list is NULL;
    // CL_INVALID_EVENT if an event is not valid.
    if num == 0 || list.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    wait_events(&q, num, list).map_err(|e| {
        if e == CL_INVALID_EVENT_WAIT_LIST {
            CL_INVALID_EVENT
        } else {
            e
        }
    })?;
    marker(queue, Some((num, list)), std::ptr::null_mut(), true)
}

fn enqueue_migrate_mem_objects(
    queue: cl_command_queue,
    num_mems: cl_uint,
    mems: *const cl_mem,
    flags: cl_mem_migration_flags,
    num_events: cl_uint,
    events: *const cl_event,
    event: *mut cl_event,
) -> ClResult<()> {
    let q = Cl::<Queue>::get(queue)?;
    // CL_INVALID_VALUE if num_mem_objects is zero, mem_objects is NULL or
    // flags are not valid.
    if num_mems == 0
        || mems.is_null()
        || flags & !(CL_MIGRATE_MEM_OBJECT_HOST | CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED) != 0
    {
        return Err(CL_INVALID_VALUE);
    }
    for &mem in array(mems, num_mems as usize)? {
        let mem = Cl::<Mem>::get(mem)?;
        if !Arc::ptr_eq(&mem.context, &q.context) {
            return Err(CL_INVALID_CONTEXT);
        }
    }
    // One device: there is nowhere to migrate to; ordering is all that
    // remains, which a marker provides.
    let wait = wait_list(&q, num_events, events)?;
    let new_event = NewEvent::new(event, CL_COMMAND_MIGRATE_MEM_OBJECTS)?;
    let request = EnqueueMarker {
        queue: q.handle(),
        wait,
        event: new_event.handle(),
    };
    new_event.submit(&q, request.into())
}
