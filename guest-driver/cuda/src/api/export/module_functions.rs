//! The table `6e163fbe-…` (99 words, sized), which cuFFT asks for. cuFFT
//! calls slot 7 once per plan, with a module it loaded (a kernel it built
//! and linked at run time) and a callback that keeps the function it is
//! handed; `cufftPlan1d` fails unless the slot answers exactly 1. Read from
//! the two sides (`traces/README.md`, last section): the driver's slot
//! walks the module's functions, calls `callback(user, function, word)`
//! for each and answers how many; cuFFT's callback is `*user = function`,
//! and the caller beside it looks a function up by name with
//! `cuModuleGetFunction` when it has a name and through this slot when it
//! has none.
//!
//! Served here with the module's kernels as the backend lists them
//! (`CuModuleFunctionNames`), each under this library's function handle
//! for that name (looked up once). The driver counts only the functions
//! in one internal state (its word at `+0x378` equal to 2), which is not
//! understood; every kernel is counted here. The callback's third argument
//! is a word of the driver's function object that cuFFT ignores: NULL here.
//! Every other slot answers `CUDA_ERROR_NOT_SUPPORTED`.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};

use vgpu_protocol::cuda::CuNamesReply;
use vgpu_protocol::messages::CuModuleFunctionNames;
use vgpu_protocol::Request;

use super::{refusing, Table};
use crate::api::module::get_function;
use crate::ffi::{handle, to_ptr, CuResult, Handle};
use crate::runtime::{decode, lock, rt};

/// What slot 7 calls per function.
type Callback = unsafe extern "C" fn(user: *mut c_void, function: Handle, word: *mut c_void);

/// The names in a `CuNamesReply`: each ends with a NUL.
fn split_names(names: &[u8]) -> Vec<&[u8]> {
    names.split(|b| *b == 0).filter(|n| !n.is_empty()).collect()
}

/// (module, kernel name) → this library's function handle.
type Handles = HashMap<(u64, Vec<u8>), u64>;

fn handles() -> &'static Mutex<Handles> {
    static HANDLES: OnceLock<Mutex<Handles>> = OnceLock::new();
    HANDLES.get_or_init(Mutex::default)
}

/// The function handles of every kernel of `module`.
fn module_functions(module: u64) -> CuResult<Vec<u64>> {
    let rt = rt()?;
    let reply: CuNamesReply = decode(&rt.call(Request::CuModuleFunctionNames(
        CuModuleFunctionNames { module },
    ))?)?;
    let mut out = Vec::new();
    for name in split_names(&reply.names) {
        let key = (module, name.to_vec());
        let known = lock(handles()).get(&key).copied();
        let function = match known {
            Some(function) => function,
            None => {
                let function = get_function(rt, module, name.to_vec())?;
                lock(handles()).insert(key, function);
                function
            }
        };
        out.push(function);
    }
    Ok(out)
}

/// Slot 7: `(unused, CUmodule, callback, user)` → how many functions the
/// module has, after `callback(user, function, NULL)` for each (no calls
/// when `callback` is NULL); -1 for a module the backend does not know, as
/// the driver answers for an invalid one.
unsafe extern "C" fn for_each_function(
    _unused: *mut c_void,
    module: Handle,
    callback: Option<Callback>,
    user: *mut c_void,
) -> c_int {
    let functions = match catch_unwind(AssertUnwindSafe(|| module_functions(handle(module)))) {
        Ok(Ok(functions)) => functions,
        Ok(Err(code)) => {
            log::debug!("module functions of {module:?}: CUresult {code}");
            return -1;
        }
        Err(_) => {
            log::error!("module functions: internal error (panic)");
            return -1;
        }
    };
    if let Some(callback) = callback {
        for function in &functions {
            // SAFETY: the caller's callback, with the caller's own
            // argument, as the driver calls it.
            unsafe { callback(user, to_ptr(*function), std::ptr::null_mut()) };
        }
    }
    c_int::try_from(functions.len()).unwrap_or(c_int::MAX)
}

pub static MODULE_FUNCTIONS: Table<99> = Table::new({
    let mut words = refusing::<99>();
    words[7] = for_each_function as *const c_void;
    words
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::export::NS;

    #[test]
    fn table_has_the_drivers_size_and_serves_slot_7_only() {
        assert_eq!(MODULE_FUNCTIONS.0[0] as usize, 0x318);
        assert_ne!(MODULE_FUNCTIONS.0[7], NS);
        let others = MODULE_FUNCTIONS.0[1..].iter().enumerate();
        assert!(others.filter(|(i, _)| i + 1 != 7).all(|(_, w)| *w == NS));
    }

    #[test]
    fn names_are_split_at_each_nul() {
        assert_eq!(split_names(b"a\0bc\0"), vec![&b"a"[..], &b"bc"[..]]);
        assert!(split_names(b"").is_empty());
    }

    #[test]
    fn without_a_session_the_slot_answers_minus_one_and_calls_nothing() {
        unsafe extern "C" fn never(_: *mut c_void, _: Handle, _: *mut c_void) {
            panic!("called");
        }
        // SAFETY: no pointer is dereferenced when the module is refused.
        let n = unsafe {
            for_each_function(
                std::ptr::null_mut(),
                std::ptr::dangling_mut(),
                Some(never),
                std::ptr::null_mut(),
            )
        };
        assert_eq!(n, -1);
    }
}
