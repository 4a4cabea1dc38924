//! Command-queue entry points.

use std::ffi::c_void;

use opencl_sys::*;
use vgpu_protocol::messages::{CreateQueue, CreateQueueOnDevice, Flush};

use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{properties, write_info};
use crate::core::context::Context;
use crate::core::info;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::queue::Queue;
use crate::core::sync;

object_entry! {
    fn clCreateCommandQueue(context: cl_context, device: cl_device_id, properties: cl_command_queue_properties) -> cl_command_queue => create_command_queue;
    fn clCreateCommandQueueWithProperties(context: cl_context, device: cl_device_id, properties: *const cl_queue_properties) -> cl_command_queue => create_command_queue_with_properties;
}

status_entry! {
    fn clRetainCommandQueue(command_queue: cl_command_queue) => Cl::<Queue>::retain;
    fn clReleaseCommandQueue(command_queue: cl_command_queue) => release_command_queue;
    fn clGetCommandQueueInfo(command_queue: cl_command_queue, param_name: cl_command_queue_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_command_queue_info;
    fn clFlush(command_queue: cl_command_queue) => flush;
    fn clFinish(command_queue: cl_command_queue) => finish;
}

const KNOWN: cl_command_queue_properties = CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE
    | CL_QUEUE_PROFILING_ENABLE
    | CL_QUEUE_ON_DEVICE
    | CL_QUEUE_ON_DEVICE_DEFAULT;

fn create(
    context: cl_context,
    device: cl_device_id,
    props: cl_command_queue_properties,
    array: Vec<u64>,
) -> ClResult<cl_command_queue> {
    // CL_INVALID_CONTEXT if context is not a valid context.
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_DEVICE if device is not a valid device or is not
    // associated with context.
    let device = context.member(device)?;
    // CL_INVALID_VALUE if values specified in properties are not valid.
    if props & !KNOWN != 0 {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_QUEUE_PROPERTIES if values specified in properties are
    // valid but are not supported by the device (device-side queues are
    // not forwarded).
    let supported = context.device.number(CL_DEVICE_QUEUE_ON_HOST_PROPERTIES)?;
    if props & (CL_QUEUE_ON_DEVICE | CL_QUEUE_ON_DEVICE_DEFAULT) != 0 || props & !supported != 0 {
        return Err(CL_INVALID_QUEUE_PROPERTIES);
    }
    let client = platform::client()?;
    let handle = client.new_handle();
    let remote = if props == 0 {
        Vec::new()
    } else {
        vec![u64::from(CL_QUEUE_PROPERTIES), props, 0]
    };
    let request = if device.is_root() {
        CreateQueue {
            queue: handle,
            context: context.handle(),
            properties: remote,
        }
        .into()
    } else {
        CreateQueueOnDevice {
            queue: handle,
            context: context.handle(),
            device: device.remote_handle(),
            properties: remote,
        }
        .into()
    };
    client.defer(request).map_err(|s| s.0)?;
    let queue = Cl::publish(
        handle,
        Queue {
            context,
            device,
            properties: props,
            properties_array: array,
            drained_at: Default::default(),
        },
    );
    Ok(queue.as_ptr())
}

fn create_command_queue(
    context: cl_context,
    device: cl_device_id,
    props: cl_command_queue_properties,
) -> ClResult<cl_command_queue> {
    create(context, device, props, Vec::new())
}

fn create_command_queue_with_properties(
    context: cl_context,
    device: cl_device_id,
    list: *const cl_queue_properties,
) -> ClResult<cl_command_queue> {
    let list = properties(list, CL_INVALID_VALUE)?;
    let mut props = 0;
    for pair in list.chunks_exact(2) {
        match pair[0] as cl_uint {
            CL_QUEUE_PROPERTIES => props = pair[1],
            // CL_INVALID_VALUE if values specified in properties are not
            // valid (a size only applies to device queues).
            _ => return Err(CL_INVALID_VALUE),
        }
    }
    create(context, device, props, list)
}

fn release_command_queue(queue: cl_command_queue) -> ClResult<()> {
    // clReleaseCommandQueue performs an implicit flush.
    let q = Cl::<Queue>::get(queue)?;
    if q.ref_count() == 1 {
        let _ = sync::flush();
    }
    Cl::<Queue>::release(queue)
}

fn get_command_queue_info(
    queue: cl_command_queue,
    param: cl_command_queue_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    let bytes = match param {
        CL_QUEUE_CONTEXT => info::ptr(queue.context.as_ptr()),
        CL_QUEUE_DEVICE => info::ptr(queue.device.as_ptr()),
        CL_QUEUE_REFERENCE_COUNT => info::u32(queue.ref_count()),
        CL_QUEUE_PROPERTIES => info::u64(queue.properties),
        CL_QUEUE_PROPERTIES_ARRAY => info::u64s(&queue.properties_array),
        CL_QUEUE_DEVICE_DEFAULT => info::ptr(std::ptr::null_mut()),
        // CL_INVALID_COMMAND_QUEUE for CL_QUEUE_SIZE when command_queue is
        // not a device queue.
        CL_QUEUE_SIZE => return Err(CL_INVALID_COMMAND_QUEUE),
        _ => return Err(CL_INVALID_VALUE),
    };
    write_info(&bytes, size, value, size_ret)
}

fn flush(queue: cl_command_queue) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    let client = platform::client()?;
    client
        .defer(
            Flush {
                queue: queue.handle(),
            }
            .into(),
        )
        .map_err(|s| s.0)?;
    sync::flush()
}

fn finish(queue: cl_command_queue) -> ClResult<()> {
    let queue = Cl::<Queue>::get(queue)?;
    sync::finish(&queue)
}
