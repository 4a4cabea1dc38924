//! The little the executor needs around cudarc's raw driver bindings: result
//! checking, the presence test that keeps a CUDA-less host from panicking,
//! and calls whose enum arguments come from the guest (passed as plain
//! integers, so an unknown value is the driver's to refuse, never undefined
//! behaviour here).

use std::ffi::{c_int, c_uint};

use cudarc::driver::sys;
use vgpu_protocol::cuda::result;
use vgpu_protocol::Status;

/// Every driver entry point the executor calls. cudarc resolves symbols on
/// first use and panics when one is missing, so all are checked up front.
const REQUIRED: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetName",
    "cuDeviceGetUuid_v2",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxCreate_v4",
    "cuCtxDestroy_v2",
    "cuCtxSetCurrent",
    "cuCtxGetCurrent",
    "cuCtxSynchronize",
    "cuMemGetInfo_v2",
    "cuMemGetAllocationGranularity",
    "cuMemAddressReserve",
    "cuMemAddressFree",
    "cuMemCreate",
    "cuMemRelease",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpyDtoD_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemHostRegister_v2",
    "cuMemHostUnregister",
    "cuMemsetD8_v2",
    "cuMemsetD16_v2",
    "cuMemsetD32_v2",
    "cuMemsetD8Async",
    "cuMemsetD16Async",
    "cuMemsetD32Async",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuModuleGetGlobal_v2",
    "cuFuncGetParamInfo",
    "cuModuleGetFunctionCount",
    "cuModuleEnumerateFunctions",
    "cuFuncGetName",
    "cuFuncGetAttribute",
    "cuFuncSetAttribute",
    "cuFuncSetCacheConfig",
    "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
    "cuOccupancyMaxPotentialBlockSizeWithFlags",
    "cuLaunchKernel",
    "cuStreamCreateWithPriority",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamQuery",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventSynchronize",
    "cuEventQuery",
    "cuEventElapsedTime_v2",
];

/// Why the driver cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("no CUDA driver library (libcuda.so.1) on this host")]
    NoLibrary,
    #[error("the CUDA driver lacks {0} (a driver for CUDA 12.8 or newer is needed)")]
    MissingSymbol(&'static str),
    #[error("{call} failed with CUresult {code}")]
    Call { call: &'static str, code: i32 },
}

/// Loads libcuda and checks that it has every entry point the executor
/// uses; only then may cudarc's bindings be called.
pub fn load() -> Result<(), DriverError> {
    // SAFETY: only tries to dlopen the library candidates.
    if !unsafe { sys::is_culib_present() } {
        return Err(DriverError::NoLibrary);
    }
    // SAFETY: the library is present (checked above), so `culib` loads it
    // instead of panicking.
    let lib = unsafe { sys::culib() };
    for name in REQUIRED {
        // SAFETY: the symbol is only looked up, not called.
        if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
            return Err(DriverError::MissingSymbol(name));
        }
    }
    Ok(())
}

/// A `CUresult` as the guest's status.
pub fn check(code: sys::CUresult) -> Result<(), Status> {
    match code as i32 {
        0 => Ok(()),
        other => Err(Status(other)),
    }
}

/// As [`check`], naming the call, for set-up paths.
pub fn check_call(call: &'static str, code: sys::CUresult) -> Result<(), DriverError> {
    match code as i32 {
        0 => Ok(()),
        code => Err(DriverError::Call { call, code }),
    }
}

fn symbol<F: Copy>(name: &[u8]) -> Result<F, Status> {
    // SAFETY: `load` succeeded before any executor exists, so the library
    // is loaded; the caller names `F` as the symbol's C signature.
    unsafe { sys::culib().get::<F>(name).map(|f| *f) }
        .map_err(|_| Status(result::ERROR_NOT_SUPPORTED))
}

fn code(value: c_int) -> Result<(), Status> {
    match value {
        0 => Ok(()),
        other => Err(Status(other)),
    }
}

/// `cuDeviceGetAttribute` with the attribute as a plain integer.
pub fn device_attribute(device: sys::CUdevice, attribute: u32) -> Result<i32, Status> {
    type F = unsafe extern "C" fn(*mut c_int, c_int, sys::CUdevice) -> c_int;
    let f: F = symbol(b"cuDeviceGetAttribute\0")?;
    let attribute = c_int::try_from(attribute).map_err(|_| Status(result::ERROR_INVALID_VALUE))?;
    let mut value = 0;
    // SAFETY: `value` is valid for writes; the driver checks the attribute.
    code(unsafe { f(&mut value, attribute, device) })?;
    Ok(value)
}

/// `cuFuncGetAttribute` with the attribute as a plain integer.
pub fn function_attribute(function: sys::CUfunction, attribute: u32) -> Result<i32, Status> {
    type F = unsafe extern "C" fn(*mut c_int, c_int, sys::CUfunction) -> c_int;
    let f: F = symbol(b"cuFuncGetAttribute\0")?;
    let attribute = c_int::try_from(attribute).map_err(|_| Status(result::ERROR_INVALID_VALUE))?;
    let mut value = 0;
    // SAFETY: `function` is a live function of the session; `value` is
    // valid for writes.
    code(unsafe { f(&mut value, attribute, function) })?;
    Ok(value)
}

/// `cuFuncSetAttribute` with the attribute as a plain integer.
pub fn set_function_attribute(
    function: sys::CUfunction,
    attribute: u32,
    value: i32,
) -> Result<(), Status> {
    type F = unsafe extern "C" fn(sys::CUfunction, c_int, c_int) -> c_int;
    let f: F = symbol(b"cuFuncSetAttribute\0")?;
    let attribute = c_int::try_from(attribute).map_err(|_| Status(result::ERROR_INVALID_VALUE))?;
    // SAFETY: `function` is a live function of the session.
    code(unsafe { f(function, attribute, value) })
}

