//! The destination of a pre-copy restores the incoming whole checkpoint
//! ahead: as its bytes arrive (the state first, then the buffers), each
//! session part is built on the executor of its kind, aside from any
//! guest, and the buffers are filled chunk by chunk. The restore at the
//! stop adopts these objects (see `adopt`); a migration that does not
//! complete drops them.

use std::collections::HashMap;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use vgpu_migration as m;

use super::follow::{Follow, Growth};
use super::Error;
use crate::executor::{BufferSink, Executor, PreparedSession, SnapshotError};
use crate::vgpu::Vgpu;

/// A whole checkpoint restored ahead, not visible to any guest.
pub(crate) struct PreparedVgpu {
    pub id: m::BaseId,
    /// Where each of its contents lies: by (session, stream key), the
    /// part's kind and the executor's object id.
    pub contents: HashMap<(u64, u64), (m::ExecutorKind, u64)>,
    /// Its parts, by session and kind, for the restore to adopt.
    pub parts: HashMap<(u64, m::ExecutorKind), PreparedSession>,
}

/// A checkpoint being restored ahead on a thread of its own, from a file
/// still being appended to.
pub struct Preparing {
    growth: Arc<Growth>,
    thread: Option<JoinHandle<Result<PreparedVgpu, Error>>>,
}

impl Preparing {
    /// Starts reading `file` from its start, as `growth` says it grows.
    pub(super) fn start(
        vgpu: Arc<Vgpu>,
        file: std::fs::File,
        growth: Arc<Growth>,
    ) -> std::io::Result<Preparing> {
        let input = Follow::new(file, growth.clone());
        let thread = std::thread::Builder::new()
            .name("vgpu-prepare".into())
            .spawn(move || {
                let t = Instant::now();
                let prepared = prepare(&vgpu.executors(), input);
                match &prepared {
                    Ok(p) => log::info!(
                        "pre-copy: restored the incoming checkpoint ahead ({} part(s)) in {:.0} ms",
                        p.parts.len(),
                        t.elapsed().as_secs_f64() * 1e3
                    ),
                    Err(e) => log::info!(
                        "pre-copy: the incoming checkpoint is not restored ahead (a restore at the stop builds it whole): {}",
                        crate::startup::error_chain(e)
                    ),
                }
                prepared
            })?;
        Ok(Preparing {
            growth,
            thread: Some(thread),
        })
    }

    /// Waits for the restore ahead to end; what it prepared, if it
    /// succeeded.
    pub(crate) fn finish(mut self) -> Option<PreparedVgpu> {
        let thread = self.thread.take()?;
        thread.join().ok()?.ok()
    }
}

impl Drop for Preparing {
    /// A migration that does not use what was prepared drops it: the
    /// thread stops at its next read, and its objects are released.
    fn drop(&mut self) {
        self.growth.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads a whole checkpoint, building each part ahead and filling its
/// buffers.
fn prepare<R: std::io::Read>(
    executors: &[Arc<dyn Executor>],
    input: R,
) -> Result<PreparedVgpu, Error> {
    let mut reader = m::StreamReader::new(input)?;
    let mut contents = HashMap::new();
    let mut parts = HashMap::new();
    let mut sinks: HashMap<(u64, u64), Box<dyn BufferSink>> = HashMap::new();
    loop {
        match reader.next_item()? {
            Some(m::Item::State(state)) => {
                for session in state.latest().sessions {
                    let session = session.latest();
                    for part in &session.parts {
                        let Some((kind, mut prepared)) = prepare_part(executors, session.id, part)?
                        else {
                            continue;
                        };
                        let mut part_sinks = std::mem::take(&mut prepared.sinks);
                        for c in &session.contents {
                            let on = session
                                .parts
                                .get(c.part as usize)
                                .map(m::ExecutorState::kind);
                            if on != Some(kind) {
                                continue;
                            }
                            contents.insert((session.id, c.key), (kind, c.object));
                            if let Some(sink) = part_sinks.remove(&c.object) {
                                sinks.insert((session.id, c.key), sink);
                            }
                        }
                        parts.insert((session.id, kind), prepared);
                    }
                }
            }
            Some(m::Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            }) => {
                // Contents of a part not prepared: the stop restores it.
                if let Some(sink) = sinks.get_mut(&(session, buffer)) {
                    sink.write(offset, data).map_err(Error::Buffer)?;
                }
            }
            Some(m::Item::Base { path, .. }) => return Err(Error::Incremental { path }),
            Some(m::Item::BaseRef { .. }) => {
                unreachable!("the reader hands out base refs only after a base")
            }
            Some(m::Item::End(summary)) => {
                let id = summary.identity.ok_or(Error::NoIdentity)?;
                return Ok(PreparedVgpu {
                    id,
                    contents,
                    parts,
                });
            }
            None => {
                return Err(m::ReadError::Truncated {
                    at: reader.bytes_read(),
                }
                .into())
            }
        }
    }
}

/// Builds one part ahead on the executor of its kind. An executor that
/// cannot prepare builds it and drops it: its driver keeps the programs
/// it compiled in its cache (PoCL's `POCL_CACHE_DIR`, CUDA's
/// `CUDA_CACHE_PATH`, private to this worker), so the restore at the stop
/// finds them built.
fn prepare_part(
    executors: &[Arc<dyn Executor>],
    session: u64,
    part: &m::ExecutorState,
) -> Result<Option<(m::ExecutorKind, PreparedSession)>, Error> {
    let kind = part.kind();
    let Some(executor) = executors.iter().find(|e| e.kind() == Some(kind)) else {
        // The restore at the stop says so.
        return Ok(None);
    };
    match executor.prepare_session(part) {
        Ok(prepared) => Ok(Some((kind, prepared))),
        Err(SnapshotError::Unsupported(_)) => {
            drop(executor.restore_session(part));
            Ok(None)
        }
        Err(source) => Err(Error::Part {
            kind,
            session,
            source,
        }),
    }
}
