//! The seam between the vGPU and its executors: a session is saved as the
//! list of parts its executors save, each in the executor's own state type,
//! and rebuilt by handing each part to the executor of the same kind. This
//! layer knows no API: it never looks inside a part, only pairs it with an
//! executor and lists the contents it carries under keys of the session.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use vgpu_migration as m;

use super::Error;
use crate::executor::{BufferSink, BufferSource, ExecSession, Executor};
use crate::vgpu::session::{ExecSessions, SessionState, VmBounds};

/// One session captured for a snapshot: its state, and a source for each
/// contents its state lists, in that order.
pub(crate) struct SavedVgpuSession {
    pub id: u64,
    pub state: m::LatestSession,
    /// (key of the contents in the stream, their source).
    pub buffers: Vec<(u64, Box<dyn BufferSource>)>,
    /// Time spent waiting for the devices to finish issued work.
    pub drain: Duration,
}

/// Captures every open session; the caller holds the vGPU quiesced.
pub(crate) fn save_sessions(
    sessions: &mut [(u64, &mut SessionState)],
) -> Result<Vec<SavedVgpuSession>, Error> {
    let mut saved = Vec::new();
    for (id, session) in sessions.iter_mut() {
        if !session.opened || session.closed {
            continue;
        }
        saved.push(save_session(*id, &mut session.exec, session.last_seq)?);
    }
    Ok(saved)
}

/// Captures one session: the part each executor holding objects of it
/// saves, and a key for each object's contents (see `content_keys`).
pub(crate) fn save_session(
    id: u64,
    exec: &mut ExecSessions,
    last_seq: u64,
) -> Result<SavedVgpuSession, Error> {
    let mut state = m::LatestSession {
        id,
        protocol_version: 1,
        last_seq: Some(last_seq),
        ..Default::default()
    };
    let mut sources = Vec::new();
    let mut drain = Duration::ZERO;
    for part in exec.sessions.iter_mut().filter(|s| !s.is_empty()) {
        let saved = part.save(id)?;
        drain += saved.drain;
        let index = u32::try_from(state.parts.len()).expect("a session has a few parts");
        sources.extend(
            saved
                .buffers
                .into_iter()
                .map(|(object, source)| (index, object, source)),
        );
        state.parts.push(saved.state);
    }
    let objects: Vec<u64> = sources.iter().map(|(_, object, _)| *object).collect();
    let mut buffers = Vec::new();
    for ((part, object, source), key) in sources.into_iter().zip(content_keys(&objects)) {
        state.contents.push(m::ContentState {
            key,
            part,
            object,
            size: source.size(),
        });
        buffers.push((key, source));
    }
    Ok(SavedVgpuSession {
        id,
        state,
        buffers,
        drain,
    })
}

/// The stream keys of a session's contents, given each one's object id in
/// its own part, in order. An object keeps its id as its key, so keys stay
/// the same from one checkpoint to the next (and are those earlier builds
/// wrote); only an id an earlier part's object took already (executors
/// number their objects on their own) gets the smallest key no object has
/// as its id. The parts' own ids never change.
fn content_keys(objects: &[u64]) -> Vec<u64> {
    let ids: std::collections::HashSet<u64> = objects.iter().copied().collect();
    let mut taken = std::collections::HashSet::new();
    let mut next = 1u64;
    objects
        .iter()
        .map(|&id| {
            if id != 0 && taken.insert(id) {
                return id;
            }
            while ids.contains(&next) || taken.contains(&next) {
                next += 1;
            }
            taken.insert(next);
            next
        })
        .collect()
}

