//! Batches behind hostile descriptor chains, through the vring's path into
//! a quota-bound vGPU, then a damaged checkpoint restored into it (see
//! `src/chains/`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vgpu_fuzz::keep_last("backend_chains", data);
    vgpu_fuzz::backend_chains(data)
});
