//! Checkpoints while the guest computes. Buffer contents are copied in
//! rounds while the vGPU runs: each copy holds only its own session, for
//! the time of one buffer's read, after that session's issued work has
//! finished. A round re-copies only what was written since its last copy
//! (see `executor::written`). Once a round copies little (or the rounds
//! stop shrinking, or the last one ran), the vGPU is quiesced for the
//! objects and the buffers written since their copy; it resumes before the
//! stream is written. Buffers an executor can owe (copy-on-write, OpenCL:
//! `executor::opencl::cow`) are not read in the pause but by the writer,
//! as they were at the pause; the rest (CUDA) are read in the pause.
//!
//! An incremental checkpoint is taken against the vGPU's last whole one:
//! buffers not written since that one was taken are neither copied nor
//! written, only referred to (see `vgpu_migration::merge`).

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vgpu_migration as m;

use super::base::{CheckpointBase, Taken};
use super::capture::quiesced;
use super::{Error, ProgressFn, Report, CHUNK};
use crate::executor::written::advance;
use crate::executor::BufferSource;
use crate::vgpu::session::SessionState;
use crate::vgpu::{lock_within, Vgpu};

/// How long a copy waits for its session's issued work; a session busy
/// longer (or waiting on a user event) has its buffers read at the pause.
const SETTLE: Duration = Duration::from_secs(1);
/// How long a copy waits for its session's batches in progress.
const LOCK: Duration = crate::executor::QUIESCE_DRAIN;

/// How a checkpoint taken while the guest runs proceeds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveOptions {
    /// Most copy rounds before the pause; with 0, what an executor can
    /// owe is owed (copy-on-write), the rest read in the pause.
    pub max_rounds: u32,
    /// A round that copies at most this many bytes is the last one: what
    /// it left behind is about what the pause has to read.
    pub pause_bytes: u64,
    /// Hold the guest's calls from the pause on (`vgpu.pause()`), for the
    /// caller to resume later; otherwise it resumes once captured.
    pub stay_paused: bool,
}

impl Default for LiveOptions {
    fn default() -> Self {
        LiveOptions {
            max_rounds: 5,
            pause_bytes: 16 << 20,
            stay_paused: false,
        }
    }
}

/// How far the copy rounds have got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoundProgress {
    /// 1 for the first round.
    pub round: u32,
    /// Bytes copied so far in this round.
    pub copied: u64,
    /// Bytes of every buffer listed in this round.
    pub listed: u64,
}

/// Hears of every buffer a copy round takes.
pub type RoundFn = Box<dyn FnMut(&RoundProgress) + Send>;

/// One buffer's contents as copied, and the epoch of the copy.
struct Staged {
    copied_at: u64,
    data: Vec<u8>,
}

/// Contents copied while the guest ran, by object (`BufferSource::object`).
#[derive(Default)]
pub(crate) struct Staging {
    copies: HashMap<(u64, u64), Staged>,
    /// For an incremental checkpoint: the whole one it refers to.
    base: Option<Arc<CheckpointBase>>,
}

impl Staging {
    /// The staged contents of `source`'s object if nothing was written
    /// to it since they were copied, and the epoch of the copy.
    fn take_fresh(&mut self, source: &dyn BufferSource) -> Option<Staged> {
        let key = source.object()?;
        let fresh = self
            .copies
            .get(&key)
            .is_some_and(|s| source.written_at() < s.copied_at);
        if fresh {
            self.copies.remove(&key)
        } else {
            None
        }
    }

    /// Whether `source` needs no copy now: copied and not written since,
    /// or unchanged since the base.
    fn is_fresh(&self, source: &dyn BufferSource) -> bool {
        let staged = source.object().is_some_and(|key| {
            self.copies
                .get(&key)
                .is_some_and(|s| source.written_at() < s.copied_at)
        });
        staged || self.unchanged_since_base(source).is_some()
    }

