//! `vgpu-ctl`'s readable output: the backend's typed replies as text.

use std::fmt::Write as _;
use std::time::Duration;

use vgpu_backend::control_schema::{
    CompatibleReply, Line, MetricsReply, PausedReply, RehomedReply, ReportReply, StatusReply,
    Timing, WrittenReply,
};

use crate::Command;

/// The reply to `command` as text, or why it does not parse as its type.
pub fn render(command: &Command, answer: &str) -> Result<String, serde_json::Error> {
    if let Ok(Line::Error { error }) = Line::parse(answer) {
        return Ok(format!(
            "vgpu-ctl: {} [{}]\n",
            error.message,
            error.code.as_str()
        ));
    }
    Ok(match command {
        Command::Status => status(&serde_json::from_str(answer)?),
        Command::Metrics | Command::Top { .. } => top_table(&serde_json::from_str(answer)?, None),
        Command::Checkpoint { .. } | Command::Restore { .. } => {
            report(&serde_json::from_str(answer)?)
        }
        Command::Rehome { .. } => {
            let reply: RehomedReply = serde_json::from_str(answer)?;
            let mut out = format!("re-homed {} vGPU(s)\n", reply.rehomed.len());
            reply.rehomed.iter().for_each(|r| out.push_str(&report(r)));
            out
        }
        Command::Profile { .. } => {
            let _: WrittenReply = serde_json::from_str(answer)?;
            "profile written\n".into()
        }
        Command::Accepts { .. } => {
            let _: CompatibleReply = serde_json::from_str(answer)?;
            "compatible: this backend honours the profile\n".into()
        }
        Command::Pause { .. } | Command::Resume { .. } => {
            let reply: PausedReply = serde_json::from_str(answer)?;
            if reply.paused {
                "paused\n"
            } else {
                "running\n"
            }
            .into()
        }
        Command::MigrationBase { .. } => {
            let reply: vgpu_backend::control_schema::MigrationBaseReply =
                serde_json::from_str(answer)?;
            if reply.sends_changes_only {
                "the next migration sends only what changed since this checkpoint; incoming ones may refer to it
"
            } else {
                "incoming migrations may refer to this checkpoint (it is not this vGPU's last whole one)
"
            }
            .into()
        }
        Command::CommonProfile { .. } => String::new(),
    })
}

fn status(s: &StatusReply) -> String {
    let mut out = String::new();
    for device in &s.devices {
        let _ = writeln!(out, "device: {device}");
    }
    let _ = writeln!(
        out,
        "{} front-end(s), {} session(s), {} object(s)",
        s.vms.len(),
        s.sessions,
        s.objects.total()
    );
    for vm in &s.vms {
        let objects: Vec<String> = vm
            .objects
            .pairs()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(kind, n)| format!("{n} {kind}"))
            .collect();
        let _ = writeln!(
            out,
            "  vm {} (worker {}): {} session(s){}, memory {} of {}; {}",
            vm.id,
            vm.worker_pid,
            vm.sessions,
            if vm.paused { ", paused" } else { "" },
            bytes(vm.memory_used_bytes),
            limit(vm.memory_limit_bytes),
            if objects.is_empty() {
                "no objects".to_string()
            } else {
                objects.join(", ")
            }
        );
    }
    out
}

fn report(r: &ReportReply) -> String {
    let mut out = format!(
        "{} session(s), {} of buffers, {} streamed; drain {:.1} ms, serialize {:.1} ms, \
         rebuild {:.1} ms, upload {:.1} ms, pause {:.1} ms (sessions held {:.1} ms)\n",
        r.sessions,
        bytes(r.buffer_bytes),
        bytes(r.stream_bytes),
        r.drain_ms,
        r.serialize_ms,
        r.rebuild_ms,
        r.upload_ms,
        r.pause_ms,
        r.held_ms
    );
    if r.rounds > 0 || r.owed_bytes > 0 {
        let _ = writeln!(
            out,
            "{} copy round(s) while the guest ran ({}, {:.1} ms), {} read in the pause, \
             {} owed (copy-on-write) and stream written after it in {:.1} ms",
            r.rounds,
            bytes(r.precopied_bytes),
            r.precopy_ms,
            bytes(r.paused_bytes),
            bytes(r.owed_bytes),
            r.write_ms
        );
    }
    out
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn limit(n: u64) -> String {
    if n == 0 {
        "no limit".into()
    } else {
        bytes(n)
    }
}

fn timing(t: &Timing) -> String {
    if t.count == 0 {
        "-".into()
    } else {
        format!("{}x last {:.3}s", t.count, t.last_seconds)
    }
}

/// The `top` table; with the previous figures and the time since, rates.
pub fn top_table(m: &MetricsReply, previous: Option<(Duration, &MetricsReply)>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:>4} {:>5} {:>10} {:>8} {:>8} {:>9} {:>10} {:>10} {:>21} {:>7}  {:<14} {:<14}",
        "VM",
        "SESS",
        "CALLS",
        "CALLS/s",
        "ERRORS",
        "KERNELS",
        "FROM GUEST",
        "TO GUEST",
        "MEMORY / LIMIT",
        "OBJECTS",
        "CHECKPOINT",
        "MIGRATION OUT"
    );
    for vm in &m.vms {
        let rate = previous
            .and_then(|(dt, p)| {
                let before = p.vms.iter().find(|v| v.id == vm.id)?;
                let secs = dt.as_secs_f64().max(1e-3);
                Some(format!(
                    "{:.0}",
                    vm.calls.saturating_sub(before.calls) as f64 / secs
                ))
            })
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "{:>4} {:>5} {:>10} {:>8} {:>8} {:>9} {:>10} {:>10} {:>21} {:>7}  {:<14} {:<14}",
            vm.id,
            vm.sessions,
            vm.calls,
            rate,
            vm.errors,
            vm.kernels_launched,
            bytes(vm.bytes_from_guest),
            bytes(vm.bytes_to_guest),
            format!(
                "{} / {}",
                bytes(vm.memory_used_bytes),
                limit(vm.memory_limit_bytes)
            ),
            vm.objects.total(),
            timing(&vm.checkpoints),
            timing(&vm.migrations_out),
        );
    }
    if m.vms.is_empty() {
        let _ = writeln!(out, "(no front-end connected)");
    }
    for d in &m.devices {
        let _ = writeln!(
            out,
            "device {} ({}): {} calls, {} errors, {} kernels, {} from guest, {} to guest",
            d.device,
            d.api,
            d.calls,
            d.errors,
            d.kernels_launched,
            bytes(d.bytes_from_guest),
            bytes(d.bytes_to_guest)
        );
    }
    out
}
