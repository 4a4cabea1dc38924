//! `cuGetProcAddress`: the function a base name means at a CUDA version,
//! among this library's own (ABI-identical variants share one body, so the
//! per-thread-stream flag changes nothing). Names the library does not know
//! answer `CUDA_ERROR_NOT_FOUND`.

use std::ffi::{c_char, c_int, c_void};

use super::{context, device, error, event, launch, memory, module, stream, unsupported};
use crate::ffi::{c_str, entry, put, put_opt, result, CuResult};

/// CUDA 13 headers made `cuCtxCreate` mean `cuCtxCreate_v4`.
const CTX_CREATE_V4_FROM: c_int = 13000;

macro_rules! table {
    ($name:expr, $($key:literal => $f:path,)*) => {
        match $name {
            $($key => Some($f as *mut c_void),)*
            _ => None,
        }
    };
}

/// The function `name` stands for at `version`.
pub fn lookup(name: &str, version: c_int) -> Option<*mut c_void> {
    if name == "cuCtxCreate" {
        return Some(if version >= CTX_CREATE_V4_FROM {
            context::cuCtxCreate_v4 as *mut c_void
        } else {
            context::cuCtxCreate_v2 as *mut c_void
        });
    }
    let base = name.strip_suffix("_v2").unwrap_or(name);
    let found = table!(base,
        "cuInit" => device::cuInit,
        "cuDriverGetVersion" => device::cuDriverGetVersion,
        "cuDeviceGetCount" => device::cuDeviceGetCount,
        "cuDeviceGet" => device::cuDeviceGet,
        "cuDeviceGetName" => device::cuDeviceGetName,
        "cuDeviceGetUuid" => device::cuDeviceGetUuid_v2,
        "cuDeviceTotalMem" => device::cuDeviceTotalMem_v2,
        "cuDeviceGetAttribute" => device::cuDeviceGetAttribute,
        "cuDeviceComputeCapability" => device::cuDeviceComputeCapability,
        "cuDeviceGetPCIBusId" => device::cuDeviceGetPCIBusId,
        "cuDeviceGetProperties" => device::cuDeviceGetProperties,
        "cuCtxCreate_v3" => context::cuCtxCreate_v3,
        "cuCtxCreate_v4" => context::cuCtxCreate_v4,
        "cuCtxDestroy" => context::cuCtxDestroy_v2,
        "cuCtxPushCurrent" => context::cuCtxPushCurrent_v2,
        "cuCtxPopCurrent" => context::cuCtxPopCurrent_v2,
        "cuCtxSetCurrent" => context::cuCtxSetCurrent,
        "cuCtxGetCurrent" => context::cuCtxGetCurrent,
        "cuCtxGetDevice" => context::cuCtxGetDevice,
        "cuCtxGetFlags" => context::cuCtxGetFlags,
        "cuCtxGetApiVersion" => context::cuCtxGetApiVersion,
        "cuCtxSynchronize" => context::cuCtxSynchronize,
        "cuCtxSetCacheConfig" => context::cuCtxSetCacheConfig,
        "cuCtxGetCacheConfig" => context::cuCtxGetCacheConfig,
        "cuDevicePrimaryCtxRetain" => context::cuDevicePrimaryCtxRetain,
        "cuDevicePrimaryCtxRelease" => context::cuDevicePrimaryCtxRelease_v2,
        "cuDevicePrimaryCtxReset" => context::cuDevicePrimaryCtxReset_v2,
        "cuDevicePrimaryCtxGetState" => context::cuDevicePrimaryCtxGetState,
        "cuDevicePrimaryCtxSetFlags" => context::cuDevicePrimaryCtxSetFlags_v2,
        "cuMemAlloc" => memory::cuMemAlloc_v2,
        "cuMemFree" => memory::cuMemFree_v2,
        "cuMemGetInfo" => memory::cuMemGetInfo_v2,
        "cuMemGetAddressRange" => memory::cuMemGetAddressRange_v2,
        "cuMemcpyHtoD" => memory::cuMemcpyHtoD_v2,
        "cuMemcpyHtoDAsync" => memory::cuMemcpyHtoDAsync_v2,
        "cuMemcpyDtoH" => memory::cuMemcpyDtoH_v2,
        "cuMemcpyDtoHAsync" => memory::cuMemcpyDtoHAsync_v2,
        "cuMemcpyDtoD" => memory::cuMemcpyDtoD_v2,
        "cuMemcpyDtoDAsync" => memory::cuMemcpyDtoDAsync_v2,
        "cuMemcpy" => memory::cuMemcpy,
        "cuMemcpyAsync" => memory::cuMemcpyAsync,
        "cuMemsetD8" => memory::cuMemsetD8_v2,
        "cuMemsetD16" => memory::cuMemsetD16_v2,
        "cuMemsetD32" => memory::cuMemsetD32_v2,
        "cuMemsetD8Async" => memory::cuMemsetD8Async,
        "cuMemsetD16Async" => memory::cuMemsetD16Async,
        "cuMemsetD32Async" => memory::cuMemsetD32Async,
        "cuMemAllocHost" => memory::cuMemAllocHost_v2,
        "cuMemHostAlloc" => memory::cuMemHostAlloc,
        "cuMemFreeHost" => memory::cuMemFreeHost,
        "cuMemHostRegister" => memory::cuMemHostRegister_v2,
        "cuMemHostUnregister" => memory::cuMemHostUnregister,
        "cuModuleLoad" => module::cuModuleLoad,
        "cuModuleLoadData" => module::cuModuleLoadData,
        "cuModuleLoadDataEx" => module::cuModuleLoadDataEx,
        "cuModuleLoadFatBinary" => module::cuModuleLoadFatBinary,
        "cuModuleUnload" => module::cuModuleUnload,
        "cuModuleGetFunction" => module::cuModuleGetFunction,
        "cuModuleGetGlobal" => module::cuModuleGetGlobal_v2,
        "cuFuncGetAttribute" => module::cuFuncGetAttribute,
        "cuFuncSetAttribute" => module::cuFuncSetAttribute,
        "cuFuncSetCacheConfig" => module::cuFuncSetCacheConfig,
        "cuFuncGetParamInfo" => module::cuFuncGetParamInfo,
        "cuLaunchKernel" => launch::cuLaunchKernel,
        "cuOccupancyMaxActiveBlocksPerMultiprocessor" => launch::cuOccupancyMaxActiveBlocksPerMultiprocessor,
        "cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags" => launch::cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags,
        "cuOccupancyMaxPotentialBlockSize" => launch::cuOccupancyMaxPotentialBlockSize,
        "cuOccupancyMaxPotentialBlockSizeWithFlags" => launch::cuOccupancyMaxPotentialBlockSizeWithFlags,
        "cuStreamCreate" => stream::cuStreamCreate,
        "cuStreamCreateWithPriority" => stream::cuStreamCreateWithPriority,
        "cuStreamDestroy" => stream::cuStreamDestroy_v2,
        "cuStreamSynchronize" => stream::cuStreamSynchronize,
        "cuStreamQuery" => stream::cuStreamQuery,
        "cuStreamWaitEvent" => stream::cuStreamWaitEvent,
        "cuEventCreate" => event::cuEventCreate,
        "cuEventDestroy" => event::cuEventDestroy_v2,
        "cuEventRecord" => event::cuEventRecord,
        "cuEventRecordWithFlags" => event::cuEventRecordWithFlags,
        "cuEventSynchronize" => event::cuEventSynchronize,
        "cuEventQuery" => event::cuEventQuery,
        "cuEventElapsedTime" => event::cuEventElapsedTime_v2,
        "cuGetErrorName" => error::cuGetErrorName,
        "cuGetErrorString" => error::cuGetErrorString,
        "cuGetProcAddress" => cuGetProcAddress_v2,
    );
    found.or_else(|| {
        unsupported::lookup(name)
            .or_else(|| unsupported::lookup(&format!("{base}_v2")))
            .map(|f| f as *mut c_void)
    })
}

