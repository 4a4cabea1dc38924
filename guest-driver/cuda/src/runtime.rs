//! The library's state: one protocol session per process (opened by the
//! first call that needs it), what the device told about itself, function
//! parameter layouts, the device ranges handed out, and each thread's
//! context stack (which never leaves the guest: calls carry the context they
//! run in).

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use vgpu_protocol::cuda::{to_cuda_result, CuDeviceInfoReply, CuInitReply, CuIntReply};
use vgpu_protocol::messages::{CuDeviceInfo, CuInit, CuMemcpyDtoH, CuMemcpyHtoD};
use vgpu_protocol::{Request, Status, Wire};
use vgpu_transport::Client;

use crate::ffi::{result, CuResult};
use crate::function_answers::{FunctionAnswers, Question};
use crate::mapped::MappedRegions;

/// A kernel's parameters as (offset, size), and the packed buffer's size.
#[derive(Debug, Clone)]
pub struct FunctionInfo {
    pub params: Vec<(u32, u32)>,
    pub param_len: usize,
}

/// A context the library created.
#[derive(Debug, Clone, Copy)]
pub struct ContextInfo {
    pub flags: u32,
}

/// The primary context of device 0: its handle and retain count.
#[derive(Debug, Default)]
pub struct Primary {
    pub handle: u64,
    pub refs: u32,
    pub flags: u32,
}

pub struct Runtime {
    pub client: Client,
    pub init: CuInitReply,
    devices: Mutex<HashMap<u32, Arc<CuDeviceInfoReply>>>,
    pub functions: RwLock<HashMap<u64, Arc<FunctionInfo>>>,
    pub contexts: Mutex<HashMap<u64, ContextInfo>>,
    pub primary: Mutex<Primary>,
    /// Device ranges (allocations and globals): start → length.
    pub ranges: Mutex<BTreeMap<u64, u64>>,
    /// Host allocations made by `cuMemAllocHost`: address → layout size.
    pub host_allocations: Mutex<HashMap<usize, usize>>,
    /// Page-locked host ranges (`cuMemAllocHost`, `cuMemHostAlloc`,
    /// `cuMemHostRegister`): start → length. Copies into them may return
    /// before the data arrived, as CUDA allows only for such memory.
    pub pinned: Mutex<BTreeMap<usize, usize>>,
    /// The order and progress of stream work (`order.rs`).
    pub order: Mutex<crate::order::Order>,
    /// Page-locked allocations in the transport's shared heap, if it has
    /// one, and the backend's handle for each block (by start).
    pub heap: Mutex<Option<crate::heap::Heap>>,
    pub heap_blocks: Mutex<HashMap<usize, u64>>,
    /// Mapped host memory and the device memory that stands for it.
    pub mapped: Mutex<MappedRegions>,
    /// Whether `mapped` holds anything (read on every call).
    any_mapped: AtomicBool,
    /// Attributes and occupancy of functions, asked once each.
    pub function_answers: Mutex<FunctionAnswers>,
    /// The page synchronous copies' signals land in (`api/signal.rs`).
    pub signals: OnceLock<Option<crate::api::signal::Signals>>,
}

static RUNTIME: OnceLock<Result<Runtime, i32>> = OnceLock::new();
static INITIALIZED: AtomicBool = AtomicBool::new(false);

thread_local! {
    static CONTEXT_STACK: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

fn connect() -> Result<Runtime, i32> {
    let client = Client::from_env().map_err(|e| {
        log::error!("vgpu CUDA: {e}");
        result::ERROR_NO_DEVICE
    })?;
    let payload = client
        .call(Request::CuInit(CuInit { flags: 0 }))
        .map_err(to_cuda_result)?;
    let init = CuInitReply::from_bytes(&payload).map_err(|_| result::ERROR_UNKNOWN)?;
    Ok(Runtime {
        heap: Mutex::new(client.shared_heap().map(crate::heap::Heap::new)),
        heap_blocks: Mutex::new(HashMap::new()),
        client,
        init,
        devices: Mutex::new(HashMap::new()),
        functions: RwLock::new(HashMap::new()),
        contexts: Mutex::new(HashMap::new()),
        primary: Mutex::new(Primary::default()),
        ranges: Mutex::new(BTreeMap::new()),
        host_allocations: Mutex::new(HashMap::new()),
        pinned: Mutex::new(BTreeMap::new()),
        order: Mutex::new(crate::order::Order::default()),
        mapped: Mutex::new(MappedRegions::default()),
        any_mapped: AtomicBool::new(false),
        function_answers: Mutex::new(FunctionAnswers::default()),
        signals: OnceLock::new(),
    })
}

/// The session, opened on first use.
pub fn session() -> CuResult<&'static Runtime> {
    RUNTIME.get_or_init(connect).as_ref().map_err(|e| *e)
}

