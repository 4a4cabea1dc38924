//! Without a reachable device: no platform, and every entry point answers
//! an error code instead of crashing, whatever it is given.

use std::ffi::c_void;
use std::ptr::{null, null_mut};
use std::sync::Once;

use opencl_sys::*;
use vgpu_opencl::api::context::*;
use vgpu_opencl::api::device::*;
use vgpu_opencl::api::enqueue::*;
use vgpu_opencl::api::event::*;
use vgpu_opencl::api::kernel::*;
use vgpu_opencl::api::memory::*;
use vgpu_opencl::api::platform::*;
use vgpu_opencl::api::queue::*;
use vgpu_opencl::api::transfer::*;

fn no_device() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: set once, before any thread of this test binary reads it.
        unsafe { std::env::set_var("VGPU_SOCKET", "/nonexistent/vgpu.sock") };
    });
}

#[test]
fn no_platform_when_the_device_is_unreachable() {
    no_device();
    let mut n = 7;
    let mut p: cl_platform_id = null_mut();
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(
            clIcdGetPlatformIDsKHR(0, null_mut(), &mut n),
            CL_PLATFORM_NOT_FOUND_KHR
        );
        assert_eq!(n, 0);
        assert_eq!(
            clGetPlatformIDs(1, &mut p, &mut n),
            CL_PLATFORM_NOT_FOUND_KHR
        );
        assert!(p.is_null());
        // CL_INVALID_VALUE if num_entries is 0 and platforms is not NULL.
        assert_eq!(clGetPlatformIDs(0, &mut p, null_mut()), CL_INVALID_VALUE);
        assert_eq!(
            clGetPlatformIDs(0, null_mut(), null_mut()),
            CL_INVALID_VALUE
        );
    }
}

#[test]
fn garbage_handles_get_error_codes() {
    no_device();
    let mut word = [0usize; 8];
    let garbage = word.as_mut_ptr() as *mut c_void;
    let mut err = 0;
    let mut out = [0u8; 64];
    let o = out.as_mut_ptr() as *mut c_void;
    let g = 64usize;
    // SAFETY: every handle is one the library must refuse before use; the
    // other pointers are valid for the sizes given.
    unsafe {
        assert_eq!(
            clGetDeviceInfo(garbage, CL_DEVICE_NAME, 64, o, null_mut()),
            CL_INVALID_DEVICE
        );
        let ctx = clCreateContext(null(), 1, &garbage, None, null_mut(), &mut err);
        assert!(ctx.is_null());
        assert_eq!(err, CL_INVALID_DEVICE);
        assert_eq!(clRetainContext(garbage), CL_INVALID_CONTEXT);
        assert!(clCreateCommandQueue(garbage, garbage, 0, &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert!(clCreateBuffer(null_mut(), 0, 16, null_mut(), &mut err).is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert_eq!(
            clEnqueueReadBuffer(garbage, garbage, 1, 0, 8, o, 0, null(), null_mut()),
            CL_INVALID_COMMAND_QUEUE
        );
        assert_eq!(
            clEnqueueNDRangeKernel(
                garbage,
                null_mut(),
                1,
                null(),
                &g,
                null(),
                0,
                null(),
                null_mut()
            ),
            CL_INVALID_COMMAND_QUEUE
        );
        assert_eq!(clSetKernelArg(garbage, 0, 8, o), CL_INVALID_KERNEL);
        assert_eq!(clWaitForEvents(1, &garbage), CL_INVALID_EVENT);
        assert_eq!(clWaitForEvents(0, null()), CL_INVALID_VALUE);
        assert_eq!(clReleaseEvent(garbage), CL_INVALID_EVENT);
        assert_eq!(clFinish(null_mut()), CL_INVALID_COMMAND_QUEUE);
        assert_eq!(
            clGetMemObjectInfo(garbage, CL_MEM_SIZE, 8, o, null_mut()),
            CL_INVALID_MEM_OBJECT
        );
        // The errcode pointer may be NULL.
        assert!(clCreateUserEvent(garbage, null_mut()).is_null());
    }
}
