//! One guest process's session: its part on each executor, and the batch
//! loop that runs its messages in order.

use std::sync::Arc;

use vgpu_protocol::frame::{frame, ReplyBuilder, PROTOCOL_VERSION};
use vgpu_protocol::limits::{MAX_REPLY_LEN, MAX_REQUEST_LEN};
use vgpu_protocol::messages::{SessionOpened, SessionStatsReply};
use vgpu_protocol::{Request, Status, Wire};

use crate::chain::ResolvedChain;
use crate::executor::{ExecSession, Executor, LateOutcomes};
use crate::quota::Quota;
use crate::vgpu::profile::{self, CallProfile};
use vgpu_migration::Profile;

/// What every session of one VM shares: its quota and its profile.
pub struct VmBounds {
    pub quota: Arc<Quota>,
    pub profile: Arc<Profile>,
}

impl VmBounds {
    /// Holds `session` to this VM's quota and profile.
    pub fn apply(&self, session: &mut dyn ExecSession) {
        session.set_quota(self.quota.clone());
        session.set_profile(self.profile.clone());
    }
}

/// One session's part on each executor.
pub struct ExecSessions {
    pub executors: Vec<Arc<dyn Executor>>,
    pub sessions: Vec<Box<dyn ExecSession>>,
    /// Per executor session, the batch's messages it ran (their index in
    /// the batch), to answer the right message when one it finished on a
    /// thread of its own failed.
    served: Vec<Vec<usize>>,
}

impl ExecSessions {
    pub fn open(executors: &[Arc<dyn Executor>], vm: &VmBounds) -> ExecSessions {
        let mut sessions: Vec<Box<dyn ExecSession>> =
            executors.iter().map(|e| e.open_session()).collect();
        sessions.iter_mut().for_each(|s| vm.apply(s.as_mut()));
        ExecSessions::from_parts(executors.to_vec(), sessions)
    }

    /// One session part per executor, as given.
    pub fn from_parts(
        executors: Vec<Arc<dyn Executor>>,
        sessions: Vec<Box<dyn ExecSession>>,
    ) -> ExecSessions {
        ExecSessions {
            served: vec![Vec::new(); sessions.len()],
            executors,
            sessions,
        }
    }

    /// Runs message `index` of the batch.
    fn execute(
        &mut self,
        index: usize,
        request: &Request,
        io: &mut crate::chain::GuestIo,
    ) -> Result<Vec<u8>, Status> {
        let opcode = request.opcode();
        match self.executors.iter().position(|e| e.serves(opcode)) {
            Some(i) => {
                if let Some(served) = self.served.get_mut(i) {
                    served.push(index);
                }
                let result = self.sessions[i].execute(request, io);
                // In-data bounced for the peer's memory reaches it now;
                // if it cannot, the call failed.
                let flushed = io.flush_bounced_in();
                result.and_then(|payload| flushed.map(|()| payload))
            }
            // No device of that API on this host (e.g. CUDA calls on a
            // host without a GPU).
            None => Err(Status::DEVICE_NOT_AVAILABLE),
        }
    }

    /// Ends a batch: what became of work the executor sessions run on
    /// threads of their own; failed calls by their index in the batch.
    pub fn finish_batch(&mut self) -> LateOutcomes {
        let mut outcomes = LateOutcomes::default();
        for (session, served) in self.sessions.iter_mut().zip(self.served.iter_mut()) {
            let late = session.finish_batch();
            for (call, status) in late.failed {
                match served.get(call) {
                    Some(&index) => outcomes.failed.push((index, status)),
                    None => {
                        log::warn!("an executor reported a failure of call {call} it never ran")
                    }
                }
            }
            outcomes.earlier = outcomes.earlier.or(late.earlier);
            served.clear();
        }
        outcomes
    }

    pub fn object_counts(&self) -> Vec<u64> {
        let mut total = Vec::new();
        self.object_counts_into(&mut total);
        total
    }

    /// [`Self::object_counts`] into `total`, reusing its room (the vring
    /// thread refreshes a session's counts after every batch).
    pub fn object_counts_into(&self, total: &mut Vec<u64>) {
        total.clear();
        total.resize(vgpu_protocol::ObjectKind::ALL.len(), 0);
        for session in &self.sessions {
            session.add_object_counts(total);
        }
    }

    /// Whether any of the session's calls could wait for the guest.
    pub fn may_wait_on_the_guest(&self) -> bool {
        self.sessions.iter().any(|s| s.may_wait_on_the_guest())
    }

    pub fn aborter(&self) -> Box<dyn Fn() + Send + Sync> {
        let aborters: Vec<_> = self.sessions.iter().map(|s| s.aborter()).collect();
        Box::new(move || aborters.iter().for_each(|abort| abort()))
    }
}

