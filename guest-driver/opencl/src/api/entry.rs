//! The C ABI boundary: macros that generate one exported `extern "C"`
//! function per entry point around a safe Rust function returning
//! `Result<_, cl_int>`. Panics are caught here and become
//! `CL_OUT_OF_HOST_MEMORY`; nothing unwinds into the application.

use std::panic::{catch_unwind, AssertUnwindSafe};

use opencl_sys::{cl_int, CL_OUT_OF_HOST_MEMORY, CL_SUCCESS};

use crate::core::object::ClResult;

/// Runs an entry point that returns a status code.
pub(crate) fn status(name: &str, f: impl FnOnce() -> ClResult<()>) -> cl_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => CL_SUCCESS,
        Ok(Err(code)) => {
            log::debug!("{name}: {code}");
            code
        }
        Err(_) => {
            log::error!("{name}: internal error (panic)");
            CL_OUT_OF_HOST_MEMORY
        }
    }
}

/// A return value with a "failed" value (NULL for objects).
pub trait Failed {
    fn failed() -> Self;
}

impl<T> Failed for *mut T {
    fn failed() -> Self {
        std::ptr::null_mut()
    }
}

/// Runs an entry point that returns a value and reports through
/// `errcode_ret`.
pub(crate) fn object<T: Failed>(
    name: &str,
    errcode_ret: *mut cl_int,
    f: impl FnOnce() -> ClResult<T>,
) -> T {
    let (value, code) = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => (value, CL_SUCCESS),
        Ok(Err(code)) => {
            log::debug!("{name}: {code}");
            (T::failed(), code)
        }
        Err(_) => {
            log::error!("{name}: internal error (panic)");
            (T::failed(), CL_OUT_OF_HOST_MEMORY)
        }
    };
    crate::api::util::write(errcode_ret, code);
    value
}

/// Entry points returning `cl_int`: `fn clName(args) => implementation;`.
macro_rules! status_entry {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $imp:path;)*) => {$(
        #[doc = concat!("`", stringify!($name), "` (exported for direct linking and the dispatch table).")]
        ///
        /// # Safety
        ///
        /// Pointer arguments follow the OpenCL specification's rules for this
        /// entry point.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> opencl_sys::cl_int {
            $crate::api::entry::status(stringify!($name), || $imp($($arg),*))
        }
    )*};
}
pub(crate) use status_entry;

/// Entry points returning an object and filling `errcode_ret` (always the
/// last parameter): `fn clName(args) -> type => implementation;`.
macro_rules! object_entry {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $imp:path;)*) => {$(
        #[doc = concat!("`", stringify!($name), "` (exported for direct linking and the dispatch table).")]
        ///
        /// # Safety
        ///
        /// Pointer arguments follow the OpenCL specification's rules for this
        /// entry point.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty,)* errcode_ret: *mut opencl_sys::cl_int) -> $ret {
            $crate::api::entry::object(stringify!($name), errcode_ret, || $imp($($arg),*))
        }
    )*};
}
pub(crate) use object_entry;

/// Entry points this library does not implement: `CL_INVALID_OPERATION`.
macro_rules! unimplemented_status {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: not implemented, returns `CL_INVALID_OPERATION`.")]
        ///
        /// # Safety
        ///
        /// No argument is dereferenced.
        #[no_mangle]
        #[allow(unused_variables)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> opencl_sys::cl_int {
            log::debug!(concat!(stringify!($name), ": not implemented"));
            opencl_sys::CL_INVALID_OPERATION
        }
    )*};
}
pub(crate) use unimplemented_status;

/// As `unimplemented_status` for entry points returning an object:
/// NULL, and `CL_INVALID_OPERATION` in `errcode_ret`.
macro_rules! unimplemented_object {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {$(
        #[doc = concat!("`", stringify!($name), "`: not implemented, fails with `CL_INVALID_OPERATION`.")]
        ///
        /// # Safety
        ///
        /// Only `errcode_ret` is written, when it is not NULL.
        #[no_mangle]
        #[allow(unused_variables)]
        pub unsafe extern "C" fn $name($($arg: $ty,)* errcode_ret: *mut opencl_sys::cl_int) -> $ret {
            log::debug!(concat!(stringify!($name), ": not implemented"));
            $crate::api::util::write(errcode_ret, opencl_sys::CL_INVALID_OPERATION);
            std::ptr::null_mut()
        }
    )*};
}
pub(crate) use unimplemented_object;