/// Refuses a state that needs more device memory than the VM's
/// `--max-memory`, or holds more objects under guest handles than its
/// `--max-objects`, before anything is built: a restore makes what the
/// guest's calls made, under the same limits.
pub(crate) fn check_quota(
    sessions: &[m::LatestSession],
    limits: &crate::quota::Limits,
) -> Result<(), Error> {
    let total = sessions
        .iter()
        .flat_map(|s| &s.parts)
        .map(m::ExecutorState::usage)
        .fold(m::Usage::default(), |sum, u| m::Usage {
            bytes: sum.bytes.saturating_add(u.bytes),
            objects: sum.objects.saturating_add(u.objects),
        });
    for (what, needed, limit, flag) in [
        (
            "bytes of device memory",
            total.bytes,
            limits.memory_bytes,
            "--max-memory",
        ),
        ("objects", total.objects, limits.objects, "--max-objects"),
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
/// and where its contents go, by key.
pub(crate) struct Rebuilt {
    pub id: u64,
    /// The last message the session ran when it was saved, if recorded.
    pub last_seq: Option<u64>,
    pub parts: Vec<(usize, Box<dyn ExecSession>)>,
    pub sinks: HashMap<u64, Box<dyn BufferSink>>,
}

/// Rebuilds each part of a saved session on the executor of its kind.
pub(crate) fn rebuild_session(
    executors: &[Arc<dyn Executor>],
    session: &m::LatestSession,
) -> Result<Rebuilt, Error> {
    let mut rebuilt = Rebuilt {
        id: session.id,
        last_seq: session.last_seq,
        parts: Vec::new(),
        sinks: HashMap::new(),
    };
    let mut part_sinks = Vec::new();
    for part in &session.parts {
        let kind = part.kind();
        let i = executors
            .iter()
            .position(|e| e.kind() == Some(kind))
            .ok_or(Error::NoExecutor { kind })?;
        let restored = executors[i]
            .restore_session(part)
            .map_err(|source| Error::Part {
                kind,
                session: session.id,
                source,
            })?;
        part_sinks.push(restored.sinks);
        rebuilt.parts.push((i, restored.session));
    }
    for content in &session.contents {
        let sink = part_sinks
            .get_mut(content.part as usize)
            .and_then(|sinks| sinks.remove(&content.object));
        if let Some(sink) = sink {
            rebuilt.sinks.insert(content.key, sink);
        }
    }
    Ok(rebuilt)
}

/// A session's parts on every executor: the rebuilt ones, fresh elsewhere.
pub(crate) fn exec_sessions(
    executors: &[Arc<dyn Executor>],
    parts: Vec<(usize, Box<dyn ExecSession>)>,
    vm: &VmBounds,
) -> ExecSessions {
    let mut all = ExecSessions::open(executors, vm);
    for (i, mut session) in parts {
        vm.apply(session.as_mut());
        all.sessions[i] = session;
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::SavedSession;
    use vgpu_protocol::{Request, Status};

    /// An executor session holding a part and its objects' contents.
    struct Fake(m::ExecutorState, Contents);

    /// Contents by object id, shared with the sources and sinks.
    type Contents = Arc<std::sync::Mutex<HashMap<u64, Vec<u8>>>>;

    impl Fake {
        /// A part whose every object holds bytes of `fill`.
        fn new(part: m::ExecutorState, fill: u8) -> Box<Fake> {
            let contents = part
                .streamed()
                .into_iter()
                .map(|(id, size)| (id, vec![fill; size as usize]))
                .collect();
            Box::new(Fake(part, Arc::new(std::sync::Mutex::new(contents))))
        }
    }

    /// One object's contents, read or written at once.
    struct Object(Contents, u64);

    impl BufferSource for Object {
        fn size(&self) -> u64 {
            self.0.lock().unwrap()[&self.1].len() as u64
        }
        fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Status> {
            let offset = offset as usize;
            buf.copy_from_slice(&self.0.lock().unwrap()[&self.1][offset..offset + buf.len()]);
            Ok(())
        }
    }

    impl BufferSink for Object {
        fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Status> {
            let offset = offset as usize;
            let mut contents = self.0.lock().unwrap();
            let object = contents.get_mut(&self.1).ok_or(Status::INVALID_VALUE)?;
            object[offset..offset + data.len()].copy_from_slice(data);
            Ok(())
        }
    }

    /// An executor of one kind that rebuilds `Fake` sessions.
    struct FakeExecutor(m::ExecutorKind);

    impl Executor for FakeExecutor {
        fn describe(&self) -> String {
            format!("fake {}", self.0)
        }
        fn serves(&self, _: u32) -> bool {
            false
        }
        fn open_session(&self) -> Box<dyn ExecSession> {
            Box::new(Fake(
                m::ExecutorState::from(m::OpenClStateV1::default()),
                Contents::default(),
            ))
        }
        fn kind(&self) -> Option<m::ExecutorKind> {
            Some(self.0)
        }
        fn restore_session(
            &self,
            state: &m::ExecutorState,
        ) -> Result<crate::executor::RestoredSession, SnapshotError> {
            if state.kind() != self.0 {
                return Err(SnapshotError::WrongKind {
                    given: state.kind(),
                    here: self.0,
                });
            }
            let session = Fake::new(state.clone(), 0);
            let sinks = state
                .streamed()
                .into_iter()
                .map(|(id, _)| {
                    (
                        id,
                        Box::new(Object(session.1.clone(), id)) as Box<dyn BufferSink>,
                    )
                })
                .collect();
            Ok(crate::executor::RestoredSession { session, sinks })
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
        fn add_object_counts(&self, total: &mut [u64]) {
            total.iter_mut().for_each(|n| *n += 1);
        }
        fn aborter(&self) -> Box<dyn Fn() + Send + Sync> {
            Box::new(|| {})
        }
        fn save(&mut self, _: u64) -> Result<crate::executor::SavedSession, SnapshotError> {
            let buffers = self
                .0
                .streamed()
                .into_iter()
                .map(|(id, _)| {
                    (
                        id,
                        Box::new(Object(self.1.clone(), id)) as Box<dyn BufferSource>,
                    )
                })
                .collect();
            Ok(SavedSession {
                state: self.0.clone(),
                buffers,
                drain: Duration::ZERO,
            })
        }
    }

    use crate::executor::SnapshotError;

    fn opencl_part() -> m::ExecutorState {
        m::OpenClStateV1 {
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

    fn cuda_part() -> m::ExecutorState {
        m::CudaSessionState {
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
        }
        .into()
    }

    fn state_of(session: m::LatestSession) -> m::VgpuState {
        m::VgpuState::V1(m::VgpuStateV1 {
            profile: Default::default(),
            device: Default::default(),
            sessions: vec![session.into()],
        })
    }

    #[test]
    fn a_session_on_both_apis_keeps_each_part_whole_under_distinct_keys() {
        let mut exec = ExecSessions::from_parts(
            Vec::new(),
            vec![Fake::new(opencl_part(), 1), Fake::new(cuda_part(), 2)],
        );
        let saved = save_session(3, &mut exec, 41).unwrap();
        assert_eq!((saved.id, saved.state.last_seq), (3, Some(41)));
        assert_eq!(
            saved.state.parts,
            vec![opencl_part(), cuda_part()],
            "no part is renumbered"
        );
        let state = state_of(saved.state.clone());
        assert_eq!(state.validate(), Ok(()));
        let streamed: Vec<(u64, u64)> = state
            .streamed_buffers()
            .iter()
            .map(|b| (b.buffer, b.size))
            .collect();
        let sources: Vec<(u64, u64)> = saved
            .buffers
            .iter()
            .map(|(key, source)| (*key, source.size()))
            .collect();
        assert_eq!(streamed, sources, "the sources follow the state");
        assert_eq!(
            streamed,
            vec![(7, 16), (2, 32), (1, 8)],
            "ids are keys, but for the second 7"
        );
        let objects: Vec<(u32, u64)> = saved
            .state
            .contents
            .iter()
            .map(|c| (c.part, c.object))
            .collect();
        assert_eq!(objects, vec![(0, 7), (1, 7), (1, 1)]);
    }

    #[test]
    fn an_empty_session_is_saved_with_no_parts() {
        let mut exec = ExecSessions::from_parts(Vec::new(), Vec::new());
        let saved = save_session(5, &mut exec, 7).unwrap();
        assert_eq!(saved.state.id, 5);
        assert!(saved.state.parts.is_empty() && saved.buffers.is_empty());
        assert_eq!(state_of(saved.state).validate(), Ok(()));
    }

    #[test]
    fn each_part_needs_an_executor_of_its_kind() {
        let none: Vec<Arc<dyn Executor>> = Vec::new();
        let session = |part: m::ExecutorState| m::LatestSession {
            id: 1,
            parts: vec![part],
            ..Default::default()
        };
        assert!(matches!(
            rebuild_session(&none, &session(cuda_part())),
            Err(Error::NoExecutor {
                kind: m::ExecutorKind::Cuda
            })
        ));
        assert!(matches!(
            rebuild_session(&none, &session(opencl_part())),
            Err(Error::NoExecutor {
                kind: m::ExecutorKind::OpenCl
            })
        ));
        let empty = rebuild_session(&none, &m::LatestSession::default()).unwrap();
        assert!(empty.parts.is_empty() && empty.sinks.is_empty());
    }

    #[test]
    fn the_quota_counts_every_part() {
        let session = m::LatestSession {
            id: 1,
            parts: vec![opencl_part(), cuda_part()],
            ..Default::default()
        };
        let limits = |memory_bytes, objects| crate::quota::Limits {
            memory_bytes,
            objects,
            ..Default::default()
        };
        let sessions = [session];
        assert!(check_quota(&sessions, &limits(16 + 40, 2)).is_ok());
        assert!(matches!(
            check_quota(&sessions, &limits(16 + 39, 0)),
            Err(Error::OverQuota { needed: 56, .. })
        ));
        assert!(matches!(
            check_quota(&sessions, &limits(0, 1)),
            Err(Error::OverQuota { needed: 2, .. })
        ));
    }

    /// Reads every source of a saved session whole, by key.
    fn read_all(saved: &mut SavedVgpuSession) -> Vec<(u64, Vec<u8>)> {
        saved
            .buffers
            .iter_mut()
            .map(|(key, source)| {
                let mut data = vec![0u8; source.size() as usize];
                source.read(0, &mut data).unwrap();
                (*key, data)
            })
            .collect()
    }

    #[test]
    fn parts_of_both_kinds_round_trip_through_the_seam() {
        let executors: Vec<Arc<dyn Executor>> = vec![
            Arc::new(FakeExecutor(m::ExecutorKind::OpenCl)),
            Arc::new(FakeExecutor(m::ExecutorKind::Cuda)),
        ];
        let (opencl, cuda) = (Fake::new(opencl_part(), 1), Fake::new(cuda_part(), 2));
        let cuda_contents = cuda.1.clone();
        let mut exec = ExecSessions::from_parts(executors.clone(), vec![opencl, cuda]);
        let mut before = save_session(3, &mut exec, 41).unwrap();
        let before_contents = read_all(&mut before);

        // Change: every CUDA byte, and the OpenCL part for another one.
        cuda_contents
            .lock()
            .unwrap()
            .values_mut()
            .for_each(|data| data.fill(9));
        let mut other = opencl_part();
        if let m::ExecutorState::OpenCl(m::OpenClState::V1(o)) = &mut other {
            o.buffers[0].size = 8;
        }
        exec.sessions[0] = Fake::new(other, 5);
        let mut changed = save_session(3, &mut exec, 42).unwrap();
        assert_ne!(changed.state, before.state);
        assert_ne!(read_all(&mut changed), before_contents);

        let mut rebuilt = rebuild_session(&executors, &before.state).unwrap();
        assert_eq!(rebuilt.sinks.len(), 3, "a sink for every key");
        for (key, data) in &before_contents {
            rebuilt.sinks.get_mut(key).unwrap().write(0, data).unwrap();
        }
        let vm = VmBounds {
            quota: crate::quota::Quota::new(Default::default()),
            profile: Default::default(),
        };
        let mut restored = exec_sessions(&executors, rebuilt.parts, &vm);
        let mut after = save_session(3, &mut restored, 41).unwrap();
        assert_eq!(after.state, before.state);
        assert_eq!(read_all(&mut after), before_contents);
        assert_eq!(
            before_contents
                .iter()
                .map(|(_, d)| d[0])
                .collect::<Vec<_>>(),
            vec![1, 2, 2],
            "each part's contents came back to it, under its own ids"
        );
    }

    #[test]
    fn content_keys_are_object_ids_but_for_ids_taken_already() {
        assert_eq!(content_keys(&[7, 1, 9]), vec![7, 1, 9]);
        assert_eq!(content_keys(&[7, 1, 7, 1, 0]), vec![7, 1, 2, 3, 4]);
        assert_eq!(content_keys(&[]), Vec::<u64>::new());
    }
}
