//! The opening every save shares: quiesce the vGPU, capture each session's
//! parts, and put them in one validated state with the profile the guest
//! saw and the device that holds it.

use std::time::Instant;

use vgpu_migration as m;

use super::sessions::{save_sessions, SavedVgpuSession};
use super::{Error, Report};
use crate::executor::profile_holder;
use crate::vgpu::Vgpu;

/// The vGPU's objects, captured while it is quiesced.
pub(crate) struct Quiesced {
    pub state: m::VgpuState,
    /// Each session's contents sources, in the state's order.
    pub sessions: Vec<SavedVgpuSession>,
}

/// Quiesces the vGPU, captures its objects and runs `then` on them while
/// it is still quiesced (reading contents: nothing is written meanwhile);
/// the report has the drain, serialize and pause times.
pub(crate) fn quiesced<T>(
    vgpu: &Vgpu,
    then: impl FnOnce(Quiesced, &mut Report) -> Result<T, Error>,
) -> Result<(T, Report), Error> {
    let executors = vgpu.executors();
    let device = profile_holder(&executors)
        .map(|i| executors[i].identity())
        .unwrap_or_default();
    let profile = vgpu.profile_seen();
    let started = Instant::now();
    vgpu.with_quiesced(|sessions| {
        let held = Instant::now();
        let mut report = Report {
            sessions: sessions.len(),
            ..Default::default()
        };
        let t = Instant::now();
        let saved = save_sessions(sessions)?;
        report.drain = saved.iter().map(|s| s.drain).sum();
        report.serialize = t.elapsed().saturating_sub(report.drain);
        let state = m::VgpuState::V1(m::VgpuStateV1 {
            profile,
            device,
            sessions: saved.iter().map(|s| s.state.clone().into()).collect(),
        });
        state.validate()?;
        let out = then(
            Quiesced {
                state,
                sessions: saved,
            },
            &mut report,
        )?;
        report.pause = started.elapsed();
        report.held = held.elapsed();
        Ok((out, report))
    })?
}
