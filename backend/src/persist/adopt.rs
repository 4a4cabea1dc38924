//! The restore at the stop of a migration that leans on a whole
//! checkpoint the destination holds: the incoming incremental stream is
//! read directly, without merging it with its base into a whole one
//! first. Each part is rebuilt adopting what was restored ahead of the
//! stop (`ahead`): a buffer the stream takes unchanged from the base keeps
//! its prepared object and contents. Buffers written since their copy come
//! in the stream and overwrite theirs; objects created since the base are
//! created, those released are not adopted and go with the prepared set.
//! Base buffers not adopted (nothing prepared, an executor that cannot
//! adopt, an object that is not the same) are read from the kept base
//! afterwards, as a merge would have. As with every restore, nothing
//! reaches the guest unless the whole stream was valid and every object
//! rebuilt.

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

use vgpu_migration as m;

use super::ahead::PreparedVgpu;
use super::sessions::{check_quota, exec_sessions, Rebuilt};
use super::{Error, Report};
use crate::executor::{profile_holder, Executor};
use crate::vgpu::Vgpu;

/// A buffer whose contents are to come from the kept base.
struct FromBase {
    session: u64,
    key: u64,
    size: u64,
    /// Bytes of it written so far.
    filled: u64,
}

/// Restores an incremental device-state stream taken against the whole
/// checkpoint `base` (its identity and the file holding it), adopting what
/// `prepared` restored of it ahead.
pub(crate) fn restore_incremental<R: Read>(
    vgpu: &Arc<Vgpu>,
    input: R,
    base: (m::BaseId, std::fs::File),
    mut prepared: Option<PreparedVgpu>,
) -> Result<Report, Error> {
    let executors = vgpu.executors();
    let mut report = Report::default();
    let mut reader = m::StreamReader::new(input)?;
    let mut restored: Vec<Rebuilt> = Vec::new();
    let mut index: HashMap<u64, usize> = HashMap::new();
    // (session, key) of each content and where it lies: kind and object.
    let mut contents: HashMap<(u64, u64), (m::ExecutorKind, u64)> = HashMap::new();
    let mut adopted: HashSet<(u64, u64)> = HashSet::new();
    let mut from_base: HashMap<(u64, u64), Vec<FromBase>> = HashMap::new();
    let (mut adopted_bytes, mut profile) = (0u64, None);
    let t = Instant::now();
    loop {
        match reader.next_item()? {
            Some(m::Item::Base { id, .. }) => {
                if id != base.0 {
                    return Err(Error::Merge(m::MergeError::WrongBase {
                        expected: id.0,
                        found: format!("{:032x}", base.0 .0),
                    }));
                }
                if prepared.as_ref().is_some_and(|p| p.id != id) {
                    log::info!(
                        "pre-copy: what was restored ahead is of another checkpoint: dropped"
                    );
                    prepared = None;
                }
            }
            Some(m::Item::State(state)) => {
                if let Some(i) = profile_holder(&executors) {
                    m::check(state.profile(), &executors[i].capacity())?;
                }
                profile = Some(state.profile().clone());
                let sessions: Vec<m::LatestSession> = state
                    .latest()
                    .sessions
                    .into_iter()
                    .map(m::SessionState::latest)
                    .collect();
                check_quota(&sessions, &vgpu.quota().limits)?;
                for session in &sessions {
                    for c in &session.contents {
                        if let Some(part) = session.parts.get(c.part as usize) {
                            contents.insert((session.id, c.key), (part.kind(), c.object));
                        }
                    }
                    let (rebuilt, kept) = rebuild_adopting(&executors, session, prepared.as_mut())?;
                    adopted.extend(kept.into_iter().map(|key| (session.id, key)));
                    index.insert(session.id, restored.len());
                    restored.push(rebuilt);
                }
                // What was not adopted is released now.
                prepared = prepared.map(|p| PreparedVgpu {
                    parts: HashMap::new(),
                    ..p
                });
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
            Some(m::Item::BaseRef {
                session,
                buffer,
                base_session,
                base_buffer,
                size,
            }) => {
                // Adopted: the same object (same session, kind and id)
                // was prepared from this very base buffer.
                let same = session == base_session
                    && adopted.contains(&(session, buffer))
                    && prepared.as_ref().is_some_and(|p| {
                        p.contents.get(&(base_session, base_buffer))
                            == contents.get(&(session, buffer))
                    });
                if same {
                    adopted_bytes += size;
                    continue;
                }
                from_base
                    .entry((base_session, base_buffer))
                    .or_default()
                    .push(FromBase {
                        session,
                        key: buffer,
                        size,
                        filled: 0,
                    });
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
    let from_base_bytes = fill_from_base(base, &mut from_base, &index, &mut restored)?;
    report.upload = t.elapsed().saturating_sub(report.rebuild);
    report.sessions = restored.len();
    log::info!(
        "incoming vGPU: {adopted_bytes} bytes of buffers adopted as restored ahead, {from_base_bytes} read from the migration base, {} in the stream",
        report.buffer_bytes
    );
    vgpu.set_profile_seen(profile.unwrap_or_default());
    let bounds = vgpu.bounds();
    let sessions = restored
        .into_iter()
        .map(|r| {
            // A migration: the guest goes on from where it stopped.
            let resumes_at = r.last_seq.map(|seq| seq + 1);
            (
                r.id,
                exec_sessions(&executors, r.parts, &bounds),
                resumes_at,
            )
        })
        .collect();
    vgpu.replace_sessions(sessions);
    Ok(report)
}

/// Rebuilds a session's parts, each adopting the part of the same kind
/// prepared for the same session, if any; answers the keys of the
/// contents adopted with their objects.
fn rebuild_adopting(
    executors: &[Arc<dyn Executor>],
    session: &m::LatestSession,
    mut prepared: Option<&mut PreparedVgpu>,
) -> Result<(Rebuilt, HashSet<u64>), Error> {
    let mut rebuilt = Rebuilt {
        id: session.id,
        last_seq: session.last_seq,
        parts: Vec::new(),
        sinks: HashMap::new(),
    };
    let mut part_sinks = Vec::new();
    let mut part_adopted = Vec::new();
    for part in &session.parts {
        let kind = part.kind();
        let i = executors
            .iter()
            .position(|e| e.kind() == Some(kind))
            .ok_or(Error::NoExecutor { kind })?;
        let fail = |source| Error::Part {
            kind,
            session: session.id,
            source,
        };
        let ahead = prepared
            .as_deref_mut()
            .and_then(|p| p.parts.remove(&(session.id, kind)));
        let (restored, adopted) = match ahead.map(|a| executors[i].adopt_session(part, a)) {
            Some(Ok(a)) => (a.restored, a.adopted),
            // What was prepared is gone with the failure: build it all.
            Some(Err(e)) => {
                log::info!(
                    "cannot adopt what was restored ahead of session {}: {}; restoring it whole",
                    session.id,
                    crate::startup::error_chain(&e)
                );
                (
                    executors[i].restore_session(part).map_err(fail)?,
                    HashSet::new(),
                )
            }
            None => (
                executors[i].restore_session(part).map_err(fail)?,
                HashSet::new(),
            ),
        };
        part_sinks.push(restored.sinks);
        part_adopted.push(adopted);
        rebuilt.parts.push((i, restored.session));
    }
    let mut kept = HashSet::new();
    for content in &session.contents {
        let part = content.part as usize;
        if part_adopted
            .get(part)
            .is_some_and(|a| a.contains(&content.object))
        {
            kept.insert(content.key);
        }
        let sink = part_sinks
            .get_mut(part)
            .and_then(|sinks| sinks.remove(&content.object));
        if let Some(sink) = sink {
            rebuilt.sinks.insert(content.key, sink);
        }
    }
    Ok((rebuilt, kept))
}

/// Reads the buffers `wanted` from the kept base into the restored
/// sessions; answers the bytes read. Every one must come whole.
fn fill_from_base(
    base: (m::BaseId, std::fs::File),
    wanted: &mut HashMap<(u64, u64), Vec<FromBase>>,
    index: &HashMap<u64, usize>,
    restored: &mut [Rebuilt],
) -> Result<u64, Error> {
    if wanted.is_empty() {
        return Ok(0);
    }
    let (id, mut file) = base;
    std::io::Seek::rewind(&mut file).map_err(Error::MigrationBase)?;
    let input = std::io::BufReader::with_capacity(1 << 20, file);
    let mut reader = m::StreamReader::new(input)?;
    let mut total = 0u64;
    loop {
        match reader.next_item()? {
            Some(m::Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            }) => {
                for target in wanted.get_mut(&(session, buffer)).into_iter().flatten() {
                    let sink = index
                        .get(&target.session)
                        .and_then(|i| restored[*i].sinks.get_mut(&target.key))
                        .ok_or(Error::UnknownBuffer {
                            session: target.session,
                            buffer: target.key,
                        })?;
                    if offset + data.len() as u64 > target.size {
                        return Err(Error::BaseContents {
                            session: target.session,
                            buffer: target.key,
                            expected: target.size,
                            found: offset + data.len() as u64,
                        });
                    }
                    sink.write(offset, data).map_err(Error::Buffer)?;
                    target.filled += data.len() as u64;
                    total += data.len() as u64;
                }
            }
            Some(m::Item::State(_)) => {}
            Some(m::Item::End(summary)) => {
                if summary.identity != Some(id) {
                    return Err(Error::Merge(m::MergeError::WrongBase {
                        expected: id.0,
                        found: summary
                            .identity
                            .map_or("without an identity".into(), |i| format!("{:032x}", i.0)),
                    }));
                }
                break;
            }
            Some(m::Item::Base { path, .. }) => return Err(Error::Incremental { path }),
            Some(m::Item::BaseRef { .. }) | None => {
                return Err(m::ReadError::Truncated {
                    at: reader.bytes_read(),
                }
                .into())
            }
        }
    }
    for target in wanted.values().flatten() {
        if target.filled != target.size {
            return Err(Error::BaseContents {
                session: target.session,
                buffer: target.key,
                expected: target.size,
                found: target.filled,
            });
        }
    }
    Ok(total)
}
