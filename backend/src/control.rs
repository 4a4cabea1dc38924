//! The control socket `vgpu-ctl` talks to: one command per line, one JSON
//! answer per line.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;

use vgpu_protocol::ObjectKind;

use crate::server::Registry;

pub fn spawn(path: &Path, registry: Arc<Registry>, device: String) -> std::io::Result<()> {
    if path.exists() {
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                if let Err(e) = serve(stream, &registry, &device) {
                    log::debug!("control connection: {e}");
                }
            }
        })?;
    Ok(())
}

fn serve(stream: UnixStream, registry: &Registry, device: &str) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    let mut line = String::new();
    while reader.read_line(&mut line)? > 0 {
        let answer = match line.trim() {
            "status" => status_json(registry, device),
            other => format!(r#"{{"error": "unknown command {:?}"}}"#, other),
        };
        writeln!(writer, "{answer}")?;
        line.clear();
    }
    Ok(())
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
                r#"{{"id": {id}, "sessions": {}, "objects": {}}}"#,
                stats.sessions,
                objects_json(&stats.objects)
            )
        })
        .collect();
    format!(
        r#"{{"device": {:?}, "vms": [{}], "sessions": {sessions}, "objects": {}}}"#,
        device,
        entries.join(", "),
        objects_json(&totals)
    )
}
