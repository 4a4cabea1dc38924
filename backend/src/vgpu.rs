//! One VM's vGPU: its sessions (one per guest process), each served by a
//! worker thread of its own so a long call of one process never stalls
//! another, and batches of one session run in order.

use std::collections::HashMap;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use vgpu_protocol::frame::{scan_opcodes, ReplyBuilder, PROTOCOL_VERSION};
use vgpu_protocol::limits::{MAX_REPLY_LEN, MAX_REQUEST_LEN};
use vgpu_protocol::messages::{SessionOpened, SessionStatsReply};
use vgpu_protocol::{decode, opcode, Request, Status, Wire};

use crate::chain::ResolvedChain;
use crate::executor::{ExecSession, Executor};

/// Most sessions one VM may hold.
pub const MAX_SESSIONS: usize = 1024;

/// Called once per chain with its head index and used length.
pub type Completion = Box<dyn FnOnce(u16, u32) + Send>;

struct Job {
    chain: ResolvedChain,
    done: Completion,
}

struct SessionWorker {
    jobs: mpsc::Sender<Job>,
    abort: Box<dyn Fn() + Send + Sync>,
    counts: Arc<Mutex<Vec<u64>>>,
}

/// Live objects of a VM, for status and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VgpuStats {
    pub sessions: usize,
    /// Per `ObjectKind::index`, summed over sessions.
    pub objects: Vec<u64>,
}

pub struct Vgpu {
    executors: Vec<Arc<dyn Executor>>,
    /// Guest-caused warnings of this VM go through this limiter.
    pub warnings: crate::ratelimit::WarnLimiter,
    sessions: Mutex<HashMap<u64, SessionWorker>>,
}

