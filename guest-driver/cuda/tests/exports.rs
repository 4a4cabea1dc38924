//! The built `libvgpu_cuda.so` exports every function NVIDIA's driver
//! exports (`traces/exported-names.txt`, driver 580), so libraries that
//! `dlopen("libcuda.so.1")` and `dlsym` a fixed list start: cuBLASLt 13.1
//! refuses to (`CUBLAS_STATUS_INTERNAL_ERROR` from `cublasCreate`) when one
//! of its 82 names is missing. Checked through the dynamic loader, on the
//! library itself, not on a list in the source.

use std::ffi::{c_void, CString};
use std::path::{Path, PathBuf};

/// The cdylib cargo built for this test: beside the test binary, in
/// `target/<profile>/deps/`.
fn library_path() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent().expect("deps dir").join("libvgpu_cuda.so")
}

/// The driver's exported functions, less the debugger's `cudbg*` hooks
/// (not driver-API functions).
fn driver_names() -> Vec<String> {
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("traces/exported-names.txt");
    std::fs::read_to_string(list)
        .expect("traces/exported-names.txt")
        .lines()
        .map(str::trim)
        .filter(|n| n.starts_with("cu") && !n.starts_with("cudbg"))
        .map(str::to_owned)
        .collect()
}

struct Library(*mut c_void);

impl Library {
    fn open(path: &Path) -> Self {
        let c = CString::new(path.to_str().expect("UTF-8 path")).expect("no NUL in path");
        // SAFETY: a NUL-terminated path; loading runs no code of the
        // library's own (it has no constructors that touch a device).
        let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "dlopen {}", path.display());
        Self(handle)
    }

    fn get(&self, name: &str) -> Option<*mut c_void> {
        let c = CString::new(name).expect("no NUL in a symbol name");
        // SAFETY: a live handle from dlopen and a NUL-terminated name.
        let f = unsafe { libc::dlsym(self.0, c.as_ptr()) };
        (!f.is_null()).then_some(f)
    }
}

impl Drop for Library {
    fn drop(&mut self) {
        // SAFETY: the handle came from dlopen and is closed once.
        unsafe { libc::dlclose(self.0) };
    }
}

#[test]
fn every_driver_function_is_exported() {
    let names = driver_names();
    assert!(names.len() > 600, "the list holds the whole driver");
    let library = Library::open(&library_path());
    let missing: Vec<&String> = names.iter().filter(|n| library.get(n).is_none()).collect();
    assert!(missing.is_empty(), "not exported: {missing:?}");
}

#[test]
fn functions_cublaslt_needs_and_vgpu_lacks_answer_not_supported() {
    const NOT_SUPPORTED: i32 = 801;
    let library = Library::open(&library_path());
    for name in [
        "cuGraphInstantiate",
        "cuStreamWaitValue32",
        "cuThreadExchangeStreamCaptureMode",
    ] {
        let f = library
            .get(name)
            .unwrap_or_else(|| panic!("{name} exported"));
        // SAFETY: the unsupported stubs take no arguments and return a
        // CUresult (`src/api/unsupported.rs`).
        let stub: extern "C" fn() -> i32 = unsafe { std::mem::transmute(f) };
        assert_eq!(stub(), NOT_SUPPORTED, "{name}");
    }
}
