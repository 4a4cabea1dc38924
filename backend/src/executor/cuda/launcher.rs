//! CUDA's launches for the session's launch thread
//! (`executor::launcher`): `cuLaunchKernel` with the parameters packed.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::sys;
use vgpu_protocol::Status;

use super::driver::{check, make_current};
use super::objects::{HostContext, HostFunction, HostStream};

/// A session's side of its launch thread, for CUDA launches.
pub type LaunchState = crate::executor::launcher::LaunchState<PreparedLaunch>;

/// Whether sessions hand their runs of launches to a thread of their own:
/// yes unless `VGPU_CUDA_LAUNCH_THREAD=0` (to compare, or to rule it out
/// when chasing a problem).
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("VGPU_CUDA_LAUNCH_THREAD").map_or(true, |v| v != "0"))
}

/// A launch checked and translated, ready for the driver.
pub struct PreparedLaunch {
    /// The batch (the session's count of batches) and the call's number in
    /// it (its index among the session's calls there), so that a failure
    /// answers that call, or, once that batch was answered, the next.
    pub batch: u64,
    pub call: usize,
    pub function: Arc<HostFunction>,
    pub ctx: Arc<HostContext>,
    /// `None`: the context's NULL stream.
    pub stream: Option<Arc<HostStream>>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem: u32,
    pub params: Vec<u8>,
    /// `cuLaunchCooperativeKernel`: all blocks resident at once.
    pub cooperative: bool,
}

impl PreparedLaunch {
    /// Issues the launch on the calling thread.
    pub fn issue_here(&self) -> Result<(), Status> {
        make_current(self.ctx.raw)?;
        let stream = self.stream.as_ref().map_or(std::ptr::null_mut(), |s| s.raw);
        if self.cooperative {
            return issue_cooperative(self, stream);
        }
        issue(
            &self.function,
            self.grid,
            self.block,
            self.shared_mem,
            stream,
            &self.params,
        )
    }
}

/// `cuLaunchCooperativeKernel`, in the launch's context (current). It
/// takes no packed buffer: each parameter is named by a pointer into it.
fn issue_cooperative(launch: &PreparedLaunch, stream: sys::CUstream) -> Result<(), Status> {
    let base = launch.params.as_ptr();
    let mut pointers: Vec<*mut c_void> = launch
        .function
        .params
        .iter()
        .map(|&(offset, _)| base.wrapping_add(offset as usize).cast_mut().cast())
        .collect();
    let [gx, gy, gz] = launch.grid;
    let [bx, by, bz] = launch.block;
    // SAFETY: the function is live (held by the launch) and its context
    // current; each pointer lies inside `params`, which has the layout's
    // size (checked by the session) and outlives the call, in which the
    // driver only reads them; pointer parameters were checked.
    check(unsafe {
        sys::cuLaunchCooperativeKernel(
            launch.function.raw,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            launch.shared_mem,
            stream,
            pointers.as_mut_ptr(),
        )
    })
}

/// `cuLaunchKernel` with a packed parameter buffer, in the current context.
fn issue(
    function: &HostFunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem: u32,
    stream: sys::CUstream,
    params: &[u8],
) -> Result<(), Status> {
    let mut size = params.len();
    let mut extra = [
        sys::CU_LAUNCH_PARAM_BUFFER_POINTER_AS_INT as usize as *mut c_void,
        params.as_ptr() as *mut c_void,
        sys::CU_LAUNCH_PARAM_BUFFER_SIZE_AS_INT as usize as *mut c_void,
        (&mut size as *mut usize).cast(),
        sys::CU_LAUNCH_PARAM_END_AS_INT as usize as *mut c_void,
    ];
    let extra_ptr = if size == 0 {
        std::ptr::null_mut()
    } else {
        extra.as_mut_ptr()
    };
    let [gx, gy, gz] = grid;
    let [bx, by, bz] = block;
    // SAFETY: the function is live (held by the caller) and its context
    // current; `extra` names a buffer of exactly the layout's size, which
    // the driver only reads during the call; its pointer parameters were
    // checked by the session.
    check(unsafe {
        sys::cuLaunchKernel(
            function.raw,
            gx,
            gy,
            gz,
            bx,
            by,
            bz,
            shared_mem,
            stream,
            std::ptr::null_mut(),
            extra_ptr,
        )
    })
}

impl crate::executor::launcher::Job for PreparedLaunch {
    fn issue(&self) -> Result<(), Status> {
        self.issue_here()
    }

    fn origin(&self) -> (u64, usize) {
        (self.batch, self.call)
    }

    fn held_bytes(&self) -> u64 {
        self.params.len() as u64
    }
}
