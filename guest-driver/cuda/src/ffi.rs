//! The C ABI boundary: driver-API types, the entry-point macro (panics are
//! caught and become `CUDA_ERROR_UNKNOWN`; nothing unwinds into the
//! application) and pointer helpers that refuse NULL.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub use vgpu_protocol::cuda::result;

pub type CUresult = c_int;
pub type CUdevice = c_int;
pub type CUdeviceptr = u64;
/// Contexts, modules, functions, streams and events are the library's
/// handles, passed to the application as opaque pointers.
pub type Handle = *mut c_void;

/// A call's outcome inside the library.
pub type CuResult<T> = Result<T, CUresult>;

/// Installs the logger on the first call: silent unless `RUST_LOG` asks,
/// so a program's own output never changes.
fn start_logging() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let env = env_logger::Env::default().default_filter_or("off");
        let _ = env_logger::Builder::from_env(env).try_init();
    });
}

/// Runs an entry point's body.
pub fn guard(name: &'static str, f: impl FnOnce() -> CuResult<()>) -> CUresult {
    start_logging();
    log::trace!("{name}");
    let started = crate::trace::start();
    let outcome = catch_unwind(AssertUnwindSafe(f));
    crate::trace::done(started, crate::trace::Kind::Entry, name);
    match outcome {
        Ok(Ok(())) => result::SUCCESS,
        Ok(Err(code)) => {
            log::debug!("{name}: CUresult {code}");
            code
        }
        Err(_) => {
            log::error!("{name}: internal error (panic)");
            result::ERROR_UNKNOWN
        }
    }
}

/// Defines an exported driver-API function, `fn name(args) | alias ... { body }`:
/// the aliases (ABI-identical versions, per-thread-stream variants) call it.
macro_rules! entry {
    ($(#[$meta:meta])* fn $name:ident $args:tt $(| $alias:ident)* $body:block) => {
        $crate::ffi::entry!(@main $(#[$meta])* fn $name $args $body);
        $crate::ffi::entry!(@aliases $name $args $($alias)*);
    };
    (@aliases $name:ident $args:tt) => {};
    (@aliases $name:ident $args:tt $first:ident $($rest:ident)*) => {
        $crate::ffi::entry!(@alias $name $first $args);
        $crate::ffi::entry!(@aliases $name $args $($rest)*);
    };
    (@main $(#[$meta:meta])* fn $name:ident ($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$meta])*
        ///
        /// # Safety
        ///
        /// Pointer arguments must be valid as the CUDA driver API specifies.
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $crate::ffi::CUresult {
            $crate::ffi::guard(stringify!($name), move || -> $crate::ffi::CuResult<()> { $body })
        }
    };
    (@alias $name:ident $alias:ident ($($arg:ident: $ty:ty),* $(,)?)) => {
        #[doc = concat!("Same as [`", stringify!($name), "`].")]
        ///
        /// # Safety
        ///
        /// As for the function it stands for.
        #[no_mangle]
        pub unsafe extern "C" fn $alias($($arg: $ty),*) -> $crate::ffi::CUresult {
            // SAFETY: the caller keeps the contract of the aliased function.
            unsafe { $name($($arg),*) }
        }
    };
}
pub(crate) use entry;

fn invalid() -> CUresult {
    result::ERROR_INVALID_VALUE
}

/// Stores `value` through an output pointer (NULL: invalid value).
pub(crate) fn put<T>(ptr: *mut T, value: T) -> CuResult<()> {
    if ptr.is_null() {
        return Err(invalid());
    }
    // SAFETY: non-null; the application passes a valid output pointer, as
    // the API requires.
    unsafe { ptr.write_unaligned(value) };
    Ok(())
}

/// Stores through an output pointer the API allows to be NULL.
pub(crate) fn put_opt<T>(ptr: *mut T, value: T) {
    if !ptr.is_null() {
        // SAFETY: as in `put`.
        unsafe { ptr.write_unaligned(value) };
    }
}

/// Reads one value through a pointer (NULL: invalid value).
pub(crate) fn get<T: Copy>(ptr: *const T) -> CuResult<T> {
    if ptr.is_null() {
        return Err(invalid());
    }
    // SAFETY: non-null; the application passes a valid pointer.
    Ok(unsafe { ptr.read_unaligned() })
}

/// The bytes of a NUL-terminated string.
pub(crate) fn c_str<'a>(ptr: *const c_char) -> CuResult<&'a [u8]> {
    if ptr.is_null() {
        return Err(invalid());
    }
    // SAFETY: non-null; the application passes a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(ptr) }.to_bytes())
}

/// `len` bytes of application memory.
pub(crate) fn bytes<'a>(ptr: *const c_void, len: usize) -> CuResult<&'a [u8]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(invalid());
    }
    // SAFETY: non-null; the application passes `len` readable bytes.
    Ok(unsafe { std::slice::from_raw_parts(ptr.cast(), len) })
}

/// `len` writable bytes of application memory.
pub(crate) fn bytes_mut<'a>(ptr: *mut c_void, len: usize) -> CuResult<&'a mut [u8]> {
    if len == 0 {
        return Ok(&mut []);
    }
    if ptr.is_null() {
        return Err(invalid());
    }
    // SAFETY: non-null; the application passes `len` writable bytes that
    // nothing else uses during the call.
    Ok(unsafe { std::slice::from_raw_parts_mut(ptr.cast(), len) })
}

/// Copies `src` into a C string buffer of `len` bytes, truncating, always
/// NUL-terminated.
pub(crate) fn put_c_string(dst: *mut c_char, len: c_int, src: &[u8]) -> CuResult<()> {
    let len = usize::try_from(len).map_err(|_| invalid())?;
    if len == 0 {
        return Err(invalid());
    }
    let out = bytes_mut(dst.cast(), len)?;
    let n = src.len().min(len - 1);
    out[..n].copy_from_slice(&src[..n]);
    out[n] = 0;
    Ok(())
}

/// A handle from its pointer form.
pub(crate) fn handle(ptr: Handle) -> u64 {
    ptr as u64
}

/// The pointer form of a handle.
pub(crate) fn to_ptr(handle: u64) -> Handle {
    handle as usize as Handle
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_turns_panics_into_unknown_error() {
        assert_eq!(guard("t", || panic!("boom")), result::ERROR_UNKNOWN);
        assert_eq!(guard("t", || Err(result::ERROR_NOT_READY)), 600);
        assert_eq!(guard("t", || Ok(())), 0);
    }

    #[test]
    fn null_outputs_are_invalid_values() {
        assert_eq!(put::<i32>(std::ptr::null_mut(), 1), Err(invalid()));
        let mut name = [1 as c_char; 4];
        put_c_string(name.as_mut_ptr(), 4, b"H100").unwrap();
        assert_eq!(name, [b'H' as c_char, b'1' as c_char, b'0' as c_char, 0]);
    }
}
