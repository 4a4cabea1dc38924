//! What each kernel argument may be given. OpenCL implementations read a
//! pointer argument's value as a host `cl_mem`, so bytes from a guest must
//! never reach one: every argument is classified from the kernel's argument
//! info, and a value of the wrong class is refused.

use cl3::types::cl_kernel;
use vgpu_protocol::Status;

use super::objects::ArgRecord;

/// Build option the backend adds so argument info is always available.
pub const ARG_INFO_OPTION: &str = " -cl-kernel-arg-info";

const ADDRESS_QUALIFIER: u32 = 0x1196; // CL_KERNEL_ARG_ADDRESS_QUALIFIER
const ACCESS_QUALIFIER: u32 = 0x1197; // CL_KERNEL_ARG_ACCESS_QUALIFIER
const TYPE_NAME: u32 = 0x1198; // CL_KERNEL_ARG_TYPE_NAME
const ACCESS_NONE: u32 = 0x11A3;
const ADDRESS_GLOBAL: u32 = 0x119B;
const ADDRESS_LOCAL: u32 = 0x119C;
const ADDRESS_CONSTANT: u32 = 0x119D;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgClass {
    /// `global` or `constant` pointer: a buffer or NULL.
    Buffer,
    /// `local` pointer: a size.
    Local,
    /// Plain data passed by value.
    Value,
    /// An image: an image memory object.
    Image,
    /// A `sampler_t`: a sampler.
    Sampler,
    /// Queues, pipes, events: not forwarded.
    Object,
    /// The implementation gave no argument info: only values and buffers
    /// the guest names by handle are accepted, and values never take the
    /// size of a pointer.
    Unknown,
}

fn u32_of(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?))
}

/// Classifies one argument of a host kernel. Images and samplers first:
/// implementations report images as `global`.
pub fn classify(kernel: cl_kernel, index: u32) -> ArgClass {
    let name = cl3::kernel::get_kernel_arg_data(kernel, index, TYPE_NAME).unwrap_or_default();
    let name = String::from_utf8_lossy(&name);
    let name = name.trim_end_matches('\0').trim();
    let access = cl3::kernel::get_kernel_arg_data(kernel, index, ACCESS_QUALIFIER)
        .ok()
        .and_then(|b| u32_of(&b));
    // Only images (and pipes) carry an access qualifier other than NONE.
    if name.starts_with("image") && access.is_some_and(|a| a != ACCESS_NONE) {
        return ArgClass::Image;
    }
    if name == "sampler_t" {
        return ArgClass::Sampler;
    }
    let Some(qualifier) = cl3::kernel::get_kernel_arg_data(kernel, index, ADDRESS_QUALIFIER)
        .ok()
        .and_then(|b| u32_of(&b))
    else {
        return ArgClass::Unknown;
    };
    match qualifier {
        ADDRESS_GLOBAL | ADDRESS_CONSTANT => ArgClass::Buffer,
        ADDRESS_LOCAL => ArgClass::Local,
        _ => {
            let object = ["image", "sampler_t", "queue_t", "pipe", "event_t"]
                .iter()
                .any(|t| name.contains(t));
            if object {
                ArgClass::Object
            } else {
                ArgClass::Value
            }
        }
    }
}

