//! Keeps clang's debug pragmas out of the daemon. The compiler runs in
//! this process, and `#pragma clang __debug crash` (or `llvm_fatal_error`,
//! …) does what it says: one build would end every VM the daemon serves
//! (finding F10 in SECURITY.md).
//!
//! The pragma can be spelt literally, which [`check_source`] refuses, or
//! assembled by token pasting into the `_Pragma` operator, which no text
//! check can see; there the operator itself is defined away by a prefix
//! put before the guest's source, on the compilers that take it
//! (clang-based ones: PoCL, rusticl, Intel). A build option cannot do it:
//! PoCL refuses `-Wno-…` options, and the redefinition warning would fail
//! a guest's `-Werror` build.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use cl3::types::{cl_context, cl_device_id};
use vgpu_protocol::Status;

/// Defines `_Pragma(x)` as nothing without a warning, then numbers the
/// guest's lines from 1 again so build logs point where the guest expects.
const OPERATOR_OFF: &str = "#pragma clang diagnostic ignored \"-Wbuiltin-macro-redefined\"\n\
                            #define _Pragma(x)\n\
                            #line 1\n";

/// Refuses sources that name clang's debug pragma namespace: `__debug` as
/// a whole identifier, also inside `_Pragma("…")` strings.
pub fn check_source(text: &[u8]) -> Result<(), Status> {
    const NAME: &[u8] = b"__debug";
    let is_ident = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'$';
    let found = text.windows(NAME.len()).enumerate().any(|(at, window)| {
        window == NAME
            && (at == 0 || !is_ident(&text[at - 1]))
            && text.get(at + NAME.len()).is_none_or(|b| !is_ident(b))
    });
    if found {
        Err(Status::INVALID_VALUE)
    } else {
        Ok(())
    }
}

/// Refuses build options that would undo the prefix or open other pragma
/// spellings (`-U_Pragma`, `-D_Pragma=…`, Microsoft's `__pragma`).
pub fn check_options(text: &str, invalid: Status) -> Result<(), Status> {
    if text.contains("_Pragma") || text.contains("-fms-") || text.contains("-fdeclspec") {
        Err(invalid)
    } else {
        Ok(())
    }
}

/// The guest's source as the device's compiler gets it: behind the
/// prefix where this compiler takes it (probed once per device).
pub fn guarded_source(context: cl_context, device: cl_device_id, source: &str) -> String {
    static ACCEPTED: OnceLock<Mutex<HashMap<usize, bool>>> = OnceLock::new();
    let accepted = ACCEPTED.get_or_init(Default::default);
    let takes_prefix = *accepted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(device as usize)
        .or_insert_with(|| probe(context, device));
    if takes_prefix {
        format!("{OPERATOR_OFF}{source}")
    } else {
        source.to_string()
    }
}

/// Builds a kernel that uses `_Pragma` behind the prefix with `-Werror`:
/// it builds only if the compiler takes the prefix without a complaint.
fn probe(context: cl_context, device: cl_device_id) -> bool {
    let source =
        format!("{OPERATOR_OFF}_Pragma(\"vgpu probe\")\n__kernel void vgpu_probe(void) {{}}\n");
    let Ok(program) = cl3::program::create_program_with_source(context, &[&source]) else {
        return false;
    };
    let built =
        cl3::program::build_program(program, &[device], c"-Werror", None, std::ptr::null_mut())
            .is_ok();
    // SAFETY: `program` was created above and is released once.
    let _ = unsafe { cl3::program::release_program(program) };
    if !built {
        log::warn!(
            "this device's compiler refuses the _Pragma guard: pasted _Pragma operators reach it"
        );
    }
    built
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_pragmas_are_refused_as_whole_identifiers() {
        for bad in [
            &b"#pragma clang __debug crash\n"[..],
            b"_Pragma(\"clang __debug llvm_fatal_error\")",
            b"__debug",
        ] {
            assert!(
                check_source(bad).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        for good in [
            &b"#define __debug_level 2\n"[..],
            b"int my__debug = 1;",
            b"#pragma unroll 4\n",
        ] {
            assert!(
                check_source(good).is_ok(),
                "{}",
                String::from_utf8_lossy(good)
            );
        }
    }

    #[test]
    fn options_that_reopen_pragmas_are_refused() {
        for bad in ["-U_Pragma", "-D_Pragma(x)=x", "-fms-extensions"] {
            assert!(
                check_options(bad, Status::INVALID_BUILD_OPTIONS).is_err(),
                "{bad}"
            );
        }
        assert!(check_options("-DN=4 -Werror", Status::INVALID_BUILD_OPTIONS).is_ok());
    }
}