impl Vgpu {
    /// A vGPU whose calls go to the first executor that serves their opcode.
    pub fn new(executors: Vec<Arc<dyn Executor>>) -> Arc<Vgpu> {
        Arc::new(Vgpu {
            executors,
            warnings: Default::default(),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<u64, SessionWorker>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> VgpuStats {
        let sessions = self.sessions();
        let mut objects = vec![0u64; vgpu_protocol::ObjectKind::ALL.len()];
        for worker in sessions.values() {
            let counts = worker.counts.lock().unwrap_or_else(|e| e.into_inner());
            for (total, n) in objects.iter_mut().zip(counts.iter()) {
                *total += n;
            }
        }
        VgpuStats {
            sessions: sessions.len(),
            objects,
        }
    }

    /// Hands a chain to its session's worker (or answers it right away).
    pub fn submit(self: &Arc<Self>, chain: ResolvedChain, done: Completion) {
        let header = match &chain.header {
            Ok(header) => *header,
            Err(e) => {
                crate::guest_warn!(self.warnings, "refusing batch: {e}");
                let reply = ReplyBuilder::refused(e.status());
                return complete(chain, reply, done);
            }
        };
        let opcodes = scan_opcodes(&chain.request);
        let opens = opcodes.first() == Some(&opcode::OpenSession);
        let closes = opcodes.contains(&opcode::CloseSession);
        let mut sessions = self.sessions();
        if !sessions.contains_key(&header.session) {
            if !opens {
                drop(sessions);
                crate::guest_warn!(
                    self.warnings,
                    "batch for unknown session {}",
                    header.session
                );
                return complete(
                    chain,
                    ReplyBuilder::refused(Status::INVALID_OPERATION),
                    done,
                );
            }
            if sessions.len() >= MAX_SESSIONS || header.session == 0 {
                drop(sessions);
                return complete(chain, ReplyBuilder::refused(Status::OUT_OF_RESOURCES), done);
            }
            let worker = self.spawn_worker(header.session);
            sessions.insert(header.session, worker);
        }
        let worker = sessions.get(&header.session).expect("inserted above");
        if closes {
            // Unset user events would block the close behind a wait forever.
            (worker.abort)();
        }
        if let Err(mpsc::SendError(job)) = worker.jobs.send(Job { chain, done }) {
            sessions.remove(&header.session);
            drop(sessions);
            complete(
                job.chain,
                ReplyBuilder::refused(Status::DEVICE_NOT_AVAILABLE),
                job.done,
            );
        }
    }

    fn spawn_worker(self: &Arc<Self>, session_id: u64) -> SessionWorker {
        let (tx, rx) = mpsc::channel::<Job>();
        let session = ExecSessions::open(&self.executors);
        let abort = session.aborter();
        let counts = Arc::new(Mutex::new(session.object_counts()));
        let worker_counts = counts.clone();
        let vgpu = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name(format!("vgpu-session-{session_id}"))
            .spawn(move || {
                let mut state = SessionState {
                    exec: session,
                    opened: false,
                    closed: false,
                };
                while let Ok(mut job) = rx.recv() {
                    let reply = state.run_batch(&mut job.chain);
                    *worker_counts.lock().unwrap_or_else(|e| e.into_inner()) =
                        state.exec.object_counts();
                    complete(job.chain, reply, job.done);
                    if state.closed {
                        break;
                    }
                }
                if state.closed {
                    if let Some(vgpu) = vgpu.upgrade() {
                        vgpu.sessions().remove(&session_id);
                    }
                }
                log::debug!("session {session_id} ended");
            });
        if let Err(e) = spawned {
            log::error!("cannot start a session thread: {e}");
        }
        SessionWorker {
            jobs: tx,
            abort,
            counts,
        }
    }
}

impl Drop for Vgpu {
    fn drop(&mut self) {
        // Front-end gone: every worker ends after its current job, dropping
        // (and so releasing) everything its session holds.
        for worker in self.sessions().values() {
            (worker.abort)();
        }
    }
}

/// One session's part on each executor.
struct ExecSessions {
    executors: Vec<Arc<dyn Executor>>,
    sessions: Vec<Box<dyn ExecSession>>,
}

impl ExecSessions {
    fn open(executors: &[Arc<dyn Executor>]) -> ExecSessions {
        ExecSessions {
            executors: executors.to_vec(),
            sessions: executors.iter().map(|e| e.open_session()).collect(),
        }
    }

    fn execute(
        &mut self,
        request: &Request,
        io: &mut crate::chain::GuestIo,
    ) -> Result<Vec<u8>, Status> {
        let opcode = request.opcode();
        match self.executors.iter().position(|e| e.serves(opcode)) {
            Some(i) => self.sessions[i].execute(request, io),
            // No device of that API on this host (e.g. CUDA calls on a
            // host without a GPU).
            None => Err(Status::DEVICE_NOT_AVAILABLE),
        }
    }

    fn object_counts(&self) -> Vec<u64> {
        let mut total = vec![0u64; vgpu_protocol::ObjectKind::ALL.len()];
        for session in &self.sessions {
            for (t, n) in total.iter_mut().zip(session.object_counts()) {
                *t += n;
            }
        }
        total
    }

    fn aborter(&self) -> Box<dyn Fn() + Send + Sync> {
        let aborters: Vec<_> = self.sessions.iter().map(|s| s.aborter()).collect();
        Box::new(move || aborters.iter().for_each(|abort| abort()))
    }
}

struct SessionState {
    exec: ExecSessions,
    opened: bool,
    closed: bool,
}

impl SessionState {
    fn run_batch(&mut self, chain: &mut ResolvedChain) -> Vec<u8> {
        let batch = match decode(&chain.request) {
            Ok(batch) => batch,
            Err(e) => {
                log::debug!("refusing batch: {e}");
                return ReplyBuilder::refused(e.status());
            }
        };
        let mut reply = ReplyBuilder::new(batch.header.reply_capacity);
        for message in batch.messages {
            let result = match message.body {
                Err(e) => {
                    log::debug!("message {:#x} does not decode: {e}", message.opcode);
                    Err(e.status())
                }
                Ok(request) => self.run(&request, chain),
            };
            match result {
                Ok(payload) => reply.push(message.opcode, message.seq, Status::SUCCESS, &payload),
                Err(status) => reply.push(message.opcode, message.seq, status, &[]),
            }
        }
        reply.finish()
    }

    fn run(&mut self, request: &Request, chain: &mut ResolvedChain) -> Result<Vec<u8>, Status> {
        if self.closed {
            return Err(Status::INVALID_OPERATION);
        }
        match request {
            Request::OpenSession(m) => {
                let version = u32::from(PROTOCOL_VERSION);
                if self.opened || m.min_version > version || m.max_version < version {
                    return Err(Status::INVALID_OPERATION);
                }
                self.opened = true;
                let opened = SessionOpened {
                    version,
                    max_request_len: MAX_REQUEST_LEN,
                    max_reply_len: MAX_REPLY_LEN,
                    flags: 0,
                };
                Ok(opened.to_bytes())
            }
            _ if !self.opened => Err(Status::INVALID_OPERATION),
            Request::CloseSession(_) => {
                self.closed = true;
                Ok(Vec::new())
            }
            Request::Ping(_) => Ok(Vec::new()),
            Request::SessionStats(_) => Ok(SessionStatsReply {
                counts: self.exec.object_counts(),
            }
            .to_bytes()),
            _ => self.exec.execute(request, &mut chain.io),
        }
    }
}

/// Writes the reply into the chain and reports its used length.
fn complete(chain: ResolvedChain, reply: Vec<u8>, done: Completion) {
    let written = reply.len().min(chain.reply.len() as usize);
    if let Err(status) = chain.reply.write(0, &reply[..written]) {
        log::warn!("cannot write a reply: {status}");
    }
    let used = if chain.io.in_written > 0 {
        chain.reply.len() + chain.io.in_written
    } else {
        written as u64
    };
    done(chain.head, u32::try_from(used).unwrap_or(u32::MAX));
}
