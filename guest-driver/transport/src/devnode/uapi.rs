//! The ioctl ABI of `virtio_vgpu.ko`, mirrored from
//! `guest-driver/kernel/vgpu_uapi.h`. Layouts match the header exactly (a
//! test compiles the header with gcc and compares).

/// `VGPU_MAX_REQUEST_LEN`.
pub const VGPU_MAX_REQUEST_LEN: usize = 16 << 20;
/// `VGPU_MAX_REPLY_LEN`.
pub const VGPU_MAX_REPLY_LEN: usize = 16 << 20;
/// `VGPU_MAX_SEGMENTS`: most segments per direction.
pub const VGPU_MAX_SEGMENTS: usize = 64;
/// `VGPU_MAX_DATA_LEN`: bytes per direction, per batch.
pub const VGPU_MAX_DATA_LEN: usize = 64 << 20;
/// `VGPU_MAX_DESCRIPTORS`: most scatter-gather entries per chain (`E2BIG`).
pub const VGPU_MAX_DESCRIPTORS: usize = 4096;
/// `VGPU_MAX_PENDING`: most tickets one open file may hold unwaited (`EBUSY`).
pub const VGPU_MAX_PENDING: usize = 1024;
/// `VGPU_IOC_MAGIC`.
pub const VGPU_IOC_MAGIC: u8 = b'V';

/// `struct vgpu_segment`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VgpuSegment {
    /// User virtual address.
    pub addr: u64,
    pub len: u64,
}

/// `struct vgpu_submit`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VgpuSubmit {
    pub request: u64,
    pub request_len: u32,
    pub reply_capacity: u32,
    pub out_segs: u64,
    pub in_segs: u64,
    pub n_out: u32,
    pub n_in: u32,
    /// Out: pass to `VGPU_IOC_WAIT`.
    pub ticket: u64,
}

/// `struct vgpu_wait`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VgpuWait {
    pub ticket: u64,
    pub reply: u64,
    pub reply_capacity: u32,
    /// Out: bytes the device wrote to the reply stream.
    pub reply_len: u32,
    /// Negative: wait forever.
    pub timeout_ms: i64,
}

const IOC_NRBITS: u32 = 8;
const IOC_TYPEBITS: u32 = 8;
const IOC_SIZEBITS: u32 = 14;
const IOC_NRSHIFT: u32 = 0;
const IOC_TYPESHIFT: u32 = IOC_NRSHIFT + IOC_NRBITS;
const IOC_SIZESHIFT: u32 = IOC_TYPESHIFT + IOC_TYPEBITS;
const IOC_DIRSHIFT: u32 = IOC_SIZESHIFT + IOC_SIZEBITS;
const IOC_WRITE: u32 = 1;
const IOC_READ: u32 = 2;

/// Linux's `_IOWR(ty, nr, size)` (the generic encoding used on x86, arm64
/// and riscv).
pub const fn iowr(ty: u8, nr: u8, size: usize) -> u32 {
    assert!(size < 1 << IOC_SIZEBITS, "ioctl argument too large");
    ((IOC_READ | IOC_WRITE) << IOC_DIRSHIFT)
        | ((size as u32) << IOC_SIZESHIFT)
        | ((ty as u32) << IOC_TYPESHIFT)
        | ((nr as u32) << IOC_NRSHIFT)
}

