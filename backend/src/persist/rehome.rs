//! Re-homing: a running vGPU's objects on one executor move to another
//! executor of the same kind (another device), without a stream: each
//! session's part is saved, rebuilt on the new executor, and its contents
//! copied across, all while the vGPU is quiesced.

use std::sync::Arc;
use std::time::Instant;

use vgpu_migration as m;

use super::{Error, Report, CHUNK};
use crate::executor::{Executor, SnapshotError};
use crate::vgpu::Vgpu;

/// Moves a running vGPU's objects on one executor to another executor of
/// the same kind (its sessions' parts on other executors stay where they
/// are): refused before anything stops when the device cannot honour the
/// profile the guest saw.
pub fn rehome(vgpu: &Arc<Vgpu>, to: Arc<dyn Executor>) -> Result<Report, Error> {
    m::check(&vgpu.profile_seen(), &to.capacity())?;
    let bounds = vgpu.bounds();
    let mut executors = vgpu.executors();
    let kind = to.kind().ok_or(SnapshotError::Unsupported(
        "re-homing onto an executor whose sessions cannot be saved",
    ))?;
    let index = executors
        .iter()
        .position(|e| e.kind() == Some(kind))
        .ok_or(Error::NoExecutor { kind })?;
    executors[index] = to.clone();
    let started = Instant::now();
    let report = vgpu.with_quiesced(|sessions| -> Result<Report, Error> {
        let mut report = Report {
            sessions: sessions.len(),
            ..Default::default()
        };
        let t = Instant::now();
        let mut saved = Vec::new();
        for (id, session) in sessions.iter_mut() {
            let part = &mut session.exec.sessions[index];
            if session.opened && !session.closed && !part.is_empty() {
                saved.push(Some(part.save(*id)?));
            } else {
                saved.push(None);
            }
        }
        report.drain = saved.iter().flatten().map(|s| s.drain).sum();
        report.serialize = t.elapsed().saturating_sub(report.drain);
        let t = Instant::now();
        let mut rebuilt = Vec::new();
        for s in &saved {
            rebuilt.push(match s {
                Some(s) => Some(to.restore_session(&s.state)?),
                None => None,
            });
        }
        report.rebuild = t.elapsed();
        let t = Instant::now();
        let mut chunk = vec![0u8; CHUNK];
        for (s, r) in saved.iter_mut().zip(rebuilt.iter_mut()) {
            let (Some(s), Some(r)) = (s, r) else {
                continue;
            };
            for (buffer, source) in s.buffers.iter_mut() {
                let sink = r.sinks.get_mut(buffer).ok_or(Error::UnknownBuffer {
                    session: 0,
                    buffer: *buffer,
                })?;
                report.buffer_bytes +=
                    super::for_each_chunk(source.as_mut(), &mut chunk, |offset, bytes| {
                        sink.write(offset, bytes).map_err(Error::Buffer)
                    })?;
            }
        }
        report.upload = t.elapsed();
        // Everything is rebuilt: swap it in; the old objects go with the
        // old parts, the other APIs' parts stay.
        for ((_, session), restored) in sessions.iter_mut().zip(rebuilt) {
            let mut part = match restored {
                Some(restored) => restored.session,
                None => to.open_session(),
            };
            bounds.apply(part.as_mut());
            session.exec.sessions[index] = part;
            session.exec.executors = executors.clone();
        }
        Ok(report)
    })??;
    vgpu.set_executors(executors);
    vgpu.refresh_aborters();
    Ok(Report {
        pause: started.elapsed(),
        ..report
    })
}
