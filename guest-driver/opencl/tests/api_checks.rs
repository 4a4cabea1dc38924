//! The API layer against a fake device: argument checks the spec defines
//! are answered without a round trip, handles are validated, creates are
//! batched, and the values the application sees are the ones the ICD
//! promises.

mod common;

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};
use std::sync::Mutex;

use common::fake::{Log, READ_PATTERN};
use common::setup;
use opencl_sys::*;
use vgpu_opencl::api::build::*;
use vgpu_opencl::api::context::*;
use vgpu_opencl::api::device::*;
use vgpu_opencl::api::enqueue::*;
use vgpu_opencl::api::event::*;
use vgpu_opencl::api::icd::*;
use vgpu_opencl::api::image::*;
use vgpu_opencl::api::kernel::*;
use vgpu_opencl::api::map::*;
use vgpu_opencl::api::memory::*;
use vgpu_opencl::api::platform::*;
use vgpu_opencl::api::program::*;
use vgpu_opencl::api::queue::*;
use vgpu_opencl::api::subdevice::*;
use vgpu_opencl::api::svm::*;
use vgpu_opencl::api::transfer::*;
use vgpu_opencl::api::unimplemented::*;
use vgpu_protocol::{ArgKind, Request};

fn submits(log: &Mutex<Log>) -> usize {
    log.lock().unwrap().submits
}

fn platform() -> cl_platform_id {
    let mut p = null_mut();
    // SAFETY: valid out-pointers.
    let err = unsafe { clGetPlatformIDs(1, &mut p, null_mut()) };
    assert_eq!(err, CL_SUCCESS);
    p
}

fn device() -> cl_device_id {
    let mut d = null_mut();
    // SAFETY: valid out-pointers.
    let err = unsafe { clGetDeviceIDs(platform(), CL_DEVICE_TYPE_ALL, 1, &mut d, null_mut()) };
    assert_eq!(err, CL_SUCCESS);
    d
}

fn context() -> cl_context {
    let d = device();
    let mut err = 0;
    // SAFETY: one valid device, valid errcode pointer.
    let c = unsafe { clCreateContext(null(), 1, &d, None, null_mut(), &mut err) };
    assert_eq!(err, CL_SUCCESS);
    c
}

fn queue(c: cl_context) -> cl_command_queue {
    let mut err = 0;
    // SAFETY: valid handles and errcode pointer.
    let q = unsafe { clCreateCommandQueue(c, device(), 0, &mut err) };
    assert_eq!(err, CL_SUCCESS);
    q
}

fn buffer(c: cl_context, size: usize) -> cl_mem {
    let mut err = 0;
    // SAFETY: valid context and errcode pointer.
    let m = unsafe { clCreateBuffer(c, CL_MEM_READ_WRITE, size, null_mut(), &mut err) };
    assert_eq!(err, CL_SUCCESS);
    m
}

fn kernel(c: cl_context) -> cl_kernel {
    let src = c"__kernel void k(__global int *a, int b) {}".as_ptr();
    let mut err = 0;
    // SAFETY: one NUL-terminated source string; valid handles.
    unsafe {
        let p = clCreateProgramWithSource(c, 1, &src as *const _ as *mut _, null(), &mut err);
        assert_eq!(err, CL_SUCCESS);
        assert_eq!(
            clBuildProgram(p, 0, null(), null(), None, null_mut()),
            CL_SUCCESS
        );
        let k = clCreateKernel(p, c"k".as_ptr(), &mut err);
        assert_eq!(err, CL_SUCCESS);
        assert_eq!(clReleaseProgram(p), CL_SUCCESS);
        k
    }
}

/// Releases a test's kernel, buffer, queue and context, the last made
/// first; a NULL one was not made.
fn release(k: cl_kernel, m: cl_mem, q: cl_command_queue, c: cl_context) {
    // SAFETY: the ICD checks every handle; these are live objects the
    // test made, each released once here.
    unsafe {
        if !k.is_null() {
            clReleaseKernel(k);
        }
        if !m.is_null() {
            clReleaseMemObject(m);
        }
        clReleaseCommandQueue(q);
        clReleaseContext(c);
    }
}

