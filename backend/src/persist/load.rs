//! Reading a stream: its state, upgraded to the newest form by the
//! migration crate, rebuilt part by part on the executors of each part's
//! kind, aside from the running vGPU; buffer contents go to the rebuilt
//! objects as their chunks arrive.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;
use std::time::Instant;

use vgpu_migration as m;

use super::sessions::{check_quota, rebuild_session, Rebuilt};
use super::{Error, Report};
use crate::executor::{profile_holder, Executor};

/// Reads a stream and builds its sessions on `executors`, aside; returns
/// them with the profile the guest saw, once the stream's end is verified.
pub(crate) fn load<R: Read>(
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
                // The profile binds the device that answers the guest's
                // device queries; a backend without one can only take
                // sessions that have no part on such a device (refused
                // below otherwise).
                if let Some(i) = profile_holder(executors) {
                    m::check(state.profile(), &executors[i].capacity())?;
                }
                profile = Some(state.profile().clone());
                let state = state.latest();
                let sessions: Vec<m::LatestSession> = state
                    .sessions
                    .into_iter()
                    .map(m::SessionState::latest)
                    .collect();
                check_quota(&sessions, limits)?;
                for session in &sessions {
                    index.insert(session.id, restored.len());
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
