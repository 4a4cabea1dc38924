//! Blocking read and write bandwidth, 4 KiB to 256 MiB in powers of 4.

use super::{Benchmark, Section};
use crate::context::{args, figure, take, Context};
use crate::error::Result;
use crate::params;
use crate::record::Figure;

pub struct Bandwidth;

impl Benchmark for Bandwidth {
    fn name(&self) -> &'static str {
        "bandwidth"
    }

    fn section(&self) -> Section {
        Section::Micro
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let (min, max) = if ctx.settings.quick {
            (4 << 10, 1 << 20)
        } else {
            (4 << 10, 256 << 20)
        };
        let program = ctx.bench_program("bandwidth");
        let args = args(&[("-r", ctx.settings.reps), ("-m", min), ("-M", max)]);
        let (native, vgpu) = ctx.samples(&program, &args)?;
        let mut figures = Vec::new();
        for (benchmark, metric) in [("bandwidth_write", "write"), ("bandwidth_read", "read")] {
            let mut size: usize = min;
            while size <= max {
                let key = size.to_string();
                figures.push(figure(
                    benchmark,
                    params![("bytes", size)],
                    "GB/s",
                    true,
                    take(&native, metric, &key),
                    take(&vgpu, metric, &key),
                )?);
                size *= 4;
            }
        }
        Ok(figures)
    }
}
