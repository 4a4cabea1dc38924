//! Driver-API functions this library does not forward. They exist so that
//! programs which link or look them up still load, and each answers
//! `CUDA_ERROR_NOT_SUPPORTED` without touching its arguments (an `extern
//! "C"` function that takes none may be called with any on the supported
//! ABIs: the caller owns the argument area).
//!
//! Two lists: the functions named here, which the README lists as not
//! supported, and in `remaining.rs` every other name the driver exports,
//! because libraries that `dlsym` a fixed list refuse to start when one
//! name is missing (cuBLASLt).

use crate::ffi::{result, CUresult};

mod remaining;

/// The function standing for an unsupported driver name, `None` for names
/// this library implements or the driver does not know.
pub fn lookup(name: &str) -> Option<extern "C" fn() -> CUresult> {
    listed(name).or_else(|| remaining::lookup(name))
}

/// Defines one `CUDA_ERROR_NOT_SUPPORTED` function per name, and `fn
/// $lookup` finding them by name.
macro_rules! unsupported {
    (fn $lookup:ident; $($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: not supported by vgpu.")]
            #[no_mangle]
            pub extern "C" fn $name() -> CUresult {
                log::debug!(concat!(stringify!($name), ": not supported"));
                result::ERROR_NOT_SUPPORTED
            }
        )*

        /// The unsupported functions of this list, by name.
        pub fn $lookup(name: &str) -> Option<extern "C" fn() -> CUresult> {
            match name {
                $(stringify!($name) => Some($name as extern "C" fn() -> CUresult),)*
                _ => None,
            }
        }
    };
}

pub(crate) use unsupported;

unsupported! {
    fn listed;
    cuMemAllocManaged,
    cuMemHostGetFlags,
    cuMemcpy3D_v2, cuMemcpy3DAsync_v2, cuMemcpyBatchAsync,
    cuMemPrefetchAsync, cuMemPrefetchAsync_v2, cuMemAdvise, cuMemAdvise_v2,
    cuMemRangeGetAttribute, cuPointerSetAttribute,
    cuMemAddressReserve, cuMemAddressFree, cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap,
    cuMemSetAccess, cuMemGetAllocationGranularity, cuMemExportToShareableHandle,
    cuStreamBeginCapture_v2, cuStreamEndCapture,
    cuStreamGetCtx_v2, cuStreamGetId, cuStreamGetDevice,
    cuStreamAttachMemAsync, cuStreamSetAttribute, cuStreamGetAttribute,
    cuGraphCreate, cuGraphInstantiateWithFlags, cuGraphLaunch, cuGraphDestroy,
    cuGraphExecDestroy, cuGraphUpload,
    cuLinkCreate_v2, cuLinkAddData_v2, cuLinkAddFile_v2, cuLinkComplete, cuLinkDestroy,
        cuLibraryGetKernelCount, cuLibraryEnumerateKernels, cuLibraryGetManaged,
    cuLibraryGetUnifiedFunction,
    cuModuleGetTexRef, cuModuleGetSurfRef,
    cuModuleGetFunctionCount, cuModuleEnumerateFunctions,
    cuFuncGetModule, cuFuncGetName, cuFuncLoad, cuFuncIsLoaded,
    cuTexObjectCreate, cuTexObjectDestroy, cuSurfObjectCreate, cuSurfObjectDestroy,
    cuArrayCreate_v2, cuArrayDestroy, cuArray3DCreate_v2, cuMipmappedArrayCreate,
    cuIpcGetMemHandle, cuIpcOpenMemHandle_v2, cuIpcCloseMemHandle, cuIpcGetEventHandle,
    cuIpcOpenEventHandle,
    cuCtxEnablePeerAccess, cuCtxDisablePeerAccess, cuDeviceCanAccessPeer,
    cuDeviceGetP2PAttribute,
    cuCtxGetSharedMemConfig, cuCtxSetSharedMemConfig, cuCtxResetPersistingL2Cache,
    cuCtxGetId, cuCtxRecordEvent, cuCtxWaitEvent, cuCtxSetFlags, cuCtxGetExecAffinity,
    cuDeviceGetExecAffinitySupport, cuDeviceGetLuid, cuDeviceGetTexture1DLinearMaxWidth,
    cuDeviceGetNvSciSyncAttributes,
    cuFlushGPUDirectRDMAWrites, cuImportExternalMemory, cuDestroyExternalMemory,
    cuExternalMemoryGetMappedBuffer, cuImportExternalSemaphore,
    cuSignalExternalSemaphoresAsync, cuWaitExternalSemaphoresAsync, cuDestroyExternalSemaphore,
    cuOccupancyMaxPotentialClusterSize,
    cuFuncSetSharedMemConfig, cuFuncSetBlockShape,
    cuProfilerInitialize,
    cuUserObjectCreate, cuCoredumpGetAttribute, cuCoredumpSetAttribute,
    cuGreenCtxCreate, cuDevResourceGenerateDesc, cuDeviceGetDevResource,
    cuLogsRegisterCallback, cuCheckpointProcessLock,
}
