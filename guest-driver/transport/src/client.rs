//! One protocol session: batching, sequence numbers, deferred errors.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use vgpu_protocol::frame::{
    BatchBuilder, BATCH_FLAG_STRICT, BATCH_HEADER_LEN, PROTOCOL_VERSION, RECORD_HEADER_LEN,
    REPLY_HEADER_LEN,
};
use vgpu_protocol::limits::MAX_BATCH_COUNT;
use vgpu_protocol::messages::{OpenSession, SessionOpened, SESSION_FLAG_PEER_MEMORY};
use vgpu_protocol::{decode_reply, DataRef, Request, Status, Wire};

use crate::{Submission, Transport};

/// Deferred messages that trigger a submit on their own.
const MAX_PENDING_MESSAGES: u32 = 1024;
/// Request bytes or staged data that trigger a submit on their own.
const MAX_PENDING_BYTES: usize = 1 << 20;
/// While the batch before is still running, a full batch grows up to the
/// protocol's message count and this many request bytes before the
/// program waits for the device (see `Inner::post_when_full`).
const MAX_GROWN_MESSAGES: u32 = MAX_BATCH_COUNT;
const MAX_GROWN_BYTES: usize = 4 << 20;
/// Reply room reserved for the payload of a synchronous call.
pub const DEFAULT_REPLY_ROOM: usize = 256 << 10;
/// Deferred out-data larger than this is sent at once instead of copied.
pub const MAX_STAGED_DATA: usize = 64 << 10;

/// Why a session could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the vgpu device")]
    Transport(#[source] std::io::Error),
    #[error("the backend refused the session: {0}")]
    Refused(Status),
}

struct Inner {
    transport: Box<dyn Transport>,
    pending: BatchBuilder,
    /// Out-data of deferred messages, copied.
    staging: Vec<u8>,
    next_seq: u64,
    deferred_error: Option<Status>,
    reply: Vec<u8>,
    /// Reply capacity of the deferred batch the transport still runs, if
    /// one is posted: it is finished before anything else is submitted.
    posted: Option<usize>,
    /// The request stream of the last batch, kept for its room.
    request: Vec<u8>,
    /// Measures a message before it joins the pending batch (kept for its
    /// room: every call is measured).
    probe: BatchBuilder,
}

/// A session with the device. Thread-safe; calls are serialized.
pub struct Client {
    inner: Mutex<Inner>,
    session: u64,
    strict: bool,
    next_handle: AtomicU64,
    opened: SessionOpened,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("session", &self.session)
            .finish()
    }
}

impl Client {
    /// `VGPU_SOCKET` set: loopback to that backend socket; otherwise the
    /// guest device node (`VGPU_DEVICE`, default `/dev/vgpu0`).
    /// `VGPU_STRICT=1` makes every call synchronous.
    pub fn from_env() -> Result<Client, ClientError> {
        let strict = std::env::var("VGPU_STRICT").is_ok_and(|v| v == "1");
        let transport: Box<dyn Transport> = match std::env::var_os("VGPU_SOCKET") {
            Some(path) => Box::new(
                crate::loopback::Loopback::connect(std::path::Path::new(&path))
                    .map_err(ClientError::Transport)?,
            ),
            None => {
                let path = std::env::var_os("VGPU_DEVICE").unwrap_or_else(|| "/dev/vgpu0".into());
                Box::new(
                    crate::devnode::DevNode::open(std::path::Path::new(&path))
                        .map_err(ClientError::Transport)?,
                )
            }
        };
        Client::open(transport, 1, strict)
    }

