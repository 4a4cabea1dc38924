//! `cuGetErrorName` and `cuGetErrorString`, answered locally from the
//! protocol's table of `CUresult` codes.

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use vgpu_protocol::cuda::{error_name, error_string};

use crate::ffi::{entry, put, result, CUresult};

/// (name, description) of every known code, as C strings that live for
/// the whole process.
fn table() -> &'static HashMap<CUresult, (CString, CString)> {
    static TABLE: OnceLock<HashMap<CUresult, (CString, CString)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=1000)
            .filter_map(|code| {
                let name = CString::new(error_name(code)?).ok()?;
                let text = CString::new(error_string(code)?).ok()?;
                Some((code, (name, text)))
            })
            .collect()
    })
}

entry! {
    fn cuGetErrorName(code: CUresult, name: *mut *const c_char) {
        match table().get(&code) {
            Some((n, _)) => put(name, n.as_ptr()),
            None => {
                put(name, std::ptr::null())?;
                Err(result::ERROR_INVALID_VALUE)
            }
        }
    }
}

entry! {
    fn cuGetErrorString(code: CUresult, text: *mut *const c_char) {
        match table().get(&code) {
            Some((_, t)) => put(text, t.as_ptr()),
            None => {
                put(text, std::ptr::null())?;
                Err(result::ERROR_INVALID_VALUE)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn names_and_strings_of_known_and_unknown_codes() {
        let mut name: *const c_char = std::ptr::null();
        // SAFETY: `name` is a valid output pointer.
        let code = unsafe { cuGetErrorName(801, &mut name) };
        assert_eq!(code, 0);
        // SAFETY: the library returned a static C string.
        let text = unsafe { CStr::from_ptr(name) };
        assert_eq!(text.to_str(), Ok("CUDA_ERROR_NOT_SUPPORTED"));
        // SAFETY: `name` is a valid output pointer.
        let code = unsafe { cuGetErrorString(12345, &mut name) };
        assert_eq!(code, result::ERROR_INVALID_VALUE);
        assert!(name.is_null());
    }
}
