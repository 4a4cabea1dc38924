//! Argument classes the device itself shows when it gave no argument info.
//!
//! NVIDIA's compiler (580) fails every program that holds an argument-less
//! kernel under `-cl-kernel-arg-info`, so such programs are built without
//! it (`create::arg_info_or_not`) and all their arguments are of unknown
//! class. `args::admit` then refuses bytes of pointer size, which could be
//! read as a host `cl_mem`: 8-byte structs, `long`s and `double`s with
//! them (CTS `clone_kernel_with_buf_image_kernels`, natively fine).
//!
//! An argument is plain data when the device, on a scratch kernel of the
//! same function, refuses a NULL `arg_value` of pointer size (a `global`
//! or `constant` pointer takes it as a NULL buffer, a `local` one as its
//! size) and accepts both eight zero bytes and eight bytes naming a real
//! buffer (an image, sampler, queue or pipe refuses a NULL object; an
//! image refuses a buffer). Any other answer leaves the class unknown.

use std::ffi::{c_void, CStr};

use cl3::types::{cl_int, cl_kernel, cl_mem};

use super::args::ArgClass;
use super::objects::ProgramEntry;

const POINTER: usize = std::mem::size_of::<cl_mem>();
const SCRATCH_BYTES: usize = 64;

/// What the three probes of one argument gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Answers {
    null_value: bool,
    zero_bytes: bool,
    buffer_bytes: bool,
}

fn class_of(answers: Answers) -> ArgClass {
    match answers {
        Answers {
            null_value: false,
            zero_bytes: true,
            buffer_bytes: true,
        } => ArgClass::Value,
        _ => ArgClass::Unknown,
    }
}

/// Replaces `Unknown` in `classes` (of kernel `name` of `program`) by
/// `Value` where the device shows the argument is plain data.
pub fn refine(program: &ProgramEntry, name: &CStr, classes: &mut [ArgClass]) {
    if !classes.contains(&ArgClass::Unknown) {
        return;
    }
    let Ok(scratch) = cl3::kernel::create_kernel(program.program.0, name) else {
        return;
    };
    // SAFETY: a plain buffer of the program's context, no host pointer.
    let buffer = unsafe {
        cl3::memory::create_buffer(
            program.context.ctx.0,
            cl3::memory::CL_MEM_READ_WRITE,
            SCRATCH_BYTES,
            std::ptr::null_mut(),
        )
    };
    if let Ok(buffer) = buffer {
        for (index, class) in classes.iter_mut().enumerate() {
            if *class == ArgClass::Unknown {
                *class = class_of(probe(scratch, index as u32, buffer));
                log::debug!("kernel {name:?} argument {index} without argument info: {class:?}");
            }
        }
        // SAFETY: created above, released once.
        let _ = unsafe { cl3::memory::release_mem_object(buffer) };
    }
    // SAFETY: created above, released once; nothing else holds it.
    let _ = unsafe { cl3::kernel::release_kernel(scratch) };
}

fn probe(kernel: cl_kernel, index: u32, buffer: cl_mem) -> Answers {
    let set = |value: *const c_void| -> bool {
        // SAFETY: `value` is NULL (allowed by clSetKernelArg) or points
        // to POINTER readable bytes that live through the call.
        let result: Result<(), cl_int> =
            unsafe { cl3::kernel::set_kernel_arg(kernel, index, POINTER, value) };
        result.is_ok()
    };
    let null_value = set(std::ptr::null());
    if null_value {
        // A pointer (or local) argument: no need to ask more.
        return Answers {
            null_value,
            zero_bytes: false,
            buffer_bytes: false,
        };
    }
    let zeros = [0u8; POINTER];
    let zero_bytes = set(zeros.as_ptr() as *const c_void);
    let buffer_bytes = set(&buffer as *const cl_mem as *const c_void);
    Answers {
        null_value,
        zero_bytes,
        buffer_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_data_by_every_probe_becomes_a_value() {
        let answers = |null_value, zero_bytes, buffer_bytes| Answers {
            null_value,
            zero_bytes,
            buffer_bytes,
        };
        assert_eq!(class_of(answers(false, true, true)), ArgClass::Value);
        // A NULL accepted: a global, constant or local pointer.
        assert_eq!(class_of(answers(true, true, true)), ArgClass::Unknown);
        // A NULL object refused: an image, sampler, queue or pipe.
        assert_eq!(class_of(answers(false, false, true)), ArgClass::Unknown);
        // A buffer refused: an image.
        assert_eq!(class_of(answers(false, true, false)), ArgClass::Unknown);
        // A value of another size refuses all three.
        assert_eq!(class_of(answers(false, false, false)), ArgClass::Unknown);
    }
}
