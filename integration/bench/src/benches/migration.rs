//! QEMU live migration of a guest whose program computes on its vGPU. Two
//! patched QEMUs on 127.0.0.1 (the destination waits with `-incoming
//! defer`), two backends on two devices (PoCL `basic` at the source,
//! `pthread` at the destination); the guest runs `checkpoint_loop` over
//! SIZE MiB of device buffers, and once it is under way QMP `migrate` moves
//! the VM, the vGPU's state travelling inside QEMU's stream. Figures:
//! QEMU's total time and downtime, and the vGPU state's size from the
//! source backend's log. The program must print progress on the
//! destination afterwards. As `integration/tests/vm_migration.rs`, which
//! also checks the program's result against a native run.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use vgpu_integration::qmp::Qmp;

use super::devices::{self, Pair};
use super::{Benchmark, Section};
use crate::backend::{Backend, Launch};
use crate::context::{args, vgpu_figure, Context};
use crate::ctl::Ctl;
use crate::error::{io, Error, Result};
use crate::guest::{Guest, RunningGuest};
use crate::params;
use crate::record::Figure;

pub struct Migration;

const SIZES_MIB: &[usize] = &[64, 256];
const QUICK_SIZES_MIB: &[usize] = &[16];
/// Each run boots two guests: quick mode makes do with one.
const QUICK_RUNS: usize = 1;
/// Never reached: the VMs are stopped once the destination runs on.
const ITERATIONS: usize = 1_000_000;
const MIGRATE_AT: &str = "PROGRESS 2\n";
const PROGRAM: &str = "/opt/vgpu/bin/checkpoint_loop";
/// Generous: TCG, two cores, two guests and two backends at once.
const STEP_TIMEOUT: Duration = Duration::from_secs(300);
const QMP_TIMEOUT: Duration = Duration::from_secs(30);
const MIB: f64 = 1024.0 * 1024.0;

pub(super) struct Sample {
    pub total_s: f64,
    pub downtime_ms: f64,
    /// The device state sent at the stop.
    pub state_bytes: f64,
    /// The destination backend's load of that state, from its first byte
    /// to the vGPU restored: the part of the downtime the vGPU takes.
    pub load_ms: f64,
    /// With QEMU's pre-copy: how long the source still handed out the
    /// whole checkpoint after the VM stopped (QEMU may stop it once the
    /// rest fits in its downtime limit), from QMP's `STOP` to the source
    /// backend's line saying it was all sent; 0 when it went before. An
    /// upper bound of the vGPU's share: QEMU's last pass over RAM comes
    /// first.
    pub after_stop_ms: f64,
    /// Sent through QEMU's pre-copy before the stop, and in how many copy
    /// rounds (0 and 0 without it).
    pub precopy_bytes: f64,
    pub rounds: f64,
    /// QEMU's downtime limit at the stop: its default, or what it was
    /// raised to when the guest wrote more than the limit allows.
    pub downtime_limit_ms: f64,
}

/// What the guest program writes while it computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum GuestWrites {
    /// Rewrites this many of its 8 buffers (`checkpoint_loop -a`).
    Buffers(usize),
    /// Reads all 8 whole every iteration and writes a 4 KiB result
    /// (`checkpoint_loop -r 1`), as inference does with its weights.
    SmallResult,
}

impl GuestWrites {
    /// The program's arguments that select it.
    fn program_args(self) -> Vec<String> {
        match self {
            GuestWrites::Buffers(8) => vec![],
            GuestWrites::Buffers(n) => vec!["-a".into(), n.to_string()],
            GuestWrites::SmallResult => vec!["-r".into(), "1".into()],
        }
    }

    /// The figures' `guest_writes` parameter.
    pub fn describe(self) -> String {
        match self {
            GuestWrites::Buffers(n) => format!("{n} of 8 buffers"),
            GuestWrites::SmallResult => "reads all 8 buffers, writes a 4 KiB result".into(),
        }
    }
}

/// How a migration run differs from the plain one.
#[derive(Debug, Clone, Copy)]
pub(super) struct Variant {
    pub writes: GuestWrites,
    /// Take a whole checkpoint of the running vGPU first and name it on
    /// both backends (`vgpu-ctl migration-base`): the device state sent at
    /// the stop is then incremental.
    pub lean_on_checkpoint: bool,
    /// Both backends serve `--precopy-socket` and both QEMUs name it
    /// (`precopy-socket=`): QEMU carries a whole checkpoint in its
    /// iterative sections while the VM runs.
    pub qemu_precopy: bool,
}

