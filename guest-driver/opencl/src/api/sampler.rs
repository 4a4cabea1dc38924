//! Sampler entry points. A sampler's state is known here, so info queries
//! never reach the device; creation is deferred like every create.

use std::ffi::c_void;

use opencl_sys::*;
use vgpu_protocol::messages::CreateSampler;

use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{properties, write_info};
use crate::core::context::Context;
use crate::core::image::Sampler;
use crate::core::info;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;

object_entry! {
    fn clCreateSampler(context: cl_context, normalized_coords: cl_bool, addressing_mode: cl_addressing_mode, filter_mode: cl_filter_mode) -> cl_sampler => create_sampler;
    fn clCreateSamplerWithProperties(context: cl_context, sampler_properties: *const cl_sampler_properties) -> cl_sampler => create_sampler_with_properties;
}

status_entry! {
    fn clRetainSampler(sampler: cl_sampler) => Cl::<Sampler>::retain;
    fn clReleaseSampler(sampler: cl_sampler) => Cl::<Sampler>::release;
    fn clGetSamplerInfo(sampler: cl_sampler, param_name: cl_sampler_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_sampler_info;
}

const ADDRESSING: [cl_addressing_mode; 5] = [
    CL_ADDRESS_NONE,
    CL_ADDRESS_CLAMP_TO_EDGE,
    CL_ADDRESS_CLAMP,
    CL_ADDRESS_REPEAT,
    CL_ADDRESS_MIRRORED_REPEAT,
];

fn new_sampler(
    context: cl_context,
    normalized: cl_bool,
    addressing: cl_addressing_mode,
    filter: cl_filter_mode,
    given: Vec<cl_sampler_properties>,
) -> ClResult<cl_sampler> {
    // CL_INVALID_CONTEXT if context is not a valid context.
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_VALUE if addressing_mode, filter_mode or
    // normalized_coords is not valid.
    if !ADDRESSING.contains(&addressing)
        || ![CL_FILTER_NEAREST, CL_FILTER_LINEAR].contains(&filter)
        || normalized > CL_TRUE
    {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_OPERATION if images are not supported by any device
    // associated with context.
    if context.device.number(CL_DEVICE_IMAGE_SUPPORT)? == 0 {
        return Err(CL_INVALID_OPERATION);
    }
    let client = platform::client()?;
    let sampler = client.new_handle();
    let create = CreateSampler {
        sampler,
        context: context.handle(),
        properties: vec![
            CL_SAMPLER_NORMALIZED_COORDS as u64,
            normalized as u64,
            CL_SAMPLER_ADDRESSING_MODE as u64,
            addressing as u64,
            CL_SAMPLER_FILTER_MODE as u64,
            filter as u64,
        ],
    };
    client.defer(create.into()).map_err(|s| s.0)?;
    let object = Cl::publish(
        sampler,
        Sampler {
            context,
            normalized: normalized == CL_TRUE,
            addressing,
            filter,
            properties: given,
        },
    );
    Ok(object.as_ptr())
}

fn create_sampler(
    context: cl_context,
    normalized: cl_bool,
    addressing: cl_addressing_mode,
    filter: cl_filter_mode,
) -> ClResult<cl_sampler> {
    new_sampler(context, normalized, addressing, filter, Vec::new())
}

fn create_sampler_with_properties(
    context: cl_context,
    props: *const cl_sampler_properties,
) -> ClResult<cl_sampler> {
    // Defaults: normalized coordinates, CLAMP, NEAREST.
    let (mut normalized, mut addressing, mut filter) =
        (CL_TRUE, CL_ADDRESS_CLAMP, CL_FILTER_NEAREST);
    let list = properties(props, CL_INVALID_VALUE)?;
    let pairs = &list[..list.len().saturating_sub(1)];
    let mut seen = Vec::new();
    for pair in pairs.chunks(2) {
        let [name, value] = *pair else {
            return Err(CL_INVALID_VALUE);
        };
        // CL_INVALID_VALUE if a property name is not supported, or is
        // given twice.
        if seen.contains(&name) {
            return Err(CL_INVALID_VALUE);
        }
        seen.push(name);
        match name as cl_uint {
            CL_SAMPLER_NORMALIZED_COORDS => normalized = value as cl_bool,
            CL_SAMPLER_ADDRESSING_MODE => addressing = value as cl_addressing_mode,
            CL_SAMPLER_FILTER_MODE => filter = value as cl_filter_mode,
            _ => return Err(CL_INVALID_VALUE),
        }
    }
    new_sampler(context, normalized, addressing, filter, list)
}

fn get_sampler_info(
    sampler: cl_sampler,
    param: cl_sampler_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let sampler = Cl::<Sampler>::get(sampler)?;
    let bytes = match param {
        CL_SAMPLER_REFERENCE_COUNT => info::u32(sampler.ref_count()),
        CL_SAMPLER_CONTEXT => info::ptr(sampler.context.as_ptr()),
        CL_SAMPLER_NORMALIZED_COORDS => info::u32(sampler.normalized as cl_bool),
        CL_SAMPLER_ADDRESSING_MODE => info::u32(sampler.addressing),
        CL_SAMPLER_FILTER_MODE => info::u32(sampler.filter),
        CL_SAMPLER_PROPERTIES => info::u64s(&sampler.properties),
        _ => return Err(CL_INVALID_VALUE),
    };
    write_info(&bytes, size, value, size_ret)
}
