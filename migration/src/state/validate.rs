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
    #[error("session {session}: streamed contents id {id} is 0 or names two buffers")]
    StreamedId { session: u64, id: ObjectId },
    #[error("session {session} has two {kind} parts")]
    DuplicatePart { session: u64, kind: ExecutorKind },
    #[error("session {session}: contents {key} name object {object} of part {part}, which carries no contents of that size")]
    BadContent {
        session: u64,
        key: ObjectId,
        part: u32,
        object: ObjectId,
    },
    #[error(
        "session {session}: object {object} of part {part} has no contents in the stream, or twice"
    )]
    MissingContent {
        session: u64,
        part: u32,
        object: ObjectId,
    },
    #[error("session {session}: CUDA allocation at {address:#x} of {size} bytes {reason}")]
    BadAllocation {
        session: u64,
        address: u64,
        size: u64,
        reason: &'static str,
    },
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
    SubDeviceState => "sub-device",
    BufferState => "buffer",
    SamplerState => "sampler",
    ImageState => "image",
    ProgramState => "program",
    KernelState => "kernel",
    EventState => "event",
    CudaContextState => "CUDA context",
    CudaModuleState => "CUDA module",
    CudaFunctionState => "CUDA function",
    CudaStreamState => "CUDA stream",
    CudaEventState => "CUDA event"
);

/// Records the guest knows by address rather than by handle.
macro_rules! addressed {
    ($($ty:ty => $kind:literal),*) => {$(
        impl Object for $ty {
            const KIND: &'static str = $kind;
            fn id(&self) -> ObjectId {
                self.id
            }
            fn guest(&self) -> Option<GuestRef> {
                None
            }
        }
    )*};
}

addressed!(
    CudaAllocationState => "CUDA allocation",
    CudaGlobalState => "CUDA global"
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
        let id = session.id();
        if id == 0 {
            return Err(StateError::ZeroSession);
        }
        if !seen.insert(id) {
            return Err(StateError::DuplicateSession(id));
        }
        match session {
            SessionState::V1(s) => opencl(&OpenCl::from(s))?,
            SessionState::V2(s) => objects(id, s)?,
            SessionState::V3(s) => objects(id, &s.objects)?,
            SessionState::V4(s) => with_images(id, &s.objects, &s.images)?,
            SessionState::V5(s) => {
                with_images(id, &s.objects, &s.images)?;
                topology(id, &s.objects.contexts, &s.objects.queues, &s.devices)?;
            }
            SessionState::V6(s) => parts(s)?,
        }
    }
    Ok(())
}

/// Checks a session's objects and images (version 4 and later).
fn with_images(id: u64, objects: &SessionStateV2, images: &[ImageState]) -> Check {
    let mut view = OpenCl::from(objects);
    view.images = images;
    opencl(&view)?;
    if let Some(c) = &objects.cuda {
        cuda(id, c)?;
    }
    let mut seen = HashSet::new();
    for (streamed, _) in super::streamed(objects, images) {
        if streamed == 0 || !seen.insert(streamed) {
            return Err(StateError::StreamedId {
                session: id,
                id: streamed,
            });
        }
    }
    Ok(())
}

/// Checks sub-devices (each parent listed before its sub-devices) and the
/// placements of contexts and queues (version 5).
fn topology(
    session: u64,
    contexts: &[ContextState],
    queues: &[QueueState],
    devices: &DeviceTopology,
) -> Check {
    let subs = table(session, &devices.sub_devices)?;
    let mut earlier = HashSet::new();
    for sub in &devices.sub_devices {
        if let Some(parent) = sub.parent {
            if !earlier.contains(&parent) {
                return Err(StateError::Dangling {
                    session,
                    kind: "sub-device",
                    id: sub.id,
                    target_kind: "sub-device listed before it",
                    target: parent,
                });
            }
        }
        earlier.insert(sub.id);
    }
    let device = |kind: &'static str, id: ObjectId, target: ObjectId| -> Check {
        if target == ROOT_DEVICE || subs.contains_key(&target) {
            return Ok(());
        }
        Err(StateError::Dangling {
            session,
            kind,
            id,
            target_kind: "sub-device",
            target,
        })
    };
    let contexts = table(session, contexts)?;
    for placed in &devices.contexts {
        if !contexts.contains_key(&placed.object) || placed.devices.is_empty() {
            return Err(StateError::BadId {
                session,
                kind: "context placement",
                id: placed.object,
            });
        }
        for &d in &placed.devices {
            device("context", placed.object, d)?;
        }
    }
    let queues = table(session, queues)?;
    for placed in &devices.queues {
        if !queues.contains_key(&placed.object) || placed.devices.len() != 1 {
            return Err(StateError::BadId {
                session,
                kind: "queue placement",
                id: placed.object,
            });
        }
        device("queue", placed.object, placed.devices[0])?;
    }
    Ok(())
}

