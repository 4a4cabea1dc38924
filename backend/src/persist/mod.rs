//! Snapshots of a whole vGPU: checkpoint to a stream, restore from one, and
//! re-home a running vGPU to another device. The vGPU is quiesced while its
//! state is taken (no batch runs; batches in progress and issued device work
//! finish first) and resumes after. A restore builds everything aside and
//! swaps it in only once the stream's end has been verified, so a bad
//! stream changes nothing.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use vgpu_migration as m;

use crate::executor::SnapshotError;
use crate::vgpu::Vgpu;

mod adopt;
mod ahead;
mod base;
mod byte_queue;
mod capture;
mod follow;
mod live;
mod load;
mod migration;
mod objects_first;
mod precopy;
mod rehome;
mod sessions;
pub use base::{CheckpointBase, MigrationBase};
pub use live::{save_live, Incremental, LiveOptions, RoundFn, RoundProgress};
pub use migration::{restore_migration, save_for_migration};
pub use precopy::{Incoming, Outgoing, PrecopyError};
pub use rehome::rehome;
pub(crate) use sessions::{exec_sessions, rebuild_session, save_session};

/// Bytes of buffer contents per stream chunk (the stream's limit).
const CHUNK: usize = 4 << 20;

/// Reads `source` whole, a chunk at a time through `chunk` (at most
/// [`CHUNK`] bytes), handing each piece and its offset to `put`; returns
/// the bytes read.
fn for_each_chunk(
    source: &mut dyn crate::executor::BufferSource,
    chunk: &mut [u8],
    mut put: impl FnMut(u64, &[u8]) -> Result<(), Error>,
) -> Result<u64, Error> {
    let size = source.size();
    let mut offset = 0u64;
    while offset < size {
        let len = (size - offset).min(chunk.len().min(CHUNK) as u64) as usize;
        source
            .read(offset, &mut chunk[..len])
            .map_err(Error::Buffer)?;
        put(offset, &chunk[..len])?;
        offset += len as u64;
    }
    Ok(size)
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Session(#[from] SnapshotError),
    #[error("cannot restore the {kind} objects of session {session} on this device")]
    Part {
        kind: m::ExecutorKind,
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
    #[error("this backend has no {kind} device to restore onto (start it with one: --device)")]
    NoExecutor { kind: m::ExecutorKind },
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
    #[error("the whole checkpoint has no identity an incremental one could refer to")]
    NoIdentity,
    #[error("the incoming vGPU names {expected} bytes for buffer {buffer} of session {session} from the migration base; {found} came")]
    BaseContents {
        session: u64,
        buffer: u64,
        expected: u64,
        found: u64,
    },
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
    /// Of the pause, the time every session was held: the rest waited
    /// for batches in progress, which their guests wait for anyway.
    pub held: Duration,
    /// Copy rounds run while the guest computed (0: stop-and-copy).
    pub rounds: u32,
    /// Bytes copied while the guest computed (re-copies included).
    pub precopied_bytes: u64,
    /// Bytes of buffer contents read during the pause.
    pub paused_bytes: u64,
    /// Bytes of contents owed at the pause (copy-on-write), read after it.
    pub owed_bytes: u64,
    /// Time of the copy rounds.
    pub precopy: Duration,
    /// Writing the stream after the guest resumed.
    pub write: Duration,
}

/// Writes the vGPU's state and buffer contents to `out`, quiescing it for
/// the duration; `progress` hears of every chunk.
pub fn save<W: Write>(
    vgpu: &Vgpu,
    out: W,
    progress: Option<ProgressFn>,
) -> Result<(W, Report), Error> {
    let (out, report) = capture::quiesced(vgpu, |mut captured, report| {
        // Nothing is written while quiesced: the contents are those of now.
        let copied_at = crate::executor::written::advance();
        let t = Instant::now();
        let mut base = CheckpointBase::new(m::BaseId::random());
        let mut writer = m::StreamWriter::with_identity(out, base.id)?;
        if let Some(progress) = progress {
            writer.on_progress(progress);
        }
        writer.write_state(&captured.state)?;
        let mut chunk = vec![0u8; CHUNK];
        for session in captured.sessions.iter_mut() {
            let id = session.id;
            for (buffer, source) in session.buffers.iter_mut() {
                let taken = base::Taken {
                    session: id,
                    buffer: *buffer,
                    copied_at,
                };
                base.note(source.as_ref(), taken);
                for_each_chunk(source.as_mut(), &mut chunk, |offset, bytes| {
                    Ok(writer.write_buffer_chunk(id, *buffer, offset, bytes)?)
                })?;
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
        Ok(out)
    })?;
    Ok((out, report))
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
/// rebuilt on the vGPU's devices: each executor's part of a session on the
/// executor of that kind. Nothing changes unless the whole stream is
/// valid and every object could be rebuilt.
pub fn restore<R: Read>(
    vgpu: &Arc<Vgpu>,
    input: R,
    continuity: Continuity,
) -> Result<Report, Error> {
    let executors = vgpu.executors();
    let mut report = Report::default();
    let (restored, profile) = load::load(input, &executors, &vgpu.quota().limits, &mut report)?;
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
            held_ms: ms(report.held),
            rounds: report.rounds,
            precopied_bytes: report.precopied_bytes,
            paused_bytes: report.paused_bytes,
            owed_bytes: report.owed_bytes,
            precopy_ms: ms(report.precopy),
            write_ms: ms(report.write),
        }
    }
}
