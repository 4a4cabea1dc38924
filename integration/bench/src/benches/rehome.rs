//! Re-homing a running vGPU to another device of the host. One backend
//! serves PoCL's `basic` device; while a loopback `checkpoint_loop` runs on
//! it, `vgpu-ctl rehome` moves the vGPU to `pthread` and back, again and
//! again, a few iterations apart. Each move's report splits the pause the
//! program saw into drain, capture, rebuild (objects, program builds) and
//! upload (buffer contents). The program must then finish and verify its
//! own results: a move that lost or garbled state fails the benchmark.

use serde_json::Value;

use super::devices::{self, Pair};
use super::{Benchmark, Section};
use crate::backend::Launch;
use crate::context::{args, vgpu_figure, Context};
use crate::ctl::{number, Ctl};
use crate::error::{Error, Result};
use crate::params;
use crate::record::Figure;
use crate::runner::Side;

pub struct Rehome;

const SIZES_MIB: &[usize] = &[64, 256];
const QUICK_SIZES_MIB: &[usize] = &[16];
/// Iterations between two moves: each device runs some of the work.
const GAP: u64 = 2;
/// Iterations left after the last move is due, so that the program is
/// still running when it arrives even if it ran ahead of our polling.
const MARGIN: u64 = 10;
const FIRST_MOVE_AT: u64 = 2;

/// The report fields of one move, in report order: (field, figure).
const PARTS: &[(&str, &str)] = &[
    ("pause_ms", "rehome_pause"),
    ("drain_ms", "rehome_drain"),
    ("serialize_ms", "rehome_capture"),
    ("rebuild_ms", "rehome_rebuild"),
    ("upload_ms", "rehome_upload"),
];

impl Benchmark for Rehome {
    fn name(&self) -> &'static str {
        "rehome"
    }

    fn section(&self) -> Section {
        Section::State
    }

    fn unavailable(&self, ctx: &Context) -> Option<String> {
        Pair::find(&ctx.paths.backend).err()
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let pair = Pair::find(&ctx.paths.backend).map_err(Error::Unavailable)?;
        let sizes = if ctx.settings.quick {
            QUICK_SIZES_MIB
        } else {
            SIZES_MIB
        };
        let mut figures = Vec::new();
        for &size in sizes {
            let [forth, back] = measure(ctx, &pair, size)?;
            for (moves, direction) in [(forth, pair.clone()), (back, pair.reversed())] {
                for (i, (_, figure)) in PARTS.iter().enumerate() {
                    let values: Vec<f64> = moves.iter().map(|m| m[i]).collect();
                    let mut f = vgpu_figure(
                        figure,
                        params![
                            ("state_mib", size),
                            (
                                "move",
                                format!("{} → {}", direction.from.short(), direction.to.short())
                            )
                        ],
                        "ms",
                        false,
                        &values,
                    )?;
                    f.device = Some(direction.describe());
                    figures.push(f);
                }
            }
        }
        Ok(figures)
    }
}

/// The moves' report parts (in [`PARTS`] order), there and back.
fn measure(ctx: &Context, pair: &Pair, size_mib: usize) -> Result<[Vec<Vec<f64>>; 2]> {
    let timeout = ctx.runner.timeout();
    let per_direction = (ctx.settings.warmups + ctx.settings.reps) as u64;
    let moves = 2 * per_direction;
    // The backend picks its own device: the run's --backend-arg may name
    // another one.
    let launch = Launch {
        env: devices::env(),
        control: true,
        ..Launch::new(&["--device".to_string(), pair.from.spec.clone()])
    };
    let backend = ctx.launch_backend("rehome", &launch)?;
    let ctl = Ctl::of(&ctx.paths.ctl, &backend)?;
    let iterations = FIRST_MOVE_AT + moves * GAP + MARGIN;
    let mut program = ctx.runner.spawn(
        Side::Vgpu(backend.socket()),
        &ctx.workload_program("checkpoint_loop"),
        &args(&[("-m", size_mib), ("-i", iterations as usize), ("-p", 1)]),
        &ctx.paths.scratch.join("rehome.log"),
    )?;
    let mut parts: [Vec<Vec<f64>>; 2] = [Vec::new(), Vec::new()];
    for k in 0..moves {
        // Absolute targets: a program that ran ahead of one move is not
        // made to run further ahead of the next.
        program.wait_for_progress(FIRST_MOVE_AT + k * GAP, timeout)?;
        let back = k % 2 == 1;
        let to = if back { &pair.from } else { &pair.to };
        let answer = ctl.run(&["rehome", "--device", &to.spec])?;
        let report = moved(&answer.json)?;
        if k / 2 >= ctx.settings.warmups as u64 {
            let values = PARTS
                .iter()
                .map(|(field, _)| number(report, field))
                .collect::<Result<Vec<f64>>>()?;
            parts[usize::from(back)].push(values);
        }
    }
    program.finish(timeout)?;
    Ok(parts)
}

/// The one vGPU's report in `{"rehomed": [...]}`.
fn moved(answer: &Value) -> Result<&Value> {
    match answer
        .get("rehomed")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([one]) => Ok(one),
        _ => Err(Error::Control {
            command: "rehome".into(),
            message: format!("expected the report of one vGPU, got {answer}"),
        }),
    }
}
