//! Context checks (`263e8860-…`, 15 words), a small guest-local table
//! every cudart asks for early: cudart calls slot 2 with a context and two
//! outputs, and slot 3 with none. Per ZLUDA's notes slot 2 reports flag
//! bits that are never observably set (first output 0, second left alone)
//! and slot 3 answers 0.

use std::ffi::{c_uint, c_void};

use super::{refusing, Table};
use crate::ffi::{guard, put, CUresult, Handle};

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

pub static CONTEXT_CHECKS: Table<15> = Table::new({
    let mut words = refusing::<15>();
    words[2] = context_check as *const c_void;
    words[3] = check_flags as *const c_void;
    words
});

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
}
