//! The bodies of the fuzz targets, shared by the libFuzzer binaries in
//! `fuzz_targets/`, the seed writer and the corpus replay test.

pub mod chains;
pub mod decode;
pub mod dispatch;
pub mod seeds;

pub use chains::backend_chains;
pub use decode::protocol_decode;
pub use dispatch::backend_dispatch;
