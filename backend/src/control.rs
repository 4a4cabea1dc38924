//! The control socket `vgpu-ctl` talks to. One command per line, its words
//! separated by tabs; long operations answer with `progress ...` lines, and
//! every command ends with one JSON line.
//!
//! | command | words |
//! |---|---|
//! | `status` | |
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

use vgpu_protocol::ObjectKind;

use crate::server::{error_chain, Registry};
use crate::snapshot::Report;

pub fn spawn(path: &Path, registry: Arc<Registry>, device: String) -> std::io::Result<()> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                let (registry, device) = (registry.clone(), device.clone());
                // Each connection on its own thread: a checkpoint must not
                // hold up a status query.
                let _ = std::thread::Builder::new()
                    .name("control-conn".into())
                    .spawn(move || {
                        if let Err(e) = serve(stream, &registry, &device) {
                            log::debug!("control connection: {e}");
                        }
                    });
            }
        })?;
    Ok(())
}

fn serve(stream: UnixStream, registry: &Registry, device: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let writer = Arc::new(Mutex::new(stream));
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 {
        let words: Vec<&str> = line.trim_end_matches(['\n', '\r']).split('\t').collect();
        let answer = match run(&words, registry, device, &writer) {
            Ok(answer) => answer,
            Err(message) => format!(r#"{{"error": {message:?}}}"#),
        };
        writeln!(writer.lock().unwrap_or_else(|e| e.into_inner()), "{answer}")?;
        if words.first() == Some(&"checkpoint")
            && words.get(3) == Some(&"exit")
            && !answer.contains("error")
        {
            log::info!("checkpoint written; exiting as asked");
            std::process::exit(0);
        }
        line.clear();
    }
    Ok(())
}

fn vm_id(word: Option<&&str>) -> Result<Option<u64>, String> {
    match word {
        None | Some(&"-") | Some(&"") => Ok(None),
        Some(w) => w
            .parse()
            .map(Some)
            .map_err(|_| format!("invalid VM id {w:?}")),
    }
}

fn report_json(report: &Report) -> String {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    format!(
        r#"{{"sessions": {}, "buffer_bytes": {}, "stream_bytes": {}, "drain_ms": {:.3}, "serialize_ms": {:.3}, "rebuild_ms": {:.3}, "upload_ms": {:.3}, "pause_ms": {:.3}}}"#,
        report.sessions,
        report.buffer_bytes,
        report.stream_bytes,
        ms(report.drain),
        ms(report.serialize),
        ms(report.rebuild),
        ms(report.upload),
        ms(report.pause)
    )
}

fn run(
    words: &[&str],
    registry: &Registry,
    device: &str,
    out: &Arc<Mutex<UnixStream>>,
) -> Result<String, String> {
    match words {
        ["status"] => Ok(status_json(registry, device)),
        ["checkpoint", file, rest @ ..] => {
            let (id, vgpu) = registry.vm(vm_id(rest.first())?)?;
            let then = rest.get(1).copied().unwrap_or("resume");
            if !["resume", "pause", "exit"].contains(&then) {
                return Err(format!(
                    "unknown follow-up {then:?}: expected resume, pause or exit"
                ));
            }
            let started = Instant::now();
            let progress_out = out.clone();
            let progress = move |p: &vgpu_migration::Progress| {
                let rate = p.stream_bytes as f64 / started.elapsed().as_secs_f64().max(1e-9) / 1e6;
                let _ = writeln!(
                    progress_out.lock().unwrap_or_else(|e| e.into_inner()),
                    "progress bytes={} buffer_bytes={} buffer_total={} rate_mb_s={rate:.1}",
                    p.stream_bytes,
                    p.buffer_bytes,
                    p.buffer_total
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
                    return Err(format!(
                        "checkpoint of front-end {id} failed: {}",
                        error_chain(&e)
                    ));
                }
            };
            log::info!("checkpoint of front-end {id} written to {file}");
            Ok(report_json(&report))
        }
        ["restore", file, rest @ ..] => {
            let (id, vgpu) = registry.vm(vm_id(rest.first())?)?;
            let f = std::fs::File::open(file).map_err(|e| format!("cannot open {file}: {e}"))?;
            vgpu.pause();
            let result = crate::snapshot::restore(
                &vgpu,
                std::io::BufReader::new(f),
                crate::snapshot::Continuity::Unchecked,
            );
            vgpu.resume();
            let report = result
                .map_err(|e| format!("restore into front-end {id} failed: {}", error_chain(&e)))?;
            Ok(report_json(&report))
        }
        ["rehome", spec] => {
            let selector = crate::config::parse_device(spec).map_err(|e| e.to_string())?;
            let reports = registry.rehome(&selector)?;
            let list: Vec<String> = reports.iter().map(report_json).collect();
            Ok(format!(r#"{{"rehomed": [{}]}}"#, list.join(", ")))
        }
        ["profile", file, rest @ ..] => {
            let (_, vgpu) = registry.vm(vm_id(rest.first())?)?;
            std::fs::write(file, vgpu.profile_seen().to_bytes())
                .map_err(|e| format!("cannot write {file}: {e}"))?;
            Ok(r#"{"written": true}"#.into())
        }
        ["accepts", file] => {
            let bytes = std::fs::read(file).map_err(|e| format!("cannot read {file}: {e}"))?;
            let saw = vgpu_migration::Profile::from_bytes(&bytes)
                .map_err(|e| format!("{file} is not a device profile: {e}"))?;
            let offered = registry
                .executors()
                .iter()
                .find(|e| e.serves(0x1001))
                .map(|e| e.capacity())
                .ok_or("this backend serves no OpenCL device")?;
            vgpu_migration::check(&saw, &offered).map_err(|e| error_chain(&e))?;
            Ok(r#"{"compatible": true}"#.into())
        }
        ["pause", rest @ ..] => {
            registry.vm(vm_id(rest.first())?)?.1.pause();
            Ok(r#"{"paused": true}"#.into())
        }
        ["resume", rest @ ..] => {
            registry.vm(vm_id(rest.first())?)?.1.resume();
            Ok(r#"{"paused": false}"#.into())
        }
        _ => Err(format!("unknown command {:?}", words.join(" "))),
    }
}

fn kind_name(kind: ObjectKind) -> &'static str {
    match kind {
        ObjectKind::Context => "contexts",
        ObjectKind::Queue => "queues",
        ObjectKind::Mem => "buffers",
        ObjectKind::Program => "programs",
        ObjectKind::Kernel => "kernels",
        ObjectKind::Event => "events",
        ObjectKind::Sampler => "samplers",
    }
}

fn objects_json(counts: &[u64]) -> String {
    let fields: Vec<String> = ObjectKind::ALL
        .iter()
        .map(|k| {
            format!(
                r#""{}": {}"#,
                kind_name(*k),
                counts.get(k.index()).copied().unwrap_or(0)
            )
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// `{"device": ..., "vms": [...], "sessions": N, "objects": {...}}`.
pub fn status_json(registry: &Registry, device: &str) -> String {
    let vms = registry.snapshot();
    let mut totals = vec![0u64; ObjectKind::ALL.len()];
    let mut sessions = 0;
    let entries: Vec<String> = vms
        .iter()
        .map(|(id, stats)| {
            sessions += stats.sessions;
            for (t, n) in totals.iter_mut().zip(&stats.objects) {
                *t += n;
            }
            format!(
                r#"{{"id": {id}, "sessions": {}, "paused": {}, "objects": {}}}"#,
                stats.sessions,
                stats.paused,
                objects_json(&stats.objects)
            )
        })
        .collect();
    let devices: Vec<String> = registry
        .executors()
        .iter()
        .map(|e| format!("{:?}", e.describe()))
        .collect();
    format!(
        r#"{{"device": {:?}, "devices": [{}], "vms": [{}], "sessions": {sessions}, "objects": {}}}"#,
        device,
        devices.join(", "),
        entries.join(", "),
        objects_json(&totals)
    )
}
