//! The table against the committed dump of the real driver, the two entry
//! points' edge cases against the driver's probes, and what the traced
//! vecadd program needs against what this library implements.

use super::*;

const DUMP: &str = include_str!("../../../traces/procaddr-dump.txt");
const VECADD: &str = include_str!("../../../traces/vecadd-static.txt");
const TORCH: &str = include_str!("../../../traces/torch.txt");
const CUPY: &str = include_str!("../../../traces/cupy.txt");

fn as_dump_text(answer: CuResult<Answer>) -> String {
    match answer {
        Ok(Answer::Sym(symbol)) => symbol.to_owned(),
        Ok(Answer::NotFound) => "!0/1".to_owned(),
        Ok(Answer::TooOld) => "!0/2".to_owned(),
        Err(code) => format!("!{code}/-1"),
    }
}

/// Every (name, flags) line of the dump: its cut-overs, first version first.
fn dump_lines() -> impl Iterator<Item = (&'static str, u64, Vec<(i32, &'static str)>)> {
    DUMP.lines()
        .filter(|line| !line.starts_with("probe") && !line.starts_with("v1diff"))
        .map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next().expect("a name");
            let flags = words.next().expect("flags").parse().expect("numeric flags");
            let cuts = words
                .map(|cut| {
                    let (version, answer) = cut.split_once(':').expect("version:answer");
                    (version.parse().expect("numeric version"), answer)
                })
                .collect();
            (name, flags, cuts)
        })
}

#[test]
fn table_answers_what_the_driver_answered_at_every_sampled_version() {
    let mut checked = 0;
    for (name, flags, cuts) in dump_lines() {
        for version in (0..=13200).step_by(10) {
            let expected = cuts
                .iter()
                .rev()
                .find(|cut| cut.0 <= version)
                .expect("the dump starts at version 0")
                .1;
            assert_eq!(
                as_dump_text(driver_answer(name, version, flags)),
                expected,
                "{name} at {version} with flags {flags}"
            );
            checked += 1;
        }
    }
    assert!(
        checked > 2_000_000,
        "the dump has every exported name: {checked}"
    );
}

#[test]
fn version_cut_overs_match_cuda_13() {
    let at = |name, version, flags| driver_answer(name, version, flags).expect("valid");
    assert_eq!(at("cuCtxCreate", 3020, 0), Answer::Sym("cuCtxCreate_v2"));
    assert_eq!(at("cuCtxCreate", 11040, 0), Answer::Sym("cuCtxCreate_v3"));
    assert_eq!(at("cuCtxCreate", 12050, 0), Answer::Sym("cuCtxCreate_v4"));
    assert_eq!(
        at("cuCtxSynchronize", 12090, 0),
        Answer::Sym("cuCtxSynchronize")
    );
    assert_eq!(
        at("cuCtxSynchronize", 13000, 0),
        Answer::Sym("cuCtxSynchronize_v2")
    );
    assert_eq!(
        at("cuCtxGetDevice", 13000, 0),
        Answer::Sym("cuCtxGetDevice_v2")
    );
    assert_eq!(at("cuMemcpyHtoD", 3020, 2), Answer::TooOld);
    assert_eq!(
        at("cuMemcpyHtoD", 7000, 2),
        Answer::Sym("cuMemcpyHtoD_v2_ptds")
    );
    assert_eq!(at("cuLaunchKernel", 4000, 2), Answer::TooOld);
    assert_eq!(
        at("cuLaunchKernel", 7000, 2),
        Answer::Sym("cuLaunchKernel_ptsz")
    );
    assert_eq!(at("cuMemAlloc", -1, 0), Answer::Sym("cuMemAlloc_v2"));
    assert_eq!(at("cuMemAlloc_v2", 13000, 0), Answer::NotFound);
    assert_eq!(at("cuMemAlloc", 0, 0), Answer::TooOld);
    assert_eq!(
        driver_answer("cuMemAlloc", DRIVER_VERSION + 1, 0),
        Err(result::ERROR_INVALID_VALUE)
    );
    assert_eq!(
        driver_answer("cuMemAlloc", 13000, 4),
        Err(result::ERROR_INVALID_VALUE)
    );
}

/// Calls `cuGetProcAddress_v2` with a sentinel in `*pfn` and `status`.
fn v2(name: &std::ffi::CStr, version: c_int, flags: u64) -> (CUresult, *mut c_void, c_int) {
    let mut pfn = 0xdead_beef_usize as *mut c_void;
    let mut status = 77;
    // SAFETY: a NUL-terminated name and valid output pointers.
    let code = unsafe { cuGetProcAddress_v2(name.as_ptr(), &mut pfn, version, flags, &mut status) };
    (code, pfn, status)
}

/// Calls `cuGetProcAddress` with a sentinel in `*pfn`.
fn v1(name: &std::ffi::CStr, version: c_int, flags: u64) -> (CUresult, *mut c_void) {
    let mut pfn = 0xdead_beef_usize as *mut c_void;
    // SAFETY: a NUL-terminated name and a valid output pointer.
    let code = unsafe { cuGetProcAddress(name.as_ptr(), &mut pfn, version, flags) };
    (code, pfn)
}

