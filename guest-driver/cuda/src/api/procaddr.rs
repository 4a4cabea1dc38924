//! `cuGetProcAddress`: answers exactly as the real driver does. CUDA
//! runtimes (every static or shared copy of cudart) ask for each base name
//! at the version that introduced it, and get the driver's versioned symbol
//! of that version (`cuCtxCreate` at 3020 is `cuCtxCreate_v2`,
//! `cuCtxSynchronize` at 13000 is `cuCtxSynchronize_v2`) or, with the
//! per-thread-stream flag, its `_ptds`/`_ptsz` form.
//!
//! Two steps: `table.rs`, generated from a dump of the real driver
//! (`traces/procaddr-dump.txt`, `trace/gen_procaddr_table.py`), says which
//! symbol the driver gives; then that symbol becomes this library's
//! function of the same name (per-thread-stream forms share the body of
//! the plain one). A symbol the driver knows and this library does not
//! implement becomes a function that answers `CUDA_ERROR_NOT_SUPPORTED`:
//! never a pointer that silently succeeds.

use std::ffi::{c_char, c_int, c_void};

use super::{
    context, copy_2d, device, error, event, export, host_func, launch, library, mem_pool, memory,
    module, pointer, profiler, stream, unsupported,
};
use crate::ffi::{c_str, entry, put, put_opt, result, CUresult, CuResult};

mod table;

pub use table::DRIVER_VERSION;

/// What the driver answers for a name at a version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The driver's exported symbol.
    Sym(&'static str),
    /// `CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND`.
    NotFound,
    /// `CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT`: known, but newer.
    TooOld,
}

/// From this version on (up to the next cut), the answer is this.
#[derive(Clone, Copy, Debug)]
pub struct Cut(pub i32, pub Answer);

/// `CUdriverProcAddress_flags`.
const PER_THREAD_DEFAULT_STREAM: u64 = 2;
const ALL_FLAGS: u64 = 3;

/// `CUdriverProcAddressQueryResult`.
const SYMBOL_SUCCESS: c_int = 0;
const SYMBOL_NOT_FOUND: c_int = 1;
const VERSION_NOT_SUFFICIENT: c_int = 2;

