//! `libvgpu_opencl.so`: an OpenCL ICD that forwards every call to the vgpu
//! device (see `README.md`).
//!
//! - [`api`]: the C ABI, one safe function per entry point with the spec's
//!   argument checks, and the generated `extern "C"` shims;
//! - `core` (private): the objects behind the handles the application holds, and
//!   the session with the device.

pub mod api;
mod core;

pub use crate::core::object::{live_objects, LiveObjects};
pub use crate::core::platform::install as install_client;
