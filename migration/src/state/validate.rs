//! Consistency of a state: unique ids and handles, references that resolve,
//! sub-buffers inside their parents. A reader checks this before it hands a
//! state out, so restore code can look objects up without second-guessing
//! the file.

use std::collections::{HashMap, HashSet};

use super::*;

/// Why a state is inconsistent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("session id 0 is reserved")]
    ZeroSession,
    #[error("session {0} appears twice")]
    DuplicateSession(u64),
    #[error("session {session}: {kind} id {id} is 0 or appears twice")]
    BadId {
        session: u64,
        kind: &'static str,
        id: ObjectId,
    },
    #[error("session {session}: {kind} handle {handle} is 0 or appears twice")]
    BadHandle {
        session: u64,
        kind: &'static str,
        handle: u64,
    },
    #[error("session {session}: {kind} {id} has a guest handle but no references")]
    ZeroRefs {
        session: u64,
        kind: &'static str,
        id: ObjectId,
    },
    #[error(
        "session {session}: {kind} {id} refers to {target_kind} {target}, which the state lacks"
    )]
    Dangling {
        session: u64,
        kind: &'static str,
        id: ObjectId,
        target_kind: &'static str,
        target: ObjectId,
    },
    #[error("session {session}: buffer {id} has size 0")]
    EmptyBuffer { session: u64, id: ObjectId },
    #[error("session {session}: sub-buffer {id} {reason}")]
    BadSubBuffer {
        session: u64,
        id: ObjectId,
        reason: &'static str,
    },
    #[error("session {session}: program {id} is linked from no inputs")]
    EmptyLink { session: u64, id: ObjectId },
}

type Check = std::result::Result<(), StateError>;

/// What every object record has.
trait Object {
    const KIND: &'static str;
    fn id(&self) -> ObjectId;
    fn guest(&self) -> Option<GuestRef>;
}

macro_rules! object {
    ($($ty:ty => $kind:literal),*) => {$(
        impl Object for $ty {
            const KIND: &'static str = $kind;
            fn id(&self) -> ObjectId {
                self.id
            }
            fn guest(&self) -> Option<GuestRef> {
                self.guest
            }
        }
    )*};
}

object!(
    ContextState => "context",
    QueueState => "queue",
    BufferState => "buffer",
    SamplerState => "sampler",
    ProgramState => "program",
    KernelState => "kernel",
    EventState => "event"
);

/// Indexes one kind's records by id, checking ids and guest handles.
fn table<T: Object>(
    session: u64,
    items: &[T],
) -> std::result::Result<HashMap<u64, &T>, StateError> {
    let mut by_id = HashMap::with_capacity(items.len());
    let mut handles = HashSet::new();
    for item in items {
        let id = item.id();
        if id == 0 || by_id.insert(id, item).is_some() {
            return Err(StateError::BadId {
                session,
                kind: T::KIND,
                id,
            });
        }
        if let Some(guest) = item.guest() {
            if guest.handle == 0 || !handles.insert(guest.handle) {
                return Err(StateError::BadHandle {
                    session,
                    kind: T::KIND,
                    handle: guest.handle,
                });
            }
            if guest.refs == 0 {
                return Err(StateError::ZeroRefs {
                    session,
                    kind: T::KIND,
                    id,
                });
            }
        }
    }
    Ok(by_id)
}

/// Fails unless `target` is a key of `table`.
fn resolves<T, U: Object>(
    session: u64,
    from: &T,
    table: &HashMap<u64, &U>,
    target: ObjectId,
) -> Check
where
    T: Object,
{
    if table.contains_key(&target) {
        return Ok(());
    }
    Err(StateError::Dangling {
        session,
        kind: T::KIND,
        id: from.id(),
        target_kind: U::KIND,
        target,
    })
}

pub(super) fn vgpu(state: &VgpuState) -> Check {
    let VgpuState::V1(state) = state;
    let mut seen = HashSet::new();
    for session in &state.sessions {
        let SessionState::V1(session) = session;
        if session.id == 0 {
            return Err(StateError::ZeroSession);
        }
        if !seen.insert(session.id) {
            return Err(StateError::DuplicateSession(session.id));
        }
        session_v1(session)?;
    }
    Ok(())
}

fn session_v1(s: &SessionStateV1) -> Check {
    let sid = s.id;
    let contexts = table(sid, &s.contexts)?;
    let queues = table(sid, &s.queues)?;
    let buffers = table(sid, &s.buffers)?;
    let samplers = table(sid, &s.samplers)?;
    let programs = table(sid, &s.programs)?;
    table(sid, &s.kernels)?;
    table(sid, &s.events)?;
    for q in &s.queues {
        resolves(sid, q, &contexts, q.context)?;
    }
    for b in &s.buffers {
        resolves(sid, b, &contexts, b.context)?;
        sub_buffer(sid, b, &buffers)?;
    }
    for sampler in &s.samplers {
        resolves(sid, sampler, &contexts, sampler.context)?;
    }
    for p in &s.programs {
        resolves(sid, p, &contexts, p.context)?;
        if matches!(&p.origin, ProgramOrigin::Linked(inputs) if inputs.is_empty()) {
            return Err(StateError::EmptyLink {
                session: sid,
                id: p.id,
            });
        }
    }
    for k in &s.kernels {
        resolves(sid, k, &programs, k.program)?;
        for arg in &k.args {
            match *arg {
                KernelArg::Buffer(b) => resolves(sid, k, &buffers, b)?,
                KernelArg::Sampler(sm) => resolves(sid, k, &samplers, sm)?,
                _ => {}
            }
        }
    }
    for e in &s.events {
        resolves(sid, e, &contexts, e.context)?;
    }
    for c in &s.pending {
        if !queues.contains_key(&c.queue) {
            return Err(StateError::Dangling {
                session: sid,
                kind: "pending command",
                id: u64::from(c.opcode),
                target_kind: "queue",
                target: c.queue,
            });
        }
    }
    Ok(())
}

fn sub_buffer(session: u64, b: &BufferState, buffers: &HashMap<u64, &BufferState>) -> Check {
    if b.size == 0 {
        return Err(StateError::EmptyBuffer { session, id: b.id });
    }
    let Some(region) = b.parent else {
        return Ok(());
    };
    let bad = |reason| StateError::BadSubBuffer {
        session,
        id: b.id,
        reason,
    };
    resolves(session, b, buffers, region.parent)?;
    let parent = buffers[&region.parent];
    if parent.parent.is_some() {
        return Err(bad("has a sub-buffer as its parent"));
    }
    if parent.context != b.context {
        return Err(bad("is in another context than its parent"));
    }
    match region.origin.checked_add(b.size) {
        Some(end) if end <= parent.size => Ok(()),
        _ => Err(bad("reaches past the end of its parent")),
    }
}
