//! One VM's vGPU: its sessions (one per guest process), each served by a
//! worker thread of its own so a long call of one process never stalls
//! another, and batches of one session run in order. The vGPU can be
//! quiesced (for a snapshot) and paused (no batch runs until resumed).

pub mod heap;
mod in_flight;
pub mod metrics;
pub mod profile;
pub mod session;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use vgpu_migration::Profile;
use vgpu_protocol::frame::{opcodes, ReplyBuilder};
use vgpu_protocol::{opcode, Status};

use crate::chain::ResolvedChain;
use crate::executor::Executor;
use crate::quota::{Limits, Quota};
use crate::vgpu::session::{ExecSessions, SessionState, VmBounds};

/// Most sessions one VM may hold.
pub const MAX_SESSIONS: usize = 1024;

pub use crate::executor::QUIESCE_DRAIN;

/// A session that would not stop for a quiesce.
#[derive(Debug, thiserror::Error)]
#[error("session {session} did not finish its batch within {waited:?}, even with its waits failed")]
pub struct Stuck {
    pub session: u64,
    pub waited: std::time::Duration,
}

/// Locks `state`, waiting at most `limit` for the batch that holds it.
pub(crate) fn lock_within(
    state: &Mutex<SessionState>,
    limit: std::time::Duration,
) -> Option<MutexGuard<'_, SessionState>> {
    let deadline = std::time::Instant::now() + limit;
    loop {
        match state.try_lock() {
            Ok(guard) => return Some(guard),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        if std::time::Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Called once per chain with its head index and used length.
pub type Completion = Box<dyn FnOnce(u16, u32) + Send>;

struct Job {
    chain: ResolvedChain,
    done: Completion,
}

type Aborter = Arc<Mutex<Box<dyn Fn() + Send + Sync>>>;

pub(crate) struct SessionWorker {
    jobs: mpsc::Sender<Job>,
    /// Jobs sent to the session's thread and not finished yet.
    queued: Arc<AtomicUsize>,
    /// Unblocks the session's waits; replaced when the session moves.
    abort: Aborter,
    counts: Arc<Mutex<Vec<u64>>>,
    pub(crate) state: Arc<Mutex<SessionState>>,
}

/// Live objects of a VM, for status and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VgpuStats {
    pub sessions: usize,
    /// Per `ObjectKind::index`, summed over sessions.
    pub objects: Vec<u64>,
    pub paused: bool,
}

pub struct Vgpu {
    executors: RwLock<Vec<Arc<dyn Executor>>>,
    /// Guest-caused warnings of this VM go through this limiter.
    pub warnings: crate::ratelimit::WarnLimiter,
    /// Ordered, not hashed: a VM has few sessions, and every batch looks its
    /// own up (SipHash cost more than the search).
    sessions: Mutex<BTreeMap<u64, SessionWorker>>,
    /// While paused, chains wait here instead of running.
    held: Mutex<Option<Vec<(ResolvedChain, Completion)>>>,
    /// What the guest sees of the device: fixed when the VM starts (from
    /// the OpenCL executor's offer), replaced only by a restored state's.
    profile: RwLock<Arc<Profile>>,
    /// Chains accepted and not yet returned.
    in_flight: Arc<in_flight::InFlight>,
    /// Chains counted against `--max-in-flight`: a chain leaves this count
    /// before the guest can see it returned, so the guest's next chain is
    /// never refused for one it already has back (`in_flight` drops only
    /// after the return, for `wait_idle`).
    admitted: Arc<AtomicUsize>,
    quota: Arc<Quota>,
    metrics: Arc<crate::vgpu::metrics::VmMetrics>,
    /// Batches handed to session threads and not finished, all sessions.
    jobs_queued: Arc<AtomicUsize>,
    /// The last whole checkpoint written, which incremental ones refer to.
    pub(crate) checkpoint_base: Mutex<Option<Arc<crate::persist::CheckpointBase>>>,
    /// Whole checkpoints a migration's device state may refer to.
    pub(crate) migration_base: Mutex<crate::persist::MigrationBase>,
}

/// The profile of the executor among `executors` whose profile the guest
/// sees (empty without one).
pub(crate) fn offered_profile(executors: &[Arc<dyn Executor>]) -> Profile {
    crate::executor::profile_holder(executors)
        .map(|i| executors[i].profile())
        .unwrap_or_default()
}

impl Vgpu {
    /// A vGPU whose calls go to the first executor that serves their opcode.
    pub fn new(executors: Vec<Arc<dyn Executor>>) -> Arc<Vgpu> {
        Vgpu::with_limits(executors, Limits::default())
    }

    /// A vGPU held to per-VM limits.
    pub fn with_limits(executors: Vec<Arc<dyn Executor>>, limits: Limits) -> Arc<Vgpu> {
        let profile = offered_profile(&executors);
        Arc::new(Vgpu {
            profile: RwLock::new(Arc::new(profile)),
            quota: Quota::new(limits),
            executors: RwLock::new(executors),
            warnings: Default::default(),
            sessions: Mutex::new(BTreeMap::new()),
            held: Mutex::new(None),
            in_flight: Arc::default(),
            admitted: Default::default(),
            metrics: Default::default(),
            jobs_queued: Default::default(),
            checkpoint_base: Mutex::new(None),
            migration_base: Default::default(),
        })
    }

    pub(crate) fn sessions(&self) -> MutexGuard<'_, BTreeMap<u64, SessionWorker>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn quota(&self) -> &Arc<Quota> {
        &self.quota
    }

    /// This VM's counters (calls, kernels, bytes, operation durations).
    pub fn metrics(&self) -> &crate::vgpu::metrics::VmMetrics {
        &self.metrics
    }

    /// Tells every executor that the front-end mapped its guest memory.
    pub fn map_guest_memory(&self, mem: &Arc<crate::chain::GuestRam>) {
        for executor in self.executors() {
            executor.map_guest_memory(mem);
        }
    }

    pub fn executors(&self) -> Vec<Arc<dyn Executor>> {
        self.executors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn set_executors(&self, executors: Vec<Arc<dyn Executor>>) {
        *self.executors.write().unwrap_or_else(|e| e.into_inner()) = executors;
    }

    /// The profile guests of this vGPU see.
    pub fn profile_seen(&self) -> Profile {
        (**self.profile.read().unwrap_or_else(|e| e.into_inner())).clone()
    }

    /// Takes the profile of a restored state, unless that state came from
    /// a backend without an OpenCL device (an empty profile): the guest
    /// then never saw one and keeps this VM's.
    pub(crate) fn set_profile_seen(&self, profile: Profile) {
        if profile != Profile::default() {
            *self.profile.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(profile);
        }
    }

    /// The quota and profile this VM's sessions are held to.
    pub(crate) fn bounds(&self) -> VmBounds {
        VmBounds {
            quota: self.quota.clone(),
            profile: self
                .profile
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
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
        let paused = self
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        VgpuStats {
            sessions: sessions.len(),
            objects,
            paused,
        }
    }

    /// Whether chains are held (see `pause`).
    pub fn is_paused(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// Stops running batches: chains that arrive wait until `resume`.
    pub fn pause(&self) {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(Vec::new);
    }

    /// Runs the chains that waited during a pause, in arrival order.
    pub fn resume(self: &Arc<Self>) {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        for (chain, done) in held.into_iter().flatten() {
            self.submit(chain, done);
        }
    }

    /// Runs `f` with every session locked: no batch runs and no session is
    /// created or closed meanwhile; batches in progress finish first, for
    /// at most `QUIESCE_DRAIN` each. A session still in its batch then
    /// (a wait on a user event nobody sets) has its waits failed, so only
    /// it sees an error and the quiesce goes on; one that even so does not
    /// finish within another `QUIESCE_DRAIN` fails the quiesce, which
    /// changes nothing.
    pub fn with_quiesced<R>(
        &self,
        f: impl FnOnce(&mut [(u64, &mut SessionState)]) -> R,
    ) -> Result<R, Stuck> {
        let map = self.sessions();
        let states: Vec<(u64, Arc<Mutex<SessionState>>)> =
            map.iter().map(|(id, w)| (*id, w.state.clone())).collect();
        let mut guards: Vec<(u64, MutexGuard<'_, SessionState>)> = Vec::new();
        for (id, state) in &states {
            let guard = match lock_within(state, QUIESCE_DRAIN) {
                Some(guard) => guard,
                None => {
                    crate::guest_warn!(
                        self.warnings,
                        "session {id} is still in its batch after {QUIESCE_DRAIN:?} of a quiesce: failing its waits on user events"
                    );
                    if let Some(worker) = map.get(id) {
                        (worker.abort.lock().unwrap_or_else(|e| e.into_inner()))();
                    }
                    lock_within(state, QUIESCE_DRAIN).ok_or(Stuck {
                        session: *id,
                        waited: QUIESCE_DRAIN * 2,
                    })?
                }
            };
            guards.push((*id, guard));
        }
        let mut sessions: Vec<(u64, &mut SessionState)> =
            guards.iter_mut().map(|(id, g)| (*id, &mut **g)).collect();
        let result = f(&mut sessions);
        drop(sessions);
        drop(guards);
        drop(map);
        Ok(result)
    }

    /// Replaces every session with restored ones (a restore from a file).
    /// `resumes_at` is each session's first expected message number, for
    /// a guest that goes on from the saved state.
    pub(crate) fn replace_sessions(
        self: &Arc<Self>,
        restored: Vec<(u64, ExecSessions, Option<u64>)>,
    ) {
        let mut map = self.sessions();
        for worker in map.values() {
            (worker.abort.lock().unwrap_or_else(|e| e.into_inner()))();
        }
        map.clear();
        for (id, exec, resumes_at) in restored {
            let mut state = SessionState::new(exec, true);
            state.resumes_at = resumes_at;
            let worker = self.spawn_worker(id, state);
            map.insert(id, worker);
        }
    }

    /// Points a session's aborter at its (new) executor sessions.
    pub(crate) fn refresh_aborters(&self) {
        for worker in self.sessions().values() {
            let state = worker.state.lock().unwrap_or_else(|e| e.into_inner());
            *worker.abort.lock().unwrap_or_else(|e| e.into_inner()) = state.exec.aborter();
        }
    }

    /// Waits until every accepted chain has been returned (the vring is
    /// stopping: `GET_VRING_BASE` must see them all used); gives up after
    /// `limit`. Returns whether it drained.
    pub fn wait_idle(&self, limit: std::time::Duration) -> bool {
        self.in_flight.wait_idle(limit)
    }

    /// Counts a chain about to be taken from the vring (see
    /// `in_flight.rs`): hand it to [`Vgpu::accept`] with the chain, or drop
    /// it once the chain was returned or none was there.
    pub fn chain_ticket(&self) -> in_flight::Ticket {
        self.in_flight.ticket()
    }

    /// Accepts a chain from the vring: counted in flight, by `ticket`,
    /// until returned.
    pub fn accept(
        self: &Arc<Self>,
        chain: ResolvedChain,
        done: Completion,
        ticket: in_flight::Ticket,
    ) {
        let limit = self.quota.limits.in_flight;
        let admitted = self.admitted.fetch_add(1, Ordering::AcqRel) as u64;
        if limit != 0 && admitted >= limit {
            self.admitted.fetch_sub(1, Ordering::AcqRel);
            crate::guest_warn!(self.warnings, "refusing a chain: {limit} already in flight");
            complete(chain, ReplyBuilder::refused(Status::OUT_OF_RESOURCES), done);
            drop(ticket);
            return;
        }
        let admitted = self.admitted.clone();
        self.submit(
            chain,
            Box::new(move |head, used| {
                admitted.fetch_sub(1, Ordering::AcqRel);
                done(head, used);
                drop(ticket);
            }),
        );
    }

    /// Hands a chain to its session's worker (or answers it right away).
    fn submit(self: &Arc<Self>, chain: ResolvedChain, done: Completion) {
        {
            let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(held) = held.as_mut() {
                held.push((chain, done));
                return;
            }
        }
        let header = match &chain.header {
            Ok(header) => *header,
            Err(e) => {
                crate::guest_warn!(self.warnings, "refusing batch: {e}");
                let reply = ReplyBuilder::refused(e.status());
                return complete(chain, reply, done);
            }
        };
        let batch_limit = self.quota.limits.batch_messages;
        if batch_limit != 0 && u64::from(header.count) > batch_limit {
            crate::guest_warn!(
                self.warnings,
                "refusing a batch of {} messages (limit {batch_limit})",
                header.count
            );
            return complete(chain, ReplyBuilder::refused(Status::OUT_OF_RESOURCES), done);
        }
        let (opens, closes) = opens_or_closes(&chain.request);
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
            let exec = ExecSessions::open(&self.executors(), &self.bounds());
            let worker = self.spawn_worker(header.session, SessionState::new(exec, false));
            sessions.insert(header.session, worker);
        }
        let worker = sessions.get(&header.session).expect("inserted above");
        if !opens && !closes && sessions.len() == 1 {
            // The VM's only session, idle: run the batch here, on the vring
            // thread, rather than pay a thread hand-off (unless it could wait
            // for the guest, which only this same thread could unblock).
            let (state, counts) = (worker.state.clone(), worker.counts.clone());
            if worker.queued.load(Ordering::Acquire) == 0 {
                drop(sessions);
                let Some(mut state) = state
                    .try_lock()
                    .ok()
                    .filter(|s| !s.exec.may_wait_on_the_guest())
                else {
                    return self.queue_job(header.session, chain, done);
                };
                let mut chain = chain;
                let reply = state.run_batch(&mut chain);
                state
                    .exec
                    .object_counts_into(&mut counts.lock().unwrap_or_else(|e| e.into_inner()));
                drop(state);
                return complete(chain, reply, done);
            }
        }
        if closes {
            // Unset user events would block the close behind a wait forever.
            (worker.abort.lock().unwrap_or_else(|e| e.into_inner()))();
        }
        drop(sessions);
        self.queue_job(header.session, chain, done);
    }

    /// Whether some session thread has a batch to run or is running one.
    pub fn has_queued_jobs(&self) -> bool {
        self.jobs_queued.load(Ordering::Acquire) > 0
    }

    /// Hands a batch to its session's thread (the session exists).
    fn queue_job(self: &Arc<Self>, session: u64, chain: ResolvedChain, done: Completion) {
        let mut sessions = self.sessions();
        let Some(worker) = sessions.get(&session) else {
            drop(sessions);
            return complete(
                chain,
                ReplyBuilder::refused(Status::DEVICE_NOT_AVAILABLE),
                done,
            );
        };
        worker.queued.fetch_add(1, Ordering::AcqRel);
        self.jobs_queued.fetch_add(1, Ordering::AcqRel);
        if let Err(mpsc::SendError(job)) = worker.jobs.send(Job { chain, done }) {
            worker.queued.fetch_sub(1, Ordering::AcqRel);
            self.jobs_queued.fetch_sub(1, Ordering::AcqRel);
            sessions.remove(&session);
            drop(sessions);
            complete(
                job.chain,
                ReplyBuilder::refused(Status::DEVICE_NOT_AVAILABLE),
                job.done,
            );
        }
    }

    fn spawn_worker(self: &Arc<Self>, session_id: u64, mut state: SessionState) -> SessionWorker {
        state.metrics = self.metrics.clone();
        let (tx, rx) = mpsc::channel::<Job>();
        let queued = Arc::new(AtomicUsize::new(0));
        let worker_queued = queued.clone();
        let vm_queued = self.jobs_queued.clone();
        let abort: Aborter = Arc::new(Mutex::new(state.exec.aborter()));
        let counts = Arc::new(Mutex::new(state.exec.object_counts()));
        let state = Arc::new(Mutex::new(state));
        let (worker_counts, worker_state) = (counts.clone(), state.clone());
        let vgpu = Arc::downgrade(self);
        let spawned = std::thread::Builder::new()
            .name(format!("vgpu-session-{session_id}"))
            .spawn(move || {
                let mut closed = false;
                while let Ok(mut job) = rx.recv() {
                    let mut state = worker_state.lock().unwrap_or_else(|e| e.into_inner());
                    let reply = state.run_batch(&mut job.chain);
                    state.exec.object_counts_into(
                        &mut worker_counts.lock().unwrap_or_else(|e| e.into_inner()),
                    );
                    closed = state.closed;
                    drop(state);
                    complete(job.chain, reply, job.done);
                    worker_queued.fetch_sub(1, Ordering::AcqRel);
                    vm_queued.fetch_sub(1, Ordering::AcqRel);
                    if closed {
                        break;
                    }
                }
                if closed {
                    if let Some(vgpu) = vgpu.upgrade() {
                        let mut sessions = vgpu.sessions();
                        if sessions
                            .get(&session_id)
                            .is_some_and(|w| Arc::ptr_eq(&w.state, &worker_state))
                        {
                            sessions.remove(&session_id);
                        }
                    }
                }
                log::debug!("session {session_id} ended");
                // The session's objects go with the last reference.
                drop(worker_state);
                crate::vgpu::heap::release_free_memory();
            });
        if let Err(e) = spawned {
            log::error!("cannot start a session thread: {e}");
        }
        SessionWorker {
            jobs: tx,
            queued,
            abort,
            counts,
            state,
        }
    }
}

impl Drop for Vgpu {
    fn drop(&mut self) {
        // Front-end gone: every worker ends after its current job, dropping
        // (and so releasing) everything its session holds.
        for worker in self.sessions().values() {
            (worker.abort.lock().unwrap_or_else(|e| e.into_inner()))();
        }
    }
}

/// Whether a batch opens its session (its first message) and whether it
/// closes one, in one walk of its messages.
fn opens_or_closes(request: &[u8]) -> (bool, bool) {
    let mut ops = opcodes(request);
    let first = ops.next();
    let opens = first == Some(opcode::OpenSession);
    let closes = first == Some(opcode::CloseSession) || ops.any(|op| op == opcode::CloseSession);
    (opens, closes)
}

/// Writes the reply into the chain and reports its used length.
pub(crate) fn complete(chain: ResolvedChain, reply: Vec<u8>, done: Completion) {
    let written = reply.len().min(chain.reply.len() as usize);
    if let Err(status) = chain.reply.write(0, &reply[..written]) {
        log::warn!("cannot write a reply: {status}");
    }
    chain.mark_written();
    let used = if chain.io.in_written > 0 {
        chain.reply.len() + chain.io.in_written
    } else {
        written as u64
    };
    done(chain.head, u32::try_from(used).unwrap_or(u32::MAX));
}
