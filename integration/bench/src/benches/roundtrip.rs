//! Synchronous call round trip, µs per call: back to back (median of
//! batches of 10) and from idle (median of single calls, each after a gap
//! longer than the backend's poll budget).

use super::{Benchmark, Section};
use crate::context::{args, figure, take, Context};
use crate::error::Result;
use crate::params;
use crate::record::Figure;

/// Sleep before each idle call: far past the backend's default poll
/// budget (`--poll-us 50`), so its vring thread has gone to sleep on the
/// kick, and short enough to make hundreds of calls in a second.
pub const IDLE_GAP_US: usize = 2000;

pub struct Roundtrip;

/// A figure of the round-trip program: its record name, its SAMPLE metric,
/// the call as the table names it, and the sleep before each call if the
/// calls are made from idle (the SAMPLE parameter then).
struct Call {
    benchmark: &'static str,
    metric: &'static str,
    call: String,
    calls: usize,
    gap_us: Option<usize>,
}

impl Benchmark for Roundtrip {
    fn name(&self) -> &'static str {
        "roundtrip"
    }

    fn section(&self) -> Section {
        Section::Micro
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let (calls, idle_calls) = if ctx.settings.quick {
            (200, 20)
        } else {
            (10_000, 500)
        };
        let program = ctx.bench_program("roundtrip");
        let (native, vgpu) = ctx.samples(
            &program,
            &args(&[
                ("-r", ctx.settings.reps),
                ("-c", calls),
                ("-g", IDLE_GAP_US),
                ("-i", idle_calls),
            ]),
        )?;
        let busy = |benchmark, metric, call: &str| Call {
            benchmark,
            metric,
            call: call.into(),
            calls,
            gap_us: None,
        };
        [
            busy(
                "roundtrip_device_info",
                "device_info",
                "clGetDeviceInfo (the ICD's cache)",
            ),
            busy(
                "roundtrip_finish",
                "finish_empty",
                "clFinish, queue drained (the ICD knows: no round trip)",
            ),
            busy(
                "roundtrip_program_info",
                "program_info",
                "clGetProgramInfo(CL_PROGRAM_NUM_KERNELS) back to back (busy)",
            ),
            Call {
                benchmark: "roundtrip_program_info_idle",
                metric: "program_info_idle",
                call: format!(
                    "clGetProgramInfo(CL_PROGRAM_NUM_KERNELS), each after {} ms asleep (from idle)",
                    IDLE_GAP_US / 1000
                ),
                calls: idle_calls,
                gap_us: Some(IDLE_GAP_US),
            },
        ]
        .into_iter()
        .map(|c| {
            let mut parameters = params![("call", c.call), ("calls", c.calls)];
            let param = match c.gap_us {
                Some(gap) => {
                    parameters.insert("gap_us".into(), serde_json::json!(gap));
                    gap.to_string()
                }
                None => "-".into(),
            };
            figure(
                c.benchmark,
                parameters,
                "µs/call",
                false,
                take(&native, c.metric, &param),
                take(&vgpu, c.metric, &param),
            )
        })
        .collect()
    }
}
