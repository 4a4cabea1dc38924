//! The backend's `--queue-depth N`: what the bound costs a workload of many
//! kernels, and how long a drain waits with it.
//!
//! For each N a backend of its own runs
//! - smith_waterman (one short kernel per anti-diagonal): total time;
//! - the drain program: a burst of equal kernels, clFlush, then the time of
//!   clFinish. clFlush returns once the backend has taken the burst, so the
//!   clFinish time is a fair proxy for the drain a snapshot or migration
//!   would do: with the bound, at most N kernels are left to finish.
//!
//! Native has no such bound; its figures are measured once and repeated in
//! each record as the reference.

use super::workloads::Case;
use super::{Benchmark, Section};
use crate::context::{args, figure, take, Context};
use crate::error::Result;
use crate::record::Figure;
use crate::runner::Side;

pub struct QueueDepth;

/// The depths measured; 0 is the backend's "unbounded".
pub const DEPTHS: [usize; 6] = [1, 2, 5, 10, 20, 0];

const FULL_WORKLOAD: Case = Case {
    program: "smith_waterman",
    options: &[
        ("-n", "query", 1024),
        ("-m", "database", 2048),
        ("-i", "sequences", 2),
    ],
};
const QUICK_WORKLOAD: Case = Case {
    program: "smith_waterman",
    options: &[
        ("-n", "query", 64),
        ("-m", "database", 128),
        ("-i", "sequences", 1),
    ],
};

impl Benchmark for QueueDepth {
    fn name(&self) -> &'static str {
        "queue_depth"
    }

    fn section(&self) -> Section {
        Section::QueueDepth
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let quick = ctx.settings.quick;
        let workload = if quick { QUICK_WORKLOAD } else { FULL_WORKLOAD };
        let (kernels, spin) = if quick { (20, 500) } else { (100, 20_000) };
        let workload_program = ctx.workload_program(workload.program);
        let drain_program = ctx.bench_program("drain");
        let drain_args = args(&[("-r", ctx.settings.reps), ("-k", kernels), ("-w", spin)]);
        let k = kernels.to_string();

        let native_time = ctx.times_on(Side::Native, &workload_program, &workload.args())?;
        let native_drain = ctx
            .runner
            .run(Side::Native, &drain_program, &drain_args)?
            .samples();

        let mut figures = Vec::new();
        for depth in DEPTHS {
            let backend = ctx.start_backend(
                &format!("depth{depth}"),
                &["--queue-depth".into(), depth.to_string()],
            )?;
            let side = Side::Vgpu(backend.socket());
            let vgpu_time = ctx.times_on(side, &workload_program, &workload.args())?;
            let mut params = workload.params();
            params.insert("depth".into(), depth.into());
            figures.push(figure(
                "queue_depth_runtime",
                params,
                "s",
                false,
                &native_time,
                &vgpu_time,
            )?);

            let vgpu_drain = ctx.runner.run(side, &drain_program, &drain_args)?.samples();
            let params = crate::params![("depth", depth), ("kernels", kernels), ("spin", spin)];
            for (benchmark, metric, param) in [
                ("queue_depth_drain", "drain_ms", k.as_str()),
                ("queue_depth_burst", "burst_ms", k.as_str()),
                ("queue_depth_kernel", "kernel_ms", "1"),
            ] {
                figures.push(figure(
                    benchmark,
                    params.clone(),
                    "ms",
                    false,
                    take(&native_drain, metric, param),
                    take(&vgpu_drain, metric, param),
                )?);
            }
        }
        Ok(figures)
    }
}