/// Checks each executor's part on its own, and that the contents table
/// lists every streamed object of every part exactly once (version 6).
fn parts(s: &SessionStateV6) -> Check {
    let sid = s.id;
    let mut kinds = HashSet::new();
    let mut expected: std::collections::BTreeMap<(u32, ObjectId), (u64, bool)> =
        std::collections::BTreeMap::new();
    for (index, part) in s.parts.iter().enumerate() {
        if !kinds.insert(part.kind()) {
            return Err(StateError::DuplicatePart {
                session: sid,
                kind: part.kind(),
            });
        }
        match part {
            ExecutorState::OpenCl(o) => {
                let o = o.newest();
                opencl(&OpenCl {
                    id: sid,
                    contexts: &o.contexts,
                    queues: &o.queues,
                    buffers: &o.buffers,
                    samplers: &o.samplers,
                    programs: &o.programs,
                    kernels: &o.kernels,
                    events: &o.events,
                    pending: &o.pending,
                    images: &o.images,
                })?;
                topology(sid, &o.contexts, &o.queues, &o.devices)?;
            }
            ExecutorState::Cuda(c) => cuda(sid, c.newest())?,
        }
        let index = index as u32;
        for (object, size) in part.streamed() {
            if expected.insert((index, object), (size, false)).is_some() {
                return Err(StateError::MissingContent {
                    session: sid,
                    part: index,
                    object,
                });
            }
        }
    }
    let mut keys = HashSet::new();
    for c in &s.contents {
        if c.key == 0 || !keys.insert(c.key) {
            return Err(StateError::StreamedId {
                session: sid,
                id: c.key,
            });
        }
        match expected.get_mut(&(c.part, c.object)) {
            Some((size, seen)) if *size == c.size && !*seen => *seen = true,
            _ => {
                return Err(StateError::BadContent {
                    session: sid,
                    key: c.key,
                    part: c.part,
                    object: c.object,
                })
            }
        }
    }
    match expected.iter().find(|(_, (_, seen))| !seen) {
        Some((&(part, object), _)) => Err(StateError::MissingContent {
            session: sid,
            part,
            object,
        }),
        None => Ok(()),
    }
}

/// Checks a session's OpenCL and CUDA objects (version 2 and later).
fn objects(id: u64, s: &SessionStateV2) -> Check {
    opencl(&OpenCl::from(s))?;
    if let Some(c) = &s.cuda {
        cuda(id, c)?;
    }
    streamed_ids(id, s)
}

/// The OpenCL records of a session, whichever version holds them.
struct OpenCl<'a> {
    id: u64,
    contexts: &'a [ContextState],
    queues: &'a [QueueState],
    buffers: &'a [BufferState],
    samplers: &'a [SamplerState],
    programs: &'a [ProgramState],
    kernels: &'a [KernelState],
    events: &'a [EventState],
    pending: &'a [PendingCommand],
    /// Version 4 and later.
    images: &'a [ImageState],
}

macro_rules! opencl_view {
    ($($ty:ty),*) => {$(
        impl<'a> From<&'a $ty> for OpenCl<'a> {
            fn from(s: &'a $ty) -> Self {
                OpenCl {
                    id: s.id,
                    contexts: &s.contexts,
                    queues: &s.queues,
                    buffers: &s.buffers,
                    samplers: &s.samplers,
                    programs: &s.programs,
                    kernels: &s.kernels,
                    events: &s.events,
                    pending: &s.pending,
                    images: &[],
                }
            }
        }
    )*};
}

opencl_view!(SessionStateV1, SessionStateV2);

