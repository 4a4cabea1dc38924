//! Tables the CUDA math libraries (cuBLAS, cuBLASLt) ask for before they
//! create a handle; without them `cublasCreate` fails
//! (`CUBLAS_STATUS_NOT_INITIALIZED`), and PyTorch's first matmul with it.
//!
//! Context identity (`21318c60-…`, 93 words): the traces show PyTorch
//! calling only slot 4, for every cuBLAS call (258 times), and CuPy slots
//! 4, 39 and 51 once each. Public notes on this table name slot 4 the
//! context's unique number, with `cuCtxGetId`'s signature (a context,
//! NULL for the current one, and a 64-bit output): here it is the guest's
//! context handle, unique and stable for the context's life. Every other
//! slot answers `CUDA_ERROR_NOT_SUPPORTED`, except word 91, which the
//! driver's table holds as data (0), and so does this one.
//!
//! `69a28e9f-…` (34 words): PyTorch calls slots 19 and 21 once and 24 and
//! 25 five times; what they do is not known, so all answer
//! `CUDA_ERROR_NOT_SUPPORTED`: the table exists, nothing in it pretends
//! to work.

use std::ffi::c_void;

use super::{not_supported, size_word, Table};
use crate::ffi::{guard, handle, put, result, CUresult, Handle};
use crate::runtime::current_context;

/// Slot 4 of the context-identity table: the context's unique number.
extern "C" fn context_id(ctx: Handle, id: *mut u64) -> CUresult {
    guard("context id", || {
        let ctx = match handle(ctx) {
            0 => current_context(),
            ctx => ctx,
        };
        if ctx == 0 {
            return Err(result::ERROR_INVALID_CONTEXT);
        }
        put(id, ctx)
    })
}

const NS: *const c_void = not_supported as *const c_void;

/// A table of `N` words: the size word, then `CUDA_ERROR_NOT_SUPPORTED`.
const fn refusing<const N: usize>() -> [*const c_void; N] {
    let mut words = [NS; N];
    words[0] = size_word::<N>();
    words
}

pub static CONTEXT_IDENTITY: Table<93> = Table::new({
    let mut words = refusing::<93>();
    words[4] = context_id as *const c_void;
    words[91] = std::ptr::null();
    words
});

pub static BLAS_69A28E9F: Table<34> = Table::new(refusing::<34>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_the_drivers_sizes() {
        assert_eq!(CONTEXT_IDENTITY.0[0] as usize, 0x2e8);
        assert_eq!(BLAS_69A28E9F.0[0] as usize, 0x110);
        assert_eq!(CONTEXT_IDENTITY.0[3], NS);
        assert!(
            CONTEXT_IDENTITY.0[91].is_null(),
            "a data word, 0 in the driver's"
        );
        assert_eq!(BLAS_69A28E9F.0[19], NS);
    }

    #[test]
    fn context_id_names_the_given_context() {
        let mut id = 0;
        assert_eq!(context_id(0x1234 as Handle, &mut id), result::SUCCESS);
        assert_eq!(id, 0x1234);
        assert_eq!(
            context_id(0x1234 as Handle, std::ptr::null_mut()),
            result::ERROR_INVALID_VALUE
        );
    }
}
