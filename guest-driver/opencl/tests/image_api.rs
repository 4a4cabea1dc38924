//! The image and sampler entry points against a fake device: pixels
//! travel packed whatever the application's pitches, reads land in the
//! application's layout without touching the gaps, hostile geometry is
//! refused before anything is sent, and sampler info is answered here.

mod common;

use std::ffi::c_void;
use std::ptr::{null, null_mut};

use common::fake::READ_PATTERN;
use common::setup;
use opencl_sys::*;
use vgpu_opencl::api::context::*;
use vgpu_opencl::api::device::*;
use vgpu_opencl::api::image::*;
use vgpu_opencl::api::image_enqueue::*;
use vgpu_opencl::api::memory::*;
use vgpu_opencl::api::platform::*;
use vgpu_opencl::api::queue::*;
use vgpu_opencl::api::sampler::*;
use vgpu_protocol::Request;

fn context_and_queue() -> (cl_context, cl_command_queue) {
    let (mut p, mut d) = (null_mut(), null_mut());
    let mut err = 0;
    // SAFETY: valid out-pointers and handles.
    unsafe {
        assert_eq!(clGetPlatformIDs(1, &mut p, null_mut()), CL_SUCCESS);
        assert_eq!(
            clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 1, &mut d, null_mut()),
            CL_SUCCESS
        );
        let c = clCreateContext(null(), 1, &d, None, null_mut(), &mut err);
        assert_eq!(err, CL_SUCCESS);
        let q = clCreateCommandQueue(c, d, 0, &mut err);
        assert_eq!(err, CL_SUCCESS);
        (c, q)
    }
}

const RGBA8: cl_image_format = cl_image_format {
    image_channel_order: CL_RGBA,
    image_channel_data_type: CL_UNSIGNED_INT8,
};

fn desc_2d(w: usize, h: usize, row_pitch: usize) -> cl_image_desc {
    cl_image_desc {
        image_type: CL_MEM_OBJECT_IMAGE2D,
        image_width: w,
        image_height: h,
        image_depth: 0,
        image_array_size: 0,
        image_row_pitch: row_pitch,
        image_slice_pitch: 0,
        num_mip_levels: 0,
        num_samples: 0,
        buffer: null_mut(),
    }
}

#[test]
fn initial_pixels_travel_packed_whatever_the_pitch() {
    let (_g, log) = setup();
    let (c, q) = context_and_queue();
    // 4x3 pixels of 4 bytes in rows of 24 bytes: 8 bytes of padding each.
    let host: Vec<u8> = (0..72u8).collect();
    let packed: Vec<u8> = host.chunks(24).flat_map(|row| row[..16].to_vec()).collect();
    let mut err = 0;
    // SAFETY: valid handles; `host` holds 3 rows of 24 bytes.
    let image = unsafe {
        let desc = desc_2d(4, 3, 24);
        let image = clCreateImage(
            c,
            CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
            &RGBA8,
            &desc,
            host.as_ptr() as *mut c_void,
            &mut err,
        );
        assert_eq!(err, CL_SUCCESS);
        assert_eq!(clFinish(q), CL_SUCCESS);
        image
    };
    let log = log.lock().unwrap();
    let init = log
        .requests
        .iter()
        .rev()
        .find_map(|r| match r {
            Request::InitImage(m) => Some(m.clone()),
            _ => None,
        })
        .expect("initial contents sent");
    assert_eq!((init.region, init.data.len), ([4, 3, 1], 48));
    assert!(
        log.out_data
            .iter()
            .any(|o| o.windows(48).any(|w| w == packed)),
        "the padding travelled"
    );
    drop(log);
    let mut pitch = 0usize;
    // SAFETY: valid image and out-pointer.
    unsafe {
        assert_eq!(
            clGetImageInfo(
                image,
                CL_IMAGE_ROW_PITCH,
                8,
                &mut pitch as *mut _ as *mut c_void,
                null_mut()
            ),
            CL_SUCCESS
        );
        assert_eq!(pitch, 16, "a COPY_HOST_PTR image is packed on the device");
        clReleaseMemObject(image);
        clReleaseCommandQueue(q);
        clReleaseContext(c);
    }
}

#[test]
fn reads_land_in_the_application_pitch_and_keep_the_gaps() {
    let (_g, _log) = setup();
    let (c, q) = context_and_queue();
    let mut err = 0;
    let mut out = vec![0x11u8; 2 * 12];
    // SAFETY: valid handles; `out` holds 2 rows of 12 bytes.
    unsafe {
        let desc = desc_2d(8, 8, 0);
        let image = clCreateImage(c, CL_MEM_READ_WRITE, &RGBA8, &desc, null_mut(), &mut err);
        assert_eq!(err, CL_SUCCESS);
        let (origin, region) = ([1usize, 2, 0], [2usize, 2, 1]);
        assert_eq!(
            clEnqueueReadImage(
                q,
                image,
                CL_TRUE,
                origin.as_ptr(),
                region.as_ptr(),
                12,
                0,
                out.as_mut_ptr() as *mut c_void,
                0,
                null(),
                null_mut()
            ),
            CL_SUCCESS
        );
        clReleaseMemObject(image);
        clReleaseCommandQueue(q);
        clReleaseContext(c);
    }
    for row in out.chunks(12) {
        assert!(row[..8].iter().all(|b| *b == READ_PATTERN));
        assert!(row[8..].iter().all(|b| *b == 0x11), "gap overwritten");
    }
}

