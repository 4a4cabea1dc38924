//! The ICD glue: the dispatch table every object starts with, and the
//! extension-function lookup ICD loaders use to find
//! `clIcdGetPlatformIDsKHR`.

use std::ffi::{c_char, c_void, CStr};
use std::panic::catch_unwind;

use opencl_sys::cl_icd::cl_icd_dispatch;
use opencl_sys::cl_platform_id;

use crate::api::build::*;
use crate::api::context::*;
use crate::api::device::*;
use crate::api::enqueue::*;
use crate::api::event::*;
use crate::api::image::*;
use crate::api::image_enqueue::*;
use crate::api::kernel::*;
use crate::api::map::*;
use crate::api::memory::*;
use crate::api::platform::*;
use crate::api::program::*;
use crate::api::queue::*;
use crate::api::rect::*;
use crate::api::sampler::*;
use crate::api::subdevice::*;
use crate::api::svm::*;
use crate::api::transfer::*;
use crate::api::unimplemented::*;
use crate::core::object::Cl;
use crate::core::platform::Platform;

/// In the Khronos `cl_icd_dispatch` order. Every slot a loader on this
/// system may call points at a function; Windows-only sharing slots are
/// empty.
pub static DISPATCH: cl_icd_dispatch = cl_icd_dispatch {
    clGetPlatformIDs: Some(clGetPlatformIDs),
    clGetPlatformInfo: Some(clGetPlatformInfo),
    clGetDeviceIDs: Some(clGetDeviceIDs),
    clGetDeviceInfo: Some(clGetDeviceInfo),
    clCreateContext: Some(clCreateContext),
    clCreateContextFromType: Some(clCreateContextFromType),
    clRetainContext: Some(clRetainContext),
    clReleaseContext: Some(clReleaseContext),
    clGetContextInfo: Some(clGetContextInfo),
    clCreateCommandQueue: Some(clCreateCommandQueue),
    clRetainCommandQueue: Some(clRetainCommandQueue),
    clReleaseCommandQueue: Some(clReleaseCommandQueue),
    clGetCommandQueueInfo: Some(clGetCommandQueueInfo),
    clSetCommandQueueProperty: Some(clSetCommandQueueProperty),
    clCreateBuffer: Some(clCreateBuffer),
    clCreateImage2D: Some(clCreateImage2D),
    clCreateImage3D: Some(clCreateImage3D),
    clRetainMemObject: Some(clRetainMemObject),
    clReleaseMemObject: Some(clReleaseMemObject),
    clGetSupportedImageFormats: Some(clGetSupportedImageFormats),
    clGetMemObjectInfo: Some(clGetMemObjectInfo),
    clGetImageInfo: Some(clGetImageInfo),
    clCreateSampler: Some(clCreateSampler),
    clRetainSampler: Some(clRetainSampler),
    clReleaseSampler: Some(clReleaseSampler),
    clGetSamplerInfo: Some(clGetSamplerInfo),
    clCreateProgramWithSource: Some(clCreateProgramWithSource),
    clCreateProgramWithBinary: Some(clCreateProgramWithBinary),
    clRetainProgram: Some(clRetainProgram),
    clReleaseProgram: Some(clReleaseProgram),
    clBuildProgram: Some(clBuildProgram),
    clUnloadCompiler: Some(clUnloadCompiler),
    clGetProgramInfo: Some(clGetProgramInfo),
    clGetProgramBuildInfo: Some(clGetProgramBuildInfo),
    clCreateKernel: Some(clCreateKernel),
    clCreateKernelsInProgram: Some(clCreateKernelsInProgram),
    clRetainKernel: Some(clRetainKernel),
    clReleaseKernel: Some(clReleaseKernel),
    clSetKernelArg: Some(clSetKernelArg),
    clGetKernelInfo: Some(clGetKernelInfo),
    clGetKernelWorkGroupInfo: Some(clGetKernelWorkGroupInfo),
    clWaitForEvents: Some(clWaitForEvents),
    clGetEventInfo: Some(clGetEventInfo),
    clRetainEvent: Some(clRetainEvent),
    clReleaseEvent: Some(clReleaseEvent),
    clGetEventProfilingInfo: Some(clGetEventProfilingInfo),
    clFlush: Some(clFlush),
    clFinish: Some(clFinish),
    clEnqueueReadBuffer: Some(clEnqueueReadBuffer),
    clEnqueueWriteBuffer: Some(clEnqueueWriteBuffer),
    clEnqueueCopyBuffer: Some(clEnqueueCopyBuffer),
    clEnqueueReadImage: Some(clEnqueueReadImage),
    clEnqueueWriteImage: Some(clEnqueueWriteImage),
    clEnqueueCopyImage: Some(clEnqueueCopyImage),
    clEnqueueCopyImageToBuffer: Some(clEnqueueCopyImageToBuffer),
    clEnqueueCopyBufferToImage: Some(clEnqueueCopyBufferToImage),
    clEnqueueMapBuffer: Some(clEnqueueMapBuffer),
    clEnqueueMapImage: Some(clEnqueueMapImage),
    clEnqueueUnmapMemObject: Some(clEnqueueUnmapMemObject),
    clEnqueueNDRangeKernel: Some(clEnqueueNDRangeKernel),
    clEnqueueTask: Some(clEnqueueTask),
    clEnqueueNativeKernel: Some(clEnqueueNativeKernel),
    clEnqueueMarker: Some(clEnqueueMarker),
    clEnqueueWaitForEvents: Some(clEnqueueWaitForEvents),
    clEnqueueBarrier: Some(clEnqueueBarrier),
    clGetExtensionFunctionAddress: Some(clGetExtensionFunctionAddress),
    clCreateFromGLBuffer: Some(clCreateFromGLBuffer),
    clCreateFromGLTexture2D: Some(clCreateFromGLTexture2D),
    clCreateFromGLTexture3D: Some(clCreateFromGLTexture3D),
    clCreateFromGLRenderbuffer: Some(clCreateFromGLRenderbuffer),
    clGetGLObjectInfo: Some(clGetGLObjectInfo),
    clGetGLTextureInfo: Some(clGetGLTextureInfo),
    clEnqueueAcquireGLObjects: Some(clEnqueueAcquireGLObjects),
    clEnqueueReleaseGLObjects: Some(clEnqueueReleaseGLObjects),
    clGetGLContextInfoKHR: Some(clGetGLContextInfoKHR),
    clGetDeviceIDsFromD3D10KHR: None,
    clCreateFromD3D10BufferKHR: None,
    clCreateFromD3D10Texture2DKHR: None,
    clCreateFromD3D10Texture3DKHR: None,
    clEnqueueAcquireD3D10ObjectsKHR: None,
    clEnqueueReleaseD3D10ObjectsKHR: None,
    clSetEventCallback: Some(clSetEventCallback),
    clCreateSubBuffer: Some(clCreateSubBuffer),
    clSetMemObjectDestructorCallback: Some(clSetMemObjectDestructorCallback),
    clCreateUserEvent: Some(clCreateUserEvent),
    clSetUserEventStatus: Some(clSetUserEventStatus),
    clEnqueueReadBufferRect: Some(clEnqueueReadBufferRect),
    clEnqueueWriteBufferRect: Some(clEnqueueWriteBufferRect),
    clEnqueueCopyBufferRect: Some(clEnqueueCopyBufferRect),
    clCreateSubDevicesEXT: Some(clCreateSubDevicesEXT),
    clRetainDeviceEXT: Some(clRetainDeviceEXT),
    clReleaseDeviceEXT: Some(clReleaseDeviceEXT),
    clCreateEventFromGLsyncKHR: Some(clCreateEventFromGLsyncKHR),
    clCreateSubDevices: Some(clCreateSubDevices),
    clRetainDevice: Some(clRetainDevice),
    clReleaseDevice: Some(clReleaseDevice),
    clCreateImage: Some(clCreateImage),
    clCreateProgramWithBuiltInKernels: Some(clCreateProgramWithBuiltInKernels),
    clCompileProgram: Some(clCompileProgram),
    clLinkProgram: Some(clLinkProgram),
    clUnloadPlatformCompiler: Some(clUnloadPlatformCompiler),
    clGetKernelArgInfo: Some(clGetKernelArgInfo),
    clEnqueueFillBuffer: Some(clEnqueueFillBuffer),
    clEnqueueFillImage: Some(clEnqueueFillImage),
    clEnqueueMigrateMemObjects: Some(clEnqueueMigrateMemObjects),
    clEnqueueMarkerWithWaitList: Some(clEnqueueMarkerWithWaitList),
    clEnqueueBarrierWithWaitList: Some(clEnqueueBarrierWithWaitList),
    clGetExtensionFunctionAddressForPlatform: Some(clGetExtensionFunctionAddressForPlatform),
    clCreateFromGLTexture: Some(clCreateFromGLTexture),
    clGetDeviceIDsFromD3D11KHR: None,
    clCreateFromD3D11BufferKHR: None,
    clCreateFromD3D11Texture2DKHR: None,
    clCreateFromD3D11Texture3DKHR: None,
    clCreateFromDX9MediaSurfaceKHR: None,
    clEnqueueAcquireD3D11ObjectsKHR: None,
    clEnqueueReleaseD3D11ObjectsKHR: None,
    clGetDeviceIDsFromDX9MediaAdapterKHR: None,
    clEnqueueAcquireDX9MediaSurfacesKHR: None,
    clEnqueueReleaseDX9MediaSurfacesKHR: None,
    clCreateFromEGLImageKHR: Some(clCreateFromEGLImageKHR),
    clEnqueueAcquireEGLObjectsKHR: Some(clEnqueueAcquireEGLObjectsKHR),
    clEnqueueReleaseEGLObjectsKHR: Some(clEnqueueReleaseEGLObjectsKHR),
    clCreateEventFromEGLSyncKHR: Some(clCreateEventFromEGLSyncKHR),
    clCreateCommandQueueWithProperties: Some(clCreateCommandQueueWithProperties),
    clCreatePipe: Some(clCreatePipe),
    clGetPipeInfo: Some(clGetPipeInfo),
    clSVMAlloc: Some(clSVMAlloc),
    clSVMFree: Some(clSVMFree),
    clEnqueueSVMFree: Some(clEnqueueSVMFree),
    clEnqueueSVMMemcpy: Some(clEnqueueSVMMemcpy),
    clEnqueueSVMMemFill: Some(clEnqueueSVMMemFill),
    clEnqueueSVMMap: Some(clEnqueueSVMMap),
    clEnqueueSVMUnmap: Some(clEnqueueSVMUnmap),
    clCreateSamplerWithProperties: Some(clCreateSamplerWithProperties),
    clSetKernelArgSVMPointer: Some(clSetKernelArgSVMPointer),
    clSetKernelExecInfo: Some(clSetKernelExecInfo),
    clGetKernelSubGroupInfoKHR: Some(clGetKernelSubGroupInfoKHR),
    clCloneKernel: Some(clCloneKernel),
    clCreateProgramWithIL: Some(clCreateProgramWithIL),
    clEnqueueSVMMigrateMem: Some(clEnqueueSVMMigrateMem),
    clGetDeviceAndHostTimer: Some(clGetDeviceAndHostTimer),
    clGetHostTimer: Some(clGetHostTimer),
    clGetKernelSubGroupInfo: Some(clGetKernelSubGroupInfo),
    clSetDefaultDeviceCommandQueue: Some(clSetDefaultDeviceCommandQueue),
    clSetProgramReleaseCallback: Some(clSetProgramReleaseCallback),
    clSetProgramSpecializationConstant: Some(clSetProgramSpecializationConstant),
    clCreateBufferWithProperties: Some(clCreateBufferWithProperties),
    clCreateImageWithProperties: Some(clCreateImageWithProperties),
    clSetContextDestructorCallback: Some(clSetContextDestructorCallback),
    // OpenCL 3.1, untyped without that feature; no 3.0 loader calls it.
    clGetKernelSuggestedLocalWorkSize: 0,
};

