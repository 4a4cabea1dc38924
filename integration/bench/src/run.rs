//! One run of the harness: build the programs, start the backend, measure,
//! then write the JSON, the tables, the plots and BENCHMARKS.md.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::benches::{self, Section};
use crate::context::{Context, Paths, Settings};
use crate::error::{io, Error, Result};
use crate::machine::Machine;
use crate::record::{self, Record};
use crate::report::markdown::{Pending, Report, RunInfo};
use crate::report::{included, plot, tables, targets};
use crate::runner::{Runner, Side};

/// Everything a run needs to know.
#[derive(Debug, Clone)]
pub struct Options {
    pub settings: Settings,
    /// The workspace root (programs' sources).
    pub root: PathBuf,
    /// Where vgpu-backend and libvgpu_opencl.so are.
    pub bin_dir: PathBuf,
    /// bench.json and, unless given elsewhere, BENCHMARKS.md and the plots.
    pub out: PathBuf,
    pub markdown: Option<PathBuf>,
    pub plots: Option<PathBuf>,
    /// Only these benchmarks (names as in `--list`); empty: all.
    pub only: Vec<String>,
    /// Extra arguments for every vgpu-backend started.
    pub backend_args: Vec<String>,
    /// Whom the OpenCL programs run as (`--program-user`).
    pub program_user: Option<String>,
    pub timeout: Duration,
    pub verbose: bool,
}

/// What a finished run produced.
#[derive(Debug)]
pub struct Outcome {
    pub records: Vec<Record>,
    /// Benchmarks that stopped with an error, and the error.
    pub failures: Vec<(String, String)>,
}