impl Variant {
    const PLAIN: Variant = Variant {
        writes: GuestWrites::Buffers(8),
        lean_on_checkpoint: false,
        qemu_precopy: false,
    };
}

impl Benchmark for Migration {
    fn name(&self) -> &'static str {
        "migration"
    }

    fn section(&self) -> Section {
        Section::State
    }

    /// It boots guests: only with --vm, where the set-up also rebuilds
    /// the guest image (without it an image left by an older checkout
    /// ran programs older than this tree's).
    fn needs_vm(&self) -> bool {
        true
    }

    fn unavailable(&self, ctx: &Context) -> Option<String> {
        if std::env::var("VGPU_SKIP_VM").is_ok_and(|v| v == "1") {
            return Some("VGPU_SKIP_VM=1 is set".into());
        }
        if let Err(e) = Guest::find(&ctx.paths.root) {
            return Some(e.to_string());
        }
        Pair::find(&ctx.paths.backend).err()
    }

    fn run(&self, ctx: &Context) -> Result<Vec<Figure>> {
        let guest = Guest::find(&ctx.paths.root)?;
        let pair = Pair::find(&ctx.paths.backend).map_err(Error::Unavailable)?;
        let (sizes, runs) = if ctx.settings.quick {
            (QUICK_SIZES_MIB, QUICK_RUNS)
        } else {
            (SIZES_MIB, ctx.settings.reps)
        };
        let mut figures = Vec::new();
        for &size in sizes {
            let samples = (0..runs)
                .map(|run| migrate(ctx, &guest, &pair, size, run, Variant::PLAIN))
                .collect::<Result<Vec<Sample>>>()?;
            let of = |f: fn(&Sample) -> f64| samples.iter().map(f).collect::<Vec<f64>>();
            for (name, unit, values) in [
                ("migration_total_time", "s", of(|s| s.total_s)),
                ("migration_downtime", "ms", of(|s| s.downtime_ms)),
                ("migration_vgpu_state", "MiB", of(|s| s.state_bytes / MIB)),
            ] {
                let mut f = vgpu_figure(
                    name,
                    params![
                        ("state_mib", size),
                        ("guest", format!("QEMU {}", guest.accel))
                    ],
                    unit,
                    false,
                    &values,
                )?;
                f.device = Some(pair.describe());
                figures.push(f);
            }
        }
        Ok(figures)
    }
}

