//! The exported driver API, one file per area. Each entry point is a
//! `#[no_mangle] extern "C"` function made by `ffi::entry!`; versioned
//! names that share an ABI (`_v2`, the per-thread-stream `_ptds`/`_ptsz`
//! variants) are aliases of one body.

pub mod context;
pub mod copy_2d;
pub mod device;
pub mod error;
pub mod event;
pub mod export;
pub mod host_func;
pub mod launch;
pub mod library;
pub mod mem_pool;
pub mod memory;
pub mod module;
pub mod pinned;
pub mod pointer;
pub mod procaddr;
pub mod profiler;
pub mod readback;
pub mod signal;
pub mod stream;
pub mod unsupported;
