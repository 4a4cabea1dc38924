//! The data path inside a real guest: a blocking 4-byte read (the
//! synchronous round trip), the tiny-kernel enqueue rate and 1–256 MiB
//! blocking transfers through /dev/vgpu0, against the same programs
//! natively on the host, for each busy-poll budget of the guest driver's
//! WAIT (`poll_us`) and of the backend's vring thread (`--poll-us`); then
//! the VM worker's CPU time while the guest's program holds a context and
//! does nothing. One boot per backend budget (`vgpu-guest-bench` runs the
//! guest budgets in turn). Only with `--vm`; the guest is TCG here, so its
//! own work, the guest library's included, is emulated.

use std::path::Path;
use std::time::{Duration, Instant};

use super::{Benchmark, Section};
use crate::backend::Launch;
use crate::context::{args, figure, take, vgpu_figure, Context};
use crate::ctl::Ctl;
use crate::error::{io, Error, Result};
use crate::guest::{Guest, RunningGuest};
use crate::params;
use crate::record::Figure;
use crate::runner::{parse_samples, Samples, Side};

pub struct VmDatapath;

/// The backend's `--poll-us`: its default, and off (the guest polls instead).
const BACKEND_POLLS: &[u64] = &[50, 0];
/// The guest driver's `poll_us`: off, and its default.
const GUEST_POLLS: &[u64] = &[0, 50];
/// How long the guest's program idles with its context open.
const IDLE: Duration = Duration::from_secs(20);
const BENCH_TIMEOUT: Duration = Duration::from_secs(1200);

/// What one boot measured.
struct Boot {
    /// Per guest `poll_us` (`absent`: a driver without the busy-poll, run
    /// once): the samples printed under it.
    blocks: Vec<(String, Samples)>,
    event_idx: String,
    /// The worker's CPU time per second of the guest's idle period (ms/s).
    idle_cpu_ms_per_s: f64,
}

impl Benchmark for VmDatapath {
    fn name(&self) -> &'static str {
        "vm_datapath"
    }

    fn section(&self) -> Section {
        Section::Vm
    }

    fn needs_vm(&self) -> bool {
        true
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let guest = Guest::find(&ctx.paths.root)?;
        let quick = ctx.settings.quick;
        let (calls, kernels) = if quick { (200, 1_000) } else { (2_000, 10_000) };
        let (min, max): (usize, usize) = if quick {
            (1 << 20, 4 << 20)
        } else {
            (1 << 20, 256 << 20)
        };
        let reps = ctx.settings.reps;
        let roundtrip = args(&[("-r", reps), ("-c", calls)]);
        let enqueue = args(&[("-r", reps), ("-k", kernels)]);
        let bandwidth = args(&[("-r", reps), ("-m", min), ("-M", max)]);
        let mut native = Samples::new();
        for (program, args) in [
            ("roundtrip", &roundtrip),
            ("enqueue_rate", &enqueue),
            ("bandwidth", &bandwidth),
        ] {
            let output = ctx
                .runner
                .run(Side::Native, &ctx.bench_program(program), args)?;
            native.extend(output.samples());
        }

        let mut guest_args = vec![
            "-r".to_string(),
            reps.to_string(),
            "-c".into(),
            calls.to_string(),
            "-k".into(),
            kernels.to_string(),
            "-m".into(),
            min.to_string(),
            "-M".into(),
            max.to_string(),
            "-i".into(),
            IDLE.as_secs().to_string(),
        ];
        guest_args.extend(GUEST_POLLS.iter().map(u64::to_string));

        let mut figures = Vec::new();
        for &backend_poll in BACKEND_POLLS {
            let boot = boot(ctx, &guest, backend_poll, &guest_args)?;
            let on = |guest_poll: &str| {
                let poll = guest_poll
                    .parse::<u64>()
                    .map_or_else(|_| guest_poll.into(), serde_json::Value::from);
                params![
                    ("guest", format!("QEMU {}", guest.accel)),
                    ("guest poll_us", poll),
                    ("backend --poll-us", backend_poll),
                    ("event_idx", boot.event_idx.clone()),
                ]
            };
            for (guest_poll, vgpu) in &boot.blocks {
                let mut p = on(guest_poll);
                p.insert("call".into(), "blocking 4-byte read".into());
                figures.push(figure(
                    "vm_roundtrip",
                    p,
                    "µs/call",
                    false,
                    take(&native, "read_4b", "-"),
                    take(vgpu, "read_4b", "-"),
                )?);
                let k = kernels.to_string();
                let mut p = on(guest_poll);
                p.insert("kernels".into(), kernels.into());
                figures.push(figure(
                    "vm_enqueue_rate",
                    p,
                    "kernels/s",
                    true,
                    take(&native, "enqueue_rate", &k),
                    take(vgpu, "enqueue_rate", &k),
                )?);
                for (benchmark, metric) in [
                    ("vm_bandwidth_write", "write"),
                    ("vm_bandwidth_read", "read"),
                ] {
                    let mut size = min;
                    while size <= max {
                        let key = size.to_string();
                        let mut p = on(guest_poll);
                        p.insert("bytes".into(), size.into());
                        figures.push(figure(
                            benchmark,
                            p,
                            "GB/s",
                            true,
                            take(&native, metric, &key),
                            take(vgpu, metric, &key),
                        )?);
                        size *= 4;
                    }
                }
            }
            figures.push(vgpu_figure(
                "vm_idle_backend_cpu",
                params![
                    ("guest", format!("QEMU {}", guest.accel)),
                    ("backend --poll-us", backend_poll),
                    ("idle s", IDLE.as_secs()),
                    ("process", "the VM's worker"),
                ],
                "ms CPU/s",
                false,
                &[boot.idle_cpu_ms_per_s],
            )?);
        }
        Ok(figures)
    }
}

