//! Pre-copy of a vGPU through its front-end's migration stream.
//!
//! Source ([`Outgoing`]): while the VM runs, the objects go first
//! (`objects_first`), then a whole checkpoint is taken live (buffers
//! copied in rounds, a short pause for the objects and what was written
//! since its copy) and handed out a slice at a time, for QEMU to send in
//! its iterative sections. Once it was all sent, the vGPU's
//! migration base is that checkpoint: the device state QEMU asks for at
//! the stop (`SET_DEVICE_STATE_FD`) is then an incremental one, the
//! objects and only the buffers written since their copy.
//!
//! Destination ([`Incoming`]): the slices are kept in a memory file and
//! restored ahead as they arrive; once complete it becomes the migration
//! base an incoming incremental stream refers to (`restore_migration`),
//! and what was restored ahead is adopted at the stop.
//!
//! Dropping either side before it completed changes nothing of the vGPU:
//! the source guest never stopped, and its migration base is what it was.

use std::io::{Seek, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use vgpu_migration as m;

use super::ahead::Preparing;
use super::base::CheckpointBase;
use super::byte_queue::{ByteQueue, QueueWriter, Taken};
use super::follow::{memory_file, Growth};
use super::live::{capture, precopy, session_states, write, LiveOptions};
use super::objects_first::{build_ahead, Opening, OpeningError};
use super::{Error, Incremental};
use crate::vgpu::{lock_within, Vgpu};

/// How long a request for bytes waits for the first one: QEMU's
/// migration thread asks in a loop and must not stall on the vGPU.
const TAKE_WAIT: Duration = Duration::from_millis(20);
/// Room for the stream's header, state and chunk framing beyond the
/// buffers' own bytes, in the estimate before the stream is written.
const FRAMING_ESTIMATE: u64 = 1 << 20;
/// How often the bytes written since their copy are counted.
const RECOUNT: Duration = Duration::from_millis(50);
/// How long a count waits for a session's batch in progress.
const COUNT_LOCK: Duration = Duration::from_millis(20);
/// A size not counted yet: large, so QEMU keeps iterating meanwhile.
const UNKNOWN: u64 = u64::MAX / 4;
/// What `pending` answers until the whole checkpoint was handed out: more
/// than any downtime limit lets QEMU move at the stop, so that it does
/// not stop the VM with part of the checkpoint still to send. That part
/// would cross in the downtime, and the destination, which adopts what it
/// restored ahead, would wait for it too: at 1 GiB the tail QEMU let
/// through at its default 300 ms limit held the stop about 100 ms.
const UNTIL_SENT: u64 = UNKNOWN;

#[derive(Debug, thiserror::Error)]
pub enum PrecopyError {
    #[error("cannot take the pre-copy checkpoint")]
    Checkpoint(#[from] Error),
    #[error("the pre-copy stream failed: {0}")]
    Stream(String),
    #[error("the pre-copy stream is not finished: {0} bytes are left to send")]
    Unfinished(u64),
    #[error("cannot keep the incoming pre-copy stream")]
    Keep(#[source] std::io::Error),
    #[error("the incoming pre-copy stream is not a whole checkpoint")]
    NotWhole(#[source] m::ReadError),
    #[error("the incoming pre-copy stream has no identity")]
    NoIdentity,
    #[error("cannot start the pre-copy thread")]
    Thread(#[source] std::io::Error),
    #[error(transparent)]
    Opening(#[from] OpeningError),
}

/// The checkpoint being sent, once captured: from then on the buffers
/// written since their copy are known.
type Captured = Arc<std::sync::Mutex<Option<Arc<CheckpointBase>>>>;

/// The source side of one migration's pre-copy.
pub struct Outgoing {
    vgpu: Arc<Vgpu>,
    queue: Arc<ByteQueue>,
    /// The stream's thread; it answers the number of copy rounds.
    producer: Option<JoinHandle<Result<u32, Error>>>,
    captured: Captured,
    /// Bytes of the whole stream, as far as known: the buffers' bytes
    /// until it is written.
    expected: Arc<AtomicU64>,
    sent: u64,
    /// The checkpoint sent, once the stream was all taken.
    sent_base: Option<Arc<CheckpointBase>>,
    /// The vGPU's migration base before this pre-copy, put back if it
    /// does not complete.
    previous: Option<Incremental>,
    finished: bool,
    /// The last count of bytes written since their copy.
    changed: Arc<AtomicU64>,
    /// Counts on a thread of its own: a count waits for the sessions'
    /// batches in progress, and the chains held meanwhile run on the
    /// thread that resumes them; neither may fall on QEMU's migration
    /// thread, which asks for `pending` at every iteration.
    counter: Option<(Arc<std::sync::atomic::AtomicBool>, JoinHandle<()>)>,
}

impl Outgoing {
    /// Starts the whole checkpoint, copied in up to `max_rounds` rounds.
    pub fn begin(vgpu: Arc<Vgpu>, max_rounds: u32) -> Result<Outgoing, PrecopyError> {
        let queue = Arc::new(ByteQueue::default());
        let expected = Arc::new(AtomicU64::new(UNKNOWN));
        let changed = Arc::new(AtomicU64::new(UNKNOWN));
        let options = LiveOptions {
            max_rounds: max_rounds.max(1),
            ..Default::default()
        };
        let captured = Captured::default();
        let producer = {
            let (vgpu, queue, expected) = (vgpu.clone(), queue.clone(), expected.clone());
            let captured = captured.clone();
            std::thread::Builder::new()
                .name("vgpu-precopy".into())
                .spawn(move || {
                    let produced = produce(&vgpu, &options, &queue, &expected, &captured);
                    match &produced {
                        Ok(_) => queue.finish(),
                        Err(e) => queue.fail(crate::startup::error_chain(e)),
                    }
                    produced
                })
                .map_err(PrecopyError::Thread)?
        };
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let counter = {
            let (vgpu, captured) = (vgpu.clone(), captured.clone());
            let (expected, changed, stop) = (expected.clone(), changed.clone(), stop.clone());
            std::thread::Builder::new()
                .name("vgpu-precopy-count".into())
                .spawn(move || count(&vgpu, &captured, &expected, &changed, &stop))
                .map_err(PrecopyError::Thread)?
        };
        let previous = vgpu
            .migration_base
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .outgoing();
        Ok(Outgoing {
            vgpu,
            queue,
            producer: Some(producer),
            captured,
            expected,
            sent: 0,
            sent_base: None,
            previous,
            finished: false,
            changed,
            counter: Some((stop, counter)),
        })
    }

    /// Up to `limit` bytes of the stream (none while the rounds copy),
    /// or `None` once it was all handed out.
    pub fn next(&mut self, limit: usize) -> Result<Option<Vec<u8>>, PrecopyError> {
        match self.queue.take(limit, TAKE_WAIT) {
            Ok(Taken::Bytes(bytes)) => {
                self.sent += bytes.len() as u64;
                Ok(Some(bytes))
            }
            Ok(Taken::End) => {
                self.collect()?;
                Ok(None)
            }
            Err(why) => {
                // The thread's own error says more than the queue's line.
                self.collect()?;
                Err(PrecopyError::Stream(why))
            }
        }
    }

    /// Joins the producer once it ended, keeping the checkpoint it sent.
    fn collect(&mut self) -> Result<(), PrecopyError> {
        let Some(producer) = self.producer.take() else {
            return Ok(());
        };
        let rounds = producer
            .join()
            .map_err(|_| PrecopyError::Stream("the pre-copy thread panicked".into()))??;
        log::info!(
            "pre-copy: whole checkpoint of {} bytes sent after {rounds} copy round(s)",
            self.sent
        );
        self.sent_base = self.captured_base();
        Ok(())
    }

    fn captured_base(&self) -> Option<Arc<CheckpointBase>> {
        self.captured
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// What is left to send before the VM can stop: `UNTIL_SENT` until
    /// the whole checkpoint was handed out, then the bytes of buffers
    /// written since their copy (what the device state at the stop
    /// carries), as last counted. Never waits.
    pub fn pending(&mut self) -> u64 {
        if self.sent_base.is_none() {
            return UNTIL_SENT;
        }
        self.changed.load(Ordering::Relaxed)
    }

    /// Bytes of the whole stream not handed out yet (an estimate until it
    /// is written); never 0 before the end.
    fn rest(&self) -> u64 {
        if self.sent_base.is_some() {
            return 0;
        }
        let expected = self.expected.load(Ordering::Relaxed);
        expected.saturating_sub(self.sent).max(self.queue.queued()) + 1
    }

    /// The stream was all sent: the device state at the stop refers to it.
    pub fn finish(&mut self) -> Result<(), PrecopyError> {
        let Some(base) = self.sent_base.clone() else {
            return Err(PrecopyError::Unfinished(self.rest()));
        };
        self.vgpu
            .migration_base
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .outgoing = Some(Incremental {
            base,
            path: "pre-copy".into(),
        });
        self.finished = true;
        Ok(())
    }
}

impl Drop for Outgoing {
    /// The migration ended, whichever way: the stream's thread stops, and
    /// the vGPU's migration base is put back (the state at the stop was
    /// sent already if it succeeded).
    fn drop(&mut self) {
        if !self.finished {
            log::info!(
                "pre-copy cancelled after {} bytes sent; the vGPU runs on unchanged",
                self.sent
            );
        }
        self.queue.fail("the pre-copy was cancelled".into());
        if let Some((stop, counter)) = self.counter.take() {
            stop.store(true, Ordering::Relaxed);
            counter.thread().unpark();
            let _ = counter.join();
        }
        if let Some(producer) = self.producer.take() {
            let _ = producer.join();
        }
        if self.finished {
            self.vgpu
                .migration_base
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .outgoing = self.previous.take();
        }
    }
}

/// Runs on the counting thread until `stop`: the buffers' bytes once, for
/// the stream's size until it is written, then, once the checkpoint is
/// captured, the bytes written since their copy every `RECOUNT`. A count
/// that found a session too busy leaves the last figure.
fn count(
    vgpu: &Arc<Vgpu>,
    captured: &Captured,
    expected: &AtomicU64,
    changed: &AtomicU64,
    stop: &std::sync::atomic::AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        let base = captured.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match base {
            Some(base) => {
                if let Some(n) = changed_bytes(vgpu, Some(&base)) {
                    changed.store(n, Ordering::Relaxed);
                }
            }
            None if expected.load(Ordering::Relaxed) == UNKNOWN
                && captured.lock().unwrap_or_else(|e| e.into_inner()).is_none() =>
            {
                if let Some(n) = changed_bytes(vgpu, None) {
                    // The producer may have set the real size already.
                    let _ = expected.compare_exchange(
                        UNKNOWN,
                        n + FRAMING_ESTIMATE,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    );
                }
            }
            None => {}
        }
        std::thread::park_timeout(RECOUNT);
    }
}

/// Runs on the stream's own thread: copy rounds, the capture, the write.
fn produce(
    vgpu: &Arc<Vgpu>,
    options: &LiveOptions,
    queue: &Arc<ByteQueue>,
    expected: &AtomicU64,
    captured_base: &Captured,
) -> Result<u32, Error> {
    // The objects first, for the destination to build its programs
    // while the buffers are copied and sent.
    let (objects, _) = super::capture::quiesced(vgpu, |q, _| Ok(q.state))?;
    let opening = super::objects_first::encode(&objects);
    let opened = opening.len() as u64;
    QueueWriter(queue.clone())
        .write_all(&opening)
        .map_err(|e| Error::Write(m::WriteError::Io(e)))?;
    let (staging, rounds, _) = precopy(vgpu, options, None, None)?;
    let (captured, _) = capture(vgpu, staging)?;
    // Kept in `captured` too: the stream opens with its identity.
    let base = captured
        .base
        .clone()
        .expect("a checkpoint taken without a base is a whole one and has an identity");
    *captured_base.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(base));
    let buffers: u64 = captured
        .contents
        .iter()
        .map(|(_, _, c)| match c {
            super::live::Content::Data(d) => d.len() as u64,
            super::live::Content::Base(_) => 0,
            // Not captured owing: read in the pause, as `Data`.
            super::live::Content::Owed(_) => 0,
        })
        .sum();
    expected.store(opened + buffers + FRAMING_ESTIMATE, Ordering::Relaxed);
    let (_, summary) = write(&captured, QueueWriter(queue.clone()), None, None)?;
    expected.store(opened + summary.stream_bytes, Ordering::Relaxed);
    Ok(rounds)
}

/// Bytes of the vGPU's buffers not held unchanged by `base` (all of them
/// without one); `None` if a session stayed busy past `COUNT_LOCK`. The
/// guest is not held for a count (its held chains would run on the
/// counting thread when resumed): a count falls between its batches.
fn changed_bytes(vgpu: &Arc<Vgpu>, base: Option<&CheckpointBase>) -> Option<u64> {
    let mut total = 0;
    for (_, state) in session_states(vgpu) {
        let mut session = lock_within(&state, COUNT_LOCK)?;
        if !session.opened || session.closed {
            continue;
        }
        for part in session.exec.sessions.iter_mut() {
            let sources = part.live_buffers().ok()?;
            total += sources
                .iter()
                .filter(|s| base.is_none_or(|b| b.unchanged(s.as_ref()).is_none()))
                .map(|s| s.size())
                .sum::<u64>();
        }
    }
    Some(total)
}

/// The destination side: the whole checkpoint as it arrives, restored
/// ahead as it does (see `ahead`).
pub struct Incoming {
    vgpu: Arc<Vgpu>,
    file: std::fs::File,
    /// Bytes handed over, and those of the stream kept.
    received: u64,
    kept: u64,
    growth: Arc<Growth>,
    /// `None` if no thread could be started: the stop restores it all.
    preparing: Option<Preparing>,
    /// The objects sent ahead of the stream.
    opening: Opening,
}

impl Incoming {
    pub fn new(vgpu: Arc<Vgpu>) -> Result<Incoming, PrecopyError> {
        let file = memory_file(c"vgpu-precopy").map_err(PrecopyError::Keep)?;
        let growth = Arc::new(Growth::default());
        let preparing = file
            .try_clone()
            .and_then(|file| Preparing::start(vgpu.clone(), file, growth.clone()))
            .inspect_err(|e| log::info!("pre-copy: cannot restore the incoming vGPU ahead: {e}"))
            .ok();
        Ok(Incoming {
            vgpu,
            file,
            received: 0,
            kept: 0,
            growth,
            preparing,
            opening: Opening::default(),
        })
    }

    /// Keeps `bytes`, for the restore ahead to read as they come; builds
    /// the objects sent first once they arrived.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), PrecopyError> {
        let (stream, objects) = self.opening.take(bytes)?;
        match objects {
            Some(Ok(state)) => build_ahead(self.vgpu.clone(), state),
            Some(Err(why)) => log::info!("pre-copy: the objects sent first are not usable: {why}"),
            None => {}
        }
        self.file.write_all(&stream).map_err(PrecopyError::Keep)?;
        self.kept += stream.len() as u64;
        self.received += bytes.len() as u64;
        self.growth.grew(self.kept);
        Ok(())
    }

    pub fn received(&self) -> u64 {
        self.received
    }

    /// The stream is complete: the vGPU's incoming device state may refer
    /// to it, and to what was restored ahead of it. Only its opening is
    /// checked here; the restore ahead and the one at the stop check the
    /// rest.
    pub fn keep(mut self) -> Result<u64, PrecopyError> {
        self.growth.complete();
        self.file.rewind().map_err(PrecopyError::Keep)?;
        let id = m::stream::base_id(&mut self.file)
            .map_err(PrecopyError::NotWhole)?
            .ok_or(PrecopyError::NoIdentity)?;
        log::info!(
            "pre-copy: kept the incoming whole checkpoint {:032x} ({} bytes)",
            id.0,
            self.kept
        );
        let mut base = self
            .vgpu
            .migration_base
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        base.incoming = Some((id, self.file));
        base.prepared = self.preparing.take();
        Ok(self.received)
    }
}
