//! Deterministic mutation sweeps, the stable-Rust companion of the fuzz
//! targets in `fuzz/`: thousands of damaged streams and states decode to an
//! error or a value, never a panic, and a damaged stream is never accepted.

mod common;

use common::*;
use vgpu_migration::*;

/// Applies one random mutation.
fn mutate(bytes: &mut Vec<u8>, rng: &mut Rng) {
    if bytes.is_empty() {
        bytes.push(rng.next() as u8);
        return;
    }
    let at = rng.below(bytes.len());
    match rng.below(7) {
        0 => bytes[at] ^= 1 << rng.below(8),
        1 => bytes[at] = rng.next() as u8,
        2 => bytes.insert(at, rng.next() as u8),
        3 => {
            bytes.remove(at);
        }
        4 => bytes.truncate(at),
        5 => {
            let len = rng.below(64).min(bytes.len() - at);
            let copy = bytes[at..at + len].to_vec();
            let to = rng.below(bytes.len());
            bytes.splice(to..to, copy);
        }
        _ => {
            // An interesting value over a little-endian integer.
            let values: [u64; 6] = [0, 1, u32::MAX as u64, u64::MAX, 1 << 31, 1 << 63];
            let v = values[rng.below(values.len())].to_le_bytes();
            let len = [1, 4, 8][rng.below(3)].min(bytes.len() - at);
            bytes[at..at + len].copy_from_slice(&v[..len]);
        }
    }
}

fn mutated(original: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..1 + rng.below(4) {
        mutate(&mut bytes, rng);
    }
    bytes
}

#[test]
fn mutated_streams_are_refused_without_panicking() {
    let original = write_stream(&rich_state(), 3000);
    let mut rng = Rng(0x00c0_ffee);
    let mut refused = 0;
    for _ in 0..4000 {
        let bytes = mutated(&original, &mut rng);
        match read_all(&bytes) {
            Ok(_) => assert_eq!(bytes, original, "a damaged stream was accepted"),
            Err(_) => refused += 1,
        }
    }
    assert!(refused > 3900);
}

#[test]
fn mutated_states_decode_to_a_value_or_an_error() {
    assert_eq!(parts_state().validate(), Ok(()), "a valid seed");
    for (original, seed) in [
        (rich_state().to_bytes(), 0xdec0_de00),
        (parts_state().to_bytes(), 0x9a27_5000),
    ] {
        let mut rng = Rng(seed);
        for _ in 0..20_000 {
            let bytes = mutated(&original, &mut rng);
            if let Ok(state) = VgpuState::from_bytes(&bytes) {
                let _ = state.validate();
                let _ = state.streamed_buffers();
                let VgpuState::V1(v) = state.clone();
                let _ = v.sessions.into_iter().map(SessionState::latest).count();
                assert_eq!(VgpuState::from_bytes(&state.to_bytes()), Ok(state));
            }
        }
    }
}

#[test]
fn mutated_profiles_decode_to_a_value_or_an_error() {
    let original = profile().to_bytes();
    let mut rng = Rng(0x0bad_cafe);
    for _ in 0..5000 {
        let bytes = mutated(&original, &mut rng);
        if let Ok(p) = Profile::from_bytes(&bytes) {
            let _ = check(&profile(), &p);
            let _ = Profile::common_subset(&[p, profile()]);
        }
    }
}

/// Mutations inside chunk payloads, re-sealed with valid checksums, so they
/// reach the state decoder, the validation and the buffer bookkeeping.
#[test]
fn resealed_mutations_reach_the_decoders_without_panicking() {
    for (state, seed) in [(rich_state(), 0x5ea1_5ea1), (parts_state(), 0x5ea1_0006)] {
        resealed_mutations(&state, seed);
    }
}

fn resealed_mutations(state: &VgpuState, seed: u64) {
    let original = write_stream(state, 3000);
    let chunks = body(&original);
    let mut rng = Rng(seed);
    for _ in 0..3000 {
        let mut chunks = chunks.clone();
        let which = rng.below(chunks.len());
        if rng.below(4) == 0 {
            chunks[which].0 = [1, 2, 3, 0x8000_0001, 7][rng.below(5)];
        } else {
            let payload = &mut chunks[which].1;
            let mut bytes = payload.clone();
            mutate(&mut bytes, &mut rng);
            *payload = bytes;
        }
        if rng.below(8) == 0 {
            let from = rng.below(chunks.len());
            let chunk = chunks.remove(from);
            let to = rng.below(chunks.len() + 1);
            chunks.insert(to, chunk);
        }
        let _ = read_all(&seal(1, &chunks));
    }
}
