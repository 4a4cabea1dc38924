//! `--peer-memory` (loopback programs): the workers of one backend share
//! one driver cache, so a program's second run finds its kernels built,
//! as a native program finds them in PoCL's own cache; the cache goes
//! when the backend stops. Real daemon, real PoCL.

mod common;

use std::path::{Path, PathBuf};

use common::{calls, req, Backend};

const SOURCE: &[u8] = b"__kernel void scale(__global float *x, float k) {\n\
    x[get_global_id(0)] *= k;\n}\n";

/// Directories of `tmp` whose names start with `prefix`.
fn dirs_named(tmp: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(tmp)
        .expect("read the backend's TMPDIR")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    found.sort();
    found
}

/// Every file beneath `dir`, as paths relative to it.
fn files_beneath(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).expect("read cache directory") {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                todo.push(path);
            } else {
                out.push(path.strip_prefix(dir).expect("beneath").to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// One program run: a front-end of its own builds the kernel.
fn build_once(backend: &Backend) {
    let client = backend.client();
    let context = client.new_handle();
    client.defer(req::context(context)).expect("context");
    calls::built_kernel(&client, context, SOURCE, b"scale");
}

/// Kernel binaries (PoCL's `.so` and `.bc` files) under `cache`, with
/// their inode and modification time: a rebuild writes new files.
fn binaries(cache: &Path, files: &[PathBuf]) -> Vec<(PathBuf, u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "so" || e == "bc"))
        .map(|f| {
            let meta = std::fs::metadata(cache.join(f)).expect("binary's metadata");
            (f.clone(), meta.ino(), meta.mtime(), meta.mtime_nsec())
        })
        .collect()
}

#[test]
fn loopback_programs_share_one_cache_that_goes_with_the_backend() {
    let tmp = std::env::temp_dir().join(format!("vgpu-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("TMPDIR for the backend");
    let tmp_str = tmp.to_str().expect("utf-8 path");
    let mut backend = Backend::start_with(&["--peer-memory"], &[("TMPDIR", tmp_str)]);

    build_once(&backend);
    let shared = dirs_named(&tmp, "vgpu-cache-");
    assert_eq!(shared.len(), 1, "one shared cache: {shared:?}");
    assert!(
        dirs_named(&tmp, "vgpu-worker-").is_empty(),
        "no private caches beside the shared one"
    );
    let after_first = files_beneath(&shared[0]);
    assert!(
        !binaries(&shared[0], &after_first).is_empty(),
        "the first build left its binaries in the shared cache: {after_first:?}"
    );

    let first = binaries(&shared[0], &after_first);
    build_once(&backend);
    let after_second = files_beneath(&shared[0]);
    assert_eq!(
        first,
        binaries(&shared[0], &after_second),
        "the second program's build was found in the cache, not built again"
    );

    backend.stop();
    assert!(
        dirs_named(&tmp, "vgpu-cache-").is_empty(),
        "the shared cache is removed when the backend stops"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn vm_sockets_keep_a_cache_per_worker() {
    let tmp = std::env::temp_dir().join(format!("vgpu-cache-test-vm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).expect("TMPDIR for the backend");
    let tmp_str = tmp.to_str().expect("utf-8 path");
    let mut backend = Backend::start_with(&[], &[("TMPDIR", tmp_str)]);
    build_once(&backend);
    assert!(dirs_named(&tmp, "vgpu-cache-").is_empty());
    assert!(
        !dirs_named(&tmp, "vgpu-worker-").is_empty(),
        "workers of a VM socket make caches of their own"
    );
    backend.stop();
    let _ = std::fs::remove_dir_all(&tmp);
}
