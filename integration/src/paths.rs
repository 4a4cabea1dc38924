//! Where the build put things (see `scripts/setup.sh`).

use std::path::{Path, PathBuf};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("integration/ has a parent")
        .to_path_buf()
}

/// `target/<profile>` of the binaries under test; `VGPU_PROFILE` picks
/// `release` (default `debug`, what `cargo test` builds).
pub fn target_dir() -> PathBuf {
    let profile = std::env::var("VGPU_PROFILE").unwrap_or_else(|_| "debug".into());
    root().join("target").join(profile)
}

pub fn backend_binary() -> PathBuf {
    target_dir().join("vgpu-backend")
}

pub fn icd_library() -> PathBuf {
    target_dir().join("libvgpu_opencl.so")
}

/// The OpenCL C test programs (`make -C integration/cl-tests`).
pub fn cl_tests_dir() -> PathBuf {
    std::env::var_os("VGPU_CL_TESTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/cl-tests"))
}

/// The patched QEMU that `scripts/setup.sh` recorded, if any.
pub fn qemu() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("VGPU_QEMU") {
        return Some(PathBuf::from(path));
    }
    let recorded = std::fs::read_to_string(root().join("target/qemu-path")).ok()?;
    let path = PathBuf::from(recorded.trim());
    path.exists().then_some(path)
}

/// The guest image directory (`vmlinux`, `initramfs.gz`), if built.
pub fn guest_image() -> Option<PathBuf> {
    let dir = std::env::var_os("VGPU_GUEST_IMAGE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target/guest-image"));
    (dir.join("vmlinux").exists() && dir.join("initramfs.gz").exists()).then_some(dir)
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vgpu-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}