    fn unchanged_since_base(&self, source: &dyn BufferSource) -> Option<Taken> {
        self.base.as_ref()?.unchanged(source)
    }
}

/// A buffer's contents in a checkpoint.
pub(crate) enum Content {
    Data(Vec<u8>),
    /// Unchanged since the base: where the base has it.
    Base(Taken),
    /// Owed to the checkpoint (copy-on-write): read as of the pause by
    /// the writer, after the guest resumed; taken once written.
    Owed(Mutex<Option<Box<dyn BufferSource>>>),
}

/// Reads a whole buffer.
fn read_whole(source: &mut dyn BufferSource) -> Result<Vec<u8>, Error> {
    let size = usize::try_from(source.size())
        .map_err(|_| Error::Buffer(vgpu_protocol::Status::OUT_OF_HOST_MEMORY))?;
    let mut data = vec![0u8; size];
    for (i, piece) in data.chunks_mut(CHUNK).enumerate() {
        source
            .read((i * CHUNK) as u64, piece)
            .map_err(Error::Buffer)?;
    }
    Ok(data)
}

/// The sessions of the vGPU now, each behind its own lock.
pub(super) fn session_states(vgpu: &Vgpu) -> Vec<(u64, Arc<Mutex<SessionState>>)> {
    let mut states: Vec<_> = vgpu
        .sessions()
        .iter()
        .map(|(id, w)| (*id, w.state.clone()))
        .collect();
    states.sort_by_key(|(id, _)| *id);
    states
}

/// Holds the vGPU's new chains while one buffer is copied: a session that
/// runs batch after batch would otherwise always take its lock first. The
/// guest waits for one buffer's read at most; a vGPU paused already (by an
/// operator) stays so.
struct Hold<'a> {
    vgpu: &'a Arc<Vgpu>,
    ours: bool,
}

impl<'a> Hold<'a> {
    fn new(vgpu: &'a Arc<Vgpu>) -> Hold<'a> {
        let ours = !vgpu.is_paused();
        if ours {
            vgpu.pause();
        }
        Hold { vgpu, ours }
    }
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        if self.ours {
            self.vgpu.resume();
        }
    }
}

/// Copies every buffer not copied yet or written since its copy; returns
/// the bytes copied.
fn copy_round(
    vgpu: &Arc<Vgpu>,
    staging: &mut Staging,
    round: u32,
    progress: &mut Option<RoundFn>,
) -> Result<u64, Error> {
    let mut report = RoundProgress {
        round,
        ..Default::default()
    };
    for (_, state) in session_states(vgpu) {
        let sources = {
            let _hold = Hold::new(vgpu);
            let Some(mut session) = lock_within(&state, LOCK) else {
                continue;
            };
            if !session.opened || session.closed {
                continue;
            }
            let mut sources = Vec::new();
            for part in session.exec.sessions.iter_mut() {
                sources.extend(part.live_buffers()?);
            }
            sources
        };
        report.listed += sources.iter().map(|s| s.size()).sum::<u64>();
        for mut source in sources {
            let Some(key) = source.object() else {
                continue;
            };
            if staging.is_fresh(source.as_ref()) {
                continue;
            }
            let hold = Hold::new(vgpu);
            let Some(mut session) = lock_within(&state, LOCK) else {
                continue;
            };
            let mut settled = true;
            for part in session.exec.sessions.iter_mut() {
                settled &= part.settle(SETTLE)?;
            }
            if !settled {
                continue;
            }
            // Writes issued from here on carry this epoch or a later one.
            let copied_at = advance();
            let data = read_whole(source.as_mut())?;
            drop(session);
            drop(hold);
            report.copied += data.len() as u64;
            staging.copies.insert(key, Staged { copied_at, data });
            if let Some(progress) = progress.as_mut() {
                progress(&report);
            }
        }
    }
    Ok(report.copied)
}

