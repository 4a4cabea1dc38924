//! The control commands as a worker runs them on its own VM. The
//! supervisor parsed the command line, resolved the VM and opened any file
//! it names; here a command gets that file open, never a path (the worker
//! may not be allowed to open it).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::control_schema::{
    CompatibleReply, DeviceFigures, ErrorCode, ErrorReply, Line, MetricsReply, ObjectCounts,
    PausedReply, Progress, RehomedReply, ReportReply, StatusReply, VmFigures, VmStatus,
    WrittenReply,
};
use crate::startup::error_chain;
use crate::worker::registry::Registry;

/// One line of JSON (serde_json escapes every newline inside strings).
pub fn to_line(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("control replies have string keys only")
}

fn bad(message: impl Into<String>) -> ErrorReply {
    ErrorReply::new(ErrorCode::BadArgument, message)
}

fn needs_file(command: &str) -> ErrorReply {
    bad(format!("{command}: the supervisor passed no file"))
}

/// Runs one command; progress lines go to `out` as they come.
pub fn run(
    words: &[&str],
    file: Option<File>,
    registry: &Registry,
    out: &Arc<Mutex<UnixStream>>,
) -> Result<String, ErrorReply> {
    match words {
        ["status"] => Ok(to_line(&status(registry))),
        ["metrics"] => Ok(to_line(&metrics(registry))),
        ["checkpoint", then, options @ ..] => {
            // A count of copy rounds, or `cow`: none, every buffer owed.
            let round_count = |rounds: &str| match rounds {
                "cow" => Ok(Copying::OweAll),
                rounds => rounds
                    .parse()
                    .map(Copying::Rounds)
                    .map_err(|_| bad(format!("invalid round count {rounds:?}"))),
            };
            let (rounds, base) = match options {
                [] => (
                    Copying::Rounds(crate::persist::LiveOptions::default().max_rounds),
                    None,
                ),
                [rounds] => (round_count(rounds)?, None),
                [rounds, id, path] => {
                    let id = u128::from_str_radix(id, 16)
                        .map_err(|_| bad(format!("invalid checkpoint identity {id:?}")))?;
                    let base = (vgpu_migration::BaseId(id), path.to_string());
                    (round_count(rounds)?, Some(base))
                }
                _ => return Err(bad("checkpoint: unexpected words".to_string())),
            };
            let file = file.ok_or(needs_file("checkpoint"))?;
            checkpoint(registry, file, then, rounds, base, out)
        }
        ["restore"] => {
            let vgpu = registry.vm()?;
            let file = file.ok_or(needs_file("restore"))?;
            let started = Instant::now();
            vgpu.pause();
            let result = crate::persist::restore(
                &vgpu,
                std::io::BufReader::new(file),
                crate::persist::Continuity::Unchecked,
            );
            vgpu.resume();
            let report = result.map_err(|e| {
                ErrorReply::new(
                    ErrorCode::RestoreFailed,
                    format!(
                        "restore into front-end {} failed: {}",
                        registry.id,
                        error_chain(&e)
                    ),
                )
            })?;
            vgpu.metrics().restores.note(started.elapsed());
            Ok(to_line(&ReportReply::from(&report)))
        }
        ["rehome", spec] => {
            let selector = crate::config::parse_rehome_target(spec).map_err(bad)?;
            let reports = registry
                .rehome(&selector)
                .map_err(|e| ErrorReply::new(ErrorCode::RehomeFailed, e))?;
            Ok(to_line(&RehomedReply {
                rehomed: reports.iter().map(ReportReply::from).collect(),
            }))
        }
        ["profile"] => {
            let vgpu = registry.vm()?;
            let mut file = file.ok_or(needs_file("profile"))?;
            file.write_all(&vgpu.profile_seen().to_bytes())
                .and_then(|()| file.sync_all())
                .map_err(|e| ErrorReply::new(ErrorCode::File, format!("cannot write: {e}")))?;
            Ok(to_line(&WrittenReply { written: true }))
        }
        ["accepts", name] => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file.ok_or(needs_file("accepts"))?, &mut bytes)
                .map_err(|e| {
                    ErrorReply::new(ErrorCode::File, format!("cannot read {name}: {e}"))
                })?;
            let saw = vgpu_migration::Profile::from_bytes(&bytes).map_err(|e| {
                ErrorReply::new(
                    ErrorCode::BadProfile,
                    format!("{name} is not a device profile: {e}"),
                )
            })?;
            let offered = registry
                .executors()
                .iter()
                .find(|e| e.kind() == Some(vgpu_migration::ExecutorKind::OpenCl))
                .map(|e| e.capacity())
                .ok_or_else(|| {
                    ErrorReply::new(ErrorCode::NoDevice, "this backend serves no OpenCL device")
                })?;
            vgpu_migration::check(&saw, &offered)
                .map_err(|e| ErrorReply::new(ErrorCode::Incompatible, error_chain(&e)))?;
            Ok(to_line(&CompatibleReply { compatible: true }))
        }
        ["migration-base", id, path] => {
            let file = file.ok_or(needs_file("migration-base"))?;
            let id = u128::from_str_radix(id, 16)
                .map(vgpu_migration::BaseId)
                .map_err(|_| bad(format!("invalid checkpoint identity {id:?}")))?;
            let vgpu = registry.vm()?;
            let outgoing = crate::persist::Incremental::against(&vgpu, id, path.to_string()).ok();
            let reply = crate::control_schema::MigrationBaseReply {
                sends_changes_only: outgoing.is_some(),
            };
            let mut base = vgpu
                .migration_base
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            base.outgoing = outgoing;
            base.incoming = Some((id, file));
            base.prepared = None;
            Ok(to_line(&reply))
        }
        ["pause"] => {
            registry.vm()?.pause();
            Ok(to_line(&PausedReply { paused: true }))
        }
        ["resume"] => {
            registry.vm()?.resume();
            Ok(to_line(&PausedReply { paused: false }))
        }
        _ => Err(ErrorReply::new(
            ErrorCode::UnknownCommand,
            format!("unknown worker command {:?}", words.join(" ")),
        )),
    }
}

