//! Two small guest-local tables every cudart asks for early.
//!
//! Context checks (`263e8860-…`, 15 words): cudart calls slot 2 with a
//! context and two outputs, and slot 3 with none. Per ZLUDA's notes slot 2
//! reports flag bits that are never observably set (first output 0, second
//! left alone) and slot 3 answers 0.
//!
//! Tools' thread-local state (`42d85a81-…`, 3 words): the size word and
//! two functions whose meaning is unknown; the traces show slot 2 called
//! in the CuPy and PyTorch runs. ZLUDA serves NULL slots, but through vgpu
//! PyTorch then crashed (cudart calls them), so here they answer
//! `CUDA_ERROR_NOT_SUPPORTED`, which cudart tolerates: it goes on.
//!
//! Tool runtime-callback hooks (`a094798c-…`, 7 words): cudart calls slots
//! 2 and 6 once each to get a driver-owned buffer and its size, where
//! profiling tools register their runtime callbacks. With no tool attached
//! they stay zero; the sizes (1024 and 14 bytes) are ZLUDA's.

use std::cell::UnsafeCell;
use std::ffi::{c_uint, c_void};

use super::{not_supported, size_word, Table};
use crate::ffi::{guard, put, put_opt, CUresult, Handle};

extern "C" fn context_check(
    ctx: Handle,
    flags: *mut c_uint,
    _unused: *mut *const c_void,
) -> CUresult {
    let _ = ctx;
    guard("context check", || put(flags, 0))
}

extern "C" fn check_flags() -> c_uint {
    0
}

const NS: *const c_void = not_supported as *const c_void;

pub static CONTEXT_CHECKS: Table<15> = Table::new([
    size_word::<15>(),
    NS,
    context_check as *const c_void,
    check_flags as *const c_void,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
    NS,
]);

pub static TOOLS_TLS: Table<3> = Table::new([size_word::<3>(), NS, NS]);

/// A zeroed buffer the tools' side of cudart may write into.
struct HookBuffer<const N: usize>(UnsafeCell<[u8; N]>);

// SAFETY: the library never reads or writes the buffer after handing it
// out; the application side owns its contents, as with the driver's.
unsafe impl<const N: usize> Sync for HookBuffer<N> {}

static HOOKS_1: HookBuffer<1024> = HookBuffer(UnsafeCell::new([0; 1024]));
static HOOKS_2: HookBuffer<14> = HookBuffer(UnsafeCell::new([0; 14]));

extern "C" fn hook_buffer_1(buffer: *mut *mut c_void, size: *mut usize) {
    put_opt(buffer, HOOKS_1.0.get().cast());
    put_opt(size, 1024);
}

extern "C" fn hook_buffer_2(buffer: *mut *mut c_void, size: *mut usize) {
    put_opt(buffer, HOOKS_2.0.get().cast());
    put_opt(size, 14);
}

pub static TOOL_HOOKS: Table<7> = Table::new([
    size_word::<7>(),
    NS,
    hook_buffer_1 as *const c_void,
    NS,
    NS,
    NS,
    hook_buffer_2 as *const c_void,
]);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::result;

    #[test]
    fn context_checks_report_no_flags() {
        assert_eq!(CONTEXT_CHECKS.0[0] as usize, 15 * 8);
        let mut flags = 7;
        let mut other = 0x55 as *const c_void;
        assert_eq!(
            context_check(std::ptr::null_mut(), &mut flags, &mut other),
            result::SUCCESS
        );
        assert_eq!((flags, other as usize), (0, 0x55));
        assert_eq!(check_flags(), 0);
    }

    #[test]
    fn hook_buffers_are_zeroed_and_sized() {
        assert_eq!(TOOL_HOOKS.0[0] as usize, 7 * 8);
        let (mut buffer, mut size) = (std::ptr::null_mut(), 0);
        hook_buffer_1(&mut buffer, &mut size);
        assert_eq!(size, 1024);
        // SAFETY: the buffer has `size` bytes and lives for the program.
        let bytes = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), size) };
        assert!(bytes.iter().all(|b| *b == 0));
        hook_buffer_2(&mut buffer, &mut size);
        assert_eq!(size, 14);
    }
}
