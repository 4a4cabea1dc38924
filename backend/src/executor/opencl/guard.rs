//! Checks on guest input that OpenCL implementations do not make safely:
//! what would read host files at build time, crash a driver, or end the
//! daemon (found by fuzzing and review; see SECURITY.md).

use vgpu_protocol::Status;

/// Preprocessor directives that read files.
const FILE_DIRECTIVES: &[&str] = &["include", "include_next", "import", "embed"];

/// Compiler options that read files or load code: include paths, forced
/// includes, response files, plugins, raw driver options.
const FILE_OPTIONS: &[&str] = &[
    "-I",
    "-include",
    "-imacros",
    "-iquote",
    "-isystem",
    "-idirafter",
    "-iprefix",
    "-iwithprefix",
    "-isysroot",
    "--include",
    "--sysroot",
    "-Xclang",
    "-Xlinker",
    "-mllvm",
    "-load",
    "-fplugin",
    "-fpass-plugin",
    "-B",
    "-L",
    "-l",
    "-o",
    "-MF",
    "-MD",
    "-MMD",
    "-save-temps",
    "-spir-std",
];

/// The source with line splices removed and comments replaced by spaces,
/// as the preprocessor sees it.
fn without_comments(source: &[u8]) -> Vec<u8> {
    let mut joined = Vec::with_capacity(source.len());
    let mut i = 0;
    while i < source.len() {
        match splice_length(&source[i..]) {
            Some(length) => i += length,
            None => {
                joined.push(source[i]);
                i += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(joined.len());
    let mut i = 0;
    while i < joined.len() {
        if joined[i..].starts_with(b"/*") {
            i = match joined[i + 2..].windows(2).position(|w| w == b"*/") {
                Some(end) => i + 2 + end + 2,
                None => joined.len(),
            };
            out.push(b' ');
        } else if joined[i..].starts_with(b"//") {
            while i < joined.len() && joined[i] != b'\n' && joined[i] != b'\r' {
                i += 1;
            }
            out.push(b' ');
        } else if joined[i] == b'"' || joined[i] == b'\'' {
            // A literal is copied whole: comment markers inside it start
            // no comment, so they cannot hide a directive from this check.
            let quote = joined[i];
            out.push(quote);
            i += 1;
            while i < joined.len() && joined[i] != b'\n' && joined[i] != b'\r' {
                out.push(joined[i]);
                i += 1;
                match joined[i - 1] {
                    b'\\' if i < joined.len() => {
                        out.push(joined[i]);
                        i += 1;
                    }
                    byte if byte == quote => break,
                    _ => {}
                }
            }
        } else {
            out.push(joined[i]);
            i += 1;
        }
    }
    out
}

/// The length of a line splice at the start of `text`, if one is there.
/// Clang splices at a backslash or the trigraph `??/`, followed by
/// optional horizontal white space (it only warns about that) and a
/// newline in any of its spellings.
fn splice_length(text: &[u8]) -> Option<usize> {
    let mut at = if text.starts_with(b"\\") {
        1
    } else if text.starts_with(b"??/") {
        3
    } else {
        return None;
    };
    while matches!(text.get(at), Some(b' ' | b'\t' | 0x0b | 0x0c)) {
        at += 1;
    }
    match (text.get(at), text.get(at + 1)) {
        (Some(b'\r'), Some(b'\n')) => Some(at + 2),
        (Some(b'\r' | b'\n'), _) => Some(at + 1),
        _ => None,
    }
}

/// Refuses program sources with directives that read host files: the
/// guest's headers are never on the host, so such a program could only
/// read the host's files into its build log. Deliberately broad: a
/// directive introducer (`#`, `%:`, `??=`) anywhere, followed by any white
/// space or comments and a file-reading directive name, is refused, so no
/// line-ending or white-space spelling slips through.
pub fn check_source(source: &[u8]) -> Result<(), Status> {
    if source.is_empty() || source.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(Status::INVALID_VALUE);
    }
    let text = without_comments(source);
    super::pragma::check_source(&text)?;
    let mut i = 0;
    while i < text.len() {
        let introducer = if text[i] == b'#' {
            1
        } else if text[i..].starts_with(b"%:") {
            2
        } else if text[i..].starts_with(b"??=") {
            3
        } else {
            i += 1;
            continue;
        };
        let mut at = i + introducer;
        while at < text.len()
            && (text[at].is_ascii_whitespace() || text[at] == 0x0b || text[at] == 0x0c)
        {
            at += 1;
        }
        let word: Vec<u8> = text[at..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .copied()
            .collect();
        if FILE_DIRECTIVES
            .iter()
            .any(|d| d.as_bytes() == word.as_slice())
        {
            return Err(Status::INVALID_VALUE);
        }
        i += introducer;
    }
    Ok(())
}

/// Refuses build options that read files or load code on the host.
pub fn check_options(options: &[u8], invalid: Status) -> Result<(), Status> {
    let text = std::str::from_utf8(options).map_err(|_| invalid)?;
    super::pragma::check_options(text, invalid)?;
    for token in text.split_ascii_whitespace() {
        let token = token.trim_matches(|c| c == '"' || c == '\'');
        if token.starts_with('@') || FILE_OPTIONS.iter().any(|o| token.starts_with(o)) {
            return Err(invalid);
        }
    }
    Ok(())
}

/// Refuses queue properties beyond host queues: a device-side queue ends
/// some implementations (PoCL calls exit()).
pub fn check_queue_properties(properties: &[u64]) -> Result<(), Status> {
    const QUEUE_PROPERTIES: u64 = 0x1093;
    const ALLOWED_BITS: u64 = 0b11; // out-of-order, profiling
    for pair in properties.chunks(2) {
        match pair {
            [0] | [0, _] => break,
            [QUEUE_PROPERTIES, bits] if bits & !ALLOWED_BITS == 0 => {}
            [QUEUE_PROPERTIES, _] => return Err(Status::INVALID_QUEUE_PROPERTIES),
            _ => return Err(Status::INVALID_VALUE),
        }
    }
    Ok(())
}

/// Bytes that may belong to a host path.
fn is_path_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'/' | b'~' | b'+' | b'@' | b'%')
}

/// A build log with host paths cut to their last component: the host
/// compiler names its own files (PoCL compiles a temporary copy of the
/// source under `~/.cache/pocl/kcache/` or `/tmp`), which tells a guest
/// the daemon's user, home and layout. An absolute path of at least two
/// components (`/a/b`, `~/a`) becomes its file name, so the log still
/// says `tempfile_x.cl:1:39: use of undeclared identifier`; a lone `/x`
/// (often division in a quoted source line) stays.
pub fn scrub_host_paths(log: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(log.len());
    let mut i = 0;
    while i < log.len() {
        let starts = (log[i] == b'/' || log[i..].starts_with(b"~/"))
            && (i == 0 || !is_path_byte(log[i - 1]));
        if !starts {
            out.push(log[i]);
            i += 1;
            continue;
        }
        let end = i + log[i..].iter().take_while(|b| is_path_byte(**b)).count();
        let token = &log[i..end];
        let slashes = token.iter().filter(|b| **b == b'/').count();
        if slashes >= 2 || (token.starts_with(b"~/") && token.len() > 2) {
            let name = token.rsplit(|b| *b == b'/').next().unwrap_or_default();
            out.extend_from_slice(name);
        } else {
            out.extend_from_slice(token);
        }
        i = end;
    }
    out
}

/// Guest warnings of the checks here, for every session of the process
/// (a refused call has no VM at hand; one process serves one VM).
pub(super) fn warnings() -> &'static crate::ratelimit::WarnLimiter {
    static LIMITER: std::sync::OnceLock<crate::ratelimit::WarnLimiter> = std::sync::OnceLock::new();
    LIMITER.get_or_init(Default::default)
}

