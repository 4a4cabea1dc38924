//! The tools' context table (`21318c60-…`, 93 words; NVIDIA's tools headers
//! call its UUID `CU_ETID_ToolsContext`), which cuBLAS asks for before its
//! first GEMM. Three slots are called (`traces/cublas-slot-args-*.txt`):
//!
//! - slot 4 `(CUcontext, u64 *id)`: the context's unique number, as
//!   `cuCtxGetId`; the driver answers 0 for NULL and `CUDA_ERROR_UNKNOWN`
//!   for a NULL output. PyTorch's cuBLAS calls it for every call (258 times
//!   in the traced run).
//! - slot 51 `(CUcontext, CUstream, void **object, bool per_thread)`: the
//!   driver's object for a stream. The driver refuses a NULL output
//!   (`CUDA_ERROR_INVALID_VALUE`) and the stream `(CUstream)-1`
//!   (`CUDA_ERROR_INVALID_HANDLE`); the context matters only for the
//!   default-stream handles (NULL, `CU_STREAM_LEGACY`, `CU_STREAM_PER_THREAD`).
//! - slot 39 `(CUcontext, object, u64 *id)`: a number read from that stream
//!   object; NULL object or output: `CUDA_ERROR_INVALID_VALUE`.
//!
//! CuPy's cuBLAS asks 51 then 39 for the stream of each GEMM; natively it
//! fails (`CUBLAS_STATUS_INTERNAL_ERROR`) when 39 fails, and it never
//! reads the object itself (a run where both slots were skipped, leaving
//! their outputs unwritten, still multiplied right). The number keys
//! cuBLAS's per-stream state, so what matters is that it names the stream:
//! here the object *is* that number, the guest's stream handle (handles are
//! unique in a process, and never 1 or 2), or for a context's default
//! stream the context's handle with the top bit set.
//!
//! Every other slot answers `CUDA_ERROR_NOT_SUPPORTED`, except word 91,
//! which the driver's table holds as data (0), and so does this one. The
//! driver's answers to bad arguments were read from its code
//! (`trace/slotaddr`); the runtime-callback hooks table (`tools.rs`) gives
//! the same numbers.

use std::ffi::c_void;

use super::{refusing, Table};
use crate::ffi::{guard, handle, put, result, CUresult, CuResult, Handle};
use crate::runtime::{current_context, stream_handle};

/// The stream "object" of a context's default stream: its context's handle
/// with this bit set (guest handles are counters, far below it).
const DEFAULT_STREAM_OF: u64 = 1 << 63;

/// The context a slot names: NULL is the calling thread's current one.
fn context_or_current(ctx: Handle) -> CuResult<u64> {
    match handle(ctx) {
        0 => match current_context() {
            0 => Err(result::ERROR_INVALID_CONTEXT),
            ctx => Ok(ctx),
        },
        ctx => Ok(ctx),
    }
}

/// A context's number (the guest's handle; 0 for NULL).
pub(super) fn context_number(ctx: Handle, id: *mut u64) -> CuResult<()> {
    if id.is_null() {
        return Err(result::ERROR_UNKNOWN);
    }
    put(id, handle(ctx))
}

/// Slot 4: the context's unique number.
extern "C" fn context_id(ctx: Handle, id: *mut u64) -> CUresult {
    guard("context id", || context_number(ctx, id))
}

/// The object slot 51 hands out for `stream` in the context `ctx`.
fn stream_object(ctx: Handle, stream: u64) -> CuResult<u64> {
    if stream == u64::MAX {
        return Err(result::ERROR_INVALID_HANDLE);
    }
    match stream_handle(stream) {
        0 => Ok(DEFAULT_STREAM_OF | context_or_current(ctx)?),
        stream => Ok(stream),
    }
}

/// Slot 51: the driver's object for a stream.
extern "C" fn stream_object_of(
    ctx: Handle,
    stream: Handle,
    object: *mut u64,
    _per_thread: u64,
) -> CUresult {
    guard("stream object", || stream_number(ctx, stream, object))
}

