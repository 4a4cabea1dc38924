//! Snapshots of a whole vGPU: checkpoint to a stream, restore from one, and
//! re-home a running vGPU to another device. The vGPU is quiesced while its
//! state is taken (no batch runs; batches in progress and issued device work
//! finish first) and resumes after. A restore builds everything aside and
//! swaps it in only once the stream's end has been verified, so a bad
//! stream changes nothing.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vgpu_migration as m;

use crate::executor::{Executor, SavedSession, SnapshotError};
use crate::vgpu::session::{ExecSessions, SessionState, VmBounds};
use crate::vgpu::Vgpu;

mod base;
mod byte_queue;
mod live;
mod migration;
mod precopy;
pub use base::{CheckpointBase, MigrationBase};
pub use live::{save_live, Incremental, LiveOptions, RoundFn, RoundProgress};
pub use migration::{restore_migration, save_for_migration};
pub use precopy::{Incoming, Outgoing, PrecopyError};

/// Bytes of buffer contents per stream chunk (the stream's limit).
const CHUNK: usize = 4 << 20;
/// An opcode of each API: the executor serving it owns that part of a
/// session (`clGetPlatformIDs`, `cuInit`).
const OPENCL_OPCODE: u32 = 0x1001;
const CUDA_OPCODE: u32 = 0x2001;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Session(#[from] SnapshotError),
    #[error("cannot restore the CUDA objects of session {session} on this GPU")]
    CudaPart {
        session: u64,
        #[source]
        source: SnapshotError,
    },
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
    #[error("this backend has no CUDA device to restore onto (start it with --device cuda:N)")]
    NoCuda,
    #[error("the state holds {needed} {what}, over this VM's limit of {limit} ({flag})")]
    OverQuota {
        what: &'static str,
        needed: u64,
        limit: u64,
        flag: &'static str,
    },
    #[error("cannot quiesce the vGPU")]
    Quiesce(#[from] crate::vgpu::Stuck),
    #[error("this is an incremental checkpoint (taken against {path}): restore it with its base")]
    Incremental { path: String },
    #[error("the base given ({given:032x}) is not this vGPU's last whole checkpoint ({last}): take a whole one first")]
    NotTheBase { given: u128, last: String },
    #[error("the incoming vGPU refers to a whole checkpoint, and none was named here (vgpu-ctl migration-base FILE)")]
    NoMigrationBase,
    #[error("cannot read the migration base")]
    MigrationBase(#[source] std::io::Error),
    #[error("cannot merge the incoming vGPU with the migration base")]
    Merge(#[source] m::MergeError),
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
    /// Copy rounds run while the guest computed (0: stop-and-copy).
    pub rounds: u32,
    /// Bytes copied while the guest computed (re-copies included).
    pub precopied_bytes: u64,
    /// Bytes of buffer contents read during the pause.
    pub paused_bytes: u64,
    /// Time of the copy rounds.
    pub precopy: Duration,
    /// Writing the stream after the guest resumed.
    pub write: Duration,
}

fn index_of(executors: &[Arc<dyn Executor>], opcode: u32) -> Option<usize> {
    executors.iter().position(|e| e.serves(opcode))
}

fn opencl_index(executors: &[Arc<dyn Executor>]) -> Option<usize> {
    index_of(executors, OPENCL_OPCODE)
}

/// Captures every open session; the caller holds the vGPU quiesced.
fn save_sessions(sessions: &mut [(u64, &mut SessionState)]) -> Result<Vec<SavedSession>, Error> {
    let mut saved = Vec::new();
    for (id, session) in sessions.iter_mut() {
        if !session.opened || session.closed {
            continue;
        }
        saved.push(save_session(*id, &mut session.exec, session.last_seq)?);
    }
    Ok(saved)
}

/// Captures one session: the parts it has on each executor (OpenCL
/// objects, CUDA objects), merged into one record of the newest version.
fn save_session(id: u64, exec: &mut ExecSessions, last_seq: u64) -> Result<SavedSession, Error> {
    let mut state = m::SessionStateV2 {
        id,
        protocol_version: 1,
        ..Default::default()
    };
    let mut opencl_buffers = Vec::new();
    let mut cuda_buffers = Vec::new();
    let mut images = Vec::new();
    let mut devices = m::DeviceTopology::default();
    let mut drain = Duration::ZERO;
    for part in exec.sessions.iter_mut().filter(|s| !s.is_empty()) {
        let part = part.save(id)?;
        drain += part.drain;
        let part_images = part.state.images().to_vec();
        let part_devices = part.state.devices().cloned().unwrap_or_default();
        let mut s = part.state.latest();
        let cuda = s.cuda.take();
        // A session may hold sub-devices and no other OpenCL object.
        let opencl = s.has_opencl() || !part_devices.is_empty();
        match (opencl, cuda) {
            (true, Some(_)) => {
                return Err(
                    SnapshotError::Unsupported("an executor saving two APIs' objects").into(),
                )
            }
            (true, None) if state.has_opencl() => {
                return Err(SnapshotError::Unsupported("a session on two OpenCL devices").into())
            }
            (true, None) => {
                s.cuda = state.cuda.take();
                state = s;
                opencl_buffers = part.buffers;
                images = part_images;
                devices = part_devices;
            }
            (false, Some(_)) if state.cuda.is_some() => {
                return Err(SnapshotError::Unsupported("a session on two CUDA devices").into())
            }
            (false, Some(cuda)) => {
                state.cuda = Some(cuda);
                cuda_buffers = part.buffers;
            }
            (false, None) => {}
        }
    }
    // Contents are keyed by id within the session: CUDA records whose id
    // an OpenCL buffer has take fresh ones.
    if let Some(cuda) = state.cuda.as_mut() {
        let opencl: HashSet<u64> = state
            .buffers
            .iter()
            .filter(|b| b.parent.is_none())
            .map(|b| b.id)
            .chain(images.iter().map(|i| i.id))
            .collect();
        let mut used: HashSet<u64> = opencl.clone();
        used.extend(cuda.allocations.iter().map(|a| a.id));
        used.extend(cuda.globals.iter().map(|g| g.id));
        let mut renamed = HashMap::new();
        let mut next = 1u64;
        cuda.renumber_streamed(|old| {
            if !opencl.contains(&old) {
                return old;
            }
            while used.contains(&next) {
                next += 1;
            }
            used.insert(next);
            renamed.insert(old, next);
            next
        });
        for (buffer, _) in cuda_buffers.iter_mut() {
            if let Some(new) = renamed.get(buffer) {
                *buffer = *new;
            }
        }
    }
    opencl_buffers.extend(cuda_buffers);
    // Version 4 only where there are images and 5 only where there are
    // sub-devices, so other states stay readable by builds that know
    // version 3.
    let state = if !devices.is_empty() {
        m::SessionStateV5 {
            objects: state,
            last_seq,
            images,
            devices,
        }
        .into()
    } else if images.is_empty() {
        m::SessionStateV3 {
            objects: state,
            last_seq,
        }
        .into()
    } else {
        m::SessionStateV4 {
            objects: state,
            last_seq,
            images,
        }
        .into()
    };
    Ok(SavedSession {
        state,
        buffers: opencl_buffers,
        drain,
    })
}

/// Refuses a state that needs more device memory (buffers, CUDA
/// allocations) than the VM's `--max-memory`, or holds more objects under
/// guest handles than its `--max-objects`, before anything is built: a
/// restore makes what the guest's calls made, under the same limits.
fn check_quota(state: &m::VgpuStateV1, limits: &crate::quota::Limits) -> Result<(), Error> {
    let (mut bytes, mut objects) = (0u64, 0u64);
    for session in &state.sessions {
        let images = session.images();
        let sub_devices: &[m::SubDeviceState] =
            session.devices().map_or(&[], |d| d.sub_devices.as_slice());
        let (s, cuda) = match session {
            m::SessionState::V1(s) => (
                (
                    &s.contexts,
                    &s.queues,
                    &s.buffers,
                    &s.programs,
                    &s.kernels,
                    &s.events,
                ),
                None,
            ),
            m::SessionState::V2(s)
            | m::SessionState::V3(m::SessionStateV3 { objects: s, .. })
            | m::SessionState::V4(m::SessionStateV4 { objects: s, .. })
            | m::SessionState::V5(m::SessionStateV5 { objects: s, .. }) => (
                (
                    &s.contexts,
                    &s.queues,
                    &s.buffers,
                    &s.programs,
                    &s.kernels,
                    &s.events,
                ),
                s.cuda.as_ref(),
            ),
        };
        let (contexts, queues, buffers, programs, kernels, events) = s;
        bytes = images
            .iter()
            .map(|i| i.size)
            .fold(bytes, u64::saturating_add);
        macro_rules! held {
            ($($list:expr),*) => { 0u64 $(+ $list.iter().filter(|o| o.guest.is_some()).count() as u64)* };
        }
        objects += held!(
            contexts,
            queues,
            buffers,
            programs,
            kernels,
            events,
            images,
            sub_devices
        );
        let top = buffers
            .iter()
            .filter(|b| b.parent.is_none())
            .map(|b| b.size);
        bytes = top.fold(bytes, u64::saturating_add);
        if let Some(c) = cuda {
            objects += held!(c.contexts, c.modules, c.functions, c.streams, c.events);
            bytes = c
                .allocations
                .iter()
                .map(|a| a.size)
                .fold(bytes, u64::saturating_add);
        }
    }
    for (what, needed, limit, flag) in [
        (
            "bytes of device memory",
            bytes,
            limits.memory_bytes,
            "--max-memory",
        ),
        ("objects", objects, limits.objects, "--max-objects"),
    ] {
        if limit != 0 && needed > limit {
            return Err(Error::OverQuota {
                what,
                needed,
                limit,
                flag,
            });
        }
    }
    Ok(())
}

/// A session rebuilt from a stream: its part on each executor (by index)
/// and where its buffers' contents go.
struct Rebuilt {
    id: u64,
    /// The last message the session ran when it was saved, if recorded.
    last_seq: Option<u64>,
    parts: Vec<(usize, Box<dyn crate::executor::ExecSession>)>,
    sinks: HashMap<u64, Box<dyn crate::executor::BufferSink>>,
}

/// Rebuilds each part of a saved session on the executor of its API.
fn rebuild_session(
    executors: &[Arc<dyn Executor>],
    session: &m::SessionState,
) -> Result<Rebuilt, Error> {
    let mut rebuilt = Rebuilt {
        id: session.id(),
        last_seq: session.last_seq(),
        parts: Vec::new(),
        sinks: HashMap::new(),
    };
    let (opencl, cuda) = match session {
        m::SessionState::V1(s) => (Some(m::SessionState::V1(s.clone())), None),
        m::SessionState::V2(s) | m::SessionState::V3(m::SessionStateV3 { objects: s, .. }) => (
            s.has_opencl().then(|| m::SessionState::V1(s.opencl())),
            s.cuda.is_some().then(|| s.cuda_only()),
        ),
        m::SessionState::V4(v4) => {
            let s = &v4.objects;
            let opencl = m::SessionStateV4 {
                objects: s.opencl().into(),
                last_seq: v4.last_seq,
                images: v4.images.clone(),
            };
            (
                (s.has_opencl() || !v4.images.is_empty()).then(|| opencl.into()),
                s.cuda.is_some().then(|| s.cuda_only()),
            )
        }
        m::SessionState::V5(v5) => {
            let s = &v5.objects;
            let opencl = m::SessionStateV5 {
                objects: s.opencl().into(),
                last_seq: v5.last_seq,
                images: v5.images.clone(),
                devices: v5.devices.clone(),
            };
            (
                (s.has_opencl() || !v5.images.is_empty() || !v5.devices.is_empty())
                    .then(|| opencl.into()),
                s.cuda.is_some().then(|| s.cuda_only()),
            )
        }
    };
    if let Some(opencl) = opencl {
        let i = opencl_index(executors).ok_or(Error::NoOpenCl)?;
        let restored = executors[i].restore_session(&opencl)?;
        rebuilt.sinks.extend(restored.sinks);
        rebuilt.parts.push((i, restored.session));
    }
    if let Some(cuda) = cuda {
        let i = index_of(executors, CUDA_OPCODE).ok_or(Error::NoCuda)?;
        let restored = executors[i]
            .restore_session(&cuda.into())
            .map_err(|source| Error::CudaPart {
                session: rebuilt.id,
                source,
            })?;
        rebuilt.sinks.extend(restored.sinks);
        rebuilt.parts.push((i, restored.session));
    }
    Ok(rebuilt)
}

/// A session's parts on every executor: the rebuilt ones, fresh elsewhere.
fn exec_sessions(
    executors: &[Arc<dyn Executor>],
    parts: Vec<(usize, Box<dyn crate::executor::ExecSession>)>,
    vm: &VmBounds,
) -> ExecSessions {
    let mut all = ExecSessions::open(executors, vm);
    for (i, mut session) in parts {
        vm.apply(session.as_mut());
        all.sessions[i] = session;
    }
    all
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
        // Nothing is written while quiesced: the contents are those of now.
        let copied_at = crate::executor::written::advance();
        report.drain = saved.iter().map(|s| s.drain).sum();
        report.serialize = t.elapsed().saturating_sub(report.drain);
        let state = m::VgpuState::V1(m::VgpuStateV1 {
            profile,
            device,
            sessions: saved.iter().map(|s| s.state.clone()).collect(),
        });
        state.validate()?;
        let t = Instant::now();
        let mut base = CheckpointBase::new(m::BaseId::random());
        let mut writer = m::StreamWriter::with_identity(out, base.id)?;
        if let Some(progress) = progress {
            writer.on_progress(progress);
        }
        writer.write_state(&state)?;
        let mut chunk = vec![0u8; CHUNK];
        for session in saved.iter_mut() {
            let id = session.state.id();
            for (buffer, source) in session.buffers.iter_mut() {
                let taken = base::Taken {
                    session: id,
                    buffer: *buffer,
                    copied_at,
                };
                base.note(source.as_ref(), taken);
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
        *vgpu
            .checkpoint_base
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(base));
        report.upload = t.elapsed();
        report.buffer_bytes = summary.buffer_bytes;
        report.paused_bytes = summary.buffer_bytes;
        report.stream_bytes = summary.stream_bytes;
        report.pause = started.elapsed();
        Ok((out, report))
    })?
}

/// Reads a stream and builds its sessions on `executors` (each part on the
/// executor of its API), aside; returns them with the profile the guest
/// saw, once the stream's end is verified.
fn load<R: Read>(
    input: R,
    executors: &[Arc<dyn Executor>],
    limits: &crate::quota::Limits,
    report: &mut Report,
) -> Result<(Vec<Rebuilt>, m::Profile), Error> {
    let mut reader = m::StreamReader::new(input)?;
    let mut restored: Vec<Rebuilt> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    let mut profile = None;
    let t = Instant::now();
    loop {
        match reader.next_item()? {
            Some(m::Item::State(state)) => {
                // The OpenCL profile binds an OpenCL device; a backend
                // without one can only take sessions that have no OpenCL
                // objects (refused below otherwise).
                if let Some(i) = opencl_index(executors) {
                    m::check(state.profile(), &executors[i].capacity())?;
                }
                profile = Some(state.profile().clone());
                let m::VgpuState::V1(state) = *state;
                check_quota(&state, limits)?;
                for session in &state.sessions {
                    index.insert(session.id(), restored.len());
                    restored.push(rebuild_session(executors, session)?);
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
                    .and_then(|i| restored[*i].sinks.get_mut(&buffer))
                    .ok_or(Error::UnknownBuffer { session, buffer })?;
                sink.write(offset, data).map_err(Error::Buffer)?;
            }
            Some(m::Item::Base { path, .. }) => return Err(Error::Incremental { path }),
            Some(m::Item::BaseRef { .. }) => {
                unreachable!("the reader hands out base refs only after a base")
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

/// Whether restored sessions check that their guest goes on from where
/// the state was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continuity {
    /// The guest goes on (a restart, a migration): a session whose guest
    /// sent messages the state does not hold fails instead of computing on
    /// stale objects.
    Checked,
    /// An operator rolls a running vGPU back on purpose.
    Unchecked,
}

/// Replaces the vGPU's sessions with those of a stream (a checkpoint),
/// rebuilt on the vGPU's devices: OpenCL objects on its OpenCL device, CUDA
/// objects on its CUDA device. Nothing changes unless the whole stream is
/// valid and every object could be rebuilt.
pub fn restore<R: Read>(
    vgpu: &Arc<Vgpu>,
    input: R,
    continuity: Continuity,
) -> Result<Report, Error> {
    let executors = vgpu.executors();
    let mut report = Report::default();
    let (restored, profile) = load(input, &executors, &vgpu.quota().limits, &mut report)?;
    // The guest goes on with the profile it saw where the state was taken.
    vgpu.set_profile_seen(profile);
    let bounds = vgpu.bounds();
    let sessions = restored
        .into_iter()
        .map(|r| {
            let resumes_at = match continuity {
                Continuity::Checked => r.last_seq.map(|seq| seq + 1),
                Continuity::Unchecked => None,
            };
            let exec = exec_sessions(&executors, r.parts, &bounds);
            (r.id, exec, resumes_at)
        })
        .collect();
    vgpu.replace_sessions(sessions);
    Ok(report)
}

/// Moves a running vGPU's OpenCL objects to another OpenCL device (its
/// sessions' CUDA objects stay where they are): refused before anything
/// stops when the device cannot honour the profile the guest saw.
pub fn rehome(vgpu: &Arc<Vgpu>, to: Arc<dyn Executor>) -> Result<Report, Error> {
    m::check(&vgpu.profile_seen(), &to.capacity())?;
    let bounds = vgpu.bounds();
    let mut executors = vgpu.executors();
    let index = opencl_index(&executors).ok_or(Error::NoOpenCl)?;
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

/// A report as the control socket answers it.
impl From<&Report> for crate::control_schema::ReportReply {
    fn from(report: &Report) -> crate::control_schema::ReportReply {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
        crate::control_schema::ReportReply {
            sessions: report.sessions,
            buffer_bytes: report.buffer_bytes,
            stream_bytes: report.stream_bytes,
            drain_ms: ms(report.drain),
            serialize_ms: ms(report.serialize),
            rebuild_ms: ms(report.rebuild),
            upload_ms: ms(report.upload),
            pause_ms: ms(report.pause),
            rounds: report.rounds,
            precopied_bytes: report.precopied_bytes,
            paused_bytes: report.paused_bytes,
            precopy_ms: ms(report.precopy),
            write_ms: ms(report.write),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::{BufferSource, ExecSession};
    use vgpu_protocol::{Request, Status};

    /// An executor session that saves a fixed state.
    struct Fake(m::SessionState);

    struct Zeros(u64);

    impl BufferSource for Zeros {
        fn size(&self) -> u64 {
            self.0
        }
        fn read(&mut self, _: u64, buf: &mut [u8]) -> Result<(), Status> {
            buf.fill(0);
            Ok(())
        }
    }

    impl ExecSession for Fake {
        fn execute(
            &mut self,
            _: &Request,
            _: &mut crate::chain::GuestIo,
        ) -> Result<Vec<u8>, Status> {
            Err(Status::INVALID_OPERATION)
        }
        fn object_counts(&self) -> Vec<u64> {
            vec![1; vgpu_protocol::ObjectKind::ALL.len()]
        }
        fn aborter(&self) -> Box<dyn Fn() + Send + Sync> {
            Box::new(|| {})
        }
        fn save(&mut self, id: u64) -> Result<SavedSession, SnapshotError> {
            let state = m::VgpuState::V1(m::VgpuStateV1 {
                profile: Default::default(),
                device: Default::default(),
                sessions: vec![self.0.clone()],
            });
            let buffers = state
                .streamed_buffers()
                .into_iter()
                .map(|b| (b.buffer, Box::new(Zeros(b.size)) as Box<dyn BufferSource>))
                .collect();
            assert_eq!(self.0.id(), id);
            Ok(SavedSession {
                state: self.0.clone(),
                buffers,
                drain: Duration::ZERO,
            })
        }
    }

    fn opencl_part(id: u64) -> m::SessionState {
        m::SessionStateV1 {
            id,
            protocol_version: 1,
            contexts: vec![m::ContextState {
                id: 1,
                guest: Some(m::GuestRef { handle: 1, refs: 1 }),
                properties: vec![],
            }],
            buffers: vec![m::BufferState {
                id: 7,
                guest: Some(m::GuestRef { handle: 7, refs: 1 }),
                context: 1,
                flags: 1,
                size: 16,
                parent: None,
            }],
            ..Default::default()
        }
        .into()
    }

    fn cuda_part(id: u64) -> m::SessionState {
        m::SessionStateV2 {
            id,
            protocol_version: 1,
            cuda: Some(m::CudaSessionState {
                allocations: vec![
                    m::CudaAllocationState {
                        id: 7,
                        address: 0x2000_0000_0000,
                        size: 32,
                    },
                    m::CudaAllocationState {
                        id: 1,
                        address: 0x2000_0020_0000,
                        size: 8,
                    },
                ],
                ..Default::default()
            }),
            ..Default::default()
        }
        .into()
    }

    #[test]
    fn a_session_on_both_apis_is_saved_as_one_record_with_distinct_content_ids() {
        let mut exec = ExecSessions {
            executors: Vec::new(),
            sessions: vec![Box::new(Fake(opencl_part(3))), Box::new(Fake(cuda_part(3)))],
        };
        let saved = save_session(3, &mut exec, 41).unwrap();
        assert_eq!(saved.state.version(), 3);
        assert_eq!(saved.state.last_seq(), Some(41));
        let state = m::VgpuState::V1(m::VgpuStateV1 {
            profile: Default::default(),
            device: Default::default(),
            sessions: vec![saved.state.clone()],
        });
        assert_eq!(state.validate(), Ok(()));
        let streamed: Vec<(u64, u64)> = state
            .streamed_buffers()
            .iter()
            .map(|b| (b.buffer, b.size))
            .collect();
        let sources: Vec<(u64, u64)> = saved
            .buffers
            .iter()
            .map(|(id, source)| (*id, source.size()))
            .collect();
        assert_eq!(streamed, sources, "the sources follow the state");
        assert_eq!(streamed[0], (7, 16), "the OpenCL buffer keeps its id");
        assert_eq!(streamed[2], (1, 8));
        assert!(![7, 1].contains(&streamed[1].0), "{streamed:?}");
        let session = saved.state.latest();
        assert!(session.has_opencl());
        assert_eq!(
            session.cuda.unwrap().allocations[0].address,
            0x2000_0000_0000,
            "addresses never change"
        );
    }

    #[test]
    fn an_empty_session_is_saved_as_an_empty_record() {
        let mut exec = ExecSessions {
            executors: Vec::new(),
            sessions: Vec::new(),
        };
        let saved = save_session(5, &mut exec, 7).unwrap();
        let session = saved.state.latest();
        assert_eq!((session.id, session.has_opencl()), (5, false));
        assert_eq!(session.cuda, None);
    }

    #[test]
    fn each_part_needs_a_device_of_its_api() {
        let none: Vec<Arc<dyn Executor>> = Vec::new();
        assert!(matches!(
            rebuild_session(&none, &cuda_part(1)),
            Err(Error::NoCuda)
        ));
        assert!(matches!(
            rebuild_session(&none, &opencl_part(1)),
            Err(Error::NoOpenCl)
        ));
        let empty = rebuild_session(&none, &m::SessionStateV2::default().into()).unwrap();
        assert!(empty.parts.is_empty() && empty.sinks.is_empty());
    }
}