    /// Opens session `session` over `transport` (version negotiation).
    pub fn open(
        transport: Box<dyn Transport>,
        session: u64,
        strict: bool,
    ) -> Result<Client, ClientError> {
        let client = Client {
            inner: Mutex::new(Inner {
                transport,
                pending: BatchBuilder::new(if strict { BATCH_FLAG_STRICT } else { 0 }),
                staging: Vec::new(),
                next_seq: 1,
                deferred_error: None,
                reply: Vec::new(),
                posted: None,
                request: Vec::new(),
                probe: BatchBuilder::new(0),
            }),
            session,
            strict,
            next_handle: AtomicU64::new(1),
            opened: SessionOpened::default(),
        };
        let request = OpenSession {
            min_version: PROTOCOL_VERSION.into(),
            max_version: PROTOCOL_VERSION.into(),
            flags: 0,
        };
        let payload = client.call(request.into()).map_err(ClientError::Refused)?;
        let opened = SessionOpened::from_bytes(&payload)
            .map_err(|_| ClientError::Refused(Status::INVALID_VALUE))?;
        if opened.flags & SESSION_FLAG_PEER_MEMORY != 0 {
            client.lock().transport.enable_peer_memory();
        }
        Ok(Client { opened, ..client })
    }

    pub fn session(&self) -> u64 {
        self.session
    }

    /// What the backend answered to `OpenSession`.
    pub fn session_info(&self) -> &SessionOpened {
        &self.opened
    }

    /// The largest request (header included) the transport carries.
    pub fn max_request_len(&self) -> usize {
        self.lock().transport.max_request_len()
    }

    /// Host addresses of the transport's page-locked heap, if it has one
    /// (see [`crate::Transport::shared_heap`]).
    pub fn shared_heap(&self) -> Option<std::ops::Range<usize>> {
        self.lock().transport.shared_heap()
    }

    pub fn is_strict(&self) -> bool {
        self.strict
    }