#[test]
fn missing_name_succeeds_with_null_in_v2_and_is_not_found_in_v1() {
    let sentinel = 0xdead_beef_usize as *mut c_void;
    assert_eq!(
        v2(c"cuNoSuchSymbol", 13000, 0),
        (0, std::ptr::null_mut(), SYMBOL_NOT_FOUND)
    );
    assert_eq!(
        v2(c"", 13000, 0),
        (0, std::ptr::null_mut(), SYMBOL_NOT_FOUND)
    );
    assert_eq!(
        v2(c"cuMemAllocAsync", 11000, 0),
        (0, std::ptr::null_mut(), VERSION_NOT_SUFFICIENT)
    );
    assert_eq!(
        v1(c"cuNoSuchSymbol", 13000, 0),
        (result::ERROR_NOT_FOUND, sentinel)
    );
    assert_eq!(
        v1(c"cuMemAllocAsync", 11000, 0),
        (result::ERROR_NOT_FOUND, sentinel)
    );
    assert_eq!(
        v2(c"cuMemAlloc", 13005, 0),
        (result::ERROR_INVALID_VALUE, sentinel, 77)
    );
    assert_eq!(
        v2(c"cuMemAlloc", 13000, 4),
        (result::ERROR_INVALID_VALUE, sentinel, 77)
    );
    assert_eq!(
        v1(c"cuMemAlloc", 99999, 0),
        (result::ERROR_INVALID_VALUE, sentinel)
    );
}

#[test]
fn found_names_give_this_librarys_functions() {
    assert_eq!(
        v2(c"cuCtxCreate", 3020, 0),
        (0, context::cuCtxCreate_v2 as *mut c_void, SYMBOL_SUCCESS)
    );
    assert_eq!(
        v2(c"cuCtxCreate", 12050, 0).1,
        context::cuCtxCreate_v4 as *mut c_void
    );
    assert_eq!(
        v2(c"cuCtxSynchronize", 13000, 0).1,
        context::cuCtxSynchronize_v2 as *mut c_void
    );
    assert_eq!(
        v2(c"cuCtxSynchronize", 12000, 0).1,
        context::cuCtxSynchronize as *mut c_void
    );
    assert_eq!(
        v2(c"cuMemcpyHtoD", 7000, 2).1,
        memory::cuMemcpyHtoD_v2 as *mut c_void
    );
    assert_eq!(
        v1(c"cuGetProcAddress", 12000, 0).1,
        cuGetProcAddress_v2 as *mut c_void
    );
    assert_eq!(
        v1(c"cuGetProcAddress", 11030, 0).1,
        cuGetProcAddress as *mut c_void
    );
}

#[test]
fn symbols_not_implemented_answer_not_supported() {
    let mut stubs = 0;
    for (_, default, per_thread) in table::TABLE {
        for cut in default.iter().chain(per_thread.unwrap_or(&[])) {
            let Answer::Sym(symbol) = cut.1 else { continue };
            let f = function(symbol);
            assert!(!f.is_null(), "{symbol}");
            if implemented(symbol).is_none() {
                // SAFETY: every function `function` gives for a symbol this
                // library does not implement takes no arguments.
                let stub: extern "C" fn() -> CUresult = unsafe { std::mem::transmute(f) };
                assert_eq!(stub(), result::ERROR_NOT_SUPPORTED, "{symbol}");
                stubs += 1;
            }
        }
    }
    assert!(stubs > 0);
    // The old ABIs (32-bit device pointers) are not this library's `_v2` bodies.
    assert_eq!(implemented("cuMemAlloc"), None);
    assert_eq!(implemented("cuCtxCreate"), None);
}

#[test]
fn implemented_names_are_symbols_the_driver_gives() {
    let given: std::collections::HashSet<&str> = table::TABLE
        .iter()
        .flat_map(|(_, default, per_thread)| default.iter().chain(per_thread.unwrap_or(&[])))
        .filter_map(|cut| match cut.1 {
            Answer::Sym(symbol) => Some(symbol),
            _ => None,
        })
        .collect();
    let mut ours = 0;
    for symbol in &given {
        ours += usize::from(implemented(symbol).is_some());
    }
    for symbol in [
        "cuMemAlloc_v2",
        "cuCtxSynchronize_v2",
        "cuCtxGetDevice_v2",
        "cuLaunchKernel",
    ] {
        assert!(
            given.contains(symbol) && implemented(symbol).is_some(),
            "{symbol}"
        );
    }
    assert!(ours >= 90, "{ours}");
}

/// What the traced programs called and this library does not implement
/// (through `cuGetProcAddress` or by name). Shrink these as it grows.
const VECADD_STILL_MISSING: &[&str] = &[];
const TORCH_STILL_MISSING: &[&str] = &[];
const CUPY_STILL_MISSING: &[&str] = &[];

fn missing(trace: &str) -> Vec<&str> {
    let calls = trace.split("\n[calls]").nth(1).expect("a [calls] section");
    let mut missing: Vec<&str> = calls
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().next())
        .filter(|symbol| implemented(symbol).is_none())
        .collect();
    missing.sort_unstable();
    missing.dedup();
    missing
}

#[test]
fn traced_programs_need_only_known_missing_entry_points() {
    assert_eq!(missing(VECADD), VECADD_STILL_MISSING);
    assert_eq!(missing(TORCH), TORCH_STILL_MISSING);
    assert_eq!(missing(CUPY), CUPY_STILL_MISSING);
}
