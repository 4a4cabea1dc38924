//! The C API: one safe Rust function per entry point, each with the
//! argument checks the specification defines (quoted briefly), and the
//! exported `extern "C"` shims generated around them.

// The implementations take the C signatures' arguments one for one.
#![allow(clippy::too_many_arguments)]

pub mod build;
pub mod context;
pub mod device;
pub mod enqueue;
mod entry;
pub mod event;
mod host_ptr;
pub mod icd;
pub mod image;
pub mod image_enqueue;
pub mod kernel;
pub mod map;
pub mod memory;
pub mod platform;
pub mod program;
pub mod queue;
pub mod rect;
pub mod sampler;
pub mod subdevice;
pub mod svm;
pub mod transfer;
pub mod unimplemented;
mod util;