#[test]
fn hostile_geometry_is_refused_before_anything_is_sent() {
    let (_g, log) = setup();
    let (c, q) = context_and_queue();
    let mut err = 0;
    let mut out = vec![0u8; 1024];
    // SAFETY: valid handles; every call is refused before `out` is used.
    unsafe {
        let desc = desc_2d(8, 8, 0);
        let image = clCreateImage(c, CL_MEM_READ_WRITE, &RGBA8, &desc, null_mut(), &mut err);
        assert_eq!(err, CL_SUCCESS);
        let sent = log.lock().unwrap().requests.len();
        let mut read = |origin: [usize; 3], region: [usize; 3], row_pitch: usize| {
            clEnqueueReadImage(
                q,
                image,
                CL_TRUE,
                origin.as_ptr(),
                region.as_ptr(),
                row_pitch,
                0,
                out.as_mut_ptr() as *mut c_void,
                0,
                null(),
                null_mut(),
            )
        };
        assert_eq!(
            read([0; 3], [9, 1, 1], 0),
            CL_INVALID_VALUE,
            "past the edge"
        );
        assert_eq!(
            read([usize::MAX, 0, 0], [2, 1, 1], 0),
            CL_INVALID_VALUE,
            "overflow"
        );
        assert_eq!(read([0; 3], [0, 1, 1], 0), CL_INVALID_VALUE, "empty");
        assert_eq!(
            read([0; 3], [1, 1, 2], 0),
            CL_INVALID_VALUE,
            "depth of a 2D"
        );
        assert_eq!(read([0; 3], [8, 2, 1], 16), CL_INVALID_VALUE, "short pitch");
        assert_eq!(
            log.lock().unwrap().requests.len(),
            sent,
            "something was sent"
        );
        let bad = cl_image_format {
            image_channel_order: 0x1234,
            image_channel_data_type: CL_FLOAT,
        };
        clCreateImage(c, CL_MEM_READ_WRITE, &bad, &desc, null_mut(), &mut err);
        assert_eq!(err, CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
        let lacking = cl_image_format {
            image_channel_order: CL_R,
            image_channel_data_type: CL_FLOAT,
        };
        clCreateImage(c, CL_MEM_READ_WRITE, &lacking, &desc, null_mut(), &mut err);
        assert_eq!(err, CL_IMAGE_FORMAT_NOT_SUPPORTED, "at once, not deferred");
        let huge = desc_2d(1 << 40, 4, 0);
        clCreateImage(c, CL_MEM_READ_WRITE, &RGBA8, &huge, null_mut(), &mut err);
        assert_eq!(err, CL_INVALID_IMAGE_SIZE);
        let pitched = desc_2d(4, 4, 64);
        clCreateImage(c, CL_MEM_READ_WRITE, &RGBA8, &pitched, null_mut(), &mut err);
        assert_eq!(
            err, CL_INVALID_IMAGE_DESCRIPTOR,
            "a pitch without host memory"
        );
        clReleaseMemObject(image);
        clReleaseCommandQueue(q);
        clReleaseContext(c);
    }
}

#[test]
fn sampler_info_is_answered_here() {
    let (_g, _log) = setup();
    let (c, q) = context_and_queue();
    let mut err = 0;
    // SAFETY: valid handles and out-pointers; a terminated property list.
    unsafe {
        let props: [cl_sampler_properties; 5] = [
            CL_SAMPLER_FILTER_MODE as u64,
            CL_FILTER_LINEAR as u64,
            CL_SAMPLER_NORMALIZED_COORDS as u64,
            0,
            0,
        ];
        let s = clCreateSamplerWithProperties(c, props.as_ptr(), &mut err);
        assert_eq!(err, CL_SUCCESS);
        let value = |param: cl_sampler_info| {
            let mut v = 0u32;
            assert_eq!(
                clGetSamplerInfo(s, param, 4, &mut v as *mut _ as *mut c_void, null_mut()),
                CL_SUCCESS
            );
            v
        };
        assert_eq!(value(CL_SAMPLER_FILTER_MODE), CL_FILTER_LINEAR);
        assert_eq!(value(CL_SAMPLER_ADDRESSING_MODE), CL_ADDRESS_CLAMP);
        assert_eq!(value(CL_SAMPLER_NORMALIZED_COORDS), CL_FALSE);
        assert_eq!(clRetainSampler(s), CL_SUCCESS);
        assert_eq!(value(CL_SAMPLER_REFERENCE_COUNT), 2);
        let mut size = 0usize;
        clGetSamplerInfo(s, CL_SAMPLER_PROPERTIES, 0, null_mut(), &mut size);
        assert_eq!(size, 5 * 8);
        assert_eq!(clReleaseSampler(s), CL_SUCCESS);
        assert_eq!(clReleaseSampler(s), CL_SUCCESS);
        assert_eq!(clReleaseSampler(s), CL_INVALID_SAMPLER);
        clCreateSampler(c, CL_TRUE, 0x1234, CL_FILTER_NEAREST, &mut err);
        assert_eq!(err, CL_INVALID_VALUE);
        clReleaseCommandQueue(q);
        clReleaseContext(c);
    }
}
