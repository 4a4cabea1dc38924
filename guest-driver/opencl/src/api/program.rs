//! Program creation and query entry points.

use std::ffi::{c_char, c_uchar, c_void};

use opencl_sys::*;
use vgpu_protocol::messages::{
    CreateProgramWithBinary, CreateProgramWithIl, CreateProgramWithSource,
};
use vgpu_protocol::InfoTarget;

use crate::api::context::check_device;
use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{array, bytes, c_str, write, write_info};
use crate::core::context::Context;
use crate::core::info;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::program::{self, Origin, Program};

object_entry! {
    fn clCreateProgramWithSource(context: cl_context, count: cl_uint, strings: *mut *const c_char, lengths: *const usize) -> cl_program => create_program_with_source;
    fn clCreateProgramWithBinary(context: cl_context, num_devices: cl_uint, device_list: *const cl_device_id, lengths: *const usize, binaries: *mut *const c_uchar, binary_status: *mut cl_int) -> cl_program => create_program_with_binary;
    fn clCreateProgramWithIL(context: cl_context, il: *const c_void, length: usize) -> cl_program => create_program_with_il;
}

status_entry! {
    fn clRetainProgram(program: cl_program) => Cl::<Program>::retain;
    fn clReleaseProgram(program: cl_program) => Cl::<Program>::release;
    fn clGetProgramInfo(program: cl_program, param_name: cl_program_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_program_info;
    fn clGetProgramBuildInfo(program: cl_program, device: cl_device_id, param_name: cl_program_build_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_program_build_info;
}

/// Largest source, binary or IL one message carries.
const MAX_PROGRAM_BYTES: usize = vgpu_protocol::limits::MAX_BYTES_FIELD as usize;
/// Reply room for build logs.
const LOG_ROOM: usize = 4 << 20;

fn create_program_with_source(
    context: cl_context,
    count: cl_uint,
    strings: *mut *const c_char,
    lengths: *const usize,
) -> ClResult<cl_program> {
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_VALUE if count is zero or if strings or any entry in
    // strings is NULL.
    if count == 0 || strings.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let strings = array(strings as *const *const c_char, count as usize)?;
    let lengths = if lengths.is_null() {
        None
    } else {
        Some(array(lengths, count as usize)?)
    };
    let mut source = Vec::new();
    for (i, &s) in strings.iter().enumerate() {
        let len = lengths.map_or(0, |l| l[i]);
        if s.is_null() {
            return Err(CL_INVALID_VALUE);
        }
        if len == 0 {
            source.extend_from_slice(c_str(s)?.to_bytes());
        } else {
            source.extend_from_slice(bytes(s as *const c_void, len)?);
        }
    }
    if source.len() > MAX_PROGRAM_BYTES {
        return Err(CL_OUT_OF_RESOURCES);
    }
    let client = platform::client()?;
    let program = client.new_handle();
    let sent = program::source_to_create(&source);
    let create = CreateProgramWithSource {
        program,
        context: context.handle(),
        source: sent.clone(),
    };
    client.defer(create.into()).map_err(|s| s.0)?;
    let object = Program::new(context, Origin::Source(source), false);
    object.created_from(sent);
    Ok(Cl::publish(program, object).as_ptr())
}

fn create_program_with_binary(
    context: cl_context,
    num_devices: cl_uint,
    devices: *const cl_device_id,
    lengths: *const usize,
    binaries: *mut *const c_uchar,
    binary_status: *mut cl_int,
) -> ClResult<cl_program> {
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_VALUE if device_list is NULL or num_devices is zero.
    if devices.is_null() || num_devices == 0 {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_DEVICE if a device in device_list is not in the context.
    let devices = array(devices, num_devices as usize)?;
    for &device in devices {
        check_device(&context, device)?;
    }
    // CL_INVALID_VALUE if lengths or binaries is NULL or if any entry in
    // lengths[i] is zero or binaries[i] is NULL.
    if lengths.is_null() || binaries.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let lengths = array(lengths, devices.len())?;
    let binaries = array(binaries as *const *const c_uchar, devices.len())?;
    let statuses = if binary_status.is_null() {
        None
    } else {
        Some(binary_status)
    };
    for i in 0..devices.len() {
        if lengths[i] == 0 || binaries[i].is_null() {
            if let Some(s) = statuses {
                write(s.wrapping_add(i), CL_INVALID_VALUE);
            }
            return Err(CL_INVALID_VALUE);
        }
    }
    if lengths[0] > MAX_PROGRAM_BYTES {
        return Err(CL_INVALID_BINARY);
    }
    let binary = bytes(binaries[0] as *const c_void, lengths[0])?.to_vec();
    let client = platform::client()?;
    let program = client.new_handle();
    // The reply status is the binary status.
    let create = CreateProgramWithBinary {
        program,
        context: context.handle(),
        binary,
    };
    let result = client.call(create.into()).map(drop).map_err(|s| s.0);
    if let Some(s) = statuses {
        for i in 0..devices.len() {
            write(s.wrapping_add(i), result.err().unwrap_or(CL_SUCCESS));
        }
    }
    result?;
    Ok(Cl::publish(program, Program::new(context, Origin::Binary, false)).as_ptr())
}

fn create_program_with_il(
    context: cl_context,
    il: *const c_void,
    length: usize,
) -> ClResult<cl_program> {
    let context = Cl::<Context>::get(context)?;
    // CL_INVALID_VALUE if il is NULL or if length is zero.
    if il.is_null() || length == 0 {
        return Err(CL_INVALID_VALUE);
    }
    if length > MAX_PROGRAM_BYTES {
        return Err(CL_INVALID_VALUE);
    }
    let il = bytes(il, length)?.to_vec();
    let client = platform::client()?;
    let program = client.new_handle();
    // Sent at once: an IL the device cannot take is reported here.
    let create = CreateProgramWithIl {
        program,
        context: context.handle(),
        il: il.clone(),
    };
    client.call(create.into()).map_err(|s| s.0)?;
    Ok(Cl::publish(program, Program::new(context, Origin::Il(il), false)).as_ptr())
}

fn get_program_info(
    program: cl_program,
    param: cl_program_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let program = Cl::<Program>::get(program)?;
    let bytes = match param {
        CL_PROGRAM_REFERENCE_COUNT => info::u32(program.ref_count()),
        CL_PROGRAM_CONTEXT => info::ptr(program.context.as_ptr()),
        CL_PROGRAM_NUM_DEVICES => info::u32(program.context.devices.len() as u32),
        CL_PROGRAM_DEVICES => crate::api::context::devices_info(&program.context.devices),
        CL_PROGRAM_SOURCE => match &program.origin {
            Origin::Source(source) => info::string(&String::from_utf8_lossy(source)),
            _ => info::string(""),
        },
        CL_PROGRAM_IL => match &program.origin {
            Origin::Il(il) => il.clone(),
            _ => Vec::new(),
        },
        CL_PROGRAM_BINARIES => return get_binaries(&program, size, value, size_ret),
        _ => info::remote(InfoTarget::Program, program.handle(), 0, param)?,
    };
    write_info(&bytes, size, value, size_ret)
}

/// `CL_PROGRAM_BINARIES`: `param_value` is an array of one pointer per
/// device, each to memory of the size `CL_PROGRAM_BINARY_SIZES` gave; a
/// NULL entry skips that device.
fn get_binaries(
    program: &Cl<Program>,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let slot = std::mem::size_of::<*mut c_uchar>();
    let devices = program.context.devices.len();
    write(size_ret, slot * devices);
    if value.is_null() {
        return Ok(());
    }
    if size < slot * devices {
        return Err(CL_INVALID_VALUE);
    }
    let targets = array(value as *const *mut c_uchar, devices)?;
    if targets.iter().all(|t| t.is_null()) {
        return Ok(());
    }
    let sizes = info::remote(
        InfoTarget::Program,
        program.handle(),
        0,
        CL_PROGRAM_BINARY_SIZES,
    )?;
    let len = info::le_number(&sizes[..sizes.len().min(8)]) as usize;
    // Every device of a context is the backend's device or a part of it:
    // the backend hands out one binary, good for each of them.
    let binary = info::remote_with_room(
        InfoTarget::Program,
        program.handle(),
        0,
        CL_PROGRAM_BINARIES,
        len + 64,
    )?;
    let n = binary.len().min(len);
    for &target in targets.iter().filter(|t| !t.is_null()) {
        crate::api::util::bytes_mut(target as *mut c_void, n)?.copy_from_slice(&binary[..n]);
    }
    Ok(())
}

fn get_program_build_info(
    program: cl_program,
    device: cl_device_id,
    param: cl_program_build_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let program = Cl::<Program>::get(program)?;
    // CL_INVALID_DEVICE if device is not in the list of devices associated
    // with program.
    check_device(&program.context, device)?;
    if param == CL_PROGRAM_BUILD_OPTIONS {
        if let Some(options) = program.options() {
            let text = String::from_utf8_lossy(&options).into_owned();
            return write_info(&info::string(&text), size, value, size_ret);
        }
    }
    let room = if param == CL_PROGRAM_BUILD_LOG {
        LOG_ROOM
    } else {
        vgpu_transport::client::DEFAULT_REPLY_ROOM
    };
    let bytes = info::remote_with_room(InfoTarget::ProgramBuild, program.handle(), 0, param, room)?;
    write_info(&bytes, size, value, size_ret)
}