/// `cuInit`: opens the session.
pub fn init() -> CuResult<()> {
    session()?;
    INITIALIZED.store(true, Ordering::Release);
    Ok(())
}

/// The session, for calls that need `cuInit` first.
pub fn rt() -> CuResult<&'static Runtime> {
    if !INITIALIZED.load(Ordering::Acquire) {
        return Err(result::ERROR_NOT_INITIALIZED);
    }
    session()
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Maps a decode failure of a reply to a CUDA error.
pub fn decode<T: Wire>(payload: &[u8]) -> CuResult<T> {
    T::from_bytes(payload).map_err(|_| result::ERROR_UNKNOWN)
}

impl Runtime {
    /// A fresh handle; never 1 or 2, which name the legacy and per-thread
    /// default streams.
    pub fn new_handle(&self) -> u64 {
        loop {
            let handle = self.client.new_handle();
            if handle > 2 {
                return handle;
            }
        }
    }

    /// A synchronous call; a failure of an earlier deferred call surfaces
    /// here when this one succeeds, as asynchronous errors do in CUDA.
    pub fn call(&self, request: Request) -> CuResult<Vec<u8>> {
        self.mapped_to_device()?;
        let waited = waits_for_device(&request);
        let prints = carries_device_output(&request);
        let name = request.name();
        let started = crate::trace::start();
        let payload = self.client.call(request);
        crate::trace::done(started, crate::trace::Kind::RoundTrip, name);
        let mut payload = payload.map_err(to_cuda_result)?;
        if prints && !payload.is_empty() {
            self.print_device_output(std::mem::take(&mut payload))?;
        }
        self.deferred()?;
        if waited {
            self.mapped_to_host()?;
        }
        Ok(payload)
    }

    /// Writes what kernels printed to the program's standard output,
    /// asking for more while replies come back full (`DEVICE_OUTPUT_CHUNK`).
    fn print_device_output(&self, mut bytes: Vec<u8>) -> CuResult<()> {
        loop {
            crate::device_output::print(&bytes);
            if bytes.len() < vgpu_protocol::cuda::DEVICE_OUTPUT_CHUNK {
                return Ok(());
            }
            let ctx = current_context();
            bytes = self
                .client
                .call(Request::CuTakeDeviceOutput(
                    vgpu_protocol::messages::CuTakeDeviceOutput { ctx },
                ))
                .map_err(to_cuda_result)?;
        }
    }

    /// A batched call.
    pub fn defer(&self, request: Request) -> CuResult<()> {
        self.mapped_to_device()?;
        let name = request.name();
        let started = crate::trace::start();
        let deferred = self.client.defer(request);
        crate::trace::queued(started, name);
        deferred.map_err(to_cuda_result)
    }

    /// Records a mapped range (`mapped.rs`); false if it overlaps one.
    pub fn map_host(&self, host: usize, len: usize, device: u64, ctx: u64, owned: bool) -> bool {
        let mut mapped = lock(&self.mapped);
        let added = mapped.insert(host, len, device, ctx, owned);
        self.any_mapped.store(!mapped.is_empty(), Ordering::Release);
        added
    }

    /// Forgets the mapped range that starts at `host`.
    pub fn unmap_host(&self, host: usize) -> Option<crate::mapped::Region> {
        let mut mapped = lock(&self.mapped);
        let region = mapped.remove(host);
        self.any_mapped.store(!mapped.is_empty(), Ordering::Release);
        region
    }

    /// Queues, ahead of what comes next, a copy of each mapped range the
    /// host changed.
    /// Whether no mapped host memory is kept equal to device memory (a
    /// synchronization answered without the device skips the copies).
    pub fn maps_nothing(&self) -> bool {
        !self.any_mapped.load(Ordering::Acquire)
    }

    pub fn mapped_to_device(&self) -> CuResult<()> {
        if !self.any_mapped.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut mapped = lock(&self.mapped);
        // SAFETY: a range stays readable while it is in the table (it is
        // taken out, under this lock, before its memory is freed or
        // unregistered).
        for t in unsafe { mapped.changed_on_host() } {
            // SAFETY: as above; the lock is held until the bytes are queued.
            let data = unsafe { std::slice::from_raw_parts(t.host as *const u8, t.len) };
            crate::trace::batched("mapped: CuMemcpyHtoD");
            self.client
                .defer_with_out(data, |data, start| {
                    Request::CuMemcpyHtoD(CuMemcpyHtoD {
                        ctx: t.ctx,
                        stream: 0,
                        dst: t.device + start,
                        data,
                    })
                })
                .map_err(to_cuda_result)?;
        }
        Ok(())
    }

