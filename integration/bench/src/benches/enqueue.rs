//! Async enqueue rate: tiny kernels enqueued, then clFinish.

use super::{Benchmark, Section};
use crate::context::{args, figure, take, Context};
use crate::error::Result;
use crate::params;
use crate::record::Figure;

pub struct EnqueueRate;

impl Benchmark for EnqueueRate {
    fn name(&self) -> &'static str {
        "enqueue"
    }

    fn section(&self) -> Section {
        Section::Micro
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let kernels = if ctx.settings.quick { 2_000 } else { 100_000 };
        let program = ctx.bench_program("enqueue_rate");
        let (native, vgpu) = ctx.samples(
            &program,
            &args(&[("-r", ctx.settings.reps), ("-k", kernels)]),
        )?;
        let k = kernels.to_string();
        Ok(vec![
            figure(
                "enqueue_rate",
                params![("kernels", kernels), ("until", "clFinish")],
                "kernels/s",
                true,
                take(&native, "enqueue_rate", &k),
                take(&vgpu, "enqueue_rate", &k),
            )?,
            figure(
                "enqueue_issue_rate",
                params![("kernels", kernels), ("until", "last enqueue returns")],
                "kernels/s",
                true,
                take(&native, "issue_rate", &k),
                take(&vgpu, "issue_rate", &k),
            )?,
        ])
    }
}
