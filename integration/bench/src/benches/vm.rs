//! The VOCL workloads inside a real guest (patched QEMU, our kernel module
//! and ICD, /dev/vgpu0) against the same program natively on the host.
//! Only with `--vm`. The guest runs under TCG here, so its own CPU work —
//! including the ICD's — is emulated: these figures show that the VM path
//! works end to end and what it costs under TCG, not KVM speed.

use super::workloads::Case;
use super::{Benchmark, Section};
use crate::context::{figure, Context};
use crate::error::{Error, Result};
use crate::guest::Guest;
use crate::record::Figure;
use crate::runner::Side;

pub struct VmWorkloads;

/// The suite's quick sizes (what the VM tests run).
const CASES: &[Case] = &[
    Case {
        program: "matmul",
        options: &[("-n", "n", 128), ("-i", "iterations", 1)],
    },
    Case {
        program: "nbody",
        options: &[("-n", "bodies", 512), ("-i", "steps", 2)],
    },
    Case {
        program: "transpose",
        options: &[("-n", "n", 256), ("-i", "iterations", 3)],
    },
    Case {
        program: "smith_waterman",
        options: &[
            ("-n", "query", 200),
            ("-m", "database", 300),
            ("-i", "sequences", 1),
        ],
    },
];

const BOOT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

impl Benchmark for VmWorkloads {
    fn name(&self) -> &'static str {
        "vm_workloads"
    }

    fn section(&self) -> Section {
        Section::Vm
    }

    fn needs_vm(&self) -> bool {
        true
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let guest = Guest::find(&ctx.paths.root)?;
        let cases = if ctx.settings.quick {
            &CASES[..1]
        } else {
            CASES
        };
        let mut figures = Vec::new();
        for case in cases {
            let native = ctx.times_on(
                Side::Native,
                &ctx.workload_program(case.program),
                &case.args(),
            )?;
            let program = format!("/opt/vgpu/bin/{}", case.program);
            let mut guest_times = Vec::new();
            for run in 0..ctx.settings.warmups + ctx.settings.reps {
                let console = guest.run(
                    ctx.socket(),
                    &ctx.paths.scratch,
                    &program,
                    &case.args(),
                    BOOT_TIMEOUT,
                )?;
                let time =
                    guest_time(&console, case.program).ok_or_else(|| Error::MissingOutput {
                        program: format!("guest {program}"),
                        what: "TIME line and RESULT PASS".into(),
                        tail: console
                            .lines()
                            .rev()
                            .take(20)
                            .collect::<Vec<_>>()
                            .into_iter()
                            .rev()
                            .collect::<Vec<_>>()
                            .join("\n"),
                    })?;
                if run >= ctx.settings.warmups {
                    guest_times.push(time);
                }
            }
            let mut params = case.params();
            params.insert("guest".into(), format!("QEMU {}", guest.accel).into());
            figures.push(figure(
                "vm_workload_time",
                params,
                "s",
                false,
                &native,
                &guest_times,
            )?);
        }
        Ok(figures)
    }
}

/// The `TIME` of a passing run in the guest's console.
fn guest_time(console: &str, name: &str) -> Option<f64> {
    let passed = console.lines().any(|l| {
        l.find("RESULT ")
            .map(|at| l[at..].split_whitespace().collect::<Vec<_>>())
            .is_some_and(|w| w.get(1) == Some(&name) && w.get(3) == Some(&"PASS"))
    });
    let time = console.lines().find_map(|l| {
        let w: Vec<&str> = l[l.find("TIME ")?..].split_whitespace().collect();
        (w.get(1) == Some(&name)).then(|| w.get(2)?.parse().ok())?
    });
    time.filter(|_| passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_time_needs_a_passing_result() {
        let ok = "[ 1.0] noise\nTIME matmul 0.5\nRESULT matmul 0123 PASS\nVGPU-GUEST-EXIT 0\n";
        assert_eq!(guest_time(ok, "matmul"), Some(0.5));
        assert_eq!(
            guest_time("TIME matmul 0.5\nRESULT matmul - FAIL x\n", "matmul"),
            None
        );
    }
}
