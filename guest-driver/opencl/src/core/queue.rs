//! Command queues: host queues only; properties are passed through.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use opencl_sys::{cl_command_queue_properties, CL_INVALID_COMMAND_QUEUE};
use vgpu_protocol::ObjectKind;

use crate::core::context::Context;
use crate::core::device::Device;
use crate::core::object::{kind, Cl};

pub struct Queue {
    pub context: Arc<Cl<Context>>,
    /// The context's device it runs on.
    pub device: Arc<Cl<Device>>,
    /// `CL_QUEUE_PROPERTIES`.
    pub properties: cl_command_queue_properties,
    /// `CL_QUEUE_PROPERTIES_ARRAY`: the list given to
    /// `clCreateCommandQueueWithProperties` with its terminator, else empty.
    pub properties_array: Vec<u64>,
    /// The session's quiet mark when this queue was last known drained
    /// (0: never); see `placed`.
    pub drained_at: AtomicU64,
}

kind!(Queue, CL_INVALID_COMMAND_QUEUE, Some(ObjectKind::Queue));

impl Queue {
    pub fn profiling(&self) -> bool {
        self.properties & opencl_sys::CL_QUEUE_PROFILING_ENABLE != 0
    }
}