/// `cuFuncSetCacheConfig` with the configuration as a plain integer.
pub fn set_cache_config(function: sys::CUfunction, config: u32) -> Result<(), Status> {
    type F = unsafe extern "C" fn(sys::CUfunction, c_uint) -> c_int;
    let f: F = symbol(b"cuFuncSetCacheConfig\0")?;
    // SAFETY: `function` is a live function of the session.
    code(unsafe { f(function, config) })
}

/// Makes `ctx` current on this thread.
pub fn set_current(ctx: sys::CUcontext) -> Result<(), Status> {
    // SAFETY: `ctx` is a live context (or null, which unbinds).
    check(unsafe { sys::cuCtxSetCurrent(ctx) })
}

/// Makes `ctx` current on this thread unless it already is. The driver is
/// asked rather than a cache kept: a session's calls run on whichever
/// thread takes its batch (the vring thread, the session's worker, or a
/// checkpoint's copier resuming held chains), and copiers and restores set
/// contexts of their own on those threads; a cache that missed one of them
/// launched a context's functions in another context
/// (`CUDA_ERROR_INVALID_HANDLE`).
pub fn make_current(ctx: sys::CUcontext) -> Result<(), Status> {
    let mut now = std::ptr::null_mut();
    // SAFETY: `now` is valid for writes.
    check(unsafe { sys::cuCtxGetCurrent(&mut now) })?;
    if now == ctx {
        return Ok(());
    }
    set_current(ctx)
}

/// `cuCtxGetLimit` of the current context, the limit as a plain integer.
pub fn context_limit(limit: u32) -> Result<u64, Status> {
    type F = unsafe extern "C" fn(*mut usize, c_int) -> c_int;
    let f: F = symbol(b"cuCtxGetLimit\0")?;
    let limit = c_int::try_from(limit).map_err(|_| Status(result::ERROR_INVALID_VALUE))?;
    let mut value = 0usize;
    // SAFETY: `value` is valid for writes; the driver checks the limit.
    code(unsafe { f(&mut value, limit) })?;
    Ok(value as u64)
}

/// `cuCtxSetLimit` on the current context.
pub fn set_context_limit(limit: u32, value: usize) -> Result<(), Status> {
    type F = unsafe extern "C" fn(c_int, usize) -> c_int;
    let f: F = symbol(b"cuCtxSetLimit\0")?;
    let limit = c_int::try_from(limit).map_err(|_| Status(result::ERROR_INVALID_VALUE))?;
    // SAFETY: plain values; the driver checks the limit and the value.
    code(unsafe { f(limit, value) })
}

/// `cuCtxGetStreamPriorityRange` of the current context: (least, greatest).
pub fn stream_priority_range() -> Result<(i32, i32), Status> {
    type F = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
    let f: F = symbol(b"cuCtxGetStreamPriorityRange\0")?;
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: both outputs are valid for writes.
    code(unsafe { f(&mut least, &mut greatest) })?;
    Ok((least, greatest))
}

/// `cuOccupancyAvailableDynamicSMemPerBlock`.
pub fn available_dynamic_smem(
    function: sys::CUfunction,
    blocks: c_int,
    block_size: c_int,
) -> Result<u64, Status> {
    type F = unsafe extern "C" fn(*mut usize, sys::CUfunction, c_int, c_int) -> c_int;
    let f: F = symbol(b"cuOccupancyAvailableDynamicSMemPerBlock\0")?;
    let mut size = 0usize;
    // SAFETY: `function` is a live function of the session; `size` is
    // valid for writes.
    code(unsafe { f(&mut size, function, blocks, block_size) })?;
    Ok(size as u64)
}

/// `CUlaunchAttribute` (an id and a 64-byte value union).
#[repr(C)]
struct LaunchAttribute {
    id: u32,
    pad: [u8; 4],
    value: [u32; 16],
}

/// `CUlaunchConfig`.
#[repr(C)]
struct LaunchConfig {
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem: u32,
    stream: *mut std::ffi::c_void,
    attrs: *const LaunchAttribute,
    num_attrs: u32,
}

/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`.
const CLUSTER_DIMENSION: u32 = 4;

/// `cuOccupancyMaxActiveClusters` for a launch of this shape; `cluster`
/// all 0 leaves the kernel's own cluster dimensions.
pub fn max_active_clusters(
    function: sys::CUfunction,
    grid: [u32; 3],
    block: [u32; 3],
    shared_mem: u32,
    cluster: [u32; 3],
) -> Result<i32, Status> {
    type F = unsafe extern "C" fn(*mut c_int, sys::CUfunction, *const LaunchConfig) -> c_int;
    let f: F = symbol(b"cuOccupancyMaxActiveClusters\0")?;
    let mut value = [0u32; 16];
    value[..3].copy_from_slice(&cluster);
    let attribute = LaunchAttribute {
        id: CLUSTER_DIMENSION,
        pad: [0; 4],
        value,
    };
    let with_cluster = cluster != [0; 3];
    let config = LaunchConfig {
        grid,
        block,
        shared_mem,
        stream: std::ptr::null_mut(),
        attrs: if with_cluster {
            &attribute
        } else {
            std::ptr::null()
        },
        num_attrs: u32::from(with_cluster),
    };
    let mut clusters = 0;
    // SAFETY: `function` is a live function of the session; the config and
    // its one attribute live across the call; `clusters` is valid for writes.
    code(unsafe { f(&mut clusters, function, &config) })?;
    Ok(clusters)
}
