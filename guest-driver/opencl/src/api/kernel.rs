//! Kernel entry points.

use std::ffi::{c_char, c_void};
use std::sync::Arc;

use opencl_sys::*;
use vgpu_protocol::messages::{CloneKernel, CreateKernel, SetKernelArg};
use vgpu_protocol::{ArgKind, InfoTarget};

use crate::api::context::check_device;
use crate::api::entry::{object_entry, status_entry};
use crate::api::util::{bytes, c_str, read, write, write_info};
use crate::core::info;
use crate::core::kernel::Kernel;
use crate::core::memory::Mem;
use crate::core::object::{Cl, ClResult};
use crate::core::platform;
use crate::core::program::Program;

object_entry! {
    fn clCreateKernel(program: cl_program, kernel_name: *const c_char) -> cl_kernel => create_kernel;
    fn clCloneKernel(source_kernel: cl_kernel) -> cl_kernel => clone_kernel;
}

status_entry! {
    fn clCreateKernelsInProgram(program: cl_program, num_kernels: cl_uint, kernels: *mut cl_kernel, num_kernels_ret: *mut cl_uint) => create_kernels_in_program;
    fn clRetainKernel(kernel: cl_kernel) => Cl::<Kernel>::retain;
    fn clReleaseKernel(kernel: cl_kernel) => Cl::<Kernel>::release;
    fn clSetKernelArg(kernel: cl_kernel, arg_index: cl_uint, arg_size: usize, arg_value: *const c_void) => set_kernel_arg;
    fn clGetKernelInfo(kernel: cl_kernel, param_name: cl_kernel_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_kernel_info;
    fn clGetKernelWorkGroupInfo(kernel: cl_kernel, device: cl_device_id, param_name: cl_kernel_work_group_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_kernel_work_group_info;
    fn clGetKernelArgInfo(kernel: cl_kernel, arg_index: cl_uint, param_name: cl_kernel_arg_info, param_value_size: usize, param_value: *mut c_void, param_value_size_ret: *mut usize) => get_kernel_arg_info;
}

/// Whether creating a kernel may be batched (its name is known to be in
/// the program) or must wait for the backend's answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Creation {
    Deferred,
    Checked,
}

/// Creates kernel `name` of an executable program.
fn new_kernel(
    program: &Arc<Cl<Program>>,
    name: String,
    creation: Creation,
) -> ClResult<Arc<Cl<Kernel>>> {
    let client = platform::client()?;
    let kernel = client.new_handle();
    let create = CreateKernel {
        kernel,
        program: program.handle(),
        name: name.clone().into_bytes(),
    };
    match creation {
        Creation::Deferred => client.defer(create.into()).map_err(|s| s.0)?,
        Creation::Checked => drop(client.call(create.into()).map_err(|s| s.0)?),
    }
    Ok(Cl::publish(kernel, Kernel::new(program.clone(), name)))
}

fn create_kernel(program: cl_program, name: *const c_char) -> ClResult<cl_kernel> {
    let program = Cl::<Program>::get(program)?;
    // CL_INVALID_VALUE if kernel_name is NULL.
    let name = c_str(name)?.to_string_lossy().into_owned();
    // CL_INVALID_PROGRAM_EXECUTABLE if there is no successfully built
    // executable for program.
    if !program.is_executable() {
        return Err(CL_INVALID_PROGRAM_EXECUTABLE);
    }
    // CL_INVALID_KERNEL_NAME if kernel_name is not found in program: from
    // the names when the application listed them already, else from the
    // driver's own clCreateKernel. The list is not asked for this: NVIDIA's
    // driver aborts listing a kernel name of 512 bytes or more, which
    // clCreateKernel of that name does not (CTS kernel_name_size).
    let creation = match program.known_kernel_names() {
        Some(names) if !names.contains(&name) => return Err(CL_INVALID_KERNEL_NAME),
        Some(_) => Creation::Deferred,
        None => Creation::Checked,
    };
    Ok(new_kernel(&program, name, creation)?.as_ptr())
}

fn create_kernels_in_program(
    program: cl_program,
    num_kernels: cl_uint,
    kernels: *mut cl_kernel,
    num_kernels_ret: *mut cl_uint,
) -> ClResult<()> {
    let program = Cl::<Program>::get(program)?;
    let names = program.kernel_names()?;
    // CL_INVALID_VALUE if kernels is not NULL and num_kernels is less than
    // the number of kernels in program.
    if !kernels.is_null() && (num_kernels as usize) < names.len() {
        return Err(CL_INVALID_VALUE);
    }
    if !kernels.is_null() {
        for (i, name) in names.iter().enumerate() {
            let kernel = new_kernel(&program, name.clone(), Creation::Deferred)?;
            write(kernels.wrapping_add(i), kernel.as_ptr());
        }
    }
    write(num_kernels_ret, names.len() as cl_uint);
    Ok(())
}

fn clone_kernel(source: cl_kernel) -> ClResult<cl_kernel> {
    let source = Cl::<Kernel>::get(source)?;
    let client = platform::client()?;
    let kernel = client.new_handle();
    client
        .defer(
            CloneKernel {
                kernel,
                source: source.handle(),
            }
            .into(),
        )
        .map_err(|s| s.0)?;
    Ok(Cl::publish(kernel, Kernel::cloned_from(&source)).as_ptr())
}

/// How an argument value travels: a live memory object of the kernel's
/// context by handle; a pointer to a NULL `cl_mem` for a buffer argument as
/// a NULL buffer; a NULL `arg_value` as `__local` memory of `arg_size`
/// bytes; anything else as bytes. Values of pointer size, and the first
/// value of every shape, are checked against the argument's address
/// qualifier (asked once per argument), so bytes never stand in for a
/// buffer and a wrong size is reported as the spec says.
fn classify(
    kernel: &Cl<Kernel>,
    index: u32,
    size: usize,
    value: *const c_void,
) -> ClResult<(ArgKind, u64, Vec<u8>)> {
    if value.is_null() {
        return Ok((ArgKind::Local, 0, Vec::new()));
    }
    let pointer = std::mem::size_of::<cl_mem>();
    if size == pointer {
        let ptr: cl_mem = read(value as *const cl_mem)?;
        if let Ok(mem) = Cl::<Mem>::get(ptr) {
            // CL_INVALID_MEM_OBJECT for a memory object of another context.
            if !Arc::ptr_eq(&mem.context, &kernel.program.context) {
                return Err(CL_INVALID_MEM_OBJECT);
            }
            return Ok((ArgKind::Mem, mem.handle(), Vec::new()));
        }
        if let Ok(sampler) = Cl::<crate::core::image::Sampler>::get(ptr) {
            // CL_INVALID_SAMPLER for a sampler of another context.
            if !Arc::ptr_eq(&sampler.context, &kernel.program.context) {
                return Err(CL_INVALID_SAMPLER);
            }
            return Ok((ArgKind::Sampler, sampler.handle(), Vec::new()));
        }
        if kernel.arg_is_buffer(index) == Some(true) {
            // CL_INVALID_MEM_OBJECT for a buffer argument whose value is
            // not a valid memory object (a released one, say).
            return match ptr.is_null() {
                true => Ok((ArgKind::NullMem, 0, Vec::new())),
                false => Err(CL_INVALID_MEM_OBJECT),
            };
        }
    } else if !kernel.accepted_before(index, ArgKind::Value, size as u64)
        && kernel.arg_is_buffer(index) == Some(true)
    {
        // CL_INVALID_ARG_SIZE if arg_size does not match the size of the
        // argument's data type (a buffer takes a cl_mem).
        return Err(CL_INVALID_ARG_SIZE);
    }
    Ok((ArgKind::Value, 0, bytes(value, size)?.to_vec()))
}

fn set_kernel_arg(
    kernel: cl_kernel,
    index: cl_uint,
    size: usize,
    value: *const c_void,
) -> ClResult<()> {
    let kernel = Cl::<Kernel>::get(kernel)?;
    // CL_INVALID_ARG_INDEX if arg_index is not a valid argument index.
    if index >= kernel.num_args()? {
        return Err(CL_INVALID_ARG_INDEX);
    }
    // CL_INVALID_ARG_SIZE if arg_size is too large for one message.
    if size > vgpu_protocol::limits::MAX_BYTES_FIELD as usize {
        return Err(CL_INVALID_ARG_SIZE);
    }
    let (kind, handle, value) = classify(&kernel, index, size, value)?;
    // The same argument again (a loop that sets every argument before each
    // launch) changes nothing on the backend: not sent.
    if kernel.holds_arg(index, kind, size as u64, handle, &value) {
        return Ok(());
    }
    let sent = value.clone();
    let set = SetKernelArg {
        kernel: kernel.handle(),
        index,
        arg_kind: kind as u32,
        size: size as u64,
        value,
        handle,
    };
    let client = platform::client()?;
    // The first value of each (index, kind, size) waits for the backend, so
    // a wrong size or kind is reported here as the spec requires; later
    // ones only differ in content, which was checked above, and are batched.
    if kernel.accepted_before(index, kind, size as u64) {
        client.defer(set.into()).map_err(|s| s.0)?;
    } else {
        client.call(set.into()).map_err(|s| s.0)?;
    }
    kernel.record_arg(index, kind, size as u64);
    kernel.remember_sent(index, kind, size as u64, handle, sent);
    Ok(())
}

fn get_kernel_info(
    kernel: cl_kernel,
    param: cl_kernel_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let kernel = Cl::<Kernel>::get(kernel)?;
    let bytes = match param {
        CL_KERNEL_FUNCTION_NAME => info::string(&kernel.name),
        CL_KERNEL_NUM_ARGS => info::u32(kernel.num_args()?),
        CL_KERNEL_REFERENCE_COUNT => info::u32(kernel.ref_count()),
        CL_KERNEL_CONTEXT => info::ptr(kernel.program.context.as_ptr()),
        CL_KERNEL_PROGRAM => info::ptr(kernel.program.as_ptr()),
        _ => info::remote(InfoTarget::Kernel, kernel.handle(), 0, param)?,
    };
    write_info(&bytes, size, value, size_ret)
}

fn get_kernel_work_group_info(
    kernel: cl_kernel,
    device: cl_device_id,
    param: cl_kernel_work_group_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let kernel = Cl::<Kernel>::get(kernel)?;
    // CL_INVALID_DEVICE if device is not in the list of devices associated
    // with kernel, or if device is NULL but there is more than one device
    // associated with kernel.
    if !device.is_null() || kernel.program.context.devices.len() > 1 {
        check_device(&kernel.program.context, device)?;
    }
    let bytes = kernel.work_group_info(param)?;
    write_info(&bytes, size, value, size_ret)
}

fn get_kernel_arg_info(
    kernel: cl_kernel,
    index: cl_uint,
    param: cl_kernel_arg_info,
    size: usize,
    value: *mut c_void,
    size_ret: *mut usize,
) -> ClResult<()> {
    let kernel = Cl::<Kernel>::get(kernel)?;
    // CL_INVALID_ARG_INDEX if arg_index is not a valid argument index.
    if index >= kernel.num_args()? {
        return Err(CL_INVALID_ARG_INDEX);
    }
    let bytes = info::remote(InfoTarget::KernelArg, kernel.handle(), index, param)?;
    write_info(&bytes, size, value, size_ret)
}
