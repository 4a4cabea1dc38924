//! The bodies of the fuzz targets, shared by the libFuzzer binaries in
//! `fuzz_targets/`, the seed writer and the corpus replay test.

pub mod chains;
pub mod decode;
pub mod dispatch;
pub mod seeds;

pub use chains::backend_chains;
pub use decode::protocol_decode;
pub use dispatch::backend_dispatch;

/// `VGPU_FUZZ_LAST=DIR`: keeps the input about to run in `DIR/<target>`.
/// libFuzzer writes a crashing input itself, but where PoCL's or LLVM's
/// signal handlers stand in front of its own the process can end without
/// it; `scripts/fuzz.sh` then keeps this copy as the finding's input.
pub fn keep_last(target: &str, data: &[u8]) {
    static DIR: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    if let Some(dir) = DIR.get_or_init(|| std::env::var_os("VGPU_FUZZ_LAST").map(Into::into)) {
        if let Err(e) = std::fs::write(dir.join(target), data) {
            eprintln!("cannot keep the input in {}: {e}", dir.display());
        }
    }
}