pub fn run(options: &Options) -> Result<Outcome> {
    let started = Instant::now();
    // Before anything is written: the report and JSON may be tracked files
    // of this very tree, and would make it look modified.
    let commit = source_commit(&options.root);
    let out = &options.out;
    std::fs::create_dir_all(out).map_err(io("create", out))?;
    // Absolute: make runs in the programs' own directories (`make -C`), so
    // a relative OUT (`--root .`) would land below them.
    let programs = std::path::absolute(options.root.join("target/bench-programs"))
        .map_err(io("resolve", &options.root))?;
    build_programs(&options.root, &programs)?;

    let scratch = std::env::temp_dir().join(format!("vgpu-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(io("create", &scratch))?;
    let paths = Paths {
        root: options.root.clone(),
        backend_args: options.backend_args.clone(),
        backend: options.bin_dir.join("vgpu-backend"),
        ctl: options.bin_dir.join("vgpu-ctl"),
        icd: options.bin_dir.join("libvgpu_opencl.so"),
        bench_programs: programs.join("bench"),
        cl_tests: programs.join("cl-tests"),
        scratch: scratch.clone(),
    };
    for binary in [&paths.backend, &paths.ctl, &paths.icd] {
        if !binary.exists() {
            return Err(Error::Build(format!(
                "{} is missing: build the workspace in release mode (cargo build --workspace --release)",
                binary.display()
            )));
        }
    }
    let program_user = match &options.program_user {
        Some(name) => {
            crate::backend::open_sockets_to_all();
            Some(crate::program_user::ProgramUser::new(name, &scratch)?)
        }
        None => None,
    };
    let runner = Runner::new(&paths.icd, &scratch, options.timeout, options.verbose)?
        .with_user(program_user);
    let ctx = Context::new(options.settings.clone(), paths, runner)?;
    let result = measure(options, &ctx, started, commit);
    drop(ctx);
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn measure(
    options: &Options,
    ctx: &Context,
    started: Instant,
    commit: Option<String>,
) -> Result<Outcome> {
    let machine = Machine::detect();
    let probe = ctx.bench_program("roundtrip");
    let probe_args: Vec<String> = ["-r", "1", "-c", "10"].map(String::from).to_vec();
    let device_of = |side| -> Result<String> {
        let output = ctx.runner.run(side, &probe, &probe_args)?;
        output.device().ok_or_else(|| output.missing("device line"))
    };
    let device = device_of(Side::Native)?;
    let vgpu_device = device_of(Side::Vgpu(ctx.socket()))?;
    eprintln!("vgpu-bench: native device {device:?}, vgpu device {vgpu_device:?}");

    let mut records = Vec::new();
    let mut failures = Vec::new();
    let mut pending = Vec::new();
    let mut loads: Vec<f64> = load_1min().into_iter().collect();
    for bench in benches::all() {
        if !options.only.is_empty() && !options.only.iter().any(|o| o == bench.name()) {
            continue;
        }
        let not_asked = (bench.needs_vm() && !options.settings.vm)
            .then(|| "boots a guest: run scripts/bench.sh --vm".to_string());
        if let Some(why) = not_asked.or_else(|| bench.unavailable(ctx)) {
            eprintln!("vgpu-bench: {} not measured: {why}", bench.name());
            pending.push(Pending {
                section: bench.section(),
                name: bench.name(),
                why,
            });
            continue;
        }
        let t = Instant::now();
        eprintln!("vgpu-bench: {} ...", bench.name());
        let result = bench.run(ctx);
        loads.extend(load_1min());
        match result {
            Ok(figures) => {
                records.extend(
                    figures
                        .into_iter()
                        .map(|f| f.into_record(&machine, &device)),
                );
                eprintln!(
                    "vgpu-bench: {} done in {:.1} s",
                    bench.name(),
                    t.elapsed().as_secs_f64()
                );
            }
            Err(e) => {
                eprintln!("vgpu-bench: {} FAILED: {e}", bench.name());
                failures.push((bench.name().to_string(), error_chain(&e)));
            }
        }
    }

    record::write_json(&records, &options.out.join("bench.json"))?;
    for section in Section::ALL {
        for table in tables::section_tables(section, &records) {
            println!("{}", table.text());
        }
    }
    let verdicts = targets::evaluate(&records);
    println!("== Targets");
    for v in &verdicts {
        println!(
            "{:<14} {} — {}",
            v.label().trim_matches('*'),
            v.target,
            v.measured
        );
    }
    for (name, error) in &failures {
        println!("FAILED {name}: {error}");
    }

    let markdown = options
        .markdown
        .clone()
        .unwrap_or_else(|| options.out.join("BENCHMARKS.md"));
    let plots_dir = options.plots.clone().unwrap_or_else(|| options.out.clone());
    let plots = match plot::draw_all(&records, &plots_dir) {
        Ok(files) => files,
        Err(e) => {
            eprintln!("vgpu-bench: no plots: {e}");
            failures.push(("plots".into(), error_chain(&e)));
            Vec::new()
        }
    };
    let md_dir = match markdown.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let links: Vec<String> = plots.iter().map(|p| relative(p, &md_dir)).collect();
    let json = relative(&options.out.join("bench.json"), &md_dir);
    let parts = included::load(
        included::SOURCES,
        &options.root,
        |file| relative(file, &md_dir),
        commit.as_deref(),
    );
    let info = RunInfo {
        machine,
        device,
        vgpu_device,
        reps: options.settings.reps,
        warmups: options.settings.warmups,
        quick: options.settings.quick,
        seconds: started.elapsed().as_secs_f64(),
        load: load_range(&loads),
        commit,
        date: command_line(&options.root, "date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
        backend_args: options.backend_args.clone(),
        program_user: options.program_user.clone(),
    };
    let report = Report {
        info: &info,
        records: &records,
        verdicts: &verdicts,
        pending: &pending,
        plots: &links,
        json: &json,
        failures: &failures,
        included: &parts,
    };
    std::fs::write(&markdown, report.render()).map_err(io("write", &markdown))?;
    eprintln!(
        "vgpu-bench: {} records in {}, report {}, {} plot(s) in {} ({:.0} s)",
        records.len(),
        options.out.join("bench.json").display(),
        markdown.display(),
        plots.len(),
        plots_dir.display(),
        info.seconds
    );
    Ok(Outcome { records, failures })
}

/// Builds the micro-benchmarks and the OpenCL test programs with make.
fn build_programs(root: &Path, programs: &Path) -> Result<()> {
    for (dir, sub) in [
        ("integration/bench/c", "bench"),
        ("integration/cl-tests", "cl-tests"),
    ] {
        let output = Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(root.join(dir))
            .arg(format!("OUT={}", programs.join(sub).display()))
            .output()
            .map_err(io("run make in", root.join(dir)))?;
        if !output.status.success() {
            return Err(Error::Build(format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )));
        }
    }
    Ok(())
}

/// The 1-minute load average.
fn load_1min() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// "min–max" of the load samples.
fn load_range(loads: &[f64]) -> Option<String> {
    let min = loads.iter().copied().reduce(f64::min)?;
    let max = loads.iter().copied().reduce(f64::max)?;
    Some(format!("{min:.1}–{max:.1}"))
}

/// `path` relative to `base` when it lies below it, else as given.
fn relative(path: &Path, base: &Path) -> String {
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let (path, base) = (abs(path), abs(base));
    path.strip_prefix(&base)
        .unwrap_or(&path)
        .display()
        .to_string()
}

/// The source the run measures: `VGPU_BENCH_COMMIT` names it for a tree
/// that is not a checkout (e.g. a `git archive` export).
fn source_commit(root: &Path) -> Option<String> {
    std::env::var("VGPU_BENCH_COMMIT")
        .ok()
        .or_else(|| command_line(root, "git", &["describe", "--always", "--dirty"]))
}

/// The first line a command prints, if it succeeds.
fn command_line(dir: &Path, program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().next()?.trim();
    (output.status.success() && !line.is_empty()).then(|| line.to_string())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plots_below_the_markdown_are_linked_relatively() {
        assert_eq!(
            relative(Path::new("/a/docs/bench/x.png"), Path::new("/a")),
            "docs/bench/x.png"
        );
        assert_eq!(relative(Path::new("/b/x.png"), Path::new("/a")), "/b/x.png");
        assert_eq!(
            relative(Path::new("docs/x.png"), Path::new(".")),
            "docs/x.png"
        );
    }
}
