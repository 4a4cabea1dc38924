//! Checkpoint and restore against vGPU state size. A loopback run of
//! `checkpoint_loop` holds SIZE MiB of buffers; `vgpu-ctl checkpoint FILE
//! --then pause` writes its vGPU to the local disk; a second backend then
//! starts from the file (`--restore`) while the first stays paused, so the
//! two do not compete for the cores; `vgpu-ctl resume` lets the program run
//! on to the next sample. Nothing here has a native counterpart.

use std::path::Path;
use std::time::Duration;

use super::{Benchmark, Section};
use crate::backend::{Backend, Launch};
use crate::context::{args, vgpu_figure, Context};
use crate::ctl::{number, Ctl};
use crate::error::Result;
use crate::params;
use crate::record::Figure;
use crate::runner::Side;

pub struct Checkpoint;

const SIZES_MIB: &[usize] = &[64, 256];
const QUICK_SIZES_MIB: &[usize] = &[16];
/// Never reached: the program is stopped once the samples are taken.
const ITERATIONS: usize = 1_000_000;
const MIB: f64 = 1024.0 * 1024.0;

/// One checkpoint and one restore.
struct Sample {
    save_s: f64,
    stream_bytes: f64,
    /// Peak RSS of the backend during the save over its RSS before.
    memory_growth_mib: Option<f64>,
    restore_s: f64,
}

impl Benchmark for Checkpoint {
    fn name(&self) -> &'static str {
        "checkpoint"
    }

    fn section(&self) -> Section {
        Section::State
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let sizes = if ctx.settings.quick {
            QUICK_SIZES_MIB
        } else {
            SIZES_MIB
        };
        let mut figures = Vec::new();
        for &size in sizes {
            let samples = measure(ctx, size)?;
            figures.extend(size_figures(size, &samples)?);
        }
        Ok(figures)
    }
}

fn measure(ctx: &Context, size_mib: usize) -> Result<Vec<Sample>> {
    let timeout = ctx.runner.timeout();
    let launch = Launch {
        control: true,
        ..Launch::new(&ctx.paths.backend_args)
    };
    let backend = ctx.launch_backend("checkpoint", &launch)?;
    let ctl = Ctl::of(&ctx.paths.ctl, &backend)?;
    let mut program = ctx.runner.spawn(
        Side::Vgpu(backend.socket()),
        &ctx.workload_program("checkpoint_loop"),
        &args(&[("-m", size_mib), ("-i", ITERATIONS), ("-p", 1)]),
        &ctx.paths.scratch.join("checkpoint_loop.log"),
    )?;
    // Past its set-up: buffers filled, program built, kernels running.
    let mut progress = program.wait_for_progress(2, timeout)?;
    let file = ctx
        .paths
        .scratch
        .join(format!("checkpoint-{size_mib}.vgpu"));
    let mut samples = Vec::new();
    for run in 0..ctx.settings.warmups + ctx.settings.reps {
        let sample = checkpoint_and_restore(ctx, &backend, &ctl, &file, timeout)?;
        ctl.run(&["resume"])?;
        // The checkpoint left the program able to go on.
        progress = program.wait_for_progress(progress + 1, timeout)?;
        if run >= ctx.settings.warmups {
            samples.push(sample);
        }
    }
    let _ = std::fs::remove_file(&file);
    Ok(samples)
}

fn checkpoint_and_restore(
    ctx: &Context,
    backend: &Backend,
    ctl: &Ctl,
    file: &Path,
    timeout: Duration,
) -> Result<Sample> {
    let _ = std::fs::remove_file(file);
    // Peak RSS is only a figure where the kernel lets us reset it.
    let rss_before = backend
        .reset_peak_memory()
        .ok()
        .and_then(|()| backend.memory_kib("VmRSS"));
    let path = file.to_string_lossy();
    let answer = ctl.run(&["checkpoint", &path, "--then", "pause"])?;
    let peak = backend.memory_kib("VmHWM");
    let stream_bytes = number(&answer.json, "stream_bytes")?;

    // Timed from its spawn: a restart from a checkpoint, as a user sees it.
    let mut launch = Launch {
        log_level: "info",
        wait_for_socket: false,
        ..Launch::new(&ctx.paths.backend_args)
    };
    launch
        .args
        .extend(["--restore".to_string(), path.into_owned()]);
    let mut restored = ctx.launch_backend("restore", &launch)?;
    let restore = restored.wait_for_log("restored", timeout)?;
    Ok(Sample {
        save_s: answer.elapsed.as_secs_f64(),
        stream_bytes,
        memory_growth_mib: rss_before
            .zip(peak)
            .map(|(before, peak)| peak.saturating_sub(before) as f64 / 1024.0),
        restore_s: restore.as_secs_f64(),
    })
}

fn size_figures(size_mib: usize, samples: &[Sample]) -> Result<Vec<Figure>> {
    let all = |f: fn(&Sample) -> f64| samples.iter().map(f).collect::<Vec<f64>>();
    let mut figures = vec![
        ("checkpoint_time", "s", false, all(|s| s.save_s)),
        (
            "checkpoint_size",
            "MiB",
            false,
            all(|s| s.stream_bytes / MIB),
        ),
        (
            "checkpoint_write_rate",
            "GB/s",
            true,
            all(|s| s.stream_bytes / s.save_s / 1e9),
        ),
        ("restore_time", "s", false, all(|s| s.restore_s)),
        (
            "restore_read_rate",
            "GB/s",
            true,
            all(|s| s.stream_bytes / s.restore_s / 1e9),
        ),
    ];
    let growth: Vec<f64> = samples.iter().filter_map(|s| s.memory_growth_mib).collect();
    if !growth.is_empty() {
        figures.push(("checkpoint_memory_growth", "MiB", false, growth));
    }
    figures
        .into_iter()
        .map(|(name, unit, higher_is_better, values)| {
            vgpu_figure(
                name,
                params![("state_mib", size_mib)],
                unit,
                higher_is_better,
                &values,
            )
        })
        .collect()
}
