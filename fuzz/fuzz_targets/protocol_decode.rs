//! Any bytes into every protocol decoder: a value or an error, never a
//! panic; decoded values re-encode to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vgpu_fuzz::protocol_decode(data));