    /// Copies every mapped range back from the device, after a call that
    /// waited for it.
    pub fn mapped_to_host(&self) -> CuResult<()> {
        if !self.any_mapped.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut mapped = lock(&self.mapped);
        for t in mapped.all() {
            // SAFETY: a range in the table is writable host memory until it
            // is taken out under this lock, which is held here.
            let buf = unsafe { std::slice::from_raw_parts_mut(t.host as *mut u8, t.len) };
            let started = crate::trace::start();
            let copied = self.client.call_with_in(buf, |data, start| {
                Request::CuMemcpyDtoH(CuMemcpyDtoH {
                    ctx: t.ctx,
                    stream: 0,
                    src: t.device + start,
                    data,
                })
            });
            crate::trace::done(
                started,
                crate::trace::Kind::RoundTrip,
                "mapped: CuMemcpyDtoH",
            );
            copied.map_err(to_cuda_result)?;
            // SAFETY: as above.
            unsafe { mapped.agreed(t.host) };
        }
        Ok(())
    }

    /// The first error of a deferred call since the last look.
    pub fn deferred(&self) -> CuResult<()> {
        match self.client.take_deferred_error() {
            Some(status) => Err(to_cuda_result(status)),
            None => Ok(()),
        }
    }

    /// The device's answer (value, second value) to `question` about
    /// `function`: asked with `request` the first time, then kept
    /// (`function_answers.rs`).
    pub fn ask_function(
        &self,
        function: u64,
        question: Question,
        request: impl FnOnce() -> Request,
    ) -> CuResult<(i32, i32)> {
        if let Some(answer) = lock(&self.function_answers).get(function, question) {
            return Ok(answer);
        }
        let reply: CuIntReply = decode(&self.call(request())?)?;
        let answer = (reply.value, reply.second);
        lock(&self.function_answers).insert(function, question, answer);
        Ok(answer)
    }

    /// Everything the device said about itself (cached).
    pub fn device(&self, device: i32) -> CuResult<Arc<CuDeviceInfoReply>> {
        let index = u32::try_from(device).map_err(|_| result::ERROR_INVALID_DEVICE)?;
        if index >= self.init.device_count {
            return Err(result::ERROR_INVALID_DEVICE);
        }
        if let Some(info) = lock(&self.devices).get(&index) {
            return Ok(info.clone());
        }
        let payload = self.call(Request::CuDeviceInfo(CuDeviceInfo { device: index }))?;
        let info = Arc::new(decode::<CuDeviceInfoReply>(&payload)?);
        lock(&self.devices).insert(index, info.clone());
        Ok(info)
    }

    /// Whether `[ptr, ptr+len)` is device memory the library handed out.
    pub fn is_device(&self, ptr: u64, len: u64) -> bool {
        let ranges = lock(&self.ranges);
        match ranges.range(..=ptr).next_back() {
            Some((&start, &size)) => ptr
                .checked_add(len)
                .is_some_and(|end| end <= start.saturating_add(size.max(1))),
            None => false,
        }
    }

    /// Whether `[ptr, ptr+len)` lies in one block of the shared heap (the
    /// backend has it registered: copies there need no staging).
    pub fn in_heap(&self, ptr: usize, len: usize) -> bool {
        lock(&self.heap).as_ref().is_some_and(|h| h.holds(ptr, len))
    }

    /// Whether `[ptr, ptr+len)` lies in one page-locked host range.
    pub fn is_pinned(&self, ptr: usize, len: usize) -> bool {
        let pinned = lock(&self.pinned);
        match pinned.range(..=ptr).next_back() {
            Some((&start, &size)) => ptr
                .checked_add(len)
                .is_some_and(|end| end <= start.saturating_add(size)),
            None => false,
        }
    }

    /// Puts an operation on `stream` of `ctx` in the stream order and
    /// sends it (`submit` gets the order and the operation's number). The
    /// order stays locked until it is sent, so a synchronization that
    /// covers the operation is always sent after it.
    pub fn on_stream<T>(
        &self,
        ctx: u64,
        stream: u64,
        submit: impl FnOnce(&mut crate::order::Order, u64) -> CuResult<T>,
    ) -> CuResult<T> {
        let mut order = lock(&self.order);
        let seq = order.enqueue(ctx, stream);
        submit(&mut order, seq)
    }

