//! Writes the seed corpus, `corpus/<target>/seed-<name>`, from valid
//! batches. Run `cargo run --bin make_seeds` inside `fuzz/`.

use std::fs;
use std::path::Path;

fn write(target: &str, seeds: Vec<(String, Vec<u8>)>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    fs::create_dir_all(&dir).expect("create the corpus directory");
    for (name, bytes) in seeds {
        fs::write(dir.join(format!("seed-{name}")), bytes).expect("write a seed");
    }
    println!("{}", dir.display());
}

fn main() {
    write("protocol_decode", vgpu_fuzz::seeds::decode_seeds());
    write("backend_dispatch", vgpu_fuzz::seeds::dispatch_seeds());
    write("backend_chains", vgpu_fuzz::seeds::chains_seeds());
}
