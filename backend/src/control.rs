//! The control socket `vgpu-ctl` talks to. One command per line: its words
//! separated by tabs, or a JSON array of strings (which can carry any path,
//! tabs and newlines included); long operations answer with `{"progress": ...}`
//! lines, and every command ends with one JSON line: its reply, or
//! `{"error": {"code": ..., "message": ...}}`. The replies are the types of
//! [`crate::control_schema`]; `backend/CONTROL.md` documents them.
//!
//! | command | words |
//! |---|---|
//! | `status` | |
//! | `metrics` | |
//! | `checkpoint` | FILE, VM id or `-`, then: `resume` / `pause` / `exit` |
//! | `restore` | FILE, VM id or `-` |
//! | `rehome` | device SPEC |
//! | `pause`, `resume` | VM id or `-` |
//! | `profile` | FILE, VM id or `-`: write the profile the VM's guests saw |
//! | `accepts` | FILE: whether this backend's device honours that profile |

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;

use crate::control_schema::{
    CompatibleReply, DeviceFigures, ErrorCode, ErrorReply, Line, MetricsReply, ObjectCounts,
    PausedReply, Progress, RehomedReply, ReportReply, StatusReply, VmFigures, VmStatus,
    WrittenReply,
};
use crate::server::{error_chain, Registry};

pub fn spawn(path: &Path, registry: Arc<Registry>) -> std::io::Result<()> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let registry = registry.clone();
                // Each connection on its own thread: a checkpoint must not
                // hold up a status query.
                let _ = std::thread::Builder::new()
                    .name("control-conn".into())
                    .spawn(move || {
                        if let Err(e) = serve(stream, &registry) {
                            log::debug!("control connection: {e}");
                        }
                    });
            }
        })?;
    Ok(())
}

fn serve(stream: UnixStream, registry: &Registry) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let writer = Arc::new(Mutex::new(stream));
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 {
        let text = line.trim_end_matches(['\n', '\r']);
        let owned: Result<Vec<String>, ErrorReply> = if text.starts_with('[') {
            serde_json::from_str(text).map_err(|e| {
                bad(format!(
                    "a command line that starts with [ must be a JSON array of strings: {e}"
                ))
            })
        } else {
            Ok(text.split('\t').map(str::to_string).collect())
        };
        let words: Vec<&str> = match &owned {
            Ok(words) => words.iter().map(String::as_str).collect(),
            Err(_) => Vec::new(),
        };
        let result = match &owned {
            Ok(_) => run(&words, registry, &writer),
            Err(e) => Err(e.clone()),
        };
        let answer = match &result {
            Ok(answer) => answer.clone(),
            Err(error) => to_line(&Line::Error {
                error: error.clone(),
            }),
        };
        writeln!(writer.lock().unwrap_or_else(|e| e.into_inner()), "{answer}")?;
        if words.first() == Some(&"checkpoint") && words.get(3) == Some(&"exit") && result.is_ok() {
            log::info!("checkpoint written; exiting as asked");
            std::process::exit(0);
        }
        line.clear();
    }
    Ok(())
}

/// One line of JSON (serde_json escapes every newline inside strings).
fn to_line(value: &impl Serialize) -> String {
    serde_json::to_string(value).expect("control replies have string keys only")
}

fn bad(message: String) -> ErrorReply {
    ErrorReply::new(ErrorCode::BadArgument, message)
}

fn file_error(message: String) -> ErrorReply {
    ErrorReply::new(ErrorCode::File, message)
}

fn vm_id(word: Option<&&str>) -> Result<Option<u64>, ErrorReply> {
    match word {
        None | Some(&"-") | Some(&"") => Ok(None),
        Some(w) => w
            .parse()
            .map(Some)
            .map_err(|_| bad(format!("invalid VM id {w:?}"))),
    }
}

