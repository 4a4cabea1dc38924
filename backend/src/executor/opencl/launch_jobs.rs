//! OpenCL's driver calls for the session's launch thread
//! (`executor::launcher`): in a run of launches, `clSetKernelArg` and
//! `clEnqueueNDRangeKernel` leave the batch's thread once checked, so that
//! decoding and checking the next call overlaps the driver's work on this
//! one (NVIDIA's takes about as long as a native program's call).
//!
//! Only calls whose effect the guest cannot look at before the next
//! synchronizing call go: launches without an event or a wait list, on a
//! session with no copy-on-write debts and no queue-depth bound, and the
//! argument settings between them. Every other call drains the thread
//! first. The arguments' record (`HostKernel::args`) is the batch
//! thread's: it is updated when the call is checked, so later checks see
//! the guest's order; a driver that then refuses the setting reports it
//! as the call's late failure, and the record keeps the refused value.

use std::sync::Arc;

use vgpu_protocol::Status;

use super::objects::{ArgRecord, HostKernel, QueueEntry};

/// A session's side of its launch thread, for OpenCL calls.
pub type LaunchState = crate::executor::launcher::LaunchState<OpenClJob>;

/// Whether sessions hand their runs of launches to a thread of their own:
/// `VGPU_OPENCL_LAUNCH_THREAD=1` or `0` says; by default yes on hosts of
/// more than two CPUs. On two, a third busy thread beside the program and
/// the batch's thread takes time from the device's own (PoCL's workers
/// are CPU threads).
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(
        || match std::env::var("VGPU_OPENCL_LAUNCH_THREAD").as_deref() {
            Ok("1") => true,
            Ok("0") => false,
            _ => std::thread::available_parallelism().is_ok_and(|n| n.get() > 2),
        },
    )
}

/// A checked call for the launch thread.
pub enum OpenClJob {
    /// An admitted argument setting.
    SetArg {
        origin: (u64, usize),
        kernel: Arc<HostKernel>,
        index: u32,
        arg: ArgRecord,
    },
    /// A launch that asks for no event and waits for none.
    Launch {
        origin: (u64, usize),
        queue: Arc<QueueEntry>,
        kernel: Arc<HostKernel>,
        work_dim: u32,
        offset: Option<[usize; 3]>,
        global: [usize; 3],
        local: Option<[usize; 3]>,
    },
}

impl crate::executor::launcher::Job for OpenClJob {
    fn issue(&self) -> Result<(), Status> {
        match self {
            OpenClJob::SetArg {
                kernel, index, arg, ..
            } => super::create::set_driver_arg(kernel, *index, arg),
            OpenClJob::Launch {
                queue,
                kernel,
                work_dim,
                offset,
                global,
                local,
                ..
            } => enqueue_kernel(
                queue,
                kernel,
                *work_dim,
                offset.as_ref(),
                global,
                local.as_ref(),
                &[],
                None,
            ),
        }
    }

    fn origin(&self) -> (u64, usize) {
        match self {
            OpenClJob::SetArg { origin, .. } | OpenClJob::Launch { origin, .. } => *origin,
        }
    }

    fn held_bytes(&self) -> u64 {
        match self {
            OpenClJob::SetArg {
                arg: ArgRecord::Value(bytes),
                ..
            } => bytes.len() as u64,
            _ => 0,
        }
    }
}

/// `clEnqueueNDRangeKernel`; the event goes to `event` when given, else
/// the driver makes none (cl3's wrapper always asks for one: NVIDIA's
/// driver spends microseconds per command on it).
#[allow(clippy::too_many_arguments)]
pub(super) fn enqueue_kernel(
    queue: &QueueEntry,
    kernel: &HostKernel,
    work_dim: u32,
    offset: Option<&[usize; 3]>,
    global: &[usize; 3],
    local: Option<&[usize; 3]>,
    wait: &[cl3::types::cl_event],
    event: Option<&mut cl3::types::cl_event>,
) -> Result<(), Status> {
    let runtime = cl3::load_library()
        .as_ref()
        .map_err(|_| Status::DEVICE_NOT_AVAILABLE)?;
    // cl3 declares the loaded entry point a safe fn. What the driver reads
    // is sound: the arrays hold 3 elements, at least `work_dim` (checked
    // by the caller); the queue, the kernel and the buffers its arguments
    // name are held alive by the caller, so are the events of `wait`;
    // `event` outlives the call.
    let status = runtime
        .clEnqueueNDRangeKernel(
            queue.queue.0,
            kernel.raw,
            work_dim,
            offset.map_or(std::ptr::null(), |o| o.as_ptr()),
            global.as_ptr(),
            local.map_or(std::ptr::null(), |l| l.as_ptr()),
            wait.len() as u32,
            if wait.is_empty() {
                std::ptr::null()
            } else {
                wait.as_ptr()
            },
            event.map_or(std::ptr::null_mut(), |e| e as *mut _),
        )
        .ok_or(Status::DEVICE_NOT_AVAILABLE)?;
    if status == cl3::error_codes::CL_SUCCESS {
        Ok(())
    } else {
        Err(Status(status))
    }
}
