//! The state decoder and the consistency check: any bytes give a value or
//! an error, and a value re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vgpu_migration::{Profile, VgpuState};

fuzz_target!(|data: &[u8]| {
    if let Ok(state) = VgpuState::from_bytes(data) {
        let _ = state.validate();
        let _ = state.streamed_buffers();
        assert_eq!(VgpuState::from_bytes(&state.to_bytes()).as_ref(), Ok(&state));
    }
    if let Ok(profile) = Profile::from_bytes(data) {
        let _ = vgpu_migration::check(&profile, &profile);
        let _ = Profile::common_subset(&[profile.clone(), profile]);
    }
});