/// Writes one progress line.
fn send_progress(out: &Arc<Mutex<UnixStream>>, progress: Progress) {
    let line = Line::Progress { progress };
    let _ = writeln!(
        out.lock().unwrap_or_else(|e| e.into_inner()),
        "{}",
        to_line(&line)
    );
}

/// How a checkpoint copies buffer contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Copying {
    /// In up to this many rounds while the guest runs, the rest owed at
    /// the pause; 0: all while it waits (stop-and-copy).
    Rounds(u32),
    /// None before the pause: every buffer owed (copy-on-write).
    OweAll,
}

/// Writes the VM's checkpoint into `file` (see [`Copying`]); an
/// incremental one when `base` names the VM's last whole checkpoint.
fn checkpoint(
    registry: &Registry,
    file: File,
    then: &str,
    copying: Copying,
    base: Option<(vgpu_migration::BaseId, String)>,
    out: &Arc<Mutex<UnixStream>>,
) -> Result<String, ErrorReply> {
    let vgpu = registry.vm()?;
    let id = registry.id;
    let failed = |e: String| {
        ErrorReply::new(
            ErrorCode::CheckpointFailed,
            format!("checkpoint of front-end {id} failed: {e}"),
        )
    };
    let incremental = base
        .map(|(given, path)| crate::persist::Incremental::against(&vgpu, given, path))
        .transpose()
        .map_err(|e| failed(error_chain(&e)))?;
    if incremental.is_some() && copying == Copying::Rounds(0) {
        return Err(bad(
            "an incremental checkpoint needs --rounds 1 or more, or --copy-on-write",
        ));
    }
    let started = Instant::now();
    let progress_out = out.clone();
    let rate = move |bytes: u64| {
        let rate = bytes as f64 / started.elapsed().as_secs_f64().max(1e-9) / 1e6;
        (rate * 10.0).round() / 10.0
    };
    let progress = move |p: &vgpu_migration::Progress| {
        let progress = Progress {
            bytes: p.stream_bytes,
            buffer_bytes: p.buffer_bytes,
            buffer_total: p.buffer_total,
            rate_mb_s: rate(p.stream_bytes),
            round: None,
        };
        send_progress(&progress_out, progress);
    };
    let round_out = out.clone();
    let round_progress = move |p: &crate::persist::RoundProgress| {
        let progress = Progress {
            bytes: p.copied,
            buffer_bytes: p.copied,
            buffer_total: p.listed,
            rate_mb_s: rate(p.copied),
            round: Some(p.round),
        };
        send_progress(&round_out, progress);
    };
    let writer = BufWriter::with_capacity(1 << 20, file);
    let saved = if let Copying::Rounds(0) = copying {
        if then != "resume" {
            vgpu.pause();
        }
        crate::persist::save(&vgpu, writer, Some(Box::new(progress)))
    } else {
        // The guest computes during the rounds, and is held from the
        // pause on when it is to stay paused.
        let options = crate::persist::LiveOptions {
            max_rounds: match copying {
                Copying::Rounds(rounds) => rounds,
                Copying::OweAll => 0,
            },
            stay_paused: then != "resume",
            ..Default::default()
        };
        crate::persist::save_live(
            &vgpu,
            writer,
            &options,
            incremental.as_ref(),
            Some(Box::new(progress)),
            Some(Box::new(round_progress)),
        )
    };
    let result = saved
        .map_err(|e| error_chain(&e))
        .and_then(|(writer, report)| {
            let file = writer.into_inner().map_err(|e| e.error().to_string())?;
            file.sync_all().map_err(|e| e.to_string())?;
            Ok(report)
        });
    match result {
        Ok(report) => {
            vgpu.metrics().checkpoints.note(started.elapsed());
            log::info!("checkpoint of front-end {id} written");
            Ok(to_line(&ReportReply::from(&report)))
        }
        Err(e) => {
            if then != "resume" {
                vgpu.resume();
            }
            Err(failed(e))
        }
    }
}

