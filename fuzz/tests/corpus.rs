//! Replays the committed seed corpus and the inputs of past findings
//! (`regressions/`) through the targets' bodies on stable Rust (no
//! libFuzzer): `cargo test` in `fuzz/`. `scripts/fuzz.sh` replays the same
//! inputs under AddressSanitizer, where an over-read such as F8's shows.

use std::path::Path;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for dir in ["corpus", "regressions"] {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("read the corpus").path();
            let bytes = std::fs::read(&path).expect("read an input");
            out.push((path.display().to_string(), bytes));
        }
    }
    out.sort();
    out
}

#[test]
fn protocol_decode_corpus_replays() {
    let inputs = inputs("protocol_decode");
    assert!(!inputs.is_empty(), "no corpus: run make_seeds");
    for (name, bytes) in inputs {
        eprintln!("{name}");
        vgpu_fuzz::protocol_decode(&bytes);
    }
}

#[test]
fn backend_dispatch_corpus_replays() {
    if !vgpu_fuzz::dispatch::available() {
        eprintln!("skipped: no OpenCL device");
        return;
    }
    let inputs = inputs("backend_dispatch");
    assert!(!inputs.is_empty(), "no corpus: run make_seeds");
    for (name, bytes) in inputs {
        eprintln!("{name}");
        vgpu_fuzz::backend_dispatch(&bytes);
    }
}

#[test]
fn backend_chains_corpus_replays() {
    if !vgpu_fuzz::dispatch::available() {
        eprintln!("skipped: no OpenCL device");
        return;
    }
    let inputs = inputs("backend_chains");
    assert!(!inputs.is_empty(), "no corpus: run make_seeds");
    for (name, bytes) in inputs {
        eprintln!("{name}");
        vgpu_fuzz::backend_chains(&bytes);
    }
}