/// Copies in rounds until they converge; returns the staged contents and
/// the number of rounds run.
pub(crate) fn precopy(
    vgpu: &Arc<Vgpu>,
    options: &LiveOptions,
    base: Option<Arc<CheckpointBase>>,
    mut progress: Option<RoundFn>,
) -> Result<(Staging, u32, u64), Error> {
    let mut staging = Staging {
        base,
        ..Default::default()
    };
    let (mut rounds, mut total) = (0, 0u64);
    let mut previous = u64::MAX;
    while rounds < options.max_rounds {
        rounds += 1;
        let copied = copy_round(vgpu, &mut staging, rounds, &mut progress)?;
        total += copied;
        // Converged, or the guest writes as fast as the rounds copy.
        if copied <= options.pause_bytes || copied >= previous {
            break;
        }
        previous = copied;
    }
    Ok((staging, rounds, total))
}

/// A checkpoint's state and every buffer's contents, taken at the pause.
pub(crate) struct Captured {
    pub state: m::VgpuState,
    /// (session, buffer, contents) in the state's order.
    pub contents: Vec<(u64, u64, Content)>,
    /// Bytes read during the pause (not staged, or written since).
    pub paused_bytes: u64,
    /// Bytes owed at the pause, read after the guest resumed.
    pub owed_bytes: u64,
    /// For a whole checkpoint: what it holds, for incremental ones after.
    pub base: Option<CheckpointBase>,
}

/// Quiesces the vGPU, captures its objects and the buffers not staged
/// fresh, and resumes it.
pub(crate) fn capture(vgpu: &Vgpu, staging: Staging) -> Result<(Captured, Report), Error> {
    capture_with(vgpu, staging, false)
}

/// As [`capture`], but contents an executor can owe (copy-on-write) are
/// not read in the pause: the writer reads them after the guest resumed,
/// as they were at the pause.
pub(crate) fn capture_owing(vgpu: &Vgpu, staging: Staging) -> Result<(Captured, Report), Error> {
    capture_with(vgpu, staging, true)
}

fn capture_with(
    vgpu: &Vgpu,
    mut staging: Staging,
    owing: bool,
) -> Result<(Captured, Report), Error> {
    quiesced(vgpu, |captured, report| {
        // Nothing is written while quiesced: what is read now is as of now.
        let now = advance();
        let t = Instant::now();
        let mut contents = Vec::new();
        let mut paused_bytes = 0;
        let mut owed_bytes = 0;
        let mut base = staging
            .base
            .is_none()
            .then(|| CheckpointBase::new(m::BaseId::random()));
        for session in captured.sessions {
            let id = session.id;
            for (buffer, mut source) in session.buffers {
                if let Some(taken) = staging.unchanged_since_base(source.as_ref()) {
                    contents.push((id, buffer, Content::Base(taken)));
                    continue;
                }
                let staged = staging.take_fresh(source.as_ref());
                if let Some(base) = base.as_mut() {
                    let taken = Taken {
                        session: id,
                        buffer,
                        copied_at: staged.as_ref().map_or(now, |s| s.copied_at),
                    };
                    base.note(source.as_ref(), taken);
                }
                let content = match staged {
                    Some(staged) => Content::Data(staged.data),
                    None if owing && source.preserve() => {
                        owed_bytes += source.size();
                        Content::Owed(Mutex::new(Some(source)))
                    }
                    None => {
                        let data = read_whole(source.as_mut())?;
                        paused_bytes += data.len() as u64;
                        Content::Data(data)
                    }
                };
                contents.push((id, buffer, content));
            }
        }
        report.upload = t.elapsed();
        Ok(Captured {
            state: captured.state,
            contents,
            paused_bytes,
            owed_bytes,
            base,
        })
    })
}