/// Extension entry points by name.
fn extension(name: &[u8]) -> *mut c_void {
    match name {
        b"clIcdGetPlatformIDsKHR" => clIcdGetPlatformIDsKHR as *mut c_void,
        b"clCreateProgramWithILKHR" => clCreateProgramWithIL as *mut c_void,
        b"clGetKernelSubGroupInfoKHR" => clGetKernelSubGroupInfoKHR as *mut c_void,
        _ => std::ptr::null_mut(),
    }
}

fn lookup(name: *const c_char) -> *mut c_void {
    if name.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: a non-NULL name is a NUL-terminated string (spec contract).
    let name = unsafe { CStr::from_ptr(name) };
    extension(name.to_bytes())
}

/// `clGetExtensionFunctionAddress`.
///
/// # Safety
///
/// `func_name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn clGetExtensionFunctionAddress(func_name: *const c_char) -> *mut c_void {
    catch_unwind(|| lookup(func_name)).unwrap_or(std::ptr::null_mut())
}

/// `clGetExtensionFunctionAddressForPlatform`.
///
/// # Safety
///
/// `func_name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn clGetExtensionFunctionAddressForPlatform(
    platform: cl_platform_id,
    func_name: *const c_char,
) -> *mut c_void {
    catch_unwind(|| {
        if Cl::<Platform>::is_live(platform) {
            lookup(func_name)
        } else {
            std::ptr::null_mut()
        }
    })
    .unwrap_or(std::ptr::null_mut())
}
