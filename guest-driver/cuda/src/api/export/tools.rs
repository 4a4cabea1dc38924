//! The tables of the profiling-tools interface that cudart asks for
//! (every copy: the program's, cuBLAS's, cuBLASLt's).
//!
//! Tools' thread state (`42d85a81-…`, 3 words): slot 2 `(CUcontext *out)`
//! answers the calling thread's current context, as `cuCtxGetCurrent` does
//! (`CUDA_ERROR_NOT_INITIALIZED` before `cuInit`); cuBLASLt calls it for
//! every handle it creates, and `cublasCreate` fails
//! (`CUBLAS_STATUS_INTERNAL_ERROR`) when it fails. Slot 1, never seen
//! called, answers `CUDA_ERROR_NOT_SUPPORTED`.
//!
//! Runtime-callback hooks (`a094798c-…`, 7 words): slots 2 and 6 hand out a
//! driver-owned buffer and its size (1024 and 14 bytes), where cudart reads
//! which of its API callbacks a tool asked for; with no tool attached they
//! stay zero (and newer cudarts read past their end: `HookBuffer`). Slots 1 `(u32 callback id, params)` and 5 (the same for a
//! second domain) deliver a callback to the subscribed tool: with none,
//! they succeed for an id in range (below 1024, below 14) and refuse the
//! others (`CUDA_ERROR_INVALID_VALUE`). Slot 3 `(CUcontext, CUstream,
//! u64 *id)` is the stream's number, the same number the tools' context
//! table gives; slot 4 `(CUcontext, u64 *id)` the context's number (0 for
//! NULL; NULL output: `CUDA_ERROR_UNKNOWN`). The driver's answers to these
//! argument checks were read from its code with `trace/slotaddr`.

use std::cell::UnsafeCell;
use std::ffi::{c_uint, c_void};

use super::tools_context::{context_number, stream_number};
use super::{refusing, Table};
use crate::ffi::{guard, put, put_opt, result, to_ptr, CUresult, Handle};
use crate::runtime::{current_context, rt};

/// Tools' thread state, slot 2: the current context.
extern "C" fn thread_context(out: *mut Handle) -> CUresult {
    guard("tools: thread context", || {
        rt()?;
        put(out, to_ptr(current_context()))
    })
}

pub static TOOLS_TLS: Table<3> = Table::new({
    let mut words = refusing::<3>();
    words[2] = thread_context as *const c_void;
    words
});

/// A zeroed buffer the tools' side of cudart reads (and may write): `N`
/// bytes are reported, and `SLACK` zero bytes follow, because newer
/// cudarts read past the size the driver reports. cuBLASLt 13's cudart
/// reads 32 bits at offset 0x750 of the 1024-byte buffer (a callback id
/// this driver does not know); in the driver that lands in more of its
/// zeroed data, and here it crashed at the end of the library's mapping.
#[repr(C)]
struct HookBuffer<const N: usize>(UnsafeCell<[u8; N]>, UnsafeCell<[u8; SLACK]>);

/// Zero bytes after each hook buffer.
const SLACK: usize = 64 << 10;

impl<const N: usize> HookBuffer<N> {
    const fn new() -> Self {
        HookBuffer(UnsafeCell::new([0; N]), UnsafeCell::new([0; SLACK]))
    }
}

// SAFETY: the library never reads or writes the buffer after handing it
// out; the application side owns its contents, as with the driver's.
unsafe impl<const N: usize> Sync for HookBuffer<N> {}

const RUNTIME_CALLBACKS: usize = 1024;
const SECOND_CALLBACKS: usize = 14;
static HOOKS_1: HookBuffer<RUNTIME_CALLBACKS> = HookBuffer::new();
static HOOKS_2: HookBuffer<SECOND_CALLBACKS> = HookBuffer::new();

extern "C" fn hook_buffer_1(buffer: *mut *mut c_void, size: *mut usize) {
    put_opt(buffer, HOOKS_1.0.get().cast());
    put_opt(size, RUNTIME_CALLBACKS);
}

extern "C" fn hook_buffer_2(buffer: *mut *mut c_void, size: *mut usize) {
    put_opt(buffer, HOOKS_2.0.get().cast());
    put_opt(size, SECOND_CALLBACKS);
}

