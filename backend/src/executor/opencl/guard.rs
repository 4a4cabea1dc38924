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

/// Skips spaces, tabs and block comments.
fn skip_blank(line: &[u8], mut at: usize) -> usize {
    loop {
        while at < line.len() && (line[at] == b' ' || line[at] == b'\t') {
            at += 1;
        }
        if line[at..].starts_with(b"/*") {
            match line[at + 2..].windows(2).position(|w| w == b"*/") {
                Some(end) => at += 2 + end + 2,
                None => return line.len(),
            }
        } else {
            return at;
        }
    }
}

/// Refuses program sources with directives that read host files: the
/// guest's headers are never on the host, so such a program could only
/// read the host's files into its build log.
pub fn check_source(source: &[u8]) -> Result<(), Status> {
    if source.is_empty() || source.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(Status::INVALID_VALUE);
    }
    // Line splices join lines before directives are recognised.
    let mut joined = Vec::with_capacity(source.len());
    let mut i = 0;
    while i < source.len() {
        if source[i] == b'\\' && source.get(i + 1) == Some(&b'\n') {
            i += 2;
        } else if source[i] == b'\\'
            && source.get(i + 1) == Some(&b'\r')
            && source.get(i + 2) == Some(&b'\n')
        {
            i += 3;
        } else {
            joined.push(source[i]);
            i += 1;
        }
    }
    for line in joined.split(|b| *b == b'\n') {
        let at = skip_blank(line, 0);
        let rest = &line[at..];
        let after = if rest.starts_with(b"#") {
            at + 1
        } else if rest.starts_with(b"%:") || rest.starts_with(b"??=") {
            at + if rest[0] == b'%' { 2 } else { 3 }
        } else {
            continue;
        };
        let word_at = skip_blank(line, after);
        let word: Vec<u8> = line[word_at..]
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
    }
    Ok(())
}

/// Refuses build options that read files or load code on the host.
pub fn check_options(options: &[u8], invalid: Status) -> Result<(), Status> {
    let text = std::str::from_utf8(options).map_err(|_| invalid)?;
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

/// Refuses launches whose group ids would not fit 32 bits (crashes PoCL's
/// CPU device).
pub fn check_launch(
    work_dim: usize,
    global: &[usize; 3],
    local: Option<&[usize; 3]>,
) -> Result<(), Status> {
    if global[..work_dim].iter().any(|&g| g > u32::MAX as usize) {
        return Err(Status::INVALID_GLOBAL_WORK_SIZE);
    }
    if let Some(local) = local {
        let mut groups: u128 = 1;
        for d in 0..work_dim {
            if local[d] == 0 {
                return Err(Status::INVALID_WORK_GROUP_SIZE);
            }
            groups *= global[d].div_ceil(local[d]) as u128;
        }
        if groups > u32::MAX as u128 {
            return Err(Status::INVALID_GLOBAL_WORK_SIZE);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn launches_beyond_32_bit_group_ids_are_refused() {
        assert!(check_launch(1, &[1 << 32, 1, 1], Some(&[1, 1, 1])).is_err());
        assert!(check_launch(2, &[1 << 16, 1 << 16, 1], Some(&[1, 1, 1])).is_err());
        assert!(check_launch(2, &[1 << 16, 1 << 16, 1], Some(&[16, 16, 1])).is_ok());
        assert!(check_launch(1, &[1024, 1, 1], None).is_ok());
    }
}