/// The number (and object) of `stream` in the context `ctx`.
pub(super) fn stream_number(ctx: Handle, stream: Handle, out: *mut u64) -> CuResult<()> {
    if out.is_null() {
        return Err(result::ERROR_INVALID_VALUE);
    }
    put(out, stream_object(ctx, handle(stream))?)
}

/// Slot 39: the number that names a stream object.
extern "C" fn stream_object_id(_ctx: Handle, object: u64, id: *mut u64) -> CUresult {
    guard("stream object id", || match object {
        0 => Err(result::ERROR_INVALID_VALUE),
        object => put(id, object),
    })
}

pub static TOOLS_CONTEXT: Table<93> = Table::new({
    let mut words = refusing::<93>();
    words[4] = context_id as *const c_void;
    words[39] = stream_object_id as *const c_void;
    words[51] = stream_object_of as *const c_void;
    words[91] = std::ptr::null();
    words
});

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::export::NS;

    fn h(value: u64) -> Handle {
        value as Handle
    }

    #[test]
    fn table_has_the_drivers_size_and_data_word() {
        assert_eq!(TOOLS_CONTEXT.0[0] as usize, 0x2e8);
        assert_eq!(TOOLS_CONTEXT.0[3], NS);
        assert!(
            TOOLS_CONTEXT.0[91].is_null(),
            "a data word, 0 in the driver's"
        );
    }

    #[test]
    fn context_id_names_the_given_context() {
        let mut id = 0;
        assert_eq!(context_id(h(0x1234), &mut id), result::SUCCESS);
        assert_eq!(id, 0x1234);
        assert_eq!(
            context_id(h(0x1234), std::ptr::null_mut()),
            result::ERROR_UNKNOWN
        );
        assert_eq!(context_id(h(0), &mut id), result::SUCCESS);
        assert_eq!(id, 0, "NULL names no context");
    }

    #[test]
    fn a_created_stream_is_its_own_object_and_number() {
        let (mut object, mut id) = (0, 0);
        assert_eq!(
            stream_object_of(h(7), h(0x55), &mut object, 0),
            result::SUCCESS
        );
        assert_eq!(stream_object_id(h(7), object, &mut id), result::SUCCESS);
        assert_eq!(id, 0x55);
    }

    #[test]
    fn default_stream_handles_name_one_stream_per_context() {
        let objects: Vec<u64> = [0u64, 1, 2]
            .iter()
            .map(|s| {
                let mut object = 0;
                assert_eq!(
                    stream_object_of(h(7), h(*s), &mut object, u64::from(*s == 2)),
                    result::SUCCESS
                );
                object
            })
            .collect();
        assert!(objects.iter().all(|o| *o == objects[0]));
        let mut other = 0;
        stream_object_of(h(8), h(0), &mut other, 0);
        assert_ne!(other, objects[0], "another context's default stream");
        assert_ne!(objects[0], 7, "never a created stream's number");
    }

    #[test]
    fn bad_stream_arguments_are_refused_as_the_driver_does() {
        let mut object = 0xdead;
        assert_eq!(
            stream_object_of(h(7), h(u64::MAX), &mut object, 0),
            result::ERROR_INVALID_HANDLE
        );
        assert_eq!(object, 0xdead);
        assert_eq!(
            stream_object_of(h(7), h(0x55), std::ptr::null_mut(), 0),
            result::ERROR_INVALID_VALUE
        );
        let mut id = 0;
        assert_eq!(
            stream_object_id(h(7), 0, &mut id),
            result::ERROR_INVALID_VALUE
        );
        assert_eq!(
            stream_object_id(h(7), 0x55, std::ptr::null_mut()),
            result::ERROR_INVALID_VALUE
        );
        // A default stream with no context to name it.
        assert_eq!(
            stream_object_of(h(0), h(0), &mut object, 0),
            result::ERROR_INVALID_CONTEXT
        );
    }
}