/// `CUdriverProcAddressQueryResult`.
const SYMBOL_SUCCESS: c_int = 0;
const SYMBOL_NOT_FOUND: c_int = 1;

fn get_proc(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    status: *mut c_int,
) -> CuResult<()> {
    let name = std::str::from_utf8(c_str(symbol)?).map_err(|_| result::ERROR_INVALID_VALUE)?;
    match lookup(name, version) {
        Some(f) => {
            put_opt(status, SYMBOL_SUCCESS);
            put(pfn, f)
        }
        None => {
            put_opt(status, SYMBOL_NOT_FOUND);
            put(pfn, std::ptr::null_mut())?;
            Err(result::ERROR_NOT_FOUND)
        }
    }
}

entry! {
    fn cuGetProcAddress_v2(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64, status: *mut c_int) {
        let _ = flags;
        get_proc(symbol, pfn, version, status)
    }
}

entry! {
    fn cuGetProcAddress(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64) {
        let _ = flags;
        get_proc(symbol, pfn, version, std::ptr::null_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names_resolve_to_versioned_functions() {
        assert_eq!(
            lookup("cuMemAlloc", 13000),
            Some(memory::cuMemAlloc_v2 as *mut c_void)
        );
        assert_eq!(
            lookup("cuMemAlloc_v2", 13000),
            Some(memory::cuMemAlloc_v2 as *mut c_void)
        );
        assert_eq!(
            lookup("cuCtxCreate", 12000),
            Some(context::cuCtxCreate_v2 as *mut c_void)
        );
        assert_eq!(
            lookup("cuCtxCreate", 13000),
            Some(context::cuCtxCreate_v4 as *mut c_void)
        );
        assert!(lookup("cuGraphLaunch", 13000).is_some());
        assert!(lookup("cuMemcpy2D", 13000).is_some());
        assert_eq!(lookup("cuNoSuchThing", 13000), None);
    }
}