pub(super) fn migrate(
    ctx: &Context,
    guest: &Guest,
    pair: &Pair,
    size_mib: usize,
    run: usize,
    variant: Variant,
) -> Result<Sample> {
    let dir = ctx
        .paths
        .scratch
        .join(format!("migration-{size_mib}-{run}"));
    let (source_dir, dest_dir) = (dir.join("source"), dir.join("dest"));
    for d in [&source_dir, &dest_dir] {
        std::fs::create_dir_all(d).map_err(io("create", d))?;
    }
    // Declared before the guests, so dropped after them: a vhost-user
    // backend that goes away under a live QEMU makes it abort.
    let precopy_socket = |d: &Path| d.join("precopy.sock").to_string_lossy().into_owned();
    let backend = |name: &str, device: &str, dir: &Path| {
        let mut args = vec!["--device".to_string(), device.to_string()];
        if variant.qemu_precopy {
            args.extend(["--precopy-socket".to_string(), precopy_socket(dir)]);
        }
        let launch = Launch {
            env: devices::env(),
            // The device-state lines are info.
            log_level: "info",
            control: variant.lean_on_checkpoint,
            ..Launch::new(&args)
        };
        ctx.launch_backend(name, &launch)
    };
    let mut source_backend = backend("migration-source", &pair.from.spec, &source_dir)?;
    let mut dest_backend = backend("migration-dest", &pair.to.spec, &dest_dir)?;
    let global = |d: &Path| format!("vhost-user-vgpu.precopy-socket={}", precopy_socket(d));
    let (source_global, dest_global) = (global(&source_dir), global(&dest_dir));
    let mut source_extra = vec![];
    let mut dest_extra = vec!["-incoming", "defer"];
    if variant.qemu_precopy {
        source_extra.extend(["-global", source_global.as_str()]);
        dest_extra.extend(["-global", dest_global.as_str()]);
    }

    let mut program_args = args(&[("-m", size_mib), ("-i", ITERATIONS), ("-p", 1)]);
    program_args.extend(variant.writes.program_args());
    let mut source = guest.start(
        source_backend.socket(),
        &source_dir,
        PROGRAM,
        &program_args,
        &source_extra,
    )?;
    // Identical machine options; only the backend differs.
    let mut dest = guest.start(
        dest_backend.socket(),
        &dest_dir,
        PROGRAM,
        &program_args,
        &dest_extra,
    )?;
    let mut dest_qmp = connect(&dest.qmp, &dest)?;
    let mut source_qmp = connect(&source.qmp, &source)?;
    qmp(
        &mut dest_qmp,
        "migrate-incoming",
        json!({"uri": "tcp:127.0.0.1:0"}),
    )?;
    let incoming = qmp(&mut dest_qmp, "query-migrate", Value::Null)?;
    let port = incoming["socket-address"][0]["port"]
        .as_str()
        .and_then(|p| p.parse::<u16>().ok())
        .ok_or_else(|| Error::Migration(format!("no listening port in {incoming}")))?;

    if !source.wait_for_console(MIGRATE_AT, STEP_TIMEOUT) {
        return Err(failed(
            &format!("the source guest never printed {MIGRATE_AT:?}"),
            &source,
            &source_backend,
        ));
    }
    if variant.lean_on_checkpoint {
        let base = dir.join("base.ckpt");
        let base = base.to_string_lossy();
        let source_ctl = Ctl::of(&ctx.paths.ctl, &source_backend)?;
        source_ctl.run(&["checkpoint", &base])?;
        source_ctl.run(&["migration-base", &base])?;
        Ctl::of(&ctx.paths.ctl, &dest_backend)?.run(&["migration-base", &base])?;
    }
    qmp(
        &mut source_qmp,
        "migrate",
        json!({ "uri": format!("tcp:127.0.0.1:{port}") }),
    )?;
    let raised = if variant.qemu_precopy {
        converge(&mut source_qmp, &source_backend)?
    } else {
        None
    };
    let info = wait_for_migration(&mut source_qmp)?;
    if info["status"] != "completed" {
        return Err(failed(
            &format!("the migration ended {}: {info}", info["status"]),
            &source,
            &source_backend,
        ));
    }
    let field = |k: &str| {
        info[k]
            .as_f64()
            .ok_or_else(|| Error::Migration(format!("no {k} in {info}")))
    };
    let (total_ms, downtime_ms) = (field("total-time")?, field("downtime")?);
    source_backend
        .wait_for_log("device state: sent ", QMP_TIMEOUT)
        .map_err(|e| Error::Migration(format!("the source backend logged no state: {e}")))?;
    let state_bytes = state_bytes(&source_backend.log()).ok_or_else(|| {
        Error::Migration(format!(
            "no bytes in the source backend's device-state line:\n{}",
            source_backend.log()
        ))
    })?;
    dest_backend
        .wait_for_log("device state: received ", QMP_TIMEOUT)
        .map_err(|e| Error::Migration(format!("the destination logged no state: {e}")))?;
    let load_ms = load_ms(&dest_backend.log()).ok_or_else(|| {
        Error::Migration(format!(
            "no time in the destination backend's device-state line:\n{}",
            dest_backend.log()
        ))
    })?;
    let (precopy_bytes, rounds) = precopied(&source_backend.log()).unwrap_or((0, 0));
    let after_stop_ms = if variant.qemu_precopy {
        let stopped = stopped_at(&source_qmp.events)
            .ok_or_else(|| Error::Migration("the source QEMU sent no STOP event".into()))?;
        let streamed = logged_at(&source_backend.log(), "pre-copy: whole checkpoint of ")
            .ok_or_else(|| {
                Error::Migration(format!(
                    "no time on the source backend's pre-copy line:\n{}",
                    source_backend.log()
                ))
            })?;
        ((streamed - stopped) * 1e3).max(0.0)
    } else {
        0.0
    };
    // Where the vGPU's share of the downtime went: the source's save at
    // the stop (its drain and stream), and at the destination what it
    // restored ahead of the stop, and what the stop adopted, read from the
    // base or received.
    echo_lines(
        "source",
        &source_backend.log(),
        &["device state:", "pre-copy: whole"],
    );
    echo_lines(
        "destination",
        &dest_backend.log(),
        &["persist::ahead", "persist::adopt", "device state:"],
    );
    // The program runs on at the destination, on the other device.
    if !dest.wait_for_console("PROGRESS ", STEP_TIMEOUT) {
        return Err(failed(
            "the program printed no progress on the destination",
            &dest,
            &dest_backend,
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Sample {
        total_s: total_ms / 1e3,
        downtime_ms,
        state_bytes: state_bytes as f64,
        load_ms: load_ms as f64,
        after_stop_ms,
        precopy_bytes: precopy_bytes as f64,
        rounds: rounds as f64,
        downtime_limit_ms: raised.unwrap_or(DEFAULT_DOWNTIME_LIMIT_MS) as f64,
    })
}

/// QEMU's default `downtime-limit`.
const DEFAULT_DOWNTIME_LIMIT_MS: u64 = 300;
/// How long a pre-copy may go on after the whole vGPU was sent before the
/// downtime limit is raised, and to what.
const CONVERGE_WAIT: Duration = Duration::from_secs(20);
const RAISED_DOWNTIME_LIMIT_MS: u64 = 5000;
/// QEMU's default `max-bandwidth`, the rate the pre-copy moved at.
const SWITCHOVER_BANDWIDTH: u64 = 128 << 20;

/// With QEMU's pre-copy the vGPU reports, as pending, the buffers written
/// since their copy: a guest that rewrites more of them per iteration than
/// the downtime limit lets QEMU move never converges, as with RAM. Once
/// the whole vGPU went and the migration is still on after
/// `CONVERGE_WAIT`, the limit is raised as an operator would, with the
/// bandwidth to expect at the switch-over: with nothing left to send
/// before it, QEMU's own estimate of the bandwidth falls to about zero,
/// and with it what it lets the downtime hold. Returns the raised limit.
fn converge(source: &mut Qmp, backend: &Backend) -> Result<Option<u64>> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    let mut sent_at = None;
    while Instant::now() < deadline {
        let info = qmp(source, "query-migrate", Value::Null)?;
        if info["status"] != "active" && info["status"] != "setup" {
            return Ok(None);
        }
        if sent_at.is_none() && backend.log().contains("pre-copy: whole checkpoint of ") {
            sent_at = Some(Instant::now());
        }
        if sent_at.is_some_and(|t| t.elapsed() > CONVERGE_WAIT) {
            qmp(
                source,
                "migrate-set-parameters",
                json!({
                    "downtime-limit": RAISED_DOWNTIME_LIMIT_MS,
                    "avail-switchover-bandwidth": SWITCHOVER_BANDWIDTH,
                }),
            )?;
            return Ok(Some(RAISED_DOWNTIME_LIMIT_MS));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(None)
}

/// Prints the lines of a backend's log that hold one of `patterns`.
fn echo_lines(side: &str, log: &str, patterns: &[&str]) {
    for line in log
        .lines()
        .filter(|l| patterns.iter().any(|p| l.contains(p)))
    {
        eprintln!("vgpu-bench: {side}: {line}");
    }
}

fn connect(socket: &Path, guest: &RunningGuest) -> Result<Qmp> {
    Qmp::connect(socket, QMP_TIMEOUT).map_err(|e| {
        Error::Migration(format!(
            "QMP {}: {e}\n{}",
            socket.display(),
            guest.console()
        ))
    })
}

fn qmp(qmp: &mut Qmp, command: &str, arguments: Value) -> Result<Value> {
    let arguments = (!arguments.is_null()).then_some(arguments);
    qmp.execute(command, arguments)
        .map_err(|e| Error::Migration(format!("QMP {command}: {e}")))
}

/// Polls the source's `query-migrate` until the migration has ended.
fn wait_for_migration(source: &mut Qmp) -> Result<Value> {
    let deadline = Instant::now() + STEP_TIMEOUT;
    loop {
        let info = qmp(source, "query-migrate", Value::Null)?;
        let status = info["status"].as_str().unwrap_or_default();
        if ["completed", "failed", "cancelled"].contains(&status) {
            return Ok(info);
        }
        if Instant::now() > deadline {
            return Err(Error::Migration(format!(
                "still {status} after {} s: {info}",
                STEP_TIMEOUT.as_secs()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn failed(what: &str, guest: &RunningGuest, backend: &Backend) -> Error {
    Error::Migration(format!(
        "{what}\nguest console:\n{}\nbackend log:\n{}",
        last_lines(&guest.console(), 30),
        last_lines(&backend.log(), 30)
    ))
}

fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// `B` of the source backend's `device state: sent N session(s), B bytes
/// (...)` line.
fn state_bytes(log: &str) -> Option<u64> {
    let line = log.lines().find(|l| l.contains("device state: sent "))?;
    let after = &line[line.find("session(s), ")? + "session(s), ".len()..];
    after.split_whitespace().next()?.parse().ok()
}

/// `T` of the destination backend's `device state: received ... in T ms`.
fn load_ms(log: &str) -> Option<u64> {
    let line = log
        .lines()
        .find(|l| l.contains("device state: received "))?;
    let after = &line[line.rfind(", in ")? + ", in ".len()..];
    after.strip_suffix(" ms")?.trim().parse().ok()
}

/// When the VM stopped for the switch-over: the time of QEMU's last `STOP`
/// event, in seconds since the epoch.
fn stopped_at(events: &[Value]) -> Option<f64> {
    let stop = events.iter().rev().find(|e| e["event"] == "STOP")?;
    let stamp = &stop["timestamp"];
    Some(stamp["seconds"].as_f64()? + stamp["microseconds"].as_f64()? / 1e6)
}

/// The time of the first log line holding `pattern`, in seconds since the
/// epoch: env_logger opens each line with `[2026-11-24T19:56:09.224365Z`.
fn logged_at(log: &str, pattern: &str) -> Option<f64> {
    let line = log.lines().find(|l| l.contains(pattern))?;
    let stamp = line.strip_prefix('[')?.split_whitespace().next()?;
    let time: jiff::Timestamp = stamp.parse().ok()?;
    Some(time.as_microsecond() as f64 / 1e6)
}

/// `N` and `R` of the source backend's `pre-copy: whole checkpoint of N
/// bytes sent after R copy round(s)`.
fn precopied(log: &str) -> Option<(u64, u64)> {
    let line = log
        .lines()
        .find(|l| l.contains("pre-copy: whole checkpoint of "))?;
    let mut words =
        line[line.find("checkpoint of ")? + "checkpoint of ".len()..].split_whitespace();
    let bytes = words.next()?.parse().ok()?;
    let rounds = words.nth(3)?.parse().ok()?;
    Some((bytes, rounds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_bytes_come_from_the_sent_line() {
        let log = "[x INFO] front-end 1 connected\n\
                   [y INFO vgpu_backend::vhost::device_state] device state: sent 1 session(s), 16781234 bytes (16777216 of buffers), drain 2ms\n";
        assert_eq!(state_bytes(log), Some(16781234));
        assert_eq!(
            state_bytes("device state: received 1 session(s), 5 bytes"),
            None
        );
    }

    #[test]
    fn load_time_and_precopy_come_from_their_lines() {
        let log = "[x INFO vgpu_backend::persist::precopy] pre-copy: whole checkpoint of 67110000 bytes sent after 3 copy round(s)\n\
                   [y INFO vgpu_backend::vhost::device_state] device state: received 1 session(s), 5 bytes (0 of buffers), rebuilt in 3ms, in 42 ms\n";
        assert_eq!(load_ms(log), Some(42));
        assert_eq!(precopied(log), Some((67110000, 3)));
        assert_eq!(load_ms("device state: received 1 session(s)"), None);
        assert_eq!(precopied("nothing here"), None);
    }

    #[test]
    fn stop_and_log_times_share_a_clock() {
        let events = [
            json!({"event": "STOP", "timestamp": {"seconds": 1_795_550_169u64, "microseconds": 100_000}}),
            json!({"event": "RESUME", "timestamp": {"seconds": 1_795_550_170u64, "microseconds": 0}}),
        ];
        let stopped = stopped_at(&events).expect("a STOP event");
        let log = "[2026-11-24T19:56:09.224365Z INFO  vgpu_backend::persist::precopy] pre-copy: whole checkpoint of 5 bytes sent after 2 copy round(s)\n";
        let logged = logged_at(log, "pre-copy: whole checkpoint of ").expect("a time");
        // 2026-11-24T19:56:09Z is 1795550169 s after the epoch.
        assert!(
            ((logged - stopped) * 1e3 - 124.365).abs() < 1e-3,
            "{logged} - {stopped}"
        );
        assert_eq!(stopped_at(&events[1..]), None);
        assert_eq!(logged_at("no stamp here", "no"), None);
    }
}