/// Whether `arg` may be given to an argument of `class`; a value of
/// all-zero pointer size for a buffer argument means NULL.
pub fn admit(class: ArgClass, arg: ArgRecord) -> Result<ArgRecord, Status> {
    let pointer = std::mem::size_of::<cl3::types::cl_mem>();
    match (class, arg) {
        (ArgClass::Object, _) => Err(Status::INVALID_ARG_VALUE),
        (ArgClass::Image, ArgRecord::Mem(mem)) if mem.image.is_some() => Ok(ArgRecord::Mem(mem)),
        (ArgClass::Image, ArgRecord::Mem(_)) => Err(Status::INVALID_MEM_OBJECT),
        (ArgClass::Image, _) => Err(Status::INVALID_ARG_VALUE),
        (ArgClass::Sampler, arg @ ArgRecord::Sampler(_)) => Ok(arg),
        // The size is checked before the value, as natively: bytes of
        // another size than a cl_sampler are CL_INVALID_ARG_SIZE.
        (ArgClass::Sampler, ArgRecord::Value(v)) if v.len() != pointer => {
            Err(Status::INVALID_ARG_SIZE)
        }
        (ArgClass::Sampler, ArgRecord::Local(size)) if size as usize != pointer => {
            Err(Status::INVALID_ARG_SIZE)
        }
        (ArgClass::Sampler, _) => Err(Status::INVALID_SAMPLER),
        (_, ArgRecord::Sampler(_)) => Err(Status::INVALID_ARG_VALUE),
        // An image stands in for no buffer: the device would read its
        // descriptor as memory.
        // SVM addresses were checked against the session's allocations.
        (ArgClass::Buffer | ArgClass::Unknown, arg @ ArgRecord::Svm(..)) => Ok(arg),
        (_, ArgRecord::Svm(..)) => Err(Status::INVALID_ARG_VALUE),
        (ArgClass::Buffer, ArgRecord::Mem(mem)) if mem.image.is_some() => {
            Err(Status::INVALID_MEM_OBJECT)
        }
        (ArgClass::Buffer, ArgRecord::Value(v))
            if v.len() == pointer && v.iter().all(|b| *b == 0) =>
        {
            Ok(ArgRecord::NullMem)
        }
        (ArgClass::Buffer, ArgRecord::Value(v)) if v.len() != pointer => {
            Err(Status::INVALID_ARG_SIZE)
        }
        (ArgClass::Buffer, ArgRecord::Value(_)) => Err(Status::INVALID_MEM_OBJECT),
        (ArgClass::Buffer, ArgRecord::Local(size)) if size as usize == pointer => {
            Ok(ArgRecord::NullMem)
        }
        (ArgClass::Buffer, ArgRecord::Local(_)) => Err(Status::INVALID_ARG_SIZE),
        (ArgClass::Local, ArgRecord::Local(0)) => Err(Status::INVALID_ARG_SIZE),
        (ArgClass::Local, arg @ ArgRecord::Local(_)) => Ok(arg),
        (ArgClass::Local, _) => Err(Status::INVALID_ARG_VALUE),
        (ArgClass::Value, ArgRecord::Mem(_) | ArgRecord::NullMem | ArgRecord::Local(_)) => {
            Err(Status::INVALID_ARG_VALUE)
        }
        (ArgClass::Unknown, ArgRecord::Value(v)) if v.len() == pointer => {
            Err(Status::INVALID_ARG_VALUE)
        }
        (_, arg) => Ok(arg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sampler_argument_checks_the_size_before_the_value() {
        let admitted = |arg| admit(ArgClass::Sampler, arg).err();
        for size in [4, 16] {
            assert_eq!(
                admitted(ArgRecord::Value(vec![0; size])),
                Some(Status::INVALID_ARG_SIZE)
            );
            assert_eq!(
                admitted(ArgRecord::Local(size as u64)),
                Some(Status::INVALID_ARG_SIZE)
            );
        }
        assert_eq!(
            admitted(ArgRecord::Value(vec![7; 8])),
            Some(Status::INVALID_SAMPLER)
        );
    }

    #[test]
    fn guest_bytes_never_reach_a_buffer_argument() {
        assert_eq!(
            admit(ArgClass::Buffer, ArgRecord::Value(vec![1; 8])).err(),
            Some(Status::INVALID_MEM_OBJECT)
        );
        assert!(matches!(
            admit(ArgClass::Buffer, ArgRecord::Value(vec![0; 8])),
            Ok(ArgRecord::NullMem)
        ));
        assert!(matches!(
            admit(ArgClass::Buffer, ArgRecord::Local(8)),
            Ok(ArgRecord::NullMem)
        ));
        assert_eq!(
            admit(ArgClass::Unknown, ArgRecord::Value(vec![7; 8])).err(),
            Some(Status::INVALID_ARG_VALUE)
        );
    }

    #[test]
    fn buffers_never_reach_a_value_argument() {
        assert_eq!(
            admit(ArgClass::Value, ArgRecord::NullMem).err(),
            Some(Status::INVALID_ARG_VALUE)
        );
        assert_eq!(
            admit(ArgClass::Object, ArgRecord::Value(vec![0; 4])).err(),
            Some(Status::INVALID_ARG_VALUE)
        );
        assert!(matches!(
            admit(ArgClass::Value, ArgRecord::Value(vec![0; 4])),
            Ok(ArgRecord::Value(_))
        ));
    }

    #[test]
    fn local_arguments_take_a_nonzero_size() {
        assert_eq!(
            admit(ArgClass::Local, ArgRecord::Local(0)).err(),
            Some(Status::INVALID_ARG_SIZE)
        );
        assert_eq!(
            admit(ArgClass::Local, ArgRecord::Value(vec![0; 4])).err(),
            Some(Status::INVALID_ARG_VALUE)
        );
    }
}