pub struct SessionState {
    pub exec: ExecSessions,
    pub opened: bool,
    pub closed: bool,
    /// The sequence number of the last message run.
    pub last_seq: u64,
    /// After a restart or migration from saved state: the number the
    /// guest's next message must carry. Any other means the guest sent
    /// messages the state does not hold.
    pub resumes_at: Option<u64>,
    /// The objects are older than the guest's view of them: every call but
    /// a close fails rather than compute on them.
    pub stale: bool,
    /// The VM's counters (its own until the vGPU hands it the VM's).
    pub metrics: Arc<crate::vgpu::metrics::VmMetrics>,
    /// Where the time goes, with `VGPU_BACKEND_PROFILE=1` (`profile.rs`).
    profile: Option<Box<CallProfile>>,
}

impl Drop for SessionState {
    fn drop(&mut self) {
        if let Some(p) = &self.profile {
            log::info!("{}", p.report());
        }
    }
}

impl SessionState {
    pub fn new(exec: ExecSessions, opened: bool) -> SessionState {
        SessionState {
            exec,
            opened,
            closed: false,
            last_seq: 0,
            resumes_at: None,
            stale: false,
            metrics: Default::default(),
            profile: profile::enabled().then(Default::default),
        }
    }

    /// Notes a message's sequence number; the first after a resume must
    /// follow the saved state's last one (a stale session can still close).
    fn check_continuity(&mut self, seq: u64) {
        if let Some(expected) = self.resumes_at.take() {
            if seq != expected {
                log::warn!(
                    "restored session: the guest's next message is number {seq}, the saved \
                     state ends before {expected}; its calls after the state was taken are \
                     lost, so the session fails from now on"
                );
                self.stale = true;
            }
        }
        self.last_seq = self.last_seq.max(seq);
    }

    pub fn run_batch(&mut self, chain: &mut ResolvedChain) -> Vec<u8> {
        let started = profile::start();
        // The request bytes leave the chain while its messages run (they
        // are decoded one at a time, borrowing them; a call borrows the
        // chain for its data) and go back before it is answered.
        let request = std::mem::take(&mut chain.request);
        let reply = self.run_framed(&request, chain, started);
        chain.request = request;
        reply
    }

    fn run_framed(
        &mut self,
        request: &[u8],
        chain: &mut ResolvedChain,
        started: Option<std::time::Instant>,
    ) -> Vec<u8> {
        let batch = match frame(request) {
            Ok(batch) => batch,
            Err(e) => {
                log::debug!("refusing batch: {e}");
                return ReplyBuilder::refused(e.status());
            }
        };
        if let (Some(p), Some(t)) = (self.profile.as_mut(), started) {
            p.note_phase("decode", t.elapsed());
        }
        let mut reply = ReplyBuilder::new(batch.header.reply_capacity);
        // Counted here, published once per batch: a few atomic adds per
        // batch rather than per message.
        let mut counts = crate::vgpu::metrics::BatchCounts::default();
        for (index, message) in batch.messages().enumerate() {
            self.check_continuity(message.seq);
            let result = match message.body {
                Err(e) => {
                    log::debug!("message {:#x} does not decode: {e}", message.opcode);
                    Err(e.status())
                }
                Ok(request) => {
                    let call_started = profile::start();
                    let result = self.run(index, &request, chain);
                    if let Err(status) = &result {
                        // What the guest asked for that failed, for whoever
                        // reads debug logs (the guest sees the status).
                        log::debug!("{} failed: {status}", request.name());
                    }
                    if let (Some(p), Some(t)) = (self.profile.as_mut(), call_started) {
                        p.note_call(request.name(), t.elapsed());
                    }
                    result
                }
            };
            counts.note_call(message.opcode, result.is_ok());
            match result {
                Ok(payload) => reply.push(message.opcode, message.seq, Status::SUCCESS, &payload),
                Err(status) => reply.push(message.opcode, message.seq, status, &[]),
            }
        }
        let finishing = profile::start();
        let late = self.exec.finish_batch();
        for (index, status) in late.failed {
            if let Some(op) = reply.set_status(index, status) {
                counts.note_late_failure(op);
            }
        }
        if let Some(status) = late.earlier {
            reply.set_earlier(status);
        }
        counts.from_guest = chain.io.moved_out.get();
        counts.to_guest = chain.io.moved_in;
        self.metrics.note_batch(&counts);
        let reply = reply.finish();
        if let (Some(p), Some(t)) = (self.profile.as_mut(), finishing) {
            p.note_phase("finish and reply", t.elapsed());
        }
        if let (Some(p), Some(t)) = (self.profile.as_mut(), started) {
            p.note_batch(t.elapsed());
        }
        reply
    }

    fn run(
        &mut self,
        index: usize,
        request: &Request,
        chain: &mut ResolvedChain,
    ) -> Result<Vec<u8>, Status> {
        if self.closed {
            return Err(Status::INVALID_OPERATION);
        }
        if self.stale && !matches!(request, Request::CloseSession(_)) {
            return Err(Status::DEVICE_NOT_AVAILABLE);
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
                    flags: vgpu_protocol::messages::SESSION_FLAG_PLACED_BUFFERS
                        | if chain.io.peer.is_some() {
                            vgpu_protocol::messages::SESSION_FLAG_PEER_MEMORY
                        } else {
                            0
                        },
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
            _ => self.exec.execute(index, request, &mut chain.io),
        }
    }
}