/// Writes a captured checkpoint as a stream: a whole one with its
/// identity, or an incremental one against `incremental`'s base.
pub(crate) fn write<W: Write>(
    captured: &Captured,
    out: W,
    incremental: Option<&Incremental>,
    progress: Option<ProgressFn>,
) -> Result<(W, m::Summary), Error> {
    let mut writer = match (incremental, &captured.base) {
        (Some(i), _) => m::StreamWriter::new_incremental(out, i.base.id, &i.path)?,
        (None, Some(base)) => m::StreamWriter::with_identity(out, base.id)?,
        (None, None) => m::StreamWriter::new(out)?,
    };
    if let Some(progress) = progress {
        writer.on_progress(progress);
    }
    writer.write_state(&captured.state)?;
    for (session, buffer, content) in &captured.contents {
        match content {
            Content::Data(data) => {
                for (i, piece) in data.chunks(CHUNK).enumerate() {
                    writer.write_buffer_chunk(*session, *buffer, (i * CHUNK) as u64, piece)?;
                }
            }
            Content::Base(taken) => {
                writer.write_base_ref(*session, *buffer, taken.session, taken.buffer)?
            }
            Content::Owed(source) => {
                let source = source.lock().unwrap_or_else(|e| e.into_inner()).take();
                let Some(mut source) = source else {
                    return Err(Error::Buffer(vgpu_protocol::Status::INVALID_OPERATION));
                };
                let size = source.size();
                let mut piece = vec![0u8; CHUNK.min(usize::try_from(size).unwrap_or(CHUNK))];
                let mut at = 0u64;
                while at < size {
                    let len =
                        usize::try_from(size - at).map_or(piece.len(), |l| l.min(piece.len()));
                    source.read(at, &mut piece[..len]).map_err(Error::Buffer)?;
                    writer.write_buffer_chunk(*session, *buffer, at, &piece[..len])?;
                    at += len as u64;
                }
                // Dropping the source settles the debt: its shadow goes.
            }
        }
    }
    Ok(writer.finish()?)
}

/// An incremental checkpoint's base: the vGPU's last whole checkpoint,
/// and where the operator says it is.
#[derive(Debug, Clone)]
pub struct Incremental {
    pub base: Arc<CheckpointBase>,
    pub path: String,
}

impl Incremental {
    /// Against the vGPU's last whole checkpoint, which must be `given`.
    pub fn against(vgpu: &Vgpu, given: m::BaseId, path: String) -> Result<Incremental, Error> {
        let last = vgpu
            .checkpoint_base
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match last {
            Some(base) if base.id == given => Ok(Incremental { base, path }),
            last => Err(Error::NotTheBase {
                given: given.0,
                last: last.map_or("none taken yet".into(), |b| format!("{:032x}", b.id.0)),
            }),
        }
    }
}

/// Writes the vGPU's state and buffer contents to `out`, copying the
/// contents while it runs (see the module's description); the report's
/// `pause` is the only time the guest waited.
pub fn save_live<W: Write>(
    vgpu: &Arc<Vgpu>,
    out: W,
    options: &LiveOptions,
    incremental: Option<&Incremental>,
    progress: Option<ProgressFn>,
    rounds: Option<RoundFn>,
) -> Result<(W, Report), Error> {
    let started = Instant::now();
    let base = incremental.map(|i| i.base.clone());
    let (staging, round_count, precopied) = precopy(vgpu, options, base, rounds)?;
    let precopy_time = started.elapsed();
    if options.stay_paused {
        vgpu.pause();
    }
    let (mut captured, report) = capture_owing(vgpu, staging)?;
    let t = Instant::now();
    let (out, summary) = write(&captured, out, incremental, progress)?;
    if let Some(base) = captured.base.take() {
        *vgpu
            .checkpoint_base
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(base));
    }
    Ok((
        out,
        Report {
            buffer_bytes: summary.buffer_bytes,
            stream_bytes: summary.stream_bytes,
            rounds: round_count,
            precopied_bytes: precopied,
            paused_bytes: captured.paused_bytes,
            owed_bytes: captured.owed_bytes,
            precopy: precopy_time,
            write: t.elapsed(),
            ..report
        },
    ))
}
