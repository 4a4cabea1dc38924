//! Platform entry points.

use std::ffi::c_void;

use opencl_sys::*;

use crate::api::entry::status_entry;
use crate::api::util::{write, write_info};
use crate::core::info;
use crate::core::object::{Cl, ClResult};
use crate::core::platform::{connection, Platform};

pub const NAME: &str = "vgpu";
pub const VENDOR: &str = "vgpu";
pub const VERSION: &str = "OpenCL 3.0 vgpu";
pub const PROFILE: &str = "FULL_PROFILE";
pub const EXTENSIONS: &str = "cl_khr_icd";
pub const ICD_SUFFIX: &str = "vgpu";

/// `CL_MAKE_VERSION(major, minor, patch)`.
pub const fn make_version(major: u32, minor: u32, patch: u32) -> u32 {
    (major << 22) | (minor << 12) | patch
}

status_entry! {
    fn clIcdGetPlatformIDsKHR(num_entries: cl_uint, platforms: *mut cl_platform_id, num_platforms: *mut cl_uint) => get_platform_ids;
    fn clGetPlatformIDs(num_entries: cl_uint, platforms: *mut cl_platform_id, num_platforms: *mut cl_uint) => get_platform_ids;
    fn clGetPlatformInfo(platform: cl_platform_id, param_name: cl_platform_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_platform_info;
    fn clUnloadPlatformCompiler(platform: cl_platform_id) => unload_platform_compiler;
    fn clUnloadCompiler() => unload_compiler;
}

fn get_platform_ids(
    num_entries: cl_uint,
    platforms: *mut cl_platform_id,
    num_platforms: *mut cl_uint,
) -> ClResult<()> {
    // CL_INVALID_VALUE if num_entries is zero and platforms is not NULL, or
    // if both num_platforms and platforms are NULL.
    if num_entries == 0 && !platforms.is_null() || num_platforms.is_null() && platforms.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let Some(connection) = connection() else {
        write(num_platforms, 0);
        return Err(CL_PLATFORM_NOT_FOUND_KHR);
    };
    write(platforms, connection.platform.as_ptr());
    write(num_platforms, 1);
    Ok(())
}

fn get_platform_info(
    platform: cl_platform_id,
    param: cl_platform_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    crate::core::platform::platform_or_default(platform)?;
    let bytes = match param {
        CL_PLATFORM_PROFILE => info::string(PROFILE),
        CL_PLATFORM_VERSION => info::string(VERSION),
        CL_PLATFORM_NAME => info::string(NAME),
        CL_PLATFORM_VENDOR => info::string(VENDOR),
        CL_PLATFORM_EXTENSIONS => info::string(EXTENSIONS),
        CL_PLATFORM_ICD_SUFFIX_KHR => info::string(ICD_SUFFIX),
        CL_PLATFORM_HOST_TIMER_RESOLUTION => info::u64(0),
        CL_PLATFORM_NUMERIC_VERSION => info::u32(make_version(3, 0, 0)),
        CL_PLATFORM_EXTENSIONS_WITH_VERSION => {
            info::name_version(make_version(1, 0, 0), EXTENSIONS)
        }
        // CL_INVALID_VALUE if param_name is not one of the supported values.
        _ => return Err(CL_INVALID_VALUE),
    };
    write_info(&bytes, size, value, size_ret)
}

fn unload_platform_compiler(platform: cl_platform_id) -> ClResult<()> {
    // CL_INVALID_PLATFORM if platform is not a valid platform. Otherwise a
    // hint: nothing to do.
    Cl::<Platform>::get(platform).map(drop)
}

fn unload_compiler() -> ClResult<()> {
    Ok(())
}
