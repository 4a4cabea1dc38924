//! `vgpu-bench`: measures OpenCL natively and through vgpu (loopback), side
//! by side, in one run; writes bench.json, prints the tables, draws the
//! plots and writes BENCHMARKS.md. `scripts/bench.sh` is the usual way in.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use vgpu_bench::benches;
use vgpu_bench::context::Settings;
use vgpu_bench::run::{run, Options};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "OpenCL figures natively and through vgpu, side by side"
)]
struct Args {
    /// Tiny sizes and 2 repetitions: checks that the harness works (< 1 min).
    #[arg(long)]
    quick: bool,

    /// Directory for bench.json (and the report and plots unless
    /// --markdown / --plots say otherwise).
    #[arg(long, value_name = "DIR", default_value = "target/bench")]
    out: PathBuf,

    /// Where to write the Markdown report (default: DIR/BENCHMARKS.md).
    #[arg(long, value_name = "PATH")]
    markdown: Option<PathBuf>,

    /// Directory for the PNG plots (default: DIR).
    #[arg(long, value_name = "DIR")]
    plots: Option<PathBuf>,

    /// Directory holding vgpu-backend and libvgpu_opencl.so.
    #[arg(long, value_name = "DIR", default_value = "target/release")]
    bin_dir: PathBuf,

    /// The workspace root (sources of the benchmark programs).
    #[arg(long, value_name = "DIR", default_value = ".")]
    root: PathBuf,

    /// Measured runs per figure (default: 5, --quick: 2).
    #[arg(long, value_name = "N")]
    reps: Option<usize>,

    /// Untimed runs before the measured ones (default: 1, --quick: 0).
    #[arg(long, value_name = "N")]
    warmups: Option<usize>,

    /// Only these benchmarks (comma-separated; see --list).
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    only: Vec<String>,

    /// An argument for every vgpu-backend started (repeat it), e.g.
    /// `--backend-arg=--device --backend-arg=opencl:NVIDIA`. Pick the same
    /// device natively with CLTEST_PLATFORM / CLTEST_DEVICE.
    #[arg(long, value_name = "ARG", allow_hyphen_values = true)]
    backend_arg: Vec<String>,

    /// Run the OpenCL programs (native and vgpu alike) as this user, e.g.
    /// `nobody`, the user a root-started backend's workers become; with
    /// `--backend-arg=--peer-memory` the loopback then moves bulk data in
    /// one copy (cross-memory attach needs the same user on both ends).
    #[arg(long, value_name = "NAME")]
    program_user: Option<String>,

    /// Longest a single program run may take, in seconds.
    #[arg(long, value_name = "S", default_value_t = 600)]
    timeout: u64,

    /// Also boot the guest (patched QEMU, built by scripts/setup.sh) and run
    /// the workloads in it.
    #[arg(long)]
    vm: bool,

    /// Print every program run.
    #[arg(long, short)]
    verbose: bool,

    /// List the benchmarks and exit.
    #[arg(long)]
    list: bool,
}

impl From<Args> for Options {
    fn from(args: Args) -> Options {
        let reps = args.reps.unwrap_or(if args.quick { 2 } else { 5 }).max(1);
        let warmups = args.warmups.unwrap_or(if args.quick { 0 } else { 1 });
        Options {
            settings: Settings {
                quick: args.quick,
                reps,
                warmups,
                vm: args.vm,
            },
            root: args.root,
            bin_dir: args.bin_dir,
            out: args.out,
            markdown: args.markdown,
            plots: args.plots,
            only: args.only,
            backend_args: args.backend_arg,
            program_user: args.program_user,
            timeout: Duration::from_secs(args.timeout),
            verbose: args.verbose,
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for b in benches::all() {
            let note = if b.needs_vm() { " (with --vm)" } else { "" };
            println!("{}\t{}{note}", b.name(), b.section().title());
        }
        return ExitCode::SUCCESS;
    }
    match run(&args.into()) {
        Ok(outcome) if outcome.failures.is_empty() => ExitCode::SUCCESS,
        Ok(outcome) => {
            eprintln!("vgpu-bench: {} benchmark(s) failed", outcome.failures.len());
            ExitCode::FAILURE
        }
        Err(e) => {
            let mut text = format!("vgpu-bench: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(&format!(": {s}"));
                source = s.source();
            }
            eprintln!("{text}");
            ExitCode::FAILURE
        }
    }
}