/// Delivers callback `id` of a domain with `count` ids to the subscribed
/// tool: there is none.
fn deliver(id: c_uint, count: usize) -> CUresult {
    match (id as usize) < count {
        true => result::SUCCESS,
        false => result::ERROR_INVALID_VALUE,
    }
}

extern "C" fn runtime_callback(id: c_uint, _params: *mut c_void) -> CUresult {
    deliver(id, RUNTIME_CALLBACKS)
}

extern "C" fn second_callback(id: c_uint, _params: *mut c_void) -> CUresult {
    deliver(id, SECOND_CALLBACKS)
}

/// Runtime-callback hooks, slot 3: a stream's number.
extern "C" fn hooks_stream_id(ctx: Handle, stream: Handle, id: *mut u64) -> CUresult {
    guard("tools: stream id", || {
        if ctx.is_null() {
            return Err(result::ERROR_INVALID_CONTEXT);
        }
        stream_number(ctx, stream, id)
    })
}

/// Runtime-callback hooks, slot 4: a context's number.
extern "C" fn hooks_context_id(ctx: Handle, id: *mut u64) -> CUresult {
    guard("tools: context id", || context_number(ctx, id))
}

pub static TOOL_HOOKS: Table<7> = Table::new({
    let mut words = refusing::<7>();
    words[1] = runtime_callback as *const c_void;
    words[2] = hook_buffer_1 as *const c_void;
    words[3] = hooks_stream_id as *const c_void;
    words[4] = hooks_context_id as *const c_void;
    words[5] = second_callback as *const c_void;
    words[6] = hook_buffer_2 as *const c_void;
    words
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_buffers_are_zeroed_and_sized() {
        assert_eq!(TOOL_HOOKS.0[0] as usize, 7 * 8);
        let (mut buffer, mut size) = (std::ptr::null_mut(), 0);
        hook_buffer_1(&mut buffer, &mut size);
        assert_eq!(size, 1024);
        // SAFETY: the buffer has `size` bytes, then `SLACK` more, and
        // lives for the program.
        let bytes = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), size + SLACK) };
        assert!(bytes.iter().all(|b| *b == 0));
        assert!(0x750 + 4 <= size + SLACK, "cuBLASLt's cudart reads there");
        hook_buffer_2(&mut buffer, &mut size);
        assert_eq!(size, 14);
    }

    #[test]
    fn callbacks_in_range_succeed_with_no_tool() {
        assert_eq!(
            runtime_callback(0x3ff, std::ptr::null_mut()),
            result::SUCCESS
        );
        assert_eq!(
            runtime_callback(0x400, std::ptr::null_mut()),
            result::ERROR_INVALID_VALUE
        );
        assert_eq!(second_callback(13, std::ptr::null_mut()), result::SUCCESS);
        assert_eq!(
            second_callback(14, std::ptr::null_mut()),
            result::ERROR_INVALID_VALUE
        );
    }

    #[test]
    fn hook_ids_match_the_tools_context_table() {
        let ctx = 0x41 as Handle;
        let mut id = 0;
        assert_eq!(hooks_context_id(ctx, &mut id), result::SUCCESS);
        assert_eq!(id, 0x41);
        assert_eq!(
            hooks_context_id(std::ptr::null_mut(), &mut id),
            result::SUCCESS
        );
        assert_eq!(id, 0, "NULL names no context");
        assert_eq!(
            hooks_context_id(ctx, std::ptr::null_mut()),
            result::ERROR_UNKNOWN
        );
        assert_eq!(
            hooks_stream_id(ctx, 0x77 as Handle, &mut id),
            result::SUCCESS
        );
        assert_eq!(id, 0x77);
        assert_eq!(
            hooks_stream_id(std::ptr::null_mut(), 0x77 as Handle, &mut id),
            result::ERROR_INVALID_CONTEXT
        );
    }

    #[test]
    fn thread_context_needs_cuinit() {
        let mut ctx = 0x5 as Handle;
        assert_eq!(thread_context(&mut ctx), result::ERROR_NOT_INITIALIZED);
        assert_eq!(TOOLS_TLS.0[0] as usize, 3 * 8);
    }
}
