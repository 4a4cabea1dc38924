//! Fixtures for end-to-end tests: the real `vgpu-backend`, the patched QEMU
//! booting the test guest, and the OpenCL C suite's results.

pub mod backend;
pub mod paths;
pub mod qmp;
pub mod suite;
pub mod vm;
