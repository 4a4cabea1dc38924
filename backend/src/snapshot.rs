//! Snapshots of a whole vGPU: checkpoint to a stream, restore from one, and
//! re-home a running vGPU to another device. The vGPU is quiesced while its
//! state is taken (no batch runs; batches in progress and issued device work
//! finish first) and resumes after. A restore builds everything aside and
//! swaps it in only once the stream's end has been verified, so a bad
//! stream changes nothing.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vgpu_migration as m;

use crate::executor::{Executor, SavedSession, SnapshotError};
use crate::session::{ExecSessions, SessionState};
use crate::vgpu::Vgpu;

/// Bytes of buffer contents per stream chunk (the stream's limit).
const CHUNK: usize = 4 << 20;
/// OpenCL's opcode range: the executor that owns the snapshot state model.
const OPENCL_OPCODE: u32 = 0x1001;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Session(#[from] SnapshotError),
    #[error("cannot write the snapshot stream")]
    Write(#[from] m::WriteError),
    #[error("the snapshot is not usable")]
    Read(#[from] m::ReadError),
    #[error("the snapshot's state is invalid")]
    State(#[from] m::StateError),
    #[error("this device cannot honour the device profile the guest saw")]
    Incompatible(#[from] m::Incompatible),
    #[error("cannot move buffer contents: {0}")]
    Buffer(vgpu_protocol::Status),
    #[error("the stream has contents for buffer {buffer} of session {session}, which it does not describe")]
    UnknownBuffer { session: u64, buffer: u64 },
    #[error("this backend has no OpenCL device to restore onto")]
    NoOpenCl,
}

/// Hears of every chunk a long save writes.
pub type ProgressFn = Box<dyn FnMut(&m::Progress) + Send>;

/// What a save, restore or re-home did, and how long each part took.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub sessions: usize,
    pub buffer_bytes: u64,
    pub stream_bytes: u64,
    /// Waiting for batches in progress and issued device work.
    pub drain: Duration,
    /// Capturing the state (objects and their records).
    pub serialize: Duration,
    /// Re-creating objects and rebuilding programs.
    pub rebuild: Duration,
    /// Moving buffer contents.
    pub upload: Duration,
    /// From quiesce to resume (the guest-visible pause).
    pub pause: Duration,
}

fn opencl_index(executors: &[Arc<dyn Executor>]) -> Option<usize> {
    executors.iter().position(|e| e.serves(OPENCL_OPCODE))
}

/// Captures every open session; the caller holds the vGPU quiesced.
fn save_sessions(sessions: &mut [(u64, &mut SessionState)]) -> Result<Vec<SavedSession>, Error> {
    let mut saved = Vec::new();
    for (id, session) in sessions.iter_mut() {
        if !session.opened || session.closed {
            continue;
        }
        let mut captured = None;
        for exec in session.exec.sessions.iter_mut() {
            if !exec.is_empty() {
                if captured.is_some() {
                    return Err(
                        SnapshotError::Unsupported("a session using two device APIs").into(),
                    );
                }
                captured = Some(exec.save(*id)?);
            }
        }
        saved.push(captured.unwrap_or_else(|| SavedSession {
            state: m::SessionState::V1(m::SessionStateV1 {
                id: *id,
                protocol_version: 1,
                ..Default::default()
            }),
            buffers: Vec::new(),
            drain: Duration::ZERO,
        }));
    }
    Ok(saved)
}

/// Writes the vGPU's state and buffer contents to `out`, quiescing it for
/// the duration; `progress` hears of every chunk.
pub fn save<W: Write>(
    vgpu: &Vgpu,
    out: W,
    progress: Option<ProgressFn>,
) -> Result<(W, Report), Error> {
    let executors = vgpu.executors();
    let device = opencl_index(&executors)
        .map(|i| executors[i].identity())
        .unwrap_or_default();
    let profile = vgpu.profile_seen();
    let started = Instant::now();
    vgpu.with_quiesced(|sessions| {
        let mut report = Report {
            sessions: sessions.len(),
            ..Default::default()
        };
        let t = Instant::now();
        let mut saved = save_sessions(sessions)?;
        report.drain = saved.iter().map(|s| s.drain).sum();
        report.serialize = t.elapsed().saturating_sub(report.drain);
        let state = m::VgpuState::V1(m::VgpuStateV1 {
            profile,
            device,
            sessions: saved.iter().map(|s| s.state.clone()).collect(),
        });
        state.validate()?;
        let t = Instant::now();
        let mut writer = m::StreamWriter::new(out)?;
        if let Some(progress) = progress {
            writer.on_progress(progress);
        }
        writer.write_state(&state)?;
        let mut chunk = vec![0u8; CHUNK];
        for session in saved.iter_mut() {
            let id = match &session.state {
                m::SessionState::V1(s) => s.id,
            };
            for (buffer, source) in session.buffers.iter_mut() {
                let size = source.size();
                let mut offset = 0u64;
                while offset < size {
                    let len = (size - offset).min(CHUNK as u64) as usize;
                    source
                        .read(offset, &mut chunk[..len])
                        .map_err(Error::Buffer)?;
                    writer.write_buffer_chunk(id, *buffer, offset, &chunk[..len])?;
                    offset += len as u64;
                }
            }
        }
        let (out, summary) = writer.finish()?;
        report.upload = t.elapsed();
        report.buffer_bytes = summary.buffer_bytes;
        report.stream_bytes = summary.stream_bytes;
        report.pause = started.elapsed();
        Ok((out, report))
    })
}

/// Reads a stream and builds its sessions on `executor`, aside; returns
/// them with the profile the guest saw, once the stream's end is verified.
fn load<R: Read>(
    input: R,
    executor: &Arc<dyn Executor>,
    report: &mut Report,
) -> Result<(Vec<(u64, crate::executor::RestoredSession)>, m::Profile), Error> {
    let mut reader = m::StreamReader::new(input)?;
    let mut restored: Vec<(u64, crate::executor::RestoredSession)> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut profile = None;
    let t = Instant::now();
    loop {
        match reader.next_item()? {
            Some(m::Item::State(state)) => {
                m::check(state.profile(), &executor.profile())?;
                profile = Some(state.profile().clone());
                let m::VgpuState::V1(state) = *state;
                for session in &state.sessions {
                    let m::SessionState::V1(s) = session;
                    index.insert(s.id, restored.len());
                    restored.push((s.id, executor.restore_session(session)?));
                }
                report.rebuild = t.elapsed();
            }
            Some(m::Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            }) => {
                let sink = index
                    .get(&session)
                    .and_then(|i| restored[*i].1.sinks.get_mut(&buffer))
                    .ok_or(Error::UnknownBuffer { session, buffer })?;
                sink.write(offset, data).map_err(Error::Buffer)?;
            }
            Some(m::Item::End(summary)) => {
                report.buffer_bytes = summary.buffer_bytes;
                report.stream_bytes = summary.stream_bytes;
                break;
            }
            None => {
                return Err(m::ReadError::Truncated {
                    at: reader.bytes_read(),
                }
                .into())
            }
        }
    }
    report.upload = t.elapsed().saturating_sub(report.rebuild);
    report.sessions = restored.len();
    Ok((restored, profile.unwrap_or_default()))
}

/// Replaces the vGPU's sessions with those of a stream (a checkpoint),
/// rebuilt on the vGPU's OpenCL device. Nothing changes unless the whole
/// stream is valid and every object could be rebuilt.
pub fn restore<R: Read>(vgpu: &Arc<Vgpu>, input: R) -> Result<Report, Error> {
    let executors = vgpu.executors();
    let index = opencl_index(&executors).ok_or(Error::NoOpenCl)?;
    let mut report = Report::default();
    let (restored, profile) = load(input, &executors[index], &mut report)?;
    let sessions = restored
        .into_iter()
        .map(|(id, r)| {
            (
                id,
                ExecSessions::with_session(&executors, index, r.session, vgpu.quota()),
            )
        })
        .collect();
    vgpu.replace_sessions(sessions);
    vgpu.set_profile_seen(profile);
    Ok(report)
}

/// Moves a running vGPU to another OpenCL device: refused before anything
/// stops when the device cannot honour the profile the guest saw.
pub fn rehome(vgpu: &Arc<Vgpu>, to: Arc<dyn Executor>) -> Result<Report, Error> {
    let profile = vgpu.profile_seen();
    m::check(&profile, &to.profile())?;
    let mut executors = vgpu.executors();
    let index = opencl_index(&executors).ok_or(Error::NoOpenCl)?;
    let started = Instant::now();
    let report = vgpu.with_quiesced(|sessions| -> Result<Report, Error> {
        let mut report = Report {
            sessions: sessions.len(),
            ..Default::default()
        };
        let t = Instant::now();
        let mut saved = save_sessions(sessions)?;
        report.drain = saved.iter().map(|s| s.drain).sum();
        report.serialize = t.elapsed().saturating_sub(report.drain);
        let t = Instant::now();
        let mut rebuilt = Vec::new();
        for s in &saved {
            rebuilt.push(to.restore_session(&s.state)?);
        }
        report.rebuild = t.elapsed();
        let t = Instant::now();
        let mut chunk = vec![0u8; CHUNK];
        for (s, r) in saved.iter_mut().zip(rebuilt.iter_mut()) {
            for (buffer, source) in s.buffers.iter_mut() {
                let sink = r.sinks.get_mut(buffer).ok_or(Error::UnknownBuffer {
                    session: 0,
                    buffer: *buffer,
                })?;
                let size = source.size();
                let mut offset = 0u64;
                while offset < size {
                    let len = (size - offset).min(CHUNK as u64) as usize;
                    source
                        .read(offset, &mut chunk[..len])
                        .map_err(Error::Buffer)?;
                    sink.write(offset, &chunk[..len]).map_err(Error::Buffer)?;
                    offset += len as u64;
                    report.buffer_bytes += len as u64;
                }
            }
        }
        report.upload = t.elapsed();
        // Everything is rebuilt: swap it in; the old objects go with the
        // old sessions.
        executors[index] = to.clone();
        let mut rebuilt = rebuilt.into_iter();
        for (_, session) in sessions.iter_mut() {
            if session.opened && !session.closed {
                let restored = rebuilt.next().expect("one per saved session");
                session.exec =
                    ExecSessions::with_session(&executors, index, restored.session, vgpu.quota());
            } else {
                session.exec = ExecSessions::open(&executors, vgpu.quota());
            }
        }
        Ok(report)
    })?;
    vgpu.set_executors(executors);
    vgpu.set_profile_seen(profile);
    vgpu.refresh_aborters();
    Ok(Report {
        pause: started.elapsed(),
        ..report
    })
}
