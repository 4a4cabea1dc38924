//! What every benchmark module gets: settings, paths, the programs and a
//! running backend.

use std::path::{Path, PathBuf};

use crate::backend::{Backend, Launch};
use crate::error::{Error, Result};
use crate::record::{Figure, Params};
use crate::runner::{Runner, Samples, Side};
use crate::stats::Summary;

/// Settings of one run.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Tiny sizes, few repetitions: checks the harness, not the figures.
    pub quick: bool,
    /// Measured runs per figure (warm-up excluded).
    pub reps: usize,
    /// Untimed runs before the measured ones.
    pub warmups: usize,
    /// Also the figures that boot guests.
    pub vm: bool,
}

/// Where the binaries and programs are.
#[derive(Debug, Clone)]
pub struct Paths {
    /// The workspace root.
    pub root: PathBuf,
    pub backend: PathBuf,
    /// `vgpu-ctl`, for the backend's control socket.
    pub ctl: PathBuf,
    /// Arguments for every backend started (e.g. `--device opencl:NVIDIA`).
    pub backend_args: Vec<String>,
    pub icd: PathBuf,
    /// The micro-benchmark programs (integration/bench/c).
    pub bench_programs: PathBuf,
    /// The OpenCL test programs (integration/cl-tests).
    pub cl_tests: PathBuf,
    /// Sockets, logs and scratch files of this run.
    pub scratch: PathBuf,
}

pub struct Context {
    pub settings: Settings,
    pub paths: Paths,
    pub runner: Runner,
    backend: Backend,
}

impl Context {
    pub fn new(settings: Settings, paths: Paths, runner: Runner) -> Result<Context> {
        let backend = Backend::start(
            &paths.backend,
            &paths.scratch,
            "backend",
            &paths.backend_args,
        )?;
        Ok(Context {
            settings,
            paths,
            runner,
            backend,
        })
    }

    /// The shared backend (no queue-depth bound).
    pub fn socket(&self) -> &Path {
        self.backend.socket()
    }

    /// A further backend of this run's build with extra arguments.
    pub fn start_backend(&self, name: &str, extra: &[String]) -> Result<Backend> {
        let args: Vec<String> = self
            .paths
            .backend_args
            .iter()
            .chain(extra)
            .cloned()
            .collect();
        Backend::start(&self.paths.backend, &self.paths.scratch, name, &args)
    }

    /// A further backend exactly as `launch` says (without the run's
    /// backend arguments: a benchmark that picks devices itself).
    pub fn launch_backend(&self, name: &str, launch: &Launch) -> Result<Backend> {
        Backend::launch(&self.paths.backend, &self.paths.scratch, name, launch)
    }

    pub fn bench_program(&self, name: &str) -> PathBuf {
        self.paths.bench_programs.join(name)
    }

    pub fn workload_program(&self, name: &str) -> PathBuf {
        self.paths.cl_tests.join(name)
    }

    /// Runs a SAMPLE-printing program once natively and once through vgpu.
    pub fn samples(&self, program: &Path, args: &[String]) -> Result<(Samples, Samples)> {
        let native = self.runner.run(Side::Native, program, args)?.samples();
        let vgpu = self
            .runner
            .run(Side::Vgpu(self.socket()), program, args)?
            .samples();
        Ok((native, vgpu))
    }

    /// The `TIME` of a workload, warm-ups then `reps` measured runs on each
    /// side, native and vgpu alternating so that drift hits both alike.
    pub fn times(
        &self,
        program: &Path,
        args: &[String],
        vgpu_socket: &Path,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let sides = [Side::Native, Side::Vgpu(vgpu_socket)];
        for _ in 0..self.settings.warmups {
            for side in sides {
                self.runner.run(side, program, args)?;
            }
        }
        let (mut native, mut vgpu) = (Vec::new(), Vec::new());
        for _ in 0..self.settings.reps {
            native.push(self.runner.run(sides[0], program, args)?.time()?);
            vgpu.push(self.runner.run(sides[1], program, args)?.time()?);
        }
        Ok((native, vgpu))
    }

    /// `TIME` of `reps` runs (after warm-ups) on one side only.
    pub fn times_on(&self, side: Side<'_>, program: &Path, args: &[String]) -> Result<Vec<f64>> {
        for _ in 0..self.settings.warmups {
            self.runner.run(side, program, args)?;
        }
        (0..self.settings.reps)
            .map(|_| self.runner.run(side, program, args)?.time())
            .collect()
    }
}

/// A figure from two sample lists; an error names what is missing.
pub fn figure(
    benchmark: &'static str,
    parameters: Params,
    unit: &'static str,
    higher_is_better: bool,
    native: &[f64],
    vgpu: &[f64],
) -> Result<Figure> {
    let summary = |samples: &[f64], side: &str| {
        Summary::of(samples).ok_or_else(|| Error::MissingOutput {
            program: benchmark.to_string(),
            what: format!("{side} samples"),
            tail: String::new(),
        })
    };
    Ok(Figure {
        benchmark,
        parameters,
        unit,
        higher_is_better,
        native: Some(summary(native, "native")?),
        vgpu: summary(vgpu, "vgpu")?,
        device: None,
    })
}

/// A figure with no native counterpart (checkpoint, re-home, migration):
/// the samples go in the vgpu side.
pub fn vgpu_figure(
    benchmark: &'static str,
    parameters: Params,
    unit: &'static str,
    higher_is_better: bool,
    samples: &[f64],
) -> Result<Figure> {
    let vgpu = Summary::of(samples).ok_or_else(|| Error::MissingOutput {
        program: benchmark.to_string(),
        what: "samples".into(),
        tail: String::new(),
    })?;
    Ok(Figure {
        benchmark,
        parameters,
        unit,
        higher_is_better,
        native: None,
        vgpu,
        device: None,
    })
}

/// The samples of `(metric, param)`, empty if none were printed.
pub fn take<'a>(samples: &'a Samples, metric: &str, param: &str) -> &'a [f64] {
    samples
        .get(&(metric.to_string(), param.to_string()))
        .map_or(&[], Vec::as_slice)
}

/// `["-r", "5", ...]` from pairs.
pub fn args(pairs: &[(&str, usize)]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|(flag, value)| [flag.to_string(), value.to_string()])
        .collect()
}