fn string_info(f: impl Fn(usize, *mut c_void, *mut usize) -> cl_int) -> String {
    let mut size = 0;
    assert_eq!(f(0, null_mut(), &mut size), CL_SUCCESS);
    let mut buf = vec![0u8; size];
    assert_eq!(
        f(size, buf.as_mut_ptr() as *mut c_void, null_mut()),
        CL_SUCCESS
    );
    CStr::from_bytes_until_nul(&buf)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

#[test]
fn platform_and_device_show_the_layering() {
    let (_g, _log) = setup();
    let p = platform();
    let info = |param| {
        // SAFETY: a valid platform, buffers of the sizes given.
        string_info(|s, v, r| unsafe { clGetPlatformInfo(p, param, s, v, r) })
    };
    assert_eq!(info(CL_PLATFORM_NAME), "vgpu");
    assert_eq!(info(CL_PLATFORM_VERSION), "OpenCL 3.0 vgpu");
    assert_eq!(info(CL_PLATFORM_ICD_SUFFIX_KHR), "vgpu");
    assert!(info(CL_PLATFORM_EXTENSIONS).contains("cl_khr_icd"));
    let d = device();
    let dinfo = |param| {
        // SAFETY: a valid device, buffers of the sizes given.
        string_info(|s, v, r| unsafe { clGetDeviceInfo(d, param, s, v, r) })
    };
    assert_eq!(dinfo(CL_DEVICE_NAME), "vgpu: Fake CPU (Fake Platform)");
    let ext = dinfo(CL_DEVICE_EXTENSIONS);
    assert_eq!(
        ext, "cl_khr_fp64",
        "host-API extensions that are not forwarded are hidden"
    );
    let mut owner: cl_platform_id = null_mut();
    let mut images: cl_bool = 7;
    let mut units: cl_uint = 0;
    // SAFETY: a valid device, values of the sizes given.
    unsafe {
        clGetDeviceInfo(
            d,
            CL_DEVICE_PLATFORM,
            8,
            &mut owner as *mut _ as *mut c_void,
            null_mut(),
        );
        clGetDeviceInfo(
            d,
            CL_DEVICE_IMAGE_SUPPORT,
            4,
            &mut images as *mut _ as *mut c_void,
            null_mut(),
        );
        clGetDeviceInfo(
            d,
            CL_DEVICE_MAX_COMPUTE_UNITS,
            4,
            &mut units as *mut _ as *mut c_void,
            null_mut(),
        );
    }
    assert_eq!(owner, p);
    assert_eq!(images, CL_TRUE, "image support is the backing device's");
    assert_eq!(units, 7, "other values are the backing device's");
}

#[test]
fn icd_entry_points_are_found_by_name() {
    let (_g, _log) = setup();
    // SAFETY: NUL-terminated names.
    unsafe {
        assert!(!clGetExtensionFunctionAddress(c"clIcdGetPlatformIDsKHR".as_ptr()).is_null());
        assert!(clGetExtensionFunctionAddress(c"clNoSuchThing".as_ptr()).is_null());
        assert!(clGetExtensionFunctionAddress(null()).is_null());
        let p = platform();
        let f = clGetExtensionFunctionAddressForPlatform(p, c"clIcdGetPlatformIDsKHR".as_ptr());
        assert!(!f.is_null());
        let mut n = 0;
        assert_eq!(clIcdGetPlatformIDsKHR(0, null_mut(), &mut n), CL_SUCCESS);
        assert_eq!(n, 1);
    }
    let ctx = context();
    // SAFETY: the first word of every object is the dispatch table pointer.
    let table = unsafe { *(ctx as *const *const cl_icd::cl_icd_dispatch) };
    assert_eq!(table, &DISPATCH as *const _);
    // SAFETY: valid context.
    unsafe { clReleaseContext(ctx) };
}

#[test]
fn info_size_protocol() {
    let (_g, _log) = setup();
    let p = platform();
    let mut small = [0u8; 2];
    let mut size = 0;
    // SAFETY: buffers of the sizes given.
    unsafe {
        // CL_INVALID_VALUE if param_value_size is smaller than the value.
        let err = clGetPlatformInfo(
            p,
            CL_PLATFORM_NAME,
            2,
            small.as_mut_ptr() as *mut c_void,
            &mut size,
        );
        assert_eq!(err, CL_INVALID_VALUE);
        assert_eq!(
            clGetPlatformInfo(p, CL_PLATFORM_NAME, 0, null_mut(), &mut size),
            CL_SUCCESS
        );
        assert_eq!(size, 5);
        assert_eq!(
            clGetPlatformInfo(p, 0xdead, 0, null_mut(), &mut size),
            CL_INVALID_VALUE
        );
    }
}

#[test]
fn forged_released_and_wrong_kind_handles_are_refused() {
    let (_g, _log) = setup();
    let c = context();
    let q = queue(c);
    let mut local = 0u64;
    let forged = &mut local as *mut u64 as *mut c_void;
    let mut err = 0;
    // SAFETY: every pointer passed is either valid or one the library must
    // refuse before dereferencing.
    unsafe {
        assert_eq!(clRetainContext(forged), CL_INVALID_CONTEXT);
        assert_eq!(clReleaseMemObject(forged), CL_INVALID_MEM_OBJECT);
        assert_eq!(
            clFinish(c),
            CL_INVALID_COMMAND_QUEUE,
            "a context is not a queue"
        );
        assert_eq!(
            clRetainContext(q),
            CL_INVALID_CONTEXT,
            "a queue is not a context"
        );
        assert_eq!(
            clGetDeviceInfo(forged, CL_DEVICE_NAME, 0, null_mut(), null_mut()),
            CL_INVALID_DEVICE
        );
        assert_eq!(clSetKernelArg(null_mut(), 0, 4, forged), CL_INVALID_KERNEL);
        let m = clCreateBuffer(forged, 0, 16, null_mut(), &mut err);
        assert!(m.is_null());
        assert_eq!(err, CL_INVALID_CONTEXT);
        assert_eq!(clReleaseCommandQueue(q), CL_SUCCESS);
        assert_eq!(clFinish(q), CL_INVALID_COMMAND_QUEUE, "released");
        assert_eq!(clReleaseContext(c), CL_SUCCESS);
        assert_eq!(clReleaseContext(c), CL_INVALID_CONTEXT, "released twice");
    }
}

#[test]
fn buffer_checks_need_no_round_trip() {
    let (_g, log) = setup();
    let c = context();
    let q = queue(c);
    let m = buffer(c, 64);
    // Device limits are asked once and cached; warm that cache first.
    let d = device();
    for param in [CL_DEVICE_MAX_MEM_ALLOC_SIZE, CL_DEVICE_MEM_BASE_ADDR_ALIGN] {
        let mut v = [0u8; 8];
        // SAFETY: an 8-byte buffer.
        unsafe { clGetDeviceInfo(d, param, 8, v.as_mut_ptr() as *mut c_void, null_mut()) };
    }
    let before = submits(&log);
    let mut err = 0;
    let mut host = [0u8; 64];
    let h = host.as_mut_ptr() as *mut c_void;
    // SAFETY: valid handles; host memory of 64 bytes.
    unsafe {
        clCreateBuffer(c, 0, 0, null_mut(), &mut err);
        assert_eq!(err, CL_INVALID_BUFFER_SIZE, "size 0");
        clCreateBuffer(c, 0, 2 << 20, null_mut(), &mut err);
        assert_eq!(
            err, CL_INVALID_BUFFER_SIZE,
            "above CL_DEVICE_MAX_MEM_ALLOC_SIZE"
        );
        clCreateBuffer(
            c,
            CL_MEM_READ_ONLY | CL_MEM_WRITE_ONLY,
            16,
            null_mut(),
            &mut err,
        );
        assert_eq!(err, CL_INVALID_VALUE, "conflicting flags");
        clCreateBuffer(c, CL_MEM_USE_HOST_PTR, 16, null_mut(), &mut err);
        assert_eq!(err, CL_INVALID_HOST_PTR, "USE_HOST_PTR without a pointer");
        clCreateBuffer(c, 0, 16, h, &mut err);
        assert_eq!(
            err, CL_INVALID_HOST_PTR,
            "a pointer without USE/COPY_HOST_PTR"
        );
        let read = |offset, size, ptr| {
            clEnqueueReadBuffer(q, m, CL_TRUE, offset, size, ptr, 0, null(), null_mut())
        };
        assert_eq!(read(60, 8, h), CL_INVALID_VALUE, "beyond the buffer");
        assert_eq!(read(0, 8, null_mut()), CL_INVALID_VALUE, "NULL destination");
        assert_eq!(
            clEnqueueReadBuffer(q, m, CL_TRUE, 0, 8, h, 1, null(), null_mut()),
            CL_INVALID_EVENT_WAIT_LIST
        );
        assert_eq!(
            clEnqueueCopyBuffer(q, m, m, 0, 8, 16, 0, null(), null_mut()),
            CL_MEM_COPY_OVERLAP
        );
        let pattern = [0u8; 3];
        let fill = clEnqueueFillBuffer(
            q,
            m,
            pattern.as_ptr() as *const c_void,
            3,
            0,
            12,
            0,
            null(),
            null_mut(),
        );
        assert_eq!(fill, CL_INVALID_VALUE, "pattern size not a power of two");
        let region = cl_buffer_region {
            origin: 64,
            size: 16,
        };
        let sub = clCreateSubBuffer(
            m,
            0,
            CL_BUFFER_CREATE_TYPE_REGION,
            &region as *const _ as *const c_void,
            &mut err,
        );
        assert!(sub.is_null());
        assert_eq!(err, CL_INVALID_VALUE, "sub-buffer out of range");
        let region = cl_buffer_region {
            origin: 8,
            size: 16,
        };
        clCreateSubBuffer(
            m,
            0,
            CL_BUFFER_CREATE_TYPE_REGION,
            &region as *const _ as *const c_void,
            &mut err,
        );
        assert_eq!(
            err, CL_MISALIGNED_SUB_BUFFER_OFFSET,
            "origin not a multiple of 128 bytes"
        );
        // Objects of another context.
        let c2 = context();
        let m2 = buffer(c2, 64);
        assert_eq!(read_other(q, m2, h), CL_INVALID_CONTEXT);
        clReleaseMemObject(m2);
        clReleaseContext(c2);
    }
    assert_eq!(submits(&log), before, "every check above is local");
    release(null_mut(), m, q, c);
}

/// A read of `m` (another context's buffer) through `q`.
///
/// # Safety
///
/// `h` holds 8 bytes.
unsafe fn read_other(q: cl_command_queue, m: cl_mem, h: *mut c_void) -> cl_int {
    // SAFETY: as the caller promises.
    unsafe { clEnqueueReadBuffer(q, m, CL_TRUE, 0, 8, h, 0, null(), null_mut()) }
}

#[test]
fn creates_and_enqueues_are_batched_until_a_synchronization_point() {
    let (_g, log) = setup();
    let c = context();
    let q = queue(c);
    let k = kernel(c);
    let m = buffer(c, 256);
    let data = [7u8; 256];
    let before = submits(&log);
    let v: cl_int = 5;
    let g = 64usize;
    // SAFETY: valid handles; argument values of the sizes given.
    let after_first_args = unsafe {
        // The first value of each argument shape, and the first launch of a
        // kernel function, ask the backend once.
        assert_eq!(
            clSetKernelArg(k, 0, 8, &m as *const _ as *const c_void),
            CL_SUCCESS
        );
        assert_eq!(
            clSetKernelArg(k, 1, 4, &v as *const _ as *const c_void),
            CL_SUCCESS
        );
        let e = clEnqueueNDRangeKernel(q, k, 1, null(), &g, null(), 0, null(), null_mut());
        assert_eq!(e, CL_SUCCESS);
        let after_first_args = submits(&log);
        for _ in 0..10 {
            assert_eq!(
                clSetKernelArg(k, 1, 4, &v as *const _ as *const c_void),
                CL_SUCCESS
            );
            let w = clEnqueueWriteBuffer(
                q,
                m,
                CL_FALSE,
                0,
                256,
                data.as_ptr() as *const c_void,
                0,
                null(),
                null_mut(),
            );
            assert_eq!(w, CL_SUCCESS);
            let e = clEnqueueNDRangeKernel(q, k, 1, null(), &g, null(), 0, null(), null_mut());
            assert_eq!(e, CL_SUCCESS);
        }
        assert_eq!(
            submits(&log),
            after_first_args,
            "no round trip for repeated args, writes, launches"
        );
        assert!(
            after_first_args - before <= 6,
            "first-time questions: {}",
            after_first_args - before
        );
        assert_eq!(clFinish(q), CL_SUCCESS);
        after_first_args
    };
    assert_eq!(
        submits(&log),
        after_first_args + 1,
        "clFinish is one round trip"
    );
    let log = log.lock().unwrap();
    let set_mem = log.requests.iter().rev().find_map(|r| match r {
        Request::SetKernelArg(s) if s.index == 0 => Some(s.clone()),
        _ => None,
    });
    assert_eq!(
        set_mem.map(|s| s.arg_kind),
        Some(ArgKind::Mem as u32),
        "a cl_mem travels as a handle"
    );
    let staged = log.out_data.last().unwrap();
    assert!(
        staged.windows(256).any(|w| w == data),
        "small non-blocking writes are staged in the batch"
    );
    drop(log);
    release(k, m, q, c);
}

#[test]
fn kernel_launch_checks() {
    let (_g, log) = setup();
    let c = context();
    let q = queue(c);
    let k = kernel(c);
    let g = [512usize; 3];
    let l = [512usize; 3];
    let m = buffer(c, 64);
    let v: cl_int = 1;
    let mut err = 0;
    // SAFETY: valid handles; arrays of 3 sizes.
    unsafe {
        let launch = |dim, l: *const usize| {
            clEnqueueNDRangeKernel(q, k, dim, null(), g.as_ptr(), l, 0, null(), null_mut())
        };
        assert_eq!(
            launch(1, null()),
            CL_INVALID_KERNEL_ARGS,
            "arguments not set"
        );
        assert_eq!(
            clSetKernelArg(k, 2, 4, &v as *const _ as *const c_void),
            CL_INVALID_ARG_INDEX
        );
        assert_eq!(
            clSetKernelArg(k, 0, 4, &v as *const _ as *const c_void),
            CL_INVALID_ARG_SIZE,
            "a buffer takes a cl_mem"
        );
        let junk = 0x1234usize;
        assert_eq!(
            clSetKernelArg(k, 0, 8, &junk as *const _ as *const c_void),
            CL_INVALID_MEM_OBJECT
        );
        assert_eq!(
            clSetKernelArg(k, 0, 8, &m as *const _ as *const c_void),
            CL_SUCCESS
        );
        assert_eq!(
            clSetKernelArg(k, 1, 4, &v as *const _ as *const c_void),
            CL_SUCCESS
        );
        assert_eq!(launch(0, null()), CL_INVALID_WORK_DIMENSION);
        assert_eq!(launch(4, null()), CL_INVALID_WORK_DIMENSION);
        // Within CL_KERNEL_WORK_GROUP_SIZE (256) but above the device's
        // CL_DEVICE_MAX_WORK_ITEM_SIZES (64): refused here.
        let over_items = [128usize; 3];
        assert_eq!(
            launch(1, over_items.as_ptr()),
            CL_INVALID_WORK_ITEM_SIZE,
            "above CL_DEVICE_MAX_WORK_ITEM_SIZES"
        );
        // Above CL_KERNEL_WORK_GROUP_SIZE: left to the device (NVIDIA runs
        // some such launches), which answers at once; this fake accepts it.
        // A batched launch would not be among the submitted requests yet.
        assert_eq!(launch(1, l.as_ptr()), CL_SUCCESS, "the device's answer");
        assert!(
            matches!(
                log.lock().unwrap().requests.last(),
                Some(vgpu_protocol::Request::EnqueueNdRange(r)) if r.local[0] == 512
            ),
            "sent at once"
        );
        // OpenCL 3.0: a NULL global_work_size is an empty launch that
        // succeeds (the CTS's zero_sized_enqueue).
        assert_eq!(
            clEnqueueNDRangeKernel(q, k, 1, null(), null(), null(), 0, null(), null_mut()),
            CL_SUCCESS
        );
        assert_eq!(launch(1, null()), CL_SUCCESS);
        let p = null_mut();
        clCreateKernel(p, c"k".as_ptr(), &mut err);
        assert_eq!(err, CL_INVALID_PROGRAM);
        release(k, m, q, c);
    }
}

#[test]
fn map_reads_and_unmap_writes_back() {
    let (_g, log) = setup();
    let c = context();
    let q = queue(c);
    let m = buffer(c, 4096);
    let mut err = 0;
    let mut event: cl_event = null_mut();
    // SAFETY: valid handles; the mapped pointer covers the mapped range.
    unsafe {
        let p = clEnqueueMapBuffer(
            q,
            m,
            CL_TRUE,
            CL_MAP_READ | CL_MAP_WRITE,
            1024,
            512,
            0,
            null(),
            &mut event,
            &mut err,
        );
        assert_eq!(err, CL_SUCCESS);
        assert_eq!(p as usize % 64, 0, "mapped areas are aligned");
        let area = std::slice::from_raw_parts_mut(p as *mut u8, 512);
        assert!(
            area.iter().all(|b| *b == READ_PATTERN),
            "the region was read"
        );
        area.fill(0x5a);
        let mut count: cl_uint = 0;
        clGetMemObjectInfo(
            m,
            CL_MEM_MAP_COUNT,
            4,
            &mut count as *mut _ as *mut c_void,
            null_mut(),
        );
        assert_eq!(count, 1);
        let mut kind: cl_command_type = 0;
        clGetEventInfo(
            event,
            CL_EVENT_COMMAND_TYPE,
            4,
            &mut kind as *mut _ as *mut c_void,
            null_mut(),
        );
        assert_eq!(kind, CL_COMMAND_MAP_BUFFER, "map returns a real event");
        let other = 16usize as *mut c_void;
        assert_eq!(
            clEnqueueUnmapMemObject(q, m, other, 0, null(), null_mut()),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clEnqueueUnmapMemObject(q, m, p, 0, null(), null_mut()),
            CL_SUCCESS
        );
        clReleaseEvent(event);
    }
    let log_ = log.lock().unwrap();
    let write = log_.requests.iter().rev().find_map(|r| match r {
        Request::EnqueueWriteBuffer(w) => Some(w.clone()),
        _ => None,
    });
    assert_eq!(
        write.map(|w| (w.offset, w.data.len)),
        Some((1024, 512)),
        "unmap wrote the region back"
    );
    assert!(log_
        .out_data
        .iter()
        .any(|d| d.len() >= 512 && d.iter().filter(|b| **b == 0x5a).count() >= 512));
    drop(log_);
    release(null_mut(), m, q, c);
}

#[test]
fn use_host_ptr_maps_return_the_application_memory() {
    let (_g, _log) = setup();
    let c = context();
    let q = queue(c);
    let mut host = vec![1u8; 1024];
    let mut err = 0;
    // SAFETY: `host` outlives the buffer; valid handles.
    unsafe {
        let m = clCreateBuffer(
            c,
            CL_MEM_USE_HOST_PTR,
            1024,
            host.as_mut_ptr() as *mut c_void,
            &mut err,
        );
        assert_eq!(err, CL_SUCCESS);
        let p = clEnqueueMapBuffer(
            q,
            m,
            CL_TRUE,
            CL_MAP_READ,
            256,
            256,
            0,
            null(),
            null_mut(),
            &mut err,
        );
        assert_eq!(err, CL_SUCCESS);
        assert_eq!(p, host.as_mut_ptr().add(256) as *mut c_void);
        assert_eq!(
            clEnqueueUnmapMemObject(q, m, p, 0, null(), null_mut()),
            CL_SUCCESS
        );
        release(null_mut(), m, q, c);
    }
    assert!(
        host[256..512].iter().all(|b| *b == READ_PATTERN),
        "the map read into the application's memory"
    );
}

static FIRED: Mutex<Vec<(usize, cl_int, usize)>> = Mutex::new(Vec::new());

extern "C" fn on_event(event: cl_event, status: cl_int, data: *mut c_void) {
    FIRED
        .lock()
        .unwrap()
        .push((event as usize, status, data as usize));
}

extern "C" fn on_destroy(_object: *mut c_void, data: *mut c_void) {
    FIRED.lock().unwrap().push((0, -1000, data as usize));
}

#[test]
fn user_event_callbacks_fire_once_and_destructors_run() {
    let (_g, _log) = setup();
    let c = context();
    let mut err = 0;
    // SAFETY: valid handles; callbacks of the right shape.
    unsafe {
        let u = clCreateUserEvent(c, &mut err);
        assert_eq!(err, CL_SUCCESS);
        assert_eq!(
            clSetEventCallback(u, CL_COMPLETE, Some(on_event), 42 as *mut c_void),
            CL_SUCCESS
        );
        assert_eq!(
            clSetEventCallback(u, 99, Some(on_event), null_mut()),
            CL_INVALID_VALUE
        );
        assert_eq!(clSetUserEventStatus(u, CL_SUBMITTED), CL_INVALID_VALUE);
        assert_eq!(clSetUserEventStatus(u, CL_COMPLETE), CL_SUCCESS);
        assert_eq!(
            clSetUserEventStatus(u, CL_COMPLETE),
            CL_INVALID_OPERATION,
            "set twice"
        );
        assert_eq!(clWaitForEvents(1, &u), CL_SUCCESS);
        let m = buffer(c, 64);
        assert_eq!(
            clSetMemObjectDestructorCallback(m, Some(on_destroy), 7 as *mut c_void),
            CL_SUCCESS
        );
        assert_eq!(clReleaseMemObject(m), CL_SUCCESS);
        clReleaseEvent(u);
        clReleaseContext(c);
        let fired = FIRED.lock().unwrap().clone();
        assert_eq!(
            fired.iter().filter(|f| f.2 == 42).count(),
            1,
            "exactly once"
        );
        assert!(fired.contains(&(u as usize, CL_COMPLETE, 42)));
        assert!(
            fired.contains(&(0, -1000, 7)),
            "destructor callback ran on release"
        );
    }
}

#[test]
fn unimplemented_entry_points_fail_cleanly() {
    let (_g, _log) = setup();
    let c = context();
    let mut err = 0;
    // SAFETY: the stubs dereference nothing but errcode_ret.
    unsafe {
        // Images are forwarded; a NULL format is refused before the device
        // is asked anything.
        let image = clCreateImage2D(c, 0, null(), 4, 4, 0, null_mut(), &mut err);
        assert!(image.is_null());
        assert_eq!(err, CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
        // Only coarse-grained SVM is forwarded: fine-grained is refused
        // before the device is asked.
        assert!(clSVMAlloc(c, CL_MEM_SVM_FINE_GRAIN_BUFFER, 64, 0).is_null());
        // The device reports no partition types: what the spec says for
        // an unsupported scheme, and for an invalid device.
        assert_eq!(
            clCreateSubDevices(device(), null(), 0, null_mut(), null_mut()),
            CL_INVALID_VALUE
        );
        let equally = [CL_DEVICE_PARTITION_EQUALLY, 1, 0];
        let mut n = 0;
        assert_eq!(
            clCreateSubDevices(device(), equally.as_ptr(), 0, null_mut(), &mut n),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clCreateSubDevices(null_mut(), equally.as_ptr(), 0, null_mut(), &mut n),
            CL_INVALID_DEVICE
        );
        clReleaseContext(c);
    }
}

#[test]
fn program_binaries_and_build_options_are_answered() {
    let (_g, _log) = setup();
    let c = context();
    let k = kernel(c);
    let mut program: cl_program = null_mut();
    let mut binary = [0u8; 4];
    let mut slot = binary.as_mut_ptr();
    // SAFETY: valid handles; buffers of the sizes given.
    unsafe {
        clGetKernelInfo(
            k,
            CL_KERNEL_PROGRAM,
            8,
            &mut program as *mut _ as *mut c_void,
            null_mut(),
        );
        let err = clGetProgramInfo(
            program,
            CL_PROGRAM_BINARIES,
            8,
            &mut slot as *mut _ as *mut c_void,
            null_mut(),
        );
        assert_eq!(err, CL_SUCCESS);
        assert_eq!(&binary, b"BIN!");
        let d = device();
        let options = string_info(|s, v, r| {
            clGetProgramBuildInfo(program, d, CL_PROGRAM_BUILD_OPTIONS, s, v, r)
        });
        assert_eq!(
            options, "",
            "the options the application gave, not the backend's"
        );
        clReleaseKernel(k);
        clReleaseContext(c);
    }
}

#[test]
fn released_objects_leave_the_registry_and_are_released_remotely() {
    let (_g, log) = setup();
    let before = vgpu_opencl::live_objects();
    let c = context();
    let q = queue(c);
    let m = buffer(c, 64);
    let k = kernel(c);
    release(k, m, q, c);
    assert_eq!(vgpu_opencl::live_objects(), before);
    // The releases were deferred: a synchronization point sends them.
    let c = context();
    let q = queue(c);
    // SAFETY: valid handles.
    unsafe {
        clFinish(q);
        clReleaseCommandQueue(q);
        clReleaseContext(c);
    }
    let log = log.lock().unwrap();
    let releases = log
        .requests
        .iter()
        .filter(|r| matches!(r, Request::Release(_)))
        .count();
    assert!(
        releases >= 5,
        "context, queue, buffer, program and kernel were released: {releases}"
    );
}

#[test]
fn mem_properties_answer_the_list_as_given() {
    let (_serial, _log) = setup();
    let c = context();
    let query = |mem: cl_mem| {
        let mut size = 99usize;
        // SAFETY: a size-only query.
        let err = unsafe { clGetMemObjectInfo(mem, CL_MEM_PROPERTIES, 0, null_mut(), &mut size) };
        assert_eq!(err, CL_SUCCESS);
        size
    };
    let mut err = 0;
    let empty: [cl_mem_properties; 1] = [0];
    // SAFETY: a terminated property list; no host pointer.
    let listed = unsafe {
        clCreateBufferWithProperties(
            c,
            empty.as_ptr(),
            CL_MEM_READ_WRITE,
            64,
            null_mut(),
            &mut err,
        )
    };
    assert_eq!(err, CL_SUCCESS);
    // SAFETY: NULL properties; no host pointer.
    let unlisted = unsafe {
        clCreateBufferWithProperties(c, null(), CL_MEM_READ_WRITE, 64, null_mut(), &mut err)
    };
    assert_eq!(err, CL_SUCCESS);
    // The terminator alone for an empty list, nothing for NULL or
    // clCreateBuffer (OpenCL 3.0; PoCL answers the same).
    assert_eq!(query(listed), std::mem::size_of::<cl_mem_properties>());
    assert_eq!(query(unlisted), 0);
    assert_eq!(query(buffer(c, 64)), 0);
    let mut value: cl_mem_properties = 7;
    // SAFETY: room for one property.
    let err = unsafe {
        clGetMemObjectInfo(
            listed,
            CL_MEM_PROPERTIES,
            std::mem::size_of_val(&value),
            &mut value as *mut _ as *mut c_void,
            null_mut(),
        )
    };
    assert_eq!((err, value), (CL_SUCCESS, 0));
}

#[test]
fn pipe_info_of_a_buffer_is_an_invalid_mem_object() {
    let (_serial, _log) = setup();
    let c = context();
    let mut value: cl_uint = 7;
    // SAFETY: a live buffer and room for a cl_uint.
    let err = unsafe {
        clGetPipeInfo(
            buffer(c, 4),
            CL_PIPE_PACKET_SIZE,
            4,
            &mut value as *mut _ as *mut c_void,
            null_mut(),
        )
    };
    // No device pipe support: nothing is a pipe (CTS consistency_pipes).
    assert_eq!(err, CL_INVALID_MEM_OBJECT);
    assert_eq!(value, 7);
    let mut err = 0;
    // SAFETY: no properties; the call fails before using any argument.
    let pipe = unsafe { clCreatePipe(c, CL_MEM_HOST_NO_ACCESS, 4, 4, null(), &mut err) };
    assert!(pipe.is_null());
    assert_eq!(err, CL_INVALID_OPERATION);
}

#[test]
fn svm_pointers_outside_any_allocation_are_refused_without_a_round_trip() {
    let (_g, log) = setup();
    let c = context();
    let q = queue(c);
    let k = kernel(c);
    let mut host = [0u8; 64];
    let p = host.as_mut_ptr() as *mut c_void;
    let pattern = 0u32;
    let mut num_args: cl_uint = 0;
    // SAFETY: a valid kernel; a cl_uint to write (the count is then known).
    unsafe {
        clGetKernelInfo(
            k,
            CL_KERNEL_NUM_ARGS,
            4,
            &mut num_args as *mut _ as *mut c_void,
            null_mut(),
        );
    }
    let before = submits(&log);
    // SAFETY: valid handles; `host` outlives every call; nothing is
    // dereferenced beyond the sizes given.
    unsafe {
        assert_eq!(clSetKernelArgSVMPointer(k, 0, p), CL_INVALID_ARG_VALUE);
        assert_eq!(clSetKernelArgSVMPointer(k, 7, p), CL_INVALID_ARG_INDEX);
        let list = [p];
        assert_eq!(
            clSetKernelExecInfo(
                k,
                CL_KERNEL_EXEC_INFO_SVM_PTRS,
                8,
                list.as_ptr() as *const c_void
            ),
            CL_INVALID_VALUE
        );
        let yes: cl_bool = CL_TRUE;
        assert_eq!(
            clSetKernelExecInfo(
                k,
                CL_KERNEL_EXEC_INFO_SVM_FINE_GRAIN_SYSTEM,
                4,
                &yes as *const _ as *const c_void
            ),
            CL_INVALID_OPERATION,
            "the device has no fine-grained system SVM"
        );
        assert_eq!(
            clEnqueueSVMMemFill(
                q,
                p,
                &pattern as *const _ as *const c_void,
                4,
                64,
                0,
                null(),
                null_mut()
            ),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clEnqueueSVMMap(q, CL_TRUE, CL_MAP_READ, p, 64, 0, null(), null_mut()),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clEnqueueSVMUnmap(q, p, 0, null(), null_mut()),
            CL_INVALID_VALUE
        );
        let ptrs = [p as *const c_void];
        assert_eq!(
            clEnqueueSVMMigrateMem(
                q,
                1,
                ptrs.as_ptr() as *mut _,
                null(),
                0,
                0,
                null(),
                null_mut()
            ),
            CL_INVALID_VALUE
        );
        assert_eq!(
            clEnqueueSVMMemcpy(
                q,
                CL_TRUE,
                p,
                (p as *const u8).add(8) as *const c_void,
                16,
                0,
                null(),
                null_mut()
            ),
            CL_MEM_COPY_OVERLAP
        );
        clSVMFree(c, p);
    }
    assert_eq!(submits(&log), before, "refused here, nothing sent");
    release(k, null_mut(), q, c);
}