fn run(
    words: &[&str],
    registry: &Registry,
    out: &Arc<Mutex<UnixStream>>,
) -> Result<String, ErrorReply> {
    match words {
        ["status"] => Ok(to_line(&status(registry))),
        ["metrics"] => Ok(to_line(&metrics(registry))),
        ["checkpoint", file, rest @ ..] => {
            let (id, vgpu) = registry.vm(vm_id(rest.first())?)?;
            let then = rest.get(1).copied().unwrap_or("resume");
            if !["resume", "pause", "exit"].contains(&then) {
                return Err(bad(format!(
                    "unknown follow-up {then:?}: expected resume, pause or exit"
                )));
            }
            let started = Instant::now();
            let progress_out = out.clone();
            let progress = move |p: &vgpu_migration::Progress| {
                let rate = p.stream_bytes as f64 / started.elapsed().as_secs_f64().max(1e-9) / 1e6;
                let line = Line::Progress {
                    progress: Progress {
                        bytes: p.stream_bytes,
                        buffer_bytes: p.buffer_bytes,
                        buffer_total: p.buffer_total,
                        rate_mb_s: (rate * 10.0).round() / 10.0,
                    },
                };
                let _ = writeln!(
                    progress_out.lock().unwrap_or_else(|e| e.into_inner()),
                    "{}",
                    to_line(&line)
                );
            };
            if then != "resume" {
                vgpu.pause();
            }
            let result = vgpu_migration::write_atomically(Path::new(file), |w| {
                crate::snapshot::save(&vgpu, w, Some(Box::new(progress))).map(|(_, report)| report)
            });
            let report = match result {
                Ok(report) => report,
                Err(e) => {
                    if then != "resume" {
                        vgpu.resume();
                    }
                    return Err(ErrorReply::new(
                        ErrorCode::CheckpointFailed,
                        format!("checkpoint of front-end {id} failed: {}", error_chain(&e)),
                    ));
                }
            };
            vgpu.metrics().checkpoints.note(started.elapsed());
            log::info!("checkpoint of front-end {id} written to {file}");
            Ok(to_line(&ReportReply::from(&report)))
        }
        ["restore", file, rest @ ..] => {
            let (id, vgpu) = registry.vm(vm_id(rest.first())?)?;
            let f = std::fs::File::open(file)
                .map_err(|e| file_error(format!("cannot open {file}: {e}")))?;
            let started = Instant::now();
            vgpu.pause();
            let result = crate::snapshot::restore(
                &vgpu,
                std::io::BufReader::new(f),
                crate::snapshot::Continuity::Unchecked,
            );
            vgpu.resume();
            let report = result.map_err(|e| {
                ErrorReply::new(
                    ErrorCode::RestoreFailed,
                    format!("restore into front-end {id} failed: {}", error_chain(&e)),
                )
            })?;
            vgpu.metrics().restores.note(started.elapsed());
            Ok(to_line(&ReportReply::from(&report)))
        }
        ["rehome", spec] => {
            let selector = crate::config::parse_device(spec).map_err(|e| bad(e.to_string()))?;
            let reports = registry
                .rehome(&selector)
                .map_err(|e| ErrorReply::new(ErrorCode::RehomeFailed, e))?;
            Ok(to_line(&RehomedReply {
                rehomed: reports.iter().map(ReportReply::from).collect(),
            }))
        }
        ["profile", file, rest @ ..] => {
            let (_, vgpu) = registry.vm(vm_id(rest.first())?)?;
            std::fs::write(file, vgpu.profile_seen().to_bytes())
                .map_err(|e| file_error(format!("cannot write {file}: {e}")))?;
            Ok(to_line(&WrittenReply { written: true }))
        }
        ["accepts", file] => {
            let bytes =
                std::fs::read(file).map_err(|e| file_error(format!("cannot read {file}: {e}")))?;
            let saw = vgpu_migration::Profile::from_bytes(&bytes).map_err(|e| {
                ErrorReply::new(
                    ErrorCode::BadProfile,
                    format!("{file} is not a device profile: {e}"),
                )
            })?;
            let offered = registry
                .executors()
                .iter()
                .find(|e| e.serves(0x1001))
                .map(|e| e.capacity())
                .ok_or_else(|| {
                    ErrorReply::new(ErrorCode::NoDevice, "this backend serves no OpenCL device")
                })?;
            vgpu_migration::check(&saw, &offered)
                .map_err(|e| ErrorReply::new(ErrorCode::Incompatible, error_chain(&e)))?;
            Ok(to_line(&CompatibleReply { compatible: true }))
        }
        ["pause", rest @ ..] => {
            registry.vm(vm_id(rest.first())?)?.1.pause();
            Ok(to_line(&PausedReply { paused: true }))
        }
        ["resume", rest @ ..] => {
            registry.vm(vm_id(rest.first())?)?.1.resume();
            Ok(to_line(&PausedReply { paused: false }))
        }
        _ => Err(ErrorReply::new(
            ErrorCode::UnknownCommand,
            format!("unknown command {:?}", words.join(" ")),
        )),
    }
}

/// The `status` reply.
pub fn status(registry: &Registry) -> StatusReply {
    let mut totals = vec![0u64; vgpu_protocol::ObjectKind::ALL.len()];
    let mut sessions = 0;
    let vms = registry
        .live()
        .iter()
        .map(|(id, vgpu)| {
            let stats = vgpu.stats();
            sessions += stats.sessions;
            for (t, n) in totals.iter_mut().zip(&stats.objects) {
                *t += n;
            }
            VmStatus {
                id: *id,
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
        vms,
        sessions,
        objects: ObjectCounts::from_indexed(&totals),
    }
}

/// The `metrics` reply: every live VM's counters and every device's.
pub fn metrics(registry: &Registry) -> MetricsReply {
    use std::sync::atomic::Ordering::Relaxed;
    let live = registry.live();
    let vms: Vec<VmFigures> = live
        .iter()
        .map(|(id, vgpu)| {
            let stats = vgpu.stats();
            let m = vgpu.metrics();
            VmFigures {
                id: *id,
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
    let memory_used = vms.iter().map(|v| v.memory_used_bytes).sum();
    // One device per API: the first executor that serves a call of it.
    let probes = [0x1001, vgpu_protocol::opcode::CuLaunchKernel];
    let executors = registry.executors();
    let devices = crate::metrics::APIS
        .iter()
        .zip(probes)
        .zip(&crate::metrics::DEVICES)
        .filter_map(|((api, probe), c)| {
            let executor = executors.iter().find(|e| e.serves(probe))?;
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
        .collect();
    MetricsReply { vms, devices }
}