    pub fn function(&self, handle: u64) -> CuResult<Arc<FunctionInfo>> {
        self.functions
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&handle)
            .cloned()
            .ok_or(result::ERROR_INVALID_HANDLE)
    }
}

/// Whether a call returns only once the device work it names is done (or,
/// for queries, answers whether it is): afterwards mapped memory is read
/// back. Copies to the host do the same in `api/memory.rs`.
/// Requests whose reply payload is what kernels printed meanwhile.
fn carries_device_output(request: &Request) -> bool {
    matches!(
        request,
        Request::CuCtxSynchronize(_)
            | Request::CuStreamSynchronize(_)
            | Request::CuEventSynchronize(_)
            | Request::CuCtxDestroy(_)
            | Request::CuPrimaryCtxRelease(_)
            | Request::CuPrimaryCtxReset(_)
    )
}

fn waits_for_device(request: &Request) -> bool {
    matches!(
        request,
        Request::CuCtxSynchronize(_)
            | Request::CuStreamSynchronize(_)
            | Request::CuStreamQuery(_)
            | Request::CuEventSynchronize(_)
            | Request::CuEventQuery(_)
    )
}

/// The calling thread's current context (0: none, also while the thread's
/// storage is being torn down: cudart releases its primary context from a
/// thread-exit destructor).
pub fn current_context() -> u64 {
    CONTEXT_STACK
        .try_with(|s| s.borrow().last().copied().unwrap_or(0))
        .unwrap_or(0)
}

/// The current context, which the call needs.
pub fn require_context() -> CuResult<u64> {
    match current_context() {
        0 => Err(result::ERROR_INVALID_CONTEXT),
        ctx => Ok(ctx),
    }
}

/// `cuCtxSetCurrent`: replaces the top of the stack (0: pops it).
pub fn set_current(ctx: u64) {
    let _ = CONTEXT_STACK.try_with(|s| {
        let mut stack = s.borrow_mut();
        stack.pop();
        if ctx != 0 {
            stack.push(ctx);
        }
    });
}

pub fn push_context(ctx: u64) {
    let _ = CONTEXT_STACK.try_with(|s| s.borrow_mut().push(ctx));
}

pub fn pop_context() -> Option<u64> {
    CONTEXT_STACK
        .try_with(|s| s.borrow_mut().pop())
        .ok()
        .flatten()
}

/// Takes a destroyed context off this thread's stack (if the thread still
/// has one).
pub fn forget_context(ctx: u64) {
    let _ = CONTEXT_STACK.try_with(|s| s.borrow_mut().retain(|c| *c != ctx));
}

/// Stream handles the application may pass for the NULL stream.
pub fn stream_handle(stream: u64) -> u64 {
    match stream {
        // CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: the context's NULL stream.
        1 | 2 => 0,
        other => other,
    }
}

/// A transport status as a CUDA result.
pub fn cuda_status(status: Status) -> i32 {
    to_cuda_result(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_stack_push_set_pop() {
        assert_eq!(current_context(), 0);
        assert_eq!(require_context(), Err(result::ERROR_INVALID_CONTEXT));
        push_context(5);
        push_context(6);
        set_current(7);
        assert_eq!(current_context(), 7);
        assert_eq!(pop_context(), Some(7));
        assert_eq!(current_context(), 5);
        forget_context(5);
        assert_eq!(current_context(), 0);
        set_current(0);
        assert_eq!(pop_context(), None);
    }

    #[test]
    fn default_stream_aliases_are_the_null_stream() {
        assert_eq!(stream_handle(1), 0);
        assert_eq!(stream_handle(2), 0);
        assert_eq!(stream_handle(9), 9);
    }

    #[test]
    fn mapped_memory_comes_back_after_waits_only() {
        use vgpu_protocol::messages::{CuEventQuery, CuMemGetInfo, CuStreamSynchronize};
        assert!(waits_for_device(&Request::CuStreamSynchronize(
            CuStreamSynchronize { ctx: 1, stream: 0 }
        )));
        assert!(waits_for_device(&Request::CuEventQuery(CuEventQuery {
            event: 3
        })));
        assert!(!waits_for_device(&Request::CuMemGetInfo(CuMemGetInfo {
            ctx: 1
        })));
    }

    #[test]
    fn calls_before_init_say_not_initialized() {
        assert_eq!(rt().err(), Some(result::ERROR_NOT_INITIALIZED));
    }
}
