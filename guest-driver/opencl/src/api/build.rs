//! Building, compiling and linking programs. These wait for the backend
//! (the build log and status are wanted at once); a notification callback,
//! when given, runs before the call returns.

use std::ffi::{c_char, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::messages::{BuildProgram, CompileProgram, LinkProgram};

use crate::api::context::check_device;
use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{array, c_str, opt_c_str};
use crate::core::callback::{ObjectCallback, ObjectFn};
use crate::core::context::Context;
use crate::core::include::{self, Search};
use crate::core::object::{Cl, ClResult, RawPtr};
use crate::core::platform;
use crate::core::program::{Origin, Program};

status_entry! {
    fn clBuildProgram(program: cl_program, num_devices: cl_uint, device_list: *const cl_device_id, options: *const c_char, pfn_notify: Option<ObjectFn>, user_data: *mut c_void) => build_program;
    fn clCompileProgram(program: cl_program, num_devices: cl_uint, device_list: *const cl_device_id, options: *const c_char, num_input_headers: cl_uint, input_headers: *const cl_program, header_include_names: *mut *const c_char, pfn_notify: Option<ObjectFn>, user_data: *mut c_void) => compile_program;
}

object_entry! {
    fn clLinkProgram(context: cl_context, num_devices: cl_uint, device_list: *const cl_device_id, options: *const c_char, num_input_programs: cl_uint, input_programs: *const cl_program, pfn_notify: Option<ObjectFn>, user_data: *mut c_void) -> cl_program => link_program;
}

/// The checks common to build, compile and link: CL_INVALID_VALUE if
/// device_list is NULL and num_devices is greater than zero or the reverse,
/// or if pfn_notify is NULL but user_data is not; CL_INVALID_DEVICE if a
/// listed device is not the context's.
fn check_common(
    context: &Arc<Cl<Context>>,
    num_devices: cl_uint,
    devices: *const cl_device_id,
    pfn_notify: Option<ObjectFn>,
    user_data: *mut c_void,
) -> ClResult<Option<ObjectCallback>> {
    if devices.is_null() != (num_devices == 0) {
        return Err(CL_INVALID_VALUE);
    }
    for &device in array(devices, num_devices as usize)? {
        check_device(context, device)?;
    }
    match pfn_notify {
        Some(pfn) => Ok(Some(ObjectCallback {
            pfn,
            data: RawPtr::new(user_data),
        })),
        None if user_data.is_null() => Ok(None),
        None => Err(CL_INVALID_VALUE),
    }
}

fn build_program(
    program: cl_program,
    num_devices: cl_uint,
    devices: *const cl_device_id,
    options: *const c_char,
    pfn_notify: Option<ObjectFn>,
    user_data: *mut c_void,
) -> ClResult<()> {
    let program = Cl::<Program>::get(program)?;
    let notify = check_common(
        &program.context,
        num_devices,
        devices,
        pfn_notify,
        user_data,
    )?;
    // CL_INVALID_OPERATION if there are kernel objects attached to program.
    if program.kernels.load(Ordering::Relaxed) > 0 {
        return Err(CL_INVALID_OPERATION);
    }
    let options = opt_c_str(options)?;
    // Include paths are the guest's: resolved here, never sent.
    let (host_options, dirs) = include::split_options(&options);
    program.resolve_includes(&Search::files(dirs))?;
    let build = BuildProgram {
        program: program.handle(),
        options: host_options,
    };
    let result = platform::client()?
        .call(build.into())
        .map(drop)
        .map_err(|s| s.0);
    program.built(result.is_ok(), options);
    if let Some(callback) = notify {
        callback.call(program.as_ptr());
    }
    result
}

fn compile_program(
    program: cl_program,
    num_devices: cl_uint,
    devices: *const cl_device_id,
    options: *const c_char,
    num_headers: cl_uint,
    headers: *const cl_program,
    header_names: *mut *const c_char,
    pfn_notify: Option<ObjectFn>,
    user_data: *mut c_void,
) -> ClResult<()> {
    let program = Cl::<Program>::get(program)?;
    let notify = check_common(
        &program.context,
        num_devices,
        devices,
        pfn_notify,
        user_data,
    )?;
    // CL_INVALID_VALUE if num_input_headers is zero and header_include_names
    // or input_headers are not NULL, or if num_input_headers is not zero
    // and either is NULL.
    if (num_headers == 0) != headers.is_null() || (num_headers == 0) != header_names.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    // CL_INVALID_OPERATION if program has no source or IL, or kernels are
    // attached.
    if matches!(program.origin, Origin::Binary | Origin::Linked)
        || program.kernels.load(Ordering::Relaxed) > 0
    {
        return Err(CL_INVALID_OPERATION);
    }
    // Embedded headers: each a program created from source, found by the
    // name `header_include_names` gives it.
    let mut embedded = Vec::new();
    let names = array(header_names as *const *const c_char, num_headers as usize)?;
    for (&header, &name) in array(headers, num_headers as usize)?.iter().zip(names) {
        let header = Cl::<Program>::get(header)?;
        let Origin::Source(text) = &header.origin else {
            return Err(CL_INVALID_PROGRAM);
        };
        let name = c_str(name)?.to_string_lossy().into_owned();
        embedded.push((name, text.clone()));
    }
    let options = opt_c_str(options)?;
    let (host_options, dirs) = include::split_options(&options);
    let search = Search {
        embedded,
        ..Search::files(dirs)
    };
    program.resolve_includes(&search)?;
    let compile = CompileProgram {
        program: program.handle(),
        options: host_options,
    };
    let result = platform::client()?
        .call(compile.into())
        .map(drop)
        .map_err(|s| s.0);
    program.built(false, options);
    if let Some(callback) = notify {
        callback.call(program.as_ptr());
    }
    result
}

fn link_program(
    context: cl_context,
    num_devices: cl_uint,
    devices: *const cl_device_id,
    options: *const c_char,
    num_inputs: cl_uint,
    inputs: *const cl_program,
    pfn_notify: Option<ObjectFn>,
    user_data: *mut c_void,
) -> ClResult<cl_program> {
    let context = Cl::<Context>::get(context)?;
    let notify = check_common(&context, num_devices, devices, pfn_notify, user_data)?;
    // CL_INVALID_VALUE if num_input_programs is zero or input_programs is
    // NULL; CL_INVALID_PROGRAM if a program in input_programs is not valid.
    if num_inputs == 0 || inputs.is_null() {
        return Err(CL_INVALID_VALUE);
    }
    let mut handles = Vec::new();
    for &input in array(inputs, num_inputs as usize)? {
        let input = Cl::<Program>::get(input)?;
        if !Arc::ptr_eq(&input.context, &context) {
            return Err(CL_INVALID_CONTEXT);
        }
        handles.push(input.handle());
    }
    let options = opt_c_str(options)?;
    let library = String::from_utf8_lossy(&options).contains("-create-library");
    let client = platform::client()?;
    let program = client.new_handle();
    let link = LinkProgram {
        program,
        context: context.handle(),
        options: options.clone(),
        inputs: handles,
    };
    client.call(link.into()).map_err(|s| s.0)?;
    let linked = Cl::publish(program, Program::new(context, Origin::Linked, !library));
    linked.built(!library, options);
    if let Some(callback) = notify {
        callback.call(linked.as_ptr());
    }
    Ok(linked.as_ptr())
}