/// The driver's answer for `name` at `version` with `flags`. Flags beyond
/// the defined bits and versions above the driver's are invalid values; a
/// negative version means the newest. With both flag bits set the driver
/// accepts the call; which variant it then gives was not measured, and the
/// default (legacy-stream) one is given here.
pub fn driver_answer(name: &str, version: c_int, flags: u64) -> CuResult<Answer> {
    if flags > ALL_FLAGS {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let version = if version < 0 { DRIVER_VERSION } else { version };
    if version > DRIVER_VERSION {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let Ok(row) = table::TABLE.binary_search_by(|row| row.0.cmp(name)) else {
        return Ok(Answer::NotFound);
    };
    let (_, default, per_thread) = table::TABLE[row];
    let cuts = match per_thread {
        Some(cuts) if flags == PER_THREAD_DEFAULT_STREAM => cuts,
        _ => default,
    };
    Ok(cuts
        .iter()
        .rev()
        .find(|cut| cut.0 <= version)
        .map_or(Answer::TooOld, |cut| cut.1))
}

/// Stands for every driver symbol this library knows nothing of.
extern "C" fn not_supported() -> CUresult {
    log::debug!("a function looked up through cuGetProcAddress is not supported");
    result::ERROR_NOT_SUPPORTED
}

/// This library's function named `symbol` (the driver's exact name, its
/// `_ptds`/`_ptsz` suffix ignored: the same body serves both streams).
pub fn implemented(symbol: &str) -> Option<*mut c_void> {
    let symbol = symbol
        .strip_suffix("_ptds")
        .or_else(|| symbol.strip_suffix("_ptsz"))
        .unwrap_or(symbol);
    macro_rules! table {
        ($($key:literal => $f:path,)*) => {
            match symbol {
                $($key => Some($f as *mut c_void),)*
                _ => None,
            }
        };
    }
    table!(
        "cuCtxCreate_v2" => context::cuCtxCreate_v2,
        "cuCtxCreate_v3" => context::cuCtxCreate_v3,
        "cuCtxCreate_v4" => context::cuCtxCreate_v4,
        "cuCtxDestroy" => context::cuCtxDestroy,
        "cuCtxDestroy_v2" => context::cuCtxDestroy_v2,
        "cuCtxGetApiVersion" => context::cuCtxGetApiVersion,
        "cuCtxGetLimit" => context::cuCtxGetLimit,
        "cuCtxSetLimit" => context::cuCtxSetLimit,
        "cuProfilerStart" => profiler::cuProfilerStart,
        "cuProfilerStop" => profiler::cuProfilerStop,
        "cuCtxGetStreamPriorityRange" => context::cuCtxGetStreamPriorityRange,
        "cuKernelGetAttribute" => library::cuKernelGetAttribute,
        "cuKernelGetFunction" => library::cuKernelGetFunction,
        "cuKernelGetLibrary" => library::cuKernelGetLibrary,
        "cuKernelGetName" => library::cuKernelGetName,
        "cuKernelGetParamInfo" => library::cuKernelGetParamInfo,
        "cuKernelSetAttribute" => library::cuKernelSetAttribute,
        "cuKernelSetCacheConfig" => library::cuKernelSetCacheConfig,
        "cuLaunchKernelEx" => launch::cuLaunchKernelEx,
        "cuLibraryGetGlobal" => library::cuLibraryGetGlobal,
        "cuLibraryGetKernel" => library::cuLibraryGetKernel,
        "cuLibraryGetModule" => library::cuLibraryGetModule,
        "cuLibraryLoadData" => library::cuLibraryLoadData,
        "cuLibraryLoadFromFile" => library::cuLibraryLoadFromFile,
        "cuLibraryUnload" => library::cuLibraryUnload,
        "cuOccupancyMaxActiveClusters" => launch::cuOccupancyMaxActiveClusters,
        "cuOccupancyAvailableDynamicSMemPerBlock" => launch::cuOccupancyAvailableDynamicSMemPerBlock,
        "cuStreamGetCaptureInfo_v2" => stream::cuStreamGetCaptureInfo_v2,
        "cuStreamGetCaptureInfo_v3" => stream::cuStreamGetCaptureInfo_v3,
        "cuStreamIsCapturing" => stream::cuStreamIsCapturing,
        "cuCtxGetCacheConfig" => context::cuCtxGetCacheConfig,
        "cuCtxGetCurrent" => context::cuCtxGetCurrent,
        "cuCtxGetDevice" => context::cuCtxGetDevice,
        "cuCtxGetDevice_v2" => context::cuCtxGetDevice_v2,
        "cuCtxGetFlags" => context::cuCtxGetFlags,
        "cuCtxPopCurrent" => context::cuCtxPopCurrent,
        "cuCtxPopCurrent_v2" => context::cuCtxPopCurrent_v2,
        "cuCtxPushCurrent" => context::cuCtxPushCurrent,
        "cuCtxPushCurrent_v2" => context::cuCtxPushCurrent_v2,
        "cuCtxSetCacheConfig" => context::cuCtxSetCacheConfig,
        "cuCtxSetCurrent" => context::cuCtxSetCurrent,
        "cuCtxSynchronize" => context::cuCtxSynchronize,
        "cuCtxSynchronize_v2" => context::cuCtxSynchronize_v2,
        "cuDeviceComputeCapability" => device::cuDeviceComputeCapability,
        "cuDeviceGet" => device::cuDeviceGet,
        "cuDeviceGetAttribute" => device::cuDeviceGetAttribute,
        "cuDeviceGetCount" => device::cuDeviceGetCount,
        "cuDeviceGetName" => device::cuDeviceGetName,
        "cuDeviceGetPCIBusId" => device::cuDeviceGetPCIBusId,
        "cuDeviceGetByPCIBusId" => device::cuDeviceGetByPCIBusId,
        "cuDeviceGetProperties" => device::cuDeviceGetProperties,
        "cuDeviceGetUuid" => device::cuDeviceGetUuid,
        "cuDeviceGetUuid_v2" => device::cuDeviceGetUuid_v2,
        "cuDevicePrimaryCtxGetState" => context::cuDevicePrimaryCtxGetState,
        "cuDevicePrimaryCtxRelease" => context::cuDevicePrimaryCtxRelease,
        "cuDevicePrimaryCtxRelease_v2" => context::cuDevicePrimaryCtxRelease_v2,
        "cuDevicePrimaryCtxReset" => context::cuDevicePrimaryCtxReset,
        "cuDevicePrimaryCtxReset_v2" => context::cuDevicePrimaryCtxReset_v2,
        "cuDevicePrimaryCtxRetain" => context::cuDevicePrimaryCtxRetain,
        "cuDevicePrimaryCtxSetFlags" => context::cuDevicePrimaryCtxSetFlags,
        "cuDevicePrimaryCtxSetFlags_v2" => context::cuDevicePrimaryCtxSetFlags_v2,
        "cuDeviceTotalMem_v2" => device::cuDeviceTotalMem_v2,
        "cuDriverGetVersion" => device::cuDriverGetVersion,
        "cuEventCreate" => event::cuEventCreate,
        "cuEventDestroy" => event::cuEventDestroy,
        "cuEventDestroy_v2" => event::cuEventDestroy_v2,
        "cuEventElapsedTime" => event::cuEventElapsedTime,
        "cuEventElapsedTime_v2" => event::cuEventElapsedTime_v2,
        "cuEventQuery" => event::cuEventQuery,
        "cuEventRecord" => event::cuEventRecord,
        "cuEventRecordWithFlags" => event::cuEventRecordWithFlags,
        "cuEventSynchronize" => event::cuEventSynchronize,
        "cuFuncGetAttribute" => module::cuFuncGetAttribute,
        "cuFuncGetParamInfo" => module::cuFuncGetParamInfo,
        "cuFuncSetAttribute" => module::cuFuncSetAttribute,
        "cuFuncSetCacheConfig" => module::cuFuncSetCacheConfig,
        "cuGetErrorName" => error::cuGetErrorName,
        "cuGetErrorString" => error::cuGetErrorString,
        "cuGetExportTable" => export::cuGetExportTable,
        "cuGetProcAddress" => cuGetProcAddress,
        "cuGetProcAddress_v2" => cuGetProcAddress_v2,
        "cuInit" => device::cuInit,
        "cuLaunchCooperativeKernel" => launch::cuLaunchCooperativeKernel,
        "cuLaunchKernel" => launch::cuLaunchKernel,
        "cuMemAllocHost_v2" => memory::cuMemAllocHost_v2,
        "cuMemAlloc_v2" => memory::cuMemAlloc_v2,
        "cuMemAllocPitch_v2" => copy_2d::cuMemAllocPitch_v2,
        "cuMemAllocAsync" => mem_pool::cuMemAllocAsync,
        "cuMemAllocFromPoolAsync" => mem_pool::cuMemAllocFromPoolAsync,
        "cuMemFreeAsync" => mem_pool::cuMemFreeAsync,
        "cuDeviceGetDefaultMemPool" => mem_pool::cuDeviceGetDefaultMemPool,
        "cuDeviceGetMemPool" => mem_pool::cuDeviceGetMemPool,
        "cuDeviceSetMemPool" => mem_pool::cuDeviceSetMemPool,
        "cuMemGetDefaultMemPool" => mem_pool::cuMemGetDefaultMemPool,
        "cuMemGetMemPool" => mem_pool::cuMemGetMemPool,
        "cuMemSetMemPool" => mem_pool::cuMemSetMemPool,
        "cuMemPoolCreate" => mem_pool::cuMemPoolCreate,
        "cuMemPoolDestroy" => mem_pool::cuMemPoolDestroy,
        "cuMemPoolTrimTo" => mem_pool::cuMemPoolTrimTo,
        "cuMemPoolSetAttribute" => mem_pool::cuMemPoolSetAttribute,
        "cuMemPoolGetAttribute" => mem_pool::cuMemPoolGetAttribute,
        "cuMemPoolSetAccess" => mem_pool::cuMemPoolSetAccess,
        "cuMemPoolGetAccess" => mem_pool::cuMemPoolGetAccess,
        "cuMemcpy2D_v2" => copy_2d::cuMemcpy2D_v2,
        "cuMemcpy2DAsync_v2" => copy_2d::cuMemcpy2DAsync_v2,
        "cuMemcpy2DUnaligned_v2" => copy_2d::cuMemcpy2DUnaligned_v2,
        "cuMemcpyPeer" => copy_2d::cuMemcpyPeer,
        "cuMemcpyPeerAsync" => copy_2d::cuMemcpyPeerAsync,
        "cuMemFreeHost" => memory::cuMemFreeHost,
        "cuMemFree_v2" => memory::cuMemFree_v2,
        "cuMemGetAddressRange_v2" => memory::cuMemGetAddressRange_v2,
        "cuMemGetInfo_v2" => memory::cuMemGetInfo_v2,
        "cuMemHostAlloc" => memory::cuMemHostAlloc,
        "cuMemHostGetDevicePointer_v2" => memory::cuMemHostGetDevicePointer_v2,
        "cuMemHostRegister" => memory::cuMemHostRegister,
        "cuMemHostRegister_v2" => memory::cuMemHostRegister_v2,
        "cuMemHostUnregister" => memory::cuMemHostUnregister,
        "cuMemcpy" => memory::cuMemcpy,
        "cuMemcpyAsync" => memory::cuMemcpyAsync,
        "cuMemcpyDtoDAsync_v2" => memory::cuMemcpyDtoDAsync_v2,
        "cuMemcpyDtoD_v2" => memory::cuMemcpyDtoD_v2,
        "cuMemcpyDtoHAsync_v2" => memory::cuMemcpyDtoHAsync_v2,
        "cuMemcpyDtoH_v2" => memory::cuMemcpyDtoH_v2,
        "cuMemcpyHtoDAsync_v2" => memory::cuMemcpyHtoDAsync_v2,
        "cuMemcpyHtoD_v2" => memory::cuMemcpyHtoD_v2,
        "cuMemsetD16Async" => memory::cuMemsetD16Async,
        "cuMemsetD16_v2" => memory::cuMemsetD16_v2,
        "cuMemsetD32Async" => memory::cuMemsetD32Async,
        "cuMemsetD2D8_v2" => memory::cuMemsetD2D8_v2,
        "cuMemsetD2D8Async" => memory::cuMemsetD2D8Async,
        "cuMemsetD2D16_v2" => memory::cuMemsetD2D16_v2,
        "cuMemsetD2D16Async" => memory::cuMemsetD2D16Async,
        "cuMemsetD2D32_v2" => memory::cuMemsetD2D32_v2,
        "cuMemsetD2D32Async" => memory::cuMemsetD2D32Async,
        "cuMemsetD32_v2" => memory::cuMemsetD32_v2,
        "cuMemsetD8Async" => memory::cuMemsetD8Async,
        "cuMemsetD8_v2" => memory::cuMemsetD8_v2,
        "cuModuleGetFunction" => module::cuModuleGetFunction,
        "cuPointerGetAttribute" => pointer::cuPointerGetAttribute,
        "cuPointerGetAttributes" => pointer::cuPointerGetAttributes,
        "cuModuleGetGlobal_v2" => module::cuModuleGetGlobal_v2,
        "cuModuleGetLoadingMode" => module::cuModuleGetLoadingMode,
        "cuModuleLoad" => module::cuModuleLoad,
        "cuModuleLoadData" => module::cuModuleLoadData,
        "cuModuleLoadDataEx" => module::cuModuleLoadDataEx,
        "cuModuleLoadFatBinary" => module::cuModuleLoadFatBinary,
        "cuModuleUnload" => module::cuModuleUnload,
        "cuOccupancyMaxActiveBlocksPerMultiprocessor" => launch::cuOccupancyMaxActiveBlocksPerMultiprocessor,
        "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags" => launch::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
        "cuOccupancyMaxPotentialBlockSize" => launch::cuOccupancyMaxPotentialBlockSize,
        "cuOccupancyMaxPotentialBlockSizeWithFlags" => launch::cuOccupancyMaxPotentialBlockSizeWithFlags,
        "cuLaunchHostFunc" => host_func::cuLaunchHostFunc,
        "cuStreamAddCallback" => host_func::cuStreamAddCallback,
        "cuStreamGetCtx" => host_func::cuStreamGetCtx,
        "cuStreamGetFlags" => host_func::cuStreamGetFlags,
        "cuStreamGetPriority" => host_func::cuStreamGetPriority,
        "cuStreamCreate" => stream::cuStreamCreate,
        "cuStreamCreateWithPriority" => stream::cuStreamCreateWithPriority,
        "cuStreamDestroy" => stream::cuStreamDestroy,
        "cuStreamDestroy_v2" => stream::cuStreamDestroy_v2,
        "cuStreamQuery" => stream::cuStreamQuery,
        "cuStreamSynchronize" => stream::cuStreamSynchronize,
        "cuStreamWaitEvent" => stream::cuStreamWaitEvent,
    )
}

/// The function that stands for the driver's `symbol` here: this library's
/// own, or one that answers `CUDA_ERROR_NOT_SUPPORTED`.
pub fn function(symbol: &str) -> *mut c_void {
    let plain = symbol
        .strip_suffix("_ptds")
        .or_else(|| symbol.strip_suffix("_ptsz"))
        .unwrap_or(symbol);
    implemented(symbol)
        .or_else(|| unsupported::lookup(plain).map(|f| f as *mut c_void))
        .unwrap_or(not_supported as *mut c_void)
}

/// `cuGetProcAddress_v2`: an unknown name, or a version below the name's
/// introduction, succeeds with a NULL function and says why in `status`.
fn get_proc_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> CuResult<()> {
    let name = c_str(symbol)?;
    if pfn.is_null() {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let answer = match std::str::from_utf8(name) {
        Ok(name) => driver_answer(name, version, flags)?,
        Err(_) => Answer::NotFound,
    };
    log::trace!(
        "cuGetProcAddress_v2 {} at {version}, flags {flags}: {answer:?}",
        String::from_utf8_lossy(name)
    );
    let (f, code) = match answer {
        Answer::Sym(symbol) => (function(symbol), SYMBOL_SUCCESS),
        Answer::NotFound => (std::ptr::null_mut(), SYMBOL_NOT_FOUND),
        Answer::TooOld => (std::ptr::null_mut(), VERSION_NOT_SUFFICIENT),
    };
    put_opt(status, code);
    put(pfn, f)
}

/// `cuGetProcAddress` (the first form): `CUDA_ERROR_NOT_FOUND` where the
/// second form succeeds with NULL, and `*pfn` is then left as it was.
fn get_proc_v1(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> CuResult<()> {
    let name = c_str(symbol)?;
    if pfn.is_null() {
        return Err(result::ERROR_INVALID_VALUE);
    }
    let answer = match std::str::from_utf8(name) {
        Ok(name) => driver_answer(name, version, flags)?,
        Err(_) => Answer::NotFound,
    };
    match answer {
        Answer::Sym(symbol) => put(pfn, function(symbol)),
        Answer::NotFound | Answer::TooOld => Err(result::ERROR_NOT_FOUND),
    }
}

entry! {
    fn cuGetProcAddress_v2(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64, status: *mut c_int) {
        get_proc_v2(symbol, pfn, version, flags, status)
    }
}

entry! {
    fn cuGetProcAddress(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64) {
        get_proc_v1(symbol, pfn, version, flags)
    }
}

#[cfg(test)]
mod tests;
