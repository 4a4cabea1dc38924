//! Request sequences through the backend's decode, dispatch and OpenCL
//! executor on the real device (see `src/dispatch.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vgpu_fuzz::keep_last("backend_dispatch", data);
    vgpu_fuzz::backend_dispatch(data)
});
