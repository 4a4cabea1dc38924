//! Runs request streams through a real session in this process, without
//! vhost-user or guest memory from a front-end: the entry point fuzzers and
//! in-process tests use. Everything else is the daemon's own code path
//! (decode, dispatch, the executor on the real device).

use std::sync::Arc;

use vm_memory::{GuestAddress, GuestMemoryBackend};

use crate::chain::{ByteStream, GuestIo, GuestRam, ResolvedChain, Segment};
use crate::executor::Executor;
use crate::vgpu::session::{ExecSessions, SessionState};

/// Size of the scratch guest memory a harness run uses.
const MEMORY: usize = 64 << 20;

pub struct InProcess {
    state: SessionState,
    mem: Arc<GuestRam>,
    executors: Vec<Arc<dyn Executor>>,
    vm: crate::vgpu::session::VmBounds,
}

/// A session as a checkpoint holds it: its state, and each of its
/// contents (by key) read whole.
pub type Snapshot = (vgpu_migration::LatestSession, Vec<(u64, Vec<u8>)>);

/// A session as a save captured it: its state, and a source (by key)
/// for each of its contents, not read yet.
pub type Unread = (
    vgpu_migration::LatestSession,
    Vec<(u64, Box<dyn crate::executor::BufferSource>)>,
);

/// The session id a harness session is saved under.
const SESSION: u64 = 1;

impl InProcess {
    /// An opened session on the given executors.
    pub fn new(executors: &[Arc<dyn Executor>]) -> InProcess {
        let mem =
            GuestRam::from_ranges(&[(GuestAddress(0), MEMORY)]).expect("anonymous guest memory");
        let vm = crate::vgpu::session::VmBounds {
            quota: crate::quota::Quota::new(Default::default()),
            profile: Arc::new(crate::vgpu::offered_profile(executors)),
        };
        let exec = ExecSessions::open(executors, &vm);
        InProcess {
            state: SessionState::new(exec, true),
            mem: Arc::new(mem),
            executors: executors.to_vec(),
            vm,
        }
    }

    /// An opened session on the first OpenCL device, if this host has one.
    pub fn opencl() -> Option<InProcess> {
        let device = crate::executor::opencl::OpenClExecutor::open(
            &crate::executor::opencl::DeviceSelector::First,
        )
        .ok()?;
        Some(InProcess::new(&[Arc::new(device)]))
    }

    fn stream(&self, at: usize, len: usize) -> ByteStream {
        let slice = self
            .mem
            .get_slice(GuestAddress(at as u64), len)
            .expect("inside scratch memory");
        ByteStream::from_segment(Segment {
            ptr: slice.ptr_guard_mut().as_ptr(),
            len,
        })
    }

    /// Runs one request stream with `out_data` as its out-data stream and
    /// `in_len` bytes of in-data; returns the reply stream and the in-data.
    /// Any bytes are accepted: malformed input yields an error reply.
    pub fn run(&mut self, request: &[u8], out_data: &[u8], in_len: usize) -> (Vec<u8>, Vec<u8>) {
        let quarter = MEMORY / 4;
        let out_len = out_data.len().min(quarter);
        let in_len = in_len.min(quarter);
        let reply_len = quarter;
        let out = self.stream(0, out_len);
        let _ = out.write(0, &out_data[..out_len]);
        let header = vgpu_protocol::BatchHeader::decode(request).and_then(|h| {
            if h.request_len as usize != request.len() {
                Err(vgpu_protocol::DecodeError::BadHeader("request_len differs"))
            } else {
                Ok(h)
            }
        });
        let mut chain = ResolvedChain {
            head: 0,
            header,
            request: request.to_vec(),
            reply: self.stream(quarter, reply_len),
            io: GuestIo::new(out, self.stream(2 * quarter, in_len)),
            mem: self.mem.clone(),
            writable: Vec::new(),
        };
        let reply = match &chain.header {
            Ok(_) => self.state.run_batch(&mut chain),
            Err(e) => vgpu_protocol::frame::ReplyBuilder::refused(e.status()),
        };
        let mut data = vec![0u8; in_len];
        let _ = chain.io.in_.read(0, &mut data);
        (reply, data)
    }

    /// Live objects of the session, per `ObjectKind::index`.
    pub fn object_counts(&self) -> Vec<u64> {
        self.state.exec.object_counts()
    }

    /// Saves the session as a checkpoint does (every executor's part, and
    /// its contents), without a stream.
    pub fn snapshot(&mut self) -> Result<Snapshot, crate::persist::Error> {
        let saved = crate::persist::save_session(SESSION, &mut self.state.exec, 0)?;
        let mut contents = Vec::new();
        for (key, mut source) in saved.buffers {
            let size = usize::try_from(source.size()).expect("a harness buffer fits memory");
            let mut data = vec![0u8; size];
            source
                .read(0, &mut data)
                .map_err(crate::persist::Error::Buffer)?;
            contents.push((key, data));
        }
        Ok((saved.state, contents))
    }

    /// Saves the session as [`Self::snapshot`] does but reads no contents:
    /// the sources a checkpoint writer reads while the session goes on.
    pub fn save_unread(&mut self) -> Result<Unread, crate::persist::Error> {
        let saved = crate::persist::save_session(SESSION, &mut self.state.exec, 0)?;
        Ok((saved.state, saved.buffers))
    }

    /// Replaces the session's objects with those rebuilt from `snapshot`,
    /// part by part on the executor of each part's kind, as a restore does.
    pub fn restore(&mut self, snapshot: &Snapshot) -> Result<(), crate::persist::Error> {
        let (state, contents) = snapshot;
        let mut rebuilt = crate::persist::rebuild_session(&self.executors, state)?;
        for (key, data) in contents {
            let sink = rebuilt
                .sinks
                .get_mut(key)
                .ok_or(crate::persist::Error::UnknownBuffer {
                    session: SESSION,
                    buffer: *key,
                })?;
            sink.write(0, data).map_err(crate::persist::Error::Buffer)?;
        }
        self.state.exec = crate::persist::exec_sessions(&self.executors, rebuilt.parts, &self.vm);
        Ok(())
    }

    /// What a checkpoint would copy while the guest runs, from every
    /// executor part of the session.
    pub fn live_buffers(&mut self) -> Vec<Box<dyn crate::executor::BufferSource>> {
        self.state
            .exec
            .sessions
            .iter_mut()
            .flat_map(|s| s.live_buffers().expect("live buffers of a harness session"))
            .collect()
    }
}