/// Refuses launch geometry a driver cannot count: PoCL's CPU device keeps
/// the number of work-groups in 32 bits and aborts the whole daemon when
/// it wraps (`get_wg_index_range: Assertion 'max_wgs > 0'`, with a 2-D
/// launch of 2^31 x 2^31 and no local size). So: every global size below
/// 2^32; with a local size, fewer than 2^32 work-groups; without one, the
/// driver picks the local size (PoCL may pick 1 for sizes with no small
/// divisors), so fewer than 2^32 work-items in all, which bounds the
/// groups whatever it picks. Refused with `CL_INVALID_GLOBAL_WORK_SIZE`.
pub fn check_launch(
    work_dim: usize,
    global: &[usize; 3],
    local: Option<&[usize; 3]>,
) -> Result<(), Status> {
    let dims = &global[..work_dim.min(3)];
    let refuse = |why: &str| {
        crate::guest_warn!(
            warnings(),
            "refusing a kernel launch of {dims:?} work-items: {why}"
        );
        Err(Status::INVALID_GLOBAL_WORK_SIZE)
    };
    if dims.iter().any(|&g| g > u32::MAX as usize) {
        return refuse("a global size of 2^32 or more");
    }
    let items: u128 = dims.iter().map(|&g| g as u128).product();
    match local {
        Some(local) => {
            let mut groups: u128 = 1;
            for d in 0..dims.len() {
                if local[d] == 0 {
                    return Err(Status::INVALID_WORK_GROUP_SIZE);
                }
                groups *= dims[d].div_ceil(local[d]) as u128;
            }
            if groups > u32::MAX as u128 {
                return refuse("2^32 or more work-groups");
            }
        }
        None if items > u32::MAX as u128 => {
            return refuse("2^32 or more work-items without a local size");
        }
        None => {}
    }
    Ok(())
}

