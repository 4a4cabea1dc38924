//! Synchronous call round trip: µs per call, median of batches of 10.

use super::{Benchmark, Section};
use crate::context::{args, figure, take, Context};
use crate::error::Result;
use crate::params;
use crate::record::Figure;

pub struct Roundtrip;

impl Benchmark for Roundtrip {
    fn name(&self) -> &'static str {
        "roundtrip"
    }

    fn section(&self) -> Section {
        Section::Micro
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let calls = if ctx.settings.quick { 200 } else { 10_000 };
        let program = ctx.bench_program("roundtrip");
        let (native, vgpu) =
            ctx.samples(&program, &args(&[("-r", ctx.settings.reps), ("-c", calls)]))?;
        [
            ("roundtrip_device_info", "device_info", "clGetDeviceInfo"),
            ("roundtrip_finish", "finish_empty", "clFinish (empty queue)"),
        ]
        .into_iter()
        .map(|(benchmark, metric, call)| {
            figure(
                benchmark,
                params![("call", call), ("calls", calls)],
                "µs/call",
                false,
                take(&native, metric, "-"),
                take(&vgpu, metric, "-"),
            )
        })
        .collect()
    }
}