/// Streamed contents are keyed by (session, id): OpenCL buffers, CUDA
/// allocations and globals must not share an id.
fn streamed_ids(sid: u64, s: &SessionStateV2) -> Check {
    let mut seen = HashSet::new();
    for (id, _) in s.streamed() {
        if id == 0 || !seen.insert(id) {
            return Err(StateError::StreamedId { session: sid, id });
        }
    }
    Ok(())
}

fn cuda(sid: u64, c: &CudaSessionState) -> Check {
    let contexts = table(sid, &c.contexts)?;
    let modules = table(sid, &c.modules)?;
    table(sid, &c.functions)?;
    table(sid, &c.streams)?;
    table(sid, &c.events)?;
    table(sid, &c.allocations)?;
    table(sid, &c.globals)?;
    if let Some(p) = &c.primary {
        if !contexts.contains_key(&p.context) {
            return Err(StateError::Dangling {
                session: sid,
                kind: "CUDA primary context",
                id: u64::from(p.refs),
                target_kind: "CUDA context",
                target: p.context,
            });
        }
    }
    for m in &c.modules {
        resolves(sid, m, &contexts, m.context)?;
    }
    for f in &c.functions {
        resolves(sid, f, &modules, f.module)?;
    }
    for g in &c.globals {
        resolves(sid, g, &modules, g.module)?;
    }
    for st in &c.streams {
        resolves(sid, st, &contexts, st.context)?;
    }
    for e in &c.events {
        resolves(sid, e, &contexts, e.context)?;
    }
    // Allocations: non-empty, not wrapping, not overlapping.
    let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(c.allocations.len());
    for a in &c.allocations {
        let bad = |reason| StateError::BadAllocation {
            session: sid,
            address: a.address,
            size: a.size,
            reason,
        };
        if a.size == 0 {
            return Err(bad("is empty"));
        }
        let end = a
            .address
            .checked_add(a.size)
            .ok_or_else(|| bad("wraps around"))?;
        if a.address == 0 {
            return Err(bad("is at address 0"));
        }
        ranges.push((a.address, end));
    }
    ranges.sort_unstable();
    if let Some(w) = ranges.windows(2).find(|w| w[1].0 < w[0].1) {
        let a = c
            .allocations
            .iter()
            .find(|a| a.address == w[1].0)
            .expect("listed above");
        return Err(StateError::BadAllocation {
            session: sid,
            address: a.address,
            size: a.size,
            reason: "overlaps another",
        });
    }
    Ok(())
}

fn opencl(s: &OpenCl<'_>) -> Check {
    let sid = s.id;
    let contexts = table(sid, s.contexts)?;
    let queues = table(sid, s.queues)?;
    let buffers = table(sid, s.buffers)?;
    let samplers = table(sid, s.samplers)?;
    let programs = table(sid, s.programs)?;
    table(sid, s.kernels)?;
    table(sid, s.events)?;
    for q in s.queues {
        resolves(sid, q, &contexts, q.context)?;
    }
    for b in s.buffers {
        resolves(sid, b, &contexts, b.context)?;
        sub_buffer(sid, b, &buffers)?;
    }
    for sampler in s.samplers {
        resolves(sid, sampler, &contexts, sampler.context)?;
    }
    let images = table(sid, s.images)?;
    for image in s.images {
        resolves(sid, image, &contexts, image.context)?;
        if buffers.contains_key(&image.id) {
            return Err(StateError::BadId {
                session: sid,
                kind: "image",
                id: image.id,
            });
        }
        if let Some(b) = image.buffer {
            resolves(sid, image, &buffers, b)?;
        }
    }
    for p in s.programs {
        resolves(sid, p, &contexts, p.context)?;
        if matches!(&p.origin, ProgramOrigin::Linked(inputs) if inputs.is_empty()) {
            return Err(StateError::EmptyLink {
                session: sid,
                id: p.id,
            });
        }
    }
    for k in s.kernels {
        resolves(sid, k, &programs, k.program)?;
        for arg in &k.args {
            match *arg {
                // Images are memory objects too.
                KernelArg::Buffer(b) if images.contains_key(&b) => {}
                KernelArg::Buffer(b) => resolves(sid, k, &buffers, b)?,
                KernelArg::Sampler(sm) => resolves(sid, k, &samplers, sm)?,
                _ => {}
            }
        }
    }
    for e in s.events {
        resolves(sid, e, &contexts, e.context)?;
    }
    for c in s.pending {
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