    /// A fresh nonzero handle of this session's namespace.
    pub fn new_handle(&self) -> u64 {
        self.next_handle.fetch_add(1, Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves a consistent batch behind
        // (pushes are all-or-nothing), so poisoning is ignored.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a call whose result the caller does not need now.
    pub fn defer(&self, request: Request) -> Result<(), Status> {
        if self.strict {
            return self.call(request).map(drop);
        }
        let mut inner = self.lock();
        let seq = inner.take_seq();
        inner.push_deferred(self.session, seq, &request)?;
        inner.post_when_full(self.session)
    }

    /// Queues a call with bulk data, copied into the batch. Large data is
    /// sent at once instead (no copy).
    pub fn defer_with_out(
        &self,
        bytes: &[u8],
        make: impl Fn(DataRef, u64) -> Request,
    ) -> Result<(), Status> {
        if self.strict || bytes.len() > MAX_STAGED_DATA {
            return self.call_with_out(bytes, make).map(drop);
        }
        let mut inner = self.lock();
        // Make room first: a submit empties the staging area, which would
        // move this call's data. The offset does not change the size.
        let len = bytes.len() as u64;
        inner.make_room_for(self.session, &make(DataRef { offset: 0, len }, 0))?;
        let data = DataRef {
            offset: inner.staging.len() as u64,
            len,
        };
        inner.staging.extend_from_slice(bytes);
        let request = make(data, 0);
        let seq = inner.take_seq();
        inner.pending.push(seq, &request);
        inner.post_when_full(self.session)
    }

    /// Submits the pending batch and this call; returns the call's reply
    /// payload or its error status.
    pub fn call(&self, request: Request) -> Result<Vec<u8>, Status> {
        self.call_with_reply_room(request, DEFAULT_REPLY_ROOM)
    }

    /// As `call`, reserving `room` bytes for the reply payload.
    pub fn call_with_reply_room(&self, request: Request, room: usize) -> Result<Vec<u8>, Status> {
        let mut inner = self.lock();
        inner.submit(self.session, Some((request, room)), DataIo::None)
    }

    /// `call`, then `then` under the same hold of the session, so that no
    /// request of another thread comes between the reply and `then`.
    /// Returns the reply payload, `then`'s result, and the session's
    /// quiet mark after them (see [`Client::run_if_quiet`]).
    /// `then` runs only while the transport is still on `connection` (see
    /// [`Client::connection`]); else its result is `None`.
    pub fn call_then<R>(
        &self,
        request: Request,
        connection: u64,
        then: impl FnOnce() -> R,
    ) -> Result<(Vec<u8>, Option<R>, u64), Status> {
        let mut inner = self.lock();
        let payload = inner.submit(
            self.session,
            Some((request, DEFAULT_REPLY_ROOM)),
            DataIo::None,
        )?;
        let result = (inner.transport.connection() == connection).then(then);
        Ok((payload, result, inner.next_seq))
    }

    /// Runs `f` under the session's hold when no request was made (sent or
    /// batched) since the quiet mark `mark` was taken and the transport is
    /// still on `connection`; `None` otherwise. A guest library uses it to
    /// act on what it knew at `mark` (say, that a queue had drained)
    /// without a round trip.
    pub fn run_if_quiet<R>(&self, mark: u64, connection: u64, f: impl FnOnce() -> R) -> Option<R> {
        let inner = self.lock();
        (inner.next_seq == mark && inner.transport.connection() == connection).then(f)
    }

    /// The transport's connection to the backend now (see
    /// [`Transport::connection`]).
    pub fn connection(&self) -> u64 {
        self.lock().transport.connection()
    }

    /// Sends `bytes` to the device, in chunks the transport can carry:
    /// `make(data, chunk_start)` builds the request for the chunk that begins
    /// `chunk_start` bytes into `bytes`. Returns the last chunk's reply.
    pub fn call_with_out(
        &self,
        bytes: &[u8],
        make: impl Fn(DataRef, u64) -> Request,
    ) -> Result<Vec<u8>, Status> {
        let mut inner = self.lock();
        let chunk = inner.chunk_len_for(bytes);
        let mut start = 0usize;
        loop {
            let end = (start + chunk).min(bytes.len());
            let data = DataRef {
                offset: inner.staging.len() as u64,
                len: (end - start) as u64,
            };
            let request = make(data, start as u64);
            let payload = inner.submit(
                self.session,
                Some((request, DEFAULT_REPLY_ROOM)),
                DataIo::Out(&bytes[start..end]),
            )?;
            start = end;
            if start >= bytes.len() {
                return Ok(payload);
            }
        }
    }

    /// Receives bulk data from the device into `buf`, in chunks, as
    /// `call_with_out` sends it.
    pub fn call_with_in(
        &self,
        buf: &mut [u8],
        make: impl Fn(DataRef, u64) -> Request,
    ) -> Result<Vec<u8>, Status> {
        let mut inner = self.lock();
        let chunk = inner.chunk_len_for(buf);
        let mut start = 0usize;
        let total = buf.len();
        loop {
            let end = (start + chunk).min(total);
            let data = DataRef {
                offset: 0,
                len: (end - start) as u64,
            };
            let request = make(data, start as u64);
            let payload = inner.submit(
                self.session,
                Some((request, DEFAULT_REPLY_ROOM)),
                DataIo::In(&mut buf[start..end]),
            )?;
            start = end;
            if start >= total {
                return Ok(payload);
            }
        }
    }

    /// Submits what is pending; returns the first deferred error since the
    /// last synchronization point.
    pub fn flush(&self) -> Result<(), Status> {
        let mut inner = self.lock();
        if !inner.pending.is_empty() {
            inner.submit(self.session, None, DataIo::None)?;
        }
        inner.finish_posted()?;
        match inner.deferred_error.take() {
            Some(status) => Err(status),
            None => Ok(()),
        }
    }

    /// The first error of a deferred call since the last take.
    pub fn take_deferred_error(&self) -> Option<Status> {
        let mut inner = self.lock();
        if let Err(status) = inner.finish_posted() {
            inner.deferred_error.get_or_insert(status);
        }
        inner.deferred_error.take()
    }
}

enum DataIo<'a> {
    None,
    Out(&'a [u8]),
    In(&'a mut [u8]),
}

impl Inner {
    fn take_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// The largest piece of `buf` one call moves: all of it when it lies
    /// in the page-locked heap (it travels in place), else what the data
    /// area takes, leaving room for data staged by deferred calls that go
    /// first.
    fn chunk_len_for(&self, buf: &[u8]) -> usize {
        let start = buf.as_ptr() as usize;
        if let Some(heap) = self.transport.shared_heap() {
            if heap.start <= start && start + buf.len() <= heap.end {
                return buf.len().max(1);
            }
        }
        (self.transport.max_data_len() / 2).max(4096)
    }

    /// Sends the pending deferred messages without waiting for them, where
    /// the transport can: the program goes on encoding while the device
    /// runs them. Their errors are kept when the batch is finished (before
    /// the next submission, or at a synchronization point).
    fn post(&mut self, session: u64) -> Result<(), Status> {
        self.finish_posted()?;
        let (request, staging, capacity) = self.seal_batch(session, 0);
        let staged = [&staging[..]];
        let out = if staging.is_empty() {
            &[][..]
        } else {
            &staged[..]
        };
        let posted = self.transport.post(Submission {
            request: &request,
            out,
            reply: &mut self.reply[..capacity],
            in_: &mut [],
        });
        self.request = request;
        match posted {
            Ok(None) => {
                self.posted = Some(capacity);
                Ok(())
            }
            Ok(Some(written)) => self.note_reply(written.min(capacity)),
            Err(e) => Err(transport_failed(e)),
        }
    }

    /// The pending messages as one request stream with room for their
    /// replies and `room` bytes more, and their staged out-data; empties
    /// both. The reply buffer is grown (and zeroed) only when a batch needs
    /// more room than any before: zeroing 256 KiB on every call cost 3 µs.
    /// Only the bytes the device reports written are read back. The
    /// request stream is built in the last one's room: hand it back to
    /// `self.request` once sent.
    fn seal_batch(&mut self, session: u64, room: usize) -> (Vec<u8>, Vec<u8>, usize) {
        let count = self.pending.len() as usize;
        let capacity = REPLY_HEADER_LEN + count * (RECORD_HEADER_LEN + 8) + room;
        let mut request = std::mem::take(&mut self.request);
        self.pending
            .finish_into(session, capacity as u32, &mut request);
        self.pending.clear();
        let staging = std::mem::take(&mut self.staging);
        if self.reply.len() < capacity {
            self.reply.resize(capacity, 0);
        }
        (request, staging, capacity)
    }

    /// Waits for the posted batch, if any, and keeps its errors.
    fn finish_posted(&mut self) -> Result<(), Status> {
        let Some(capacity) = self.posted.take() else {
            return Ok(());
        };
        if self.reply.len() < capacity {
            self.reply.resize(capacity, 0);
        }
        match self.transport.finish_posted(&mut self.reply[..capacity]) {
            Ok(written) => self.note_reply(written.min(capacity)),
            Err(e) => Err(transport_failed(e)),
        }
    }

    /// The errors of a batch of deferred calls, from its reply.
    fn note_reply(&mut self, written: usize) -> Result<(), Status> {
        let reply = match decode_reply(&self.reply[..written]) {
            Ok(reply) => reply,
            Err(e) => {
                log::error!("malformed reply from the device: {e}");
                return Err(Status::DEVICE_NOT_AVAILABLE);
            }
        };
        if !reply.status.is_success() {
            self.note_deferred(reply.status);
        }
        self.note_deferred(reply.earlier);
        for record in reply.records {
            self.note_deferred(record.status);
        }
        Ok(())
    }

    fn note_deferred(&mut self, status: Status) {
        if !status.is_success() {
            log::debug!("deferred call failed: {status}");
            self.deferred_error.get_or_insert(status);
        }
    }

    /// Sends the pending batch once it is full. When the batch before has
    /// finished (or none is posted) that is at once; while it still runs,
    /// the pending batch keeps growing, up to `MAX_GROWN_*`, and is sent by
    /// the first deferral that finds it finished. The program goes on
    /// encoding instead of sleeping until the device is done, and the
    /// device finds the next batch waiting: with one batch posted at a
    /// time, every wait and wake-up between two batches was time in which
    /// the backend issued nothing.
    fn post_when_full(&mut self, session: u64) -> Result<(), Status> {
        let count = self.pending.len();
        let request = self.pending.encoded_len();
        let staged = self.staging.len();
        if count < MAX_PENDING_MESSAGES && request < MAX_PENDING_BYTES && staged < MAX_PENDING_BYTES
        {
            return Ok(());
        }
        let at_limit = count >= MAX_GROWN_MESSAGES
            || request >= MAX_GROWN_BYTES
            || staged >= MAX_PENDING_BYTES;
        if !at_limit && self.posted.is_some() && !self.transport.posted_finished() {
            return Ok(());
        }
        self.post(session)
    }

    /// Appends a deferred message, encoding it once: when it makes the
    /// batch too large for the transport, it is taken out again, the batch
    /// is sent, and it starts the next one.
    fn push_deferred(&mut self, session: u64, seq: u64, request: &Request) -> Result<(), Status> {
        let mark = self.pending.mark();
        let before = self.pending.encoded_len();
        self.pending.push(seq, request);
        let max = self.transport.max_request_len();
        if self.pending.encoded_len() <= max {
            return Ok(());
        }
        let alone = self.pending.encoded_len() - before + BATCH_HEADER_LEN;
        self.pending.truncate(mark);
        if alone > max {
            log::error!(
                "a {} message of {alone} bytes exceeds the device's request limit of {max} bytes",
                request.name(),
            );
            return Err(Status::OUT_OF_RESOURCES);
        }
        self.post(session)?;
        self.pending.push(seq, request);
        Ok(())
    }

    /// Submits what is pending when `request` would not fit beside it in one
    /// request stream; refuses a request that fits in none.
    fn make_room_for(&mut self, session: u64, request: &Request) -> Result<(), Status> {
        self.probe.clear();
        self.probe.push(0, request);
        let needed = self.probe.encoded_len();
        let max = self.transport.max_request_len();
        if needed > max {
            log::error!(
                "a {} message of {needed} bytes exceeds the device's request limit of {max} bytes",
                request.name(),
            );
            return Err(Status::OUT_OF_RESOURCES);
        }
        if !self.pending.is_empty() && self.pending.encoded_len() + needed > max {
            self.post(session)?;
        }
        Ok(())
    }

    /// Sends the pending messages and, when given, one synchronous call;
    /// returns that call's payload (empty without a call).
    fn submit(
        &mut self,
        session: u64,
        call: Option<(Request, usize)>,
        data: DataIo<'_>,
    ) -> Result<Vec<u8>, Status> {
        if let Some((request, _)) = &call {
            self.make_room_for(session, request)?;
        }
        self.finish_posted()?;
        let call_seq = match &call {
            Some((request, _)) => {
                let seq = self.take_seq();
                self.pending.push(seq, request);
                Some(seq)
            }
            None => None,
        };
        let room = call.as_ref().map_or(0, |(_, room)| *room);
        let (request, staging, capacity) = self.seal_batch(session, room);
        // At most two out-data segments and one in-data one, on the stack.
        let mut out: [&[u8]; 2] = [&[], &[]];
        let mut outs = 0;
        if !staging.is_empty() {
            out[outs] = &staging;
            outs += 1;
        }
        let mut in_: [&mut [u8]; 1] = [&mut []];
        let mut ins = 0;
        match data {
            DataIo::None => {}
            DataIo::Out(bytes) => {
                out[outs] = bytes;
                outs += 1;
            }
            DataIo::In(buf) => {
                in_[0] = buf;
                ins = 1;
            }
        }
        let result = self.transport.submit(Submission {
            request: &request,
            out: &out[..outs],
            reply: &mut self.reply[..capacity],
            in_: &mut in_[..ins],
        });
        self.request = request;
        let written = result.map_err(transport_failed)?;
        let reply = match decode_reply(&self.reply[..written.min(capacity)]) {
            Ok(reply) => reply,
            Err(e) => {
                log::error!("malformed reply from the device: {e}");
                return Err(Status::DEVICE_NOT_AVAILABLE);
            }
        };
        if !reply.status.is_success() {
            return Err(reply.status);
        }
        self.note_deferred(reply.earlier);
        let mut call_result = Err(Status::OUT_OF_RESOURCES);
        for record in reply.records {
            if Some(record.seq) == call_seq {
                call_result = if record.status.is_success() {
                    Ok(record.payload)
                } else {
                    Err(record.status)
                };
            } else {
                self.note_deferred(record.status);
            }
        }
        if call_seq.is_some() {
            call_result
        } else {
            Ok(Vec::new())
        }
    }
}

/// A transport error as the calls see it: the device is gone.
fn transport_failed(e: std::io::Error) -> Status {
    log::error!("vgpu transport failed: {e}");
    Status::DEVICE_NOT_AVAILABLE
}
