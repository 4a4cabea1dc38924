//! Status codes: one-to-one with OpenCL's `cl_int` error codes.
//!
//! CUDA results (positive `CUresult` values) travel in the same field for the
//! CUDA opcode range; the value is passed through unchanged.

use std::fmt;

/// A call's outcome as it travels on the wire.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub i32);

macro_rules! statuses {
    ($($name:ident = $value:literal,)*) => {
        impl Status {
            $(pub const $name: Status = Status($value);)*

            /// The OpenCL name of this code, if it has one.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($name)),)*
                    _ => None,
                }
            }
        }
    };
}

statuses! {
    SUCCESS = 0,
    DEVICE_NOT_FOUND = -1,
    DEVICE_NOT_AVAILABLE = -2,
    COMPILER_NOT_AVAILABLE = -3,
    MEM_OBJECT_ALLOCATION_FAILURE = -4,
    OUT_OF_RESOURCES = -5,
    OUT_OF_HOST_MEMORY = -6,
    PROFILING_INFO_NOT_AVAILABLE = -7,
    MEM_COPY_OVERLAP = -8,
    IMAGE_FORMAT_MISMATCH = -9,
    IMAGE_FORMAT_NOT_SUPPORTED = -10,
    BUILD_PROGRAM_FAILURE = -11,
    MAP_FAILURE = -12,
    MISALIGNED_SUB_BUFFER_OFFSET = -13,
    EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST = -14,
    COMPILE_PROGRAM_FAILURE = -15,
    LINKER_NOT_AVAILABLE = -16,
    LINK_PROGRAM_FAILURE = -17,
    DEVICE_PARTITION_FAILED = -18,
    KERNEL_ARG_INFO_NOT_AVAILABLE = -19,
    INVALID_VALUE = -30,
    INVALID_DEVICE_TYPE = -31,
    INVALID_PLATFORM = -32,
    INVALID_DEVICE = -33,
    INVALID_CONTEXT = -34,
    INVALID_QUEUE_PROPERTIES = -35,
    INVALID_COMMAND_QUEUE = -36,
    INVALID_HOST_PTR = -37,
    INVALID_MEM_OBJECT = -38,
    INVALID_IMAGE_FORMAT_DESCRIPTOR = -39,
    INVALID_IMAGE_SIZE = -40,
    INVALID_SAMPLER = -41,
    INVALID_BINARY = -42,
    INVALID_BUILD_OPTIONS = -43,
    INVALID_PROGRAM = -44,
    INVALID_PROGRAM_EXECUTABLE = -45,
    INVALID_KERNEL_NAME = -46,
    INVALID_KERNEL_DEFINITION = -47,
    INVALID_KERNEL = -48,
    INVALID_ARG_INDEX = -49,
    INVALID_ARG_VALUE = -50,
    INVALID_ARG_SIZE = -51,
    INVALID_KERNEL_ARGS = -52,
    INVALID_WORK_DIMENSION = -53,
    INVALID_WORK_GROUP_SIZE = -54,
    INVALID_WORK_ITEM_SIZE = -55,
    INVALID_GLOBAL_OFFSET = -56,
    INVALID_EVENT_WAIT_LIST = -57,
    INVALID_EVENT = -58,
    INVALID_OPERATION = -59,
    INVALID_GL_OBJECT = -60,
    INVALID_BUFFER_SIZE = -61,
    INVALID_MIP_LEVEL = -62,
    INVALID_GLOBAL_WORK_SIZE = -63,
    INVALID_PROPERTY = -64,
    INVALID_IMAGE_DESCRIPTOR = -65,
    INVALID_COMPILER_OPTIONS = -66,
    INVALID_LINKER_OPTIONS = -67,
    INVALID_DEVICE_PARTITION_COUNT = -68,
    INVALID_PIPE_SIZE = -69,
    INVALID_DEVICE_QUEUE = -70,
    INVALID_SPEC_ID = -71,
    MAX_SIZE_RESTRICTION_EXCEEDED = -72,
}

impl Status {
    pub fn is_success(self) -> bool {
        self.0 == 0
    }

    /// `Ok(())` for success, the status itself otherwise.
    pub fn result(self) -> Result<(), Status> {
        if self.is_success() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => write!(f, "CL_{name}"),
            None => write!(f, "Status({})", self.0),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl From<i32> for Status {
    fn from(code: i32) -> Self {
        Status(code)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_names_match_opencl_codes() {
        assert_eq!(Status(-30), Status::INVALID_VALUE);
        assert_eq!(
            Status::INVALID_KERNEL_ARGS.name(),
            Some("INVALID_KERNEL_ARGS")
        );
        assert_eq!(format!("{}", Status(-1000)), "Status(-1000)");
        assert!(Status::SUCCESS.result().is_ok());
        assert_eq!(Status::INVALID_EVENT.result(), Err(Status::INVALID_EVENT));
    }
}