/// `VGPU_IOC_SUBMIT`.
pub const VGPU_IOC_SUBMIT: u32 = iowr(VGPU_IOC_MAGIC, 1, std::mem::size_of::<VgpuSubmit>());
/// `VGPU_IOC_WAIT`.
pub const VGPU_IOC_WAIT: u32 = iowr(VGPU_IOC_MAGIC, 2, std::mem::size_of::<VgpuWait>());

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};
    use std::path::Path;
    use std::process::Command;

    #[test]
    fn ioctl_numbers_match_hand_computed_values() {
        assert_eq!(size_of::<VgpuSubmit>(), 48);
        assert_eq!(size_of::<VgpuWait>(), 32);
        assert_eq!(VGPU_IOC_SUBMIT, 0xc030_5601);
        assert_eq!(VGPU_IOC_WAIT, 0xc020_5602);
    }

    /// The Rust view of the header, in the order the C program prints it.
    fn rust_view() -> Vec<(&'static str, u64)> {
        vec![
            ("VGPU_IOC_SUBMIT", VGPU_IOC_SUBMIT.into()),
            ("VGPU_IOC_WAIT", VGPU_IOC_WAIT.into()),
            ("VGPU_MAX_REQUEST_LEN", VGPU_MAX_REQUEST_LEN as u64),
            ("VGPU_MAX_REPLY_LEN", VGPU_MAX_REPLY_LEN as u64),
            ("VGPU_MAX_SEGMENTS", VGPU_MAX_SEGMENTS as u64),
            ("VGPU_MAX_DATA_LEN", VGPU_MAX_DATA_LEN as u64),
            ("VGPU_MAX_DESCRIPTORS", VGPU_MAX_DESCRIPTORS as u64),
            ("VGPU_MAX_PENDING", VGPU_MAX_PENDING as u64),
            (
                "sizeof(struct vgpu_segment)",
                size_of::<VgpuSegment>() as u64,
            ),
            ("sizeof(struct vgpu_submit)", size_of::<VgpuSubmit>() as u64),
            (
                "offsetof(struct vgpu_submit, request_len)",
                offset_of!(VgpuSubmit, request_len) as u64,
            ),
            (
                "offsetof(struct vgpu_submit, reply_capacity)",
                offset_of!(VgpuSubmit, reply_capacity) as u64,
            ),
            (
                "offsetof(struct vgpu_submit, out_segs)",
                offset_of!(VgpuSubmit, out_segs) as u64,
            ),
            (
                "offsetof(struct vgpu_submit, in_segs)",
                offset_of!(VgpuSubmit, in_segs) as u64,
            ),
            (
                "offsetof(struct vgpu_submit, n_out)",
                offset_of!(VgpuSubmit, n_out) as u64,
            ),
            (
                "offsetof(struct vgpu_submit, n_in)",
                offset_of!(VgpuSubmit, n_in) as u64,
            ),
            (
                "offsetof(struct vgpu_submit, ticket)",
                offset_of!(VgpuSubmit, ticket) as u64,
            ),
            ("sizeof(struct vgpu_wait)", size_of::<VgpuWait>() as u64),
            (
                "offsetof(struct vgpu_wait, reply)",
                offset_of!(VgpuWait, reply) as u64,
            ),
            (
                "offsetof(struct vgpu_wait, reply_capacity)",
                offset_of!(VgpuWait, reply_capacity) as u64,
            ),
            (
                "offsetof(struct vgpu_wait, reply_len)",
                offset_of!(VgpuWait, reply_len) as u64,
            ),
            (
                "offsetof(struct vgpu_wait, timeout_ms)",
                offset_of!(VgpuWait, timeout_ms) as u64,
            ),
        ]
    }

    #[test]
    fn layouts_and_numbers_match_the_c_header() {
        let header_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernel");
        if Command::new("gcc").arg("--version").output().is_err() {
            eprintln!("gcc not found: comparing against hand-computed values only");
            return;
        }
        let work = std::env::temp_dir().join(format!("vgpu-uapi-{}", std::process::id()));
        std::fs::create_dir_all(&work).expect("temp dir");
        let mut program = String::from(
            "#include <stdio.h>\n#include <stddef.h>\n#include \"vgpu_uapi.h\"\nint main(void) {\n",
        );
        for (expr, _) in rust_view() {
            program.push_str(&format!(
                "printf(\"%llu\\n\", (unsigned long long)({expr}));\n"
            ));
        }
        program.push_str("return 0;\n}\n");
        let source = work.join("uapi.c");
        let binary = work.join("uapi");
        std::fs::write(&source, program).expect("write C source");
        let status = Command::new("gcc")
            .arg("-I")
            .arg(&header_dir)
            .arg("-o")
            .arg(&binary)
            .arg(&source)
            .status()
            .expect("run gcc");
        assert!(status.success(), "the C program did not compile");
        let output = Command::new(&binary).output().expect("run the C program");
        let printed = String::from_utf8(output.stdout).expect("ASCII output");
        let values: Vec<u64> = printed
            .lines()
            .map(|line| line.parse().expect("a number"))
            .collect();
        let _ = std::fs::remove_dir_all(&work);
        assert_eq!(
            values.len(),
            rust_view().len(),
            "the C program printed {printed:?}"
        );
        for ((expr, rust), c) in rust_view().into_iter().zip(values) {
            assert_eq!(rust, c, "{expr}: Rust has {rust}, C has {c}");
        }
    }
}