/// The `status` reply: this worker's VM, if one is connected.
pub fn status(registry: &Registry) -> StatusReply {
    let vms: Vec<VmStatus> = registry
        .live()
        .iter()
        .map(|vgpu| {
            let stats = vgpu.stats();
            VmStatus {
                id: registry.id,
                worker_pid: std::process::id(),
                file_system: crate::sandbox::files::describe(),
                sessions: stats.sessions,
                paused: stats.paused,
                objects: ObjectCounts::from_indexed(&stats.objects),
                memory_used_bytes: vgpu.quota().memory_used(),
                memory_limit_bytes: vgpu.quota().limits.memory_bytes,
            }
        })
        .collect();
    let devices: Vec<String> = registry.executors().iter().map(|e| e.describe()).collect();
    StatusReply {
        device: devices.join("; "),
        devices,
        sessions: vms.iter().map(|v| v.sessions).sum(),
        objects: vms.first().map(|v| v.objects.clone()).unwrap_or_default(),
        vms,
    }
}

/// The `metrics` reply: this worker's VM and the device counters of its
/// life.
pub fn metrics(registry: &Registry) -> MetricsReply {
    let vms: Vec<VmFigures> = registry
        .live()
        .iter()
        .map(|vgpu| {
            let stats = vgpu.stats();
            let m = vgpu.metrics();
            VmFigures {
                id: registry.id,
                sessions: stats.sessions,
                paused: stats.paused,
                calls: m.calls.calls.load(Relaxed),
                errors: m.calls.errors.load(Relaxed),
                kernels_launched: m.calls.kernels.load(Relaxed),
                bytes_from_guest: m.calls.bytes_from_guest.load(Relaxed),
                bytes_to_guest: m.calls.bytes_to_guest.load(Relaxed),
                memory_used_bytes: vgpu.quota().memory_used(),
                memory_limit_bytes: vgpu.quota().limits.memory_bytes,
                objects: ObjectCounts::from_indexed(&stats.objects),
                checkpoints: m.checkpoints.figures(),
                restores: m.restores.figures(),
                migrations_out: m.migrations_out.figures(),
                migrations_in: m.migrations_in.figures(),
                rehomes: m.rehomes.figures(),
            }
        })
        .collect();
    MetricsReply {
        devices: device_figures(registry, vms.iter().map(|v| v.memory_used_bytes).sum()),
        vms,
    }
}

/// This worker's per-device counters, one device per API: the first
/// executor of its kind.
pub fn device_figures(registry: &Registry, memory_used: u64) -> Vec<DeviceFigures> {
    let kinds = [
        vgpu_migration::ExecutorKind::OpenCl,
        vgpu_migration::ExecutorKind::Cuda,
    ];
    let executors = registry.executors();
    crate::vgpu::metrics::APIS
        .iter()
        .zip(kinds)
        .zip(&crate::vgpu::metrics::DEVICES)
        .filter_map(|((api, kind), c)| {
            let executor = executors.iter().find(|e| e.kind() == Some(kind))?;
            Some(DeviceFigures {
                api: api.to_string(),
                device: executor.describe(),
                calls: c.calls.load(Relaxed),
                errors: c.errors.load(Relaxed),
                kernels_launched: c.kernels.load(Relaxed),
                bytes_from_guest: c.bytes_from_guest.load(Relaxed),
                bytes_to_guest: c.bytes_to_guest.load(Relaxed),
                memory_used_bytes: memory_used,
            })
        })
        .collect()
}