/// The alignment PoCL's CPU device gives each `__local` argument in the
/// work-group's local memory block (its largest extended alignment).
const LOCAL_ARG_ALIGN: u64 = 128;

/// Refuses `__local` arguments that do not fit the device's local memory:
/// PoCL's CPU device lays them out one after another, each at a 128-byte
/// boundary, in a block of `CL_DEVICE_LOCAL_MEM_SIZE`, and aborts the whole
/// process when they overflow it (`setup_kernel_arg_array_with_locals:
/// Assertion 'start - local_mem <= local_mem_size'`, found by the
/// dispatcher fuzz target with a 7 TB argument). Refused, as a driver with
/// too little memory for a launch answers, with `CL_OUT_OF_RESOURCES`.
pub fn check_local_args(sizes: &[u64], device_local_mem: u64) -> Result<(), Status> {
    let needed = sizes.iter().try_fold(0u64, |at, &size| {
        at.checked_next_multiple_of(LOCAL_ARG_ALIGN)?
            .checked_add(size)
    });
    match needed {
        Some(needed) if needed <= device_local_mem => Ok(()),
        _ => {
            crate::guest_warn!(
                warnings(),
                "refusing a kernel launch: __local arguments of {sizes:?} bytes exceed the device's {device_local_mem} bytes of local memory"
            );
            Err(Status::OUT_OF_RESOURCES)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_arguments_must_fit_local_memory_with_their_alignment() {
        assert!(check_local_args(&[], 0).is_ok());
        assert!(check_local_args(&[4096, 4096], 8192).is_ok());
        // The second argument starts at 128, not 100.
        assert!(check_local_args(&[100, 8064], 8192).is_ok());
        assert!(check_local_args(&[100, 8065], 8192).is_err());
        assert!(check_local_args(&[7_696_581_394_448], 65_536).is_err());
        assert!(check_local_args(&[u64::MAX, u64::MAX], u64::MAX).is_err());
    }

    #[test]
    fn sources_that_read_files_are_refused_in_every_spelling() {
        for bad in [
            &b"#include \"/etc/passwd\"\n"[..],
            b"  #  include </etc/shadow>",
            b"#/* c */include \"x\"",
            b"%:include \"x\"",
            b"#inc\\\nlude \"x\"",
            b"kernel void k(){}\n#embed \"/etc/hostname\"",
            b"#import \"x\"",
            b"/* a comment\n */ #include \"x\"\n",
            b"1;\r#include \"x\"\r",
            b"\x0c#include \"x\"\n",
            b"\x0b#include \"x\"\n",
            b"\xef\xbb\xbf#include \"x\"",
            b"#inc??/\nlude \"x\"",
            b"#inc\\ \t\r\nlude \"x\"",
            b"#inc??/\x0c\rlude \"x\"",
            b"\"/*\"\n#include \"x\"\n\"*/\"",
            b"'/*'\n#include \"x\"\n'*/'",
            b"\"\\\"/*\"\n#include \"x\"\n\"*/\"",
            b"",
            b"  \n ",
        ] {
            assert!(
                check_source(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert!(check_source(
            b"#define N 4\nkernel void k(global int* a){ a[0] = N; } // #include nothing"
        )
        .is_ok());
        assert!(check_source(b"#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n").is_ok());
    }

    #[test]
    fn options_that_read_files_are_refused() {
        for bad in [
            "-I/etc",
            "-include /etc/passwd",
            "@/etc/passwd",
            "-Xclang -load",
            "-DX=1 -imacros /x",
        ] {
            assert!(
                check_options(bad.as_bytes(), Status::INVALID_BUILD_OPTIONS).is_err(),
                "{bad}"
            );
        }
        assert!(check_options(
            b"-DN=4 -cl-fast-relaxed-math -cl-std=CL1.2 -w",
            Status::INVALID_BUILD_OPTIONS
        )
        .is_ok());
    }

    #[test]
    fn only_host_queues_are_accepted() {
        assert!(check_queue_properties(&[0x1093, 0b11, 0]).is_ok());
        assert!(check_queue_properties(&[0x1093, 0b101, 0x1094, 16, 0]).is_err());
        assert!(check_queue_properties(&[0x1094, 16, 0]).is_err());
    }

    #[test]
    fn build_logs_lose_host_paths_but_keep_the_message() {
        let scrub = |log: &str| String::from_utf8(scrub_host_paths(log.as_bytes())).unwrap();
        assert_eq!(
            scrub("error: /root/.cache/pocl/kcache/tempfile_YAuo2T.cl:1:39: use of undeclared identifier"),
            "error: tempfile_YAuo2T.cl:1:39: use of undeclared identifier"
        );
        assert_eq!(
            scrub("In file included from /usr/lib/clc/x.h:3:"),
            "In file included from x.h:3:"
        );
        assert_eq!(
            scrub("see ~/.cache/pocl and \"/tmp/a/b.cl\""),
            "see pocl and \"b.cl\""
        );
        assert_eq!(
            scrub("int x = a /b; int y = c/d/e;"),
            "int x = a /b; int y = c/d/e;"
        );
        assert_eq!(scrub("/home/u/"), "");
    }

    #[test]
    fn launches_beyond_32_bit_group_ids_are_refused() {
        assert!(check_launch(1, &[1 << 32, 1, 1], Some(&[1, 1, 1])).is_err());
        assert!(check_launch(2, &[1 << 16, 1 << 16, 1], Some(&[1, 1, 1])).is_err());
        assert!(check_launch(2, &[1 << 16, 1 << 16, 1], Some(&[16, 16, 1])).is_ok());
        assert!(check_launch(1, &[1024, 1, 1], None).is_ok());
    }

    #[test]
    fn launches_without_a_local_size_are_bounded_by_their_work_items() {
        // The launch that aborted PoCL 3.1: 2^31 x 2^31, no local size.
        assert_eq!(
            check_launch(2, &[1 << 31, 1 << 31, 1], None),
            Err(Status::INVALID_GLOBAL_WORK_SIZE)
        );
        // Two primes: the driver can only pick 1 x 1, so every item is a group.
        assert!(check_launch(2, &[65_537, 65_539, 1], None).is_err());
        assert!(check_launch(3, &[1 << 11, 1 << 11, 1 << 9], None).is_ok());
        assert!(check_launch(3, &[1 << 11, 1 << 11, 1 << 10], None).is_err());
        // Dimensions past `work_dim` do not count.
        assert!(check_launch(1, &[1 << 20, 1 << 20, 1 << 20], None).is_ok());
        // The same sizes with a local size that keeps groups in 32 bits run.
        assert!(check_launch(2, &[65_536, 65_536, 1], Some(&[256, 1, 1])).is_ok());
    }
}