/// Boots the guest bench against a backend with `--poll-us backend_poll`,
/// measuring the VM worker's CPU time over the guest's idle period.
fn boot(ctx: &Context, guest: &Guest, backend_poll: u64, guest_args: &[String]) -> Result<Boot> {
    let mut launch = Launch::new(&ctx.paths.backend_args);
    launch
        .args
        .extend(["--poll-us".to_string(), backend_poll.to_string()]);
    launch.control = true;
    let name = format!("vm-datapath-{backend_poll}");
    let backend = ctx.launch_backend(&name, &launch)?;
    let ctl = Ctl::of(&ctx.paths.ctl, &backend)?;
    let dir = ctx.paths.scratch.join(&name);
    std::fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let mut running = guest.start(
        backend.socket(),
        &dir,
        "/opt/vgpu/bin/vgpu-guest-bench",
        guest_args,
        &[],
    )?;
    expect(&mut running, "IDLE-BEGIN", BENCH_TIMEOUT)?;
    let status = ctl.run(&["status"])?;
    let pid = status.json["vms"][0]["worker_pid"]
        .as_u64()
        .filter(|pid| *pid != 0)
        .ok_or_else(|| Error::Control {
            command: "status".into(),
            message: format!("no worker_pid for the VM in {}", status.json),
        })?;
    let (cpu0, t0) = (cpu_ns(pid)?, Instant::now());
    expect(&mut running, "IDLE-END", IDLE + Duration::from_secs(120))?;
    let (cpu1, t1) = (cpu_ns(pid)?, Instant::now());
    expect(&mut running, "VGPU-GUEST-EXIT 0", Duration::from_secs(120))?;
    let console = running.console();
    let event_idx = console
        .lines()
        .find_map(|l| l.trim().strip_prefix("EVENT-IDX "))
        .unwrap_or("?")
        .to_string();
    Ok(Boot {
        blocks: blocks(&console),
        event_idx,
        idle_cpu_ms_per_s: (cpu1.saturating_sub(cpu0)) as f64 / 1e6 / (t1 - t0).as_secs_f64(),
    })
}

fn expect(running: &mut RunningGuest, needle: &str, timeout: Duration) -> Result<()> {
    if running.wait_for_console(needle, timeout) {
        return Ok(());
    }
    let console = running.console();
    let tail: Vec<&str> = console.lines().rev().take(30).collect();
    Err(Error::MissingOutput {
        program: "guest vgpu-guest-bench".into(),
        what: needle.to_string(),
        tail: tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
    })
}

/// The samples printed under each `POLL-US n` (or `POLL-US absent`) line.
fn blocks(console: &str) -> Vec<(String, Samples)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in console.lines() {
        if let Some(poll) = line.trim().strip_prefix("POLL-US ") {
            out.push((poll.to_string(), String::new()));
            continue;
        }
        if let Some((_, text)) = out.last_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    out.into_iter()
        .map(|(poll, text)| (poll, parse_samples(&text)))
        .collect()
}

/// CPU time of every thread of `pid` so far, in nanoseconds
/// (`/proc/PID/task/*/schedstat`: time on the CPU, first field).
fn cpu_ns(pid: u64) -> Result<u64> {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    let mut total = 0;
    for task in std::fs::read_dir(&tasks).map_err(io("list", &tasks))? {
        let path = task.map_err(io("list", &tasks))?.path().join("schedstat");
        // A thread that ended since the listing no longer counts.
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        total += text
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_split_by_guest_poll_budget() {
        let console = "EVENT-IDX 1\nPOLL-US 0\nSAMPLE read_4b - 10\nPOLL-US 50\n\
                       SAMPLE read_4b - 7\nSAMPLE read_4b - 8\nIDLE-BEGIN\n";
        let b = blocks(console);
        assert_eq!(b.len(), 2);
        assert_eq!(b[0].0, "0");
        assert_eq!(take(&b[0].1, "read_4b", "-"), &[10.0][..]);
        assert_eq!(b[1].0, "50");
        assert_eq!(take(&b[1].1, "read_4b", "-"), &[7.0, 8.0][..]);
    }

    #[test]
    fn cpu_time_of_this_process_is_read() {
        let pid = u64::from(std::process::id());
        let before = cpu_ns(pid).expect("schedstat");
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(cpu_ns(pid).expect("schedstat") > before);
    }
}
