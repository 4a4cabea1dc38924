//! Deterministic mutation sweeps over the seed corpus on stable Rust: the
//! targets' bodies on thousands of damaged inputs, without libFuzzer or
//! AddressSanitizer. The smoke run (`scripts/fuzz.sh --smoke`) falls back
//! to these where nightly or cargo-fuzz is missing.
//!
//! `VGPU_SWEEP_SCALE=N` multiplies the number of inputs;
//! `VGPU_SWEEP_LAST=DIR` keeps the input being run in `DIR/<target>`, so
//! one that crashes the process can be replayed (`examples/replay.rs`).

use std::path::Path;

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

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
            let values: [u64; 6] = [0, 1, u32::MAX as u64, u64::MAX, 1 << 31, 1 << 63];
            let v = values[rng.below(values.len())].to_le_bytes();
            let len = [1, 4, 8][rng.below(3)].min(bytes.len() - at);
            bytes[at..at + len].copy_from_slice(&v[..len]);
        }
    }
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e} (run make_seeds)", dir.display()))
        .map(|e| e.expect("corpus entry").path())
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|p| std::fs::read(p).expect("read a seed"))
        .collect()
}

fn scale() -> usize {
    std::env::var("VGPU_SWEEP_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// `count` inputs, each a seed with one to four mutations.
fn sweep(target: &str, count: usize, run: impl Fn(&[u8])) {
    let seeds = seeds(target);
    let mut rng = Rng(0x5eed_0000_0000_0001 ^ target.len() as u64);
    for i in 0..count {
        let mut input = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(4) {
            mutate(&mut input, &mut rng);
        }
        if let Some(dir) = std::env::var_os("VGPU_SWEEP_LAST") {
            // The input about to run, for a crash that ends the process.
            std::fs::write(Path::new(&dir).join(target), &input).expect("write the input");
        }
        run(&input);
    }
    eprintln!("{target}: {count} mutated inputs");
}

#[test]
fn protocol_decode_survives_mutated_seeds() {
    sweep(
        "protocol_decode",
        20_000 * scale(),
        vgpu_fuzz::protocol_decode,
    );
}

#[test]
fn backend_dispatch_survives_mutated_seeds() {
    if !vgpu_fuzz::dispatch::available() {
        eprintln!("skipped: no OpenCL device");
        return;
    }
    sweep(
        "backend_dispatch",
        300 * scale(),
        vgpu_fuzz::backend_dispatch,
    );
    eprintln!(
        "backend_dispatch: {} calls naming unknown objects refused",
        vgpu_fuzz::dispatch::unknown_handles_refused()
    );
}

#[test]
fn backend_chains_survives_mutated_seeds() {
    if !vgpu_fuzz::dispatch::available() {
        eprintln!("skipped: no OpenCL device");
        return;
    }
    sweep("backend_chains", 300 * scale(), vgpu_fuzz::backend_chains);
    let [accepted, dropped, succeeded, restored, refused] = vgpu_fuzz::chains::reached();
    eprintln!(
        "backend_chains: {accepted} chains accepted, {dropped} dropped by resolve, \
         {succeeded} calls succeeded, {restored} restores done, {refused} refused"
    );
}
