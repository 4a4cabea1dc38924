//! Runs fuzz inputs through a target's body without libFuzzer:
//! `cargo run --example replay -- TARGET FILE...` (with
//! `VGPU_FUZZ_TRACE=1` to print every request and status).

fn main() {
    let mut args = std::env::args().skip(1);
    let target = args.next().expect("usage: replay TARGET FILE...");
    for file in args {
        let data = std::fs::read(&file).expect("read the input");
        eprintln!("== {file}");
        match target.as_str() {
            "protocol_decode" => vgpu_fuzz::protocol_decode(&data),
            "backend_dispatch" => vgpu_fuzz::backend_dispatch(&data),
            "backend_chains" => vgpu_fuzz::backend_chains(&data),
            other => panic!("unknown target {other}"),
        }
    }
    if target == "backend_dispatch" {
        eprintln!(
            "{} calls naming unknown objects refused",
            vgpu_fuzz::dispatch::unknown_handles_refused()
        );
    }
}
