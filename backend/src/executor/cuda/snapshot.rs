//! Save a CUDA session into the state model, and rebuild one from it on
//! this executor's GPU.
//!
//! Allocations come back at the addresses the guest holds (the arena is
//! reserved at the same fixed address in every backend, and each
//! allocation is mapped where it was). Modules are reloaded from their
//! image: PTX, and fat binaries with PTX, are JIT-compiled for the GPU at
//! hand; a module whose code cannot run here is refused before anything is
//! built. Globals the guest looked up keep the address it was given; when
//! the reloaded module put the variable elsewhere, the session translates
//! that address in copies, fills and kernel parameters. Objects the guest
//! released but another object still holds (a destroyed context whose
//! module lives on) are saved too, under ids of their own.
//!
//! A live checkpoint's pause copies the allocations written since their
//! round copy on the device (`shadow.rs`, within a budget) and reads those
//! copies after the guest resumed: a CUDA kernel writes through raw
//! pointers, so OpenCL's copy-on-write at the first write would have to
//! preserve every allocation at the first launch anyway, and the GPU
//! copies them in about a millisecond per GiB. Module globals are read in
//! the pause.
//!
//! Save and restore run on the thread that asked for them (the control
//! connection, the device-state transfer, start-up), never the session's
//! own, so they set contexts current themselves and leave that thread with
//! none.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::sys;
use vgpu_migration as m;
use vgpu_protocol::cuda::{check_image, result, ImageKind, MAX_PARAM_BUFFER};
use vgpu_protocol::Status;

use super::driver::{self, check, set_current};
use super::image;
use super::launch::param_layout;
use super::memory::Allocation;
use super::objects::*;
use super::session::CudaSession;
use super::DeviceShared;
use crate::executor::written::WriteMark;
use crate::executor::{BufferSink, BufferSource, RestoredSession, SavedSession, SnapshotError};

const COMPUTE_CAPABILITY_MAJOR: usize = 75;
const COMPUTE_CAPABILITY_MINOR: usize = 76;

/// The GPU as a snapshot names it.
pub fn device(shared: &DeviceShared) -> m::CudaDevice {
    let attribute = |i: usize| {
        shared
            .info
            .attributes
            .get(i)
            .and_then(|v| u32::try_from(*v).ok())
            .unwrap_or(0)
    };
    m::CudaDevice {
        name: String::from_utf8_lossy(&shared.info.name).into_owned(),
        uuid: shared.info.uuid.clone(),
        arch: m::CudaArch::new(
            attribute(COMPUTE_CAPABILITY_MAJOR),
            attribute(COMPUTE_CAPABILITY_MINOR),
        ),
        total_mem: shared.info.total_mem,
        driver_version: shared.driver_version,
    }
}

fn to_kind(kind: ImageKind) -> m::CudaImageKind {
    match kind {
        ImageKind::Ptx => m::CudaImageKind::Ptx,
        ImageKind::Cubin => m::CudaImageKind::Cubin,
        ImageKind::Fatbin => m::CudaImageKind::Fatbin,
    }
}

fn from_kind(kind: m::CudaImageKind) -> ImageKind {
    match kind {
        m::CudaImageKind::Ptx => ImageKind::Ptx,
        m::CudaImageKind::Cubin => ImageKind::Cubin,
        m::CudaImageKind::Fatbin => ImageKind::Fatbin,
    }
}

/// Ids of one object kind: guest handles for held objects, fresh ids for
/// the rest.
struct Ids<T> {
    by_ptr: HashMap<*const T, u64>,
    used: HashSet<u64>,
    order: Vec<(u64, Arc<T>, Option<m::GuestRef>)>,
    next_hidden: u64,
}

impl<T> Ids<T> {
    fn new<'a>(held: impl Iterator<Item = (u64, &'a Arc<T>, u32)>) -> Self
    where
        T: 'a,
    {
        let mut ids = Ids {
            by_ptr: HashMap::new(),
            used: HashSet::new(),
            order: Vec::new(),
            next_hidden: 1 << 63,
        };
        let mut held: Vec<_> = held.collect();
        held.sort_by_key(|(handle, _, _)| *handle);
        for (handle, object, refs) in held {
            ids.by_ptr.insert(Arc::as_ptr(object), handle);
            ids.used.insert(handle);
            ids.order
                .push((handle, object.clone(), Some(m::GuestRef { handle, refs })));
        }
        ids
    }

    /// The id of `object`, adding it as a released object when unknown.
    fn id(&mut self, object: &Arc<T>) -> u64 {
        if let Some(id) = self.by_ptr.get(&Arc::as_ptr(object)) {
            return *id;
        }
        while self.used.contains(&self.next_hidden) {
            self.next_hidden += 1;
        }
        let id = self.next_hidden;
        self.used.insert(id);
        self.by_ptr.insert(Arc::as_ptr(object), id);
        self.order.push((id, object.clone(), None));
        id
    }
}

/// Copies between the host and device memory of the session, with `ctx`
/// current on the calling thread.
fn copy_out(
    ctx: sys::CUcontext,
    ptr: u64,
    size: u64,
    offset: u64,
    buf: &mut [u8],
) -> Result<(), Status> {
    let len = buf.len() as u64;
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(Status(result::ERROR_INVALID_VALUE));
    }
    set_current(ctx)?;
    // SAFETY: `[ptr+offset, +len)` lies inside a live allocation or global
    // of `size` bytes (checked above; the holder keeps it mapped), `buf` is
    // valid for `len` bytes of writes, and the copy is synchronous.
    check(unsafe { sys::cuMemcpyDtoH_v2(buf.as_mut_ptr().cast(), ptr + offset, buf.len()) })
}

fn copy_in(
    ctx: sys::CUcontext,
    ptr: u64,
    size: u64,
    offset: u64,
    data: &[u8],
) -> Result<(), Status> {
    let len = data.len() as u64;
    if offset.checked_add(len).is_none_or(|end| end > size) {
        return Err(Status(result::ERROR_INVALID_VALUE));
    }
    set_current(ctx)?;
    // SAFETY: as in `copy_out`, with `data` read instead.
    check(unsafe { sys::cuMemcpyHtoD_v2(ptr + offset, data.as_ptr().cast(), data.len()) })
}

/// An allocation's contents; the allocation stays mapped while this holds it.
struct AllocationContents {
    allocation: Arc<Allocation>,
    shared: Arc<DeviceShared>,
    /// The session's mark (kernel launches).
    session_written: Arc<WriteMark>,
    /// A copy taken at a checkpoint's pause (`preserve`), read instead.
    shadow: Option<super::shadow::Shadow>,
}

impl BufferSource for AllocationContents {
    fn size(&self) -> u64 {
        self.allocation.size
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Status> {
        let (ptr, size) = match &self.shadow {
            Some(shadow) => shadow.range(),
            None => (self.allocation.addr, self.allocation.size),
        };
        copy_out(self.shared.primary, ptr, size, offset, buf)
    }

    fn owed(&self) -> bool {
        self.shadow.is_some()
    }

    fn preserve(&mut self) -> bool {
        if self.shadow.is_none() {
            let a = &self.allocation;
            self.shadow = super::shadow::Shadow::take(&self.shared, a.addr, a.size);
        }
        self.shadow.is_some()
    }

    fn object(&self) -> Option<(u64, u64)> {
        Some((self.allocation.written.serial(), 0))
    }

    fn written_at(&self) -> u64 {
        (self.allocation.written.epoch()).max(self.session_written.epoch())
    }
}

impl CudaSession {
    /// A source of one allocation's contents.
    pub(super) fn allocation_source(&self, allocation: Arc<Allocation>) -> Box<dyn BufferSource> {
        Box::new(AllocationContents {
            allocation,
            shared: self.shared.clone(),
            session_written: self.written.clone(),
            shadow: None,
        })
    }
}

impl BufferSink for AllocationContents {
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Status> {
        let a = &self.allocation;
        copy_in(self.shared.primary, a.addr, a.size, offset, data)
    }
}

/// A global's contents, through its module's context; the module stays
/// loaded while this holds it.
struct GlobalContents {
    module: Arc<HostModule>,
    host: u64,
    size: u64,
    /// The session's mark (launches and writes to globals).
    session_written: Arc<WriteMark>,
}

impl BufferSource for GlobalContents {
    fn size(&self) -> u64 {
        self.size
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Status> {
        copy_out(self.module.ctx.raw, self.host, self.size, offset, buf)
    }

    /// The session and the global's host address, unique in it.
    fn object(&self) -> Option<(u64, u64)> {
        Some((self.session_written.serial(), self.host))
    }

    fn written_at(&self) -> u64 {
        self.session_written.epoch()
    }
}

impl BufferSink for GlobalContents {
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Status> {
        copy_in(self.module.ctx.raw, self.host, self.size, offset, data)
    }
}

impl CudaSession {
    /// Waits for the session's work, then captures its objects; contents
    /// are read afterwards through the returned sources.
    pub(super) fn save_session(&mut self, id: u64) -> Result<SavedSession, SnapshotError> {
        let mut contexts = Ids::new(self.contexts.entries());
        let mut modules = Ids::new(self.modules.entries());
        let functions = Ids::new(self.functions.entries());
        let streams = Ids::new(self.streams.entries());
        let events = Ids::new(self.events.entries());
        let mut cuda = m::CudaSessionState {
            device: device(&self.shared),
            ..Default::default()
        };

        // Functions first: they may hold a module the guest unloaded.
        for (fid, f, guest) in &functions.order {
            let settings = f.settings.lock().unwrap_or_else(|e| e.into_inner()).clone();
            cuda.functions.push(m::CudaFunctionState {
                id: *fid,
                guest: *guest,
                module: modules.id(&f.module),
                name: f.name.clone(),
                attributes: settings
                    .attributes
                    .iter()
                    .map(|&(attribute, value)| m::CudaFunctionAttribute { attribute, value })
                    .collect(),
                cache_config: settings.cache_config,
            });
        }
        let mut buffers: Vec<(u64, Box<dyn BufferSource>)> = Vec::new();
        for (addr, allocation) in &self.allocations {
            cuda.allocations.push(m::CudaAllocationState {
                id: *addr,
                address: *addr,
                size: allocation.size,
            });
            buffers.push((
                *addr,
                Box::new(AllocationContents {
                    allocation: allocation.clone(),
                    shared: self.shared.clone(),
                    session_written: self.written.clone(),
                    shadow: None,
                }),
            ));
        }
        for (mid, module, guest) in &modules.order {
            let archs = module.archs.clone();
            cuda.modules.push(m::CudaModuleState {
                id: *mid,
                guest: *guest,
                context: contexts.id(&module.ctx),
                kind: to_kind(module.kind),
                image: module.image.clone().into(),
                ptx_target: archs.ptx_target,
                cubin_archs: archs.cubins,
            });
            for g in module
                .globals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                cuda.globals.push(m::CudaGlobalState {
                    id: g.guest,
                    module: *mid,
                    name: g.name.clone(),
                    address: g.guest,
                    size: g.size,
                });
                if g.size > 0 {
                    buffers.push((
                        g.guest,
                        Box::new(GlobalContents {
                            module: module.clone(),
                            host: g.host,
                            size: g.size,
                            session_written: self.written.clone(),
                        }),
                    ));
                }
            }
        }
        for (sid, stream, guest) in &streams.order {
            cuda.streams.push(m::CudaStreamState {
                id: *sid,
                guest: *guest,
                context: contexts.id(&stream.ctx),
                flags: stream.flags,
                priority: stream.priority,
            });
        }
        for (eid, event, guest) in &events.order {
            cuda.events.push(m::CudaEventState {
                id: *eid,
                guest: *guest,
                context: contexts.id(&event.ctx),
                flags: event.flags,
                recorded: event.recorded.load(Ordering::Relaxed),
            });
        }
        for (cid, context, guest) in &contexts.order {
            cuda.contexts.push(m::CudaContextState {
                id: *cid,
                guest: *guest,
                flags: context.flags,
            });
            for (limit, value, charged) in self.limits.of(context) {
                cuda.limits.push(m::CudaLimitState {
                    context: *cid,
                    limit,
                    value,
                    charged,
                });
            }
        }
        cuda.primary = self
            .primary
            .map(|(context, refs)| m::CudaPrimaryState { context, refs });

        // Everything issued finishes before the contents are read.
        let started = Instant::now();
        let drained = contexts.order.iter().try_for_each(|(_, context, _)| {
            set_current(context.raw)?;
            // SAFETY: a live context of the session is current.
            check(unsafe { sys::cuCtxSynchronize() })
        });
        let _ = set_current(std::ptr::null_mut());
        drained.map_err(|s| SnapshotError::device("finish the session's CUDA work", s))?;
        let drain = started.elapsed();
        if !self.readbacks.is_empty() {
            // Their staging is not part of the state yet: a guest that
            // collects one after a restore gets an error for it.
            log::warn!("session {id}: device-to-host copies not yet collected are not saved");
        }

        Ok(SavedSession {
            state: cuda.into(),
            buffers,
            drain,
        })
    }
}

fn rebuild_error(what: String, id: u64) -> impl FnOnce(Status) -> SnapshotError {
    move |status| SnapshotError::Rebuild { what, id, status }
}

/// Refuses a GPU that cannot run the session's code or hold its memory,
/// before anything is built.
fn check_device(
    cuda: &m::CudaSessionState,
    shared: &DeviceShared,
    here: &m::CudaDevice,
) -> Result<(), SnapshotError> {
    let label = format!("{} ({})", here.name, here.arch);
    if let Err(incompatible) = cuda.check(here) {
        log::warn!("{incompatible}");
    }
    if let Some(module) = cuda.modules.iter().find(|m| !m.loads_on(here.arch)) {
        let mut code: Vec<String> = module.cubin_archs.iter().map(|a| a.to_string()).collect();
        if code.is_empty() {
            code.push("an unknown architecture".into());
        }
        let ptx = match module.ptx_target {
            None => "no PTX".to_string(),
            Some(t) => format!("PTX for {t} and newer"),
        };
        return Err(SnapshotError::BinaryOnly {
            built_for: format!(
                "{} (CUDA module {:#x}: {ptx})",
                code.join(", "),
                module.guest.map_or(module.id, |g| g.handle)
            ),
            here: label,
        });
    }
    let arena = &shared.arena;
    let mut needed = 0u64;
    for a in &cuda.allocations {
        let mapped = a
            .size
            .checked_next_multiple_of(arena.granularity)
            .unwrap_or(u64::MAX);
        needed = needed.saturating_add(mapped);
        if !arena.contains(a.address) || !arena.is_free(a.address, mapped) {
            return Err(SnapshotError::Rebuild {
                what: format!(
                    "CUDA allocation of {} bytes at {:#x} (outside this backend's address range {:#x}..{:#x}, or taken)",
                    a.size,
                    a.address,
                    arena.base,
                    arena.base + arena.size
                ),
                id: a.id,
                status: Status(result::ERROR_INVALID_VALUE),
            });
        }
    }
    set_current(shared.primary).map_err(|s| SnapshotError::device("use the primary context", s))?;
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: both outputs are valid for writes; a context is current.
    check(unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })
        .map_err(|s| SnapshotError::device("query free GPU memory", s))?;
    if needed > free as u64 {
        return Err(SnapshotError::Rebuild {
            what: format!(
                "CUDA allocations of {needed} bytes on {label}, which has {free} free; session"
            ),
            id: 0,
            status: Status(result::ERROR_OUT_OF_MEMORY),
        });
    }
    Ok(())
}

/// Builds a session from its saved CUDA objects on this GPU; contents
/// arrive afterwards through the returned sinks.
pub(super) fn restore(
    shared: Arc<DeviceShared>,
    cuda: &m::CudaSessionState,
) -> Result<RestoredSession, SnapshotError> {
    let mut session = CudaSession::new(shared.clone());
    let built = check_device(cuda, &shared, &device(&shared)).and_then(|()| session.rebuild(cuda));
    let _ = set_current(std::ptr::null_mut());
    let sinks = built?;
    Ok(RestoredSession {
        session: Box::new(session),
        sinks,
    })
}

impl CudaSession {
    fn rebuild(
        &mut self,
        cuda: &m::CudaSessionState,
    ) -> Result<HashMap<u64, Box<dyn BufferSink>>, SnapshotError> {
        let device = self.shared.device;
        let mut sinks: HashMap<u64, Box<dyn BufferSink>> = HashMap::new();

        let mut contexts: HashMap<u64, Arc<HostContext>> = HashMap::new();
        for c in &cuda.contexts {
            // The guard of `cuCtxCreate`: a restore stream is guest input.
            super::account::check_context_flags(c.flags)
                .map_err(rebuild_error("CUDA context".into(), c.id))?;
            let mut raw = std::ptr::null_mut();
            // SAFETY: `raw` is valid for writes. The new context is pushed
            // on this thread's stack; it is popped right away.
            check(unsafe { sys::cuCtxCreate_v4(&mut raw, std::ptr::null_mut(), c.flags, device) })
                .map_err(rebuild_error("CUDA context".into(), c.id))?;
            let context = Arc::new(HostContext {
                raw,
                flags: c.flags,
            });
            let _ = set_current(std::ptr::null_mut());
            contexts.insert(c.id, context);
        }
        let context = |id: u64| {
            contexts.get(&id).cloned().ok_or(SnapshotError::Dangling {
                what: "CUDA context",
                id,
            })
        };

        for l in &cuda.limits {
            let ctx = context(l.context)?;
            set_current(ctx.raw).map_err(rebuild_error("CUDA context limit".into(), l.context))?;
            // Charged as the value needs here, not as the stream says.
            let charged =
                super::limits::reserved_bytes(l.limit, l.value, &self.shared.info.attributes);
            self.limits
                .set(&ctx, l.limit, l.value, charged, None)
                .map_err(rebuild_error("CUDA context limit".into(), l.context))?;
        }

        set_current(self.shared.primary)
            .map_err(|s| SnapshotError::device("use the primary context", s))?;
        for a in &cuda.allocations {
            let allocation = Arc::new(self.shared.arena.allocate_at(a.address, a.size).map_err(
                rebuild_error(format!("CUDA allocation at {:#x}", a.address), a.id),
            )?);
            self.ranges
                .insert_mapped(a.address, a.size, allocation.mapped);
            self.allocations.insert(a.address, allocation.clone());
            sinks.insert(
                a.id,
                Box::new(AllocationContents {
                    allocation,
                    shared: self.shared.clone(),
                    session_written: self.written.clone(),
                    shadow: None,
                }),
            );
        }

        let mut modules: HashMap<u64, Arc<HostModule>> = HashMap::new();
        for saved in &cuda.modules {
            let ctx = context(saved.context)?;
            let kind = from_kind(saved.kind);
            let image: Arc<[u8]> = if kind == ImageKind::Ptx && saved.image.last() != Some(&0) {
                let mut terminated = saved.image.to_vec();
                terminated.push(0);
                terminated.into()
            } else {
                saved.image.shared()
            };
            let fail = rebuild_error("CUDA module".into(), saved.id);
            if ImageKind::detect(&image) != Some(kind) || !check_image(kind, &image) {
                return Err(fail(Status(result::ERROR_INVALID_IMAGE)));
            }
            set_current(ctx.raw).map_err(rebuild_error("CUDA module".into(), saved.id))?;
            let mut raw = std::ptr::null_mut();
            // SAFETY: `image` is NUL-terminated PTX, or a cubin / fat binary
            // whose headers stay inside it (checked above); `ctx` is current.
            check(unsafe { sys::cuModuleLoadData(&mut raw, image.as_ptr().cast()) })
                .map_err(fail)?;
            modules.insert(
                saved.id,
                Arc::new(HostModule {
                    raw,
                    kind,
                    archs: image::archs(kind, &image),
                    image,
                    globals: Mutex::new(Vec::new()),
                    functions: Mutex::new(Vec::new()),
                    ctx,
                }),
            );
        }
        let module = |id: u64| {
            modules.get(&id).cloned().ok_or(SnapshotError::Dangling {
                what: "CUDA module",
                id,
            })
        };

        for g in &cuda.globals {
            let owner = module(g.module)?;
            let what = format!("CUDA global {:?}", String::from_utf8_lossy(&g.name));
            let name = CString::new(g.name.clone()).map_err(|_| {
                rebuild_error(what.clone(), g.id)(Status(result::ERROR_INVALID_VALUE))
            })?;
            set_current(owner.ctx.raw).map_err(rebuild_error(what.clone(), g.id))?;
            let (mut host, mut size) = (0u64, 0usize);
            // SAFETY: the module is loaded; outputs are valid; `name` is
            // NUL-terminated.
            check(unsafe {
                sys::cuModuleGetGlobal_v2(&mut host, &mut size, owner.raw, name.as_ptr())
            })
            .map_err(rebuild_error(what.clone(), g.id))?;
            if size as u64 != g.size {
                return Err(rebuild_error(format!("{what} (its size changed)"), g.id)(
                    Status(result::ERROR_INVALID_IMAGE),
                ));
            }
            owner
                .globals
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Global {
                    name: g.name.clone(),
                    guest: g.address,
                    host,
                    size: g.size,
                });
            self.ranges.insert(g.address, g.size);
            if host != g.address {
                log::debug!(
                    "{what} is at {host:#x} now; the guest's {:#x} is translated",
                    g.address
                );
                self.relocations.insert(g.address, (g.size, host));
            }
            if g.size > 0 {
                sinks.insert(
                    g.id,
                    Box::new(GlobalContents {
                        module: owner,
                        host,
                        size: g.size,
                        session_written: self.written.clone(),
                    }),
                );
            }
        }

        let mut functions: HashMap<u64, Arc<HostFunction>> = HashMap::new();
        for f in &cuda.functions {
            let owner = module(f.module)?;
            let what = format!("CUDA function {:?}", String::from_utf8_lossy(&f.name));
            let fail = |s: Status| SnapshotError::Rebuild {
                what: what.clone(),
                id: f.id,
                status: s,
            };
            let name = CString::new(f.name.clone())
                .map_err(|_| fail(Status(result::ERROR_INVALID_VALUE)))?;
            set_current(owner.ctx.raw).map_err(fail)?;
            let mut raw = std::ptr::null_mut();
            // SAFETY: the module is loaded; `name` is NUL-terminated.
            check(unsafe { sys::cuModuleGetFunction(&mut raw, owner.raw, name.as_ptr()) })
                .map_err(fail)?;
            let params = param_layout(raw).map_err(fail)?;
            let param_len = params
                .iter()
                .map(|&(offset, size)| offset as usize + size as usize)
                .max()
                .unwrap_or(0);
            if param_len > MAX_PARAM_BUFFER {
                return Err(fail(Status(result::ERROR_NOT_SUPPORTED)));
            }
            for a in &f.attributes {
                driver::set_function_attribute(raw, a.attribute, a.value).map_err(fail)?;
            }
            if let Some(config) = f.cache_config {
                driver::set_cache_config(raw, config).map_err(fail)?;
            }
            if let Some(g) = f.guest {
                owner
                    .functions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(g.handle);
            }
            functions.insert(
                f.id,
                Arc::new(HostFunction {
                    raw,
                    name: f.name.clone(),
                    params,
                    param_len,
                    module: owner,
                    settings: Mutex::new(FunctionSettings {
                        attributes: f
                            .attributes
                            .iter()
                            .map(|a| (a.attribute, a.value))
                            .collect(),
                        cache_config: f.cache_config,
                    }),
                }),
            );
        }

        let mut streams: HashMap<u64, Arc<HostStream>> = HashMap::new();
        for s in &cuda.streams {
            let ctx = context(s.context)?;
            set_current(ctx.raw).map_err(rebuild_error("CUDA stream".into(), s.id))?;
            let mut raw = std::ptr::null_mut();
            // SAFETY: `raw` is valid for writes; a context is current.
            check(unsafe { sys::cuStreamCreateWithPriority(&mut raw, s.flags, s.priority) })
                .map_err(rebuild_error("CUDA stream".into(), s.id))?;
            streams.insert(
                s.id,
                Arc::new(HostStream {
                    raw,
                    flags: s.flags,
                    priority: s.priority,
                    ctx,
                }),
            );
        }

        let mut events: HashMap<u64, Arc<HostEvent>> = HashMap::new();
        for e in &cuda.events {
            let ctx = context(e.context)?;
            let fail = rebuild_error("CUDA event".into(), e.id);
            set_current(ctx.raw).map_err(rebuild_error("CUDA event".into(), e.id))?;
            let mut raw = std::ptr::null_mut();
            // SAFETY: `raw` is valid for writes; a context is current.
            check(unsafe { sys::cuEventCreate(&mut raw, e.flags) })
                .map_err(rebuild_error("CUDA event".into(), e.id))?;
            let event = Arc::new(HostEvent {
                raw,
                flags: e.flags,
                ctx,
                recorded: e.recorded.into(),
            });
            if e.recorded {
                // Drained before the save, so it had completed: record it
                // on the idle NULL stream, where it completes at once.
                // SAFETY: the event is live and its context current.
                check(unsafe { sys::cuEventRecord(event.raw, std::ptr::null_mut()) })
                    .map_err(fail)?;
            }
            events.insert(e.id, event);
        }
        for ctx in contexts.values() {
            set_current(ctx.raw).map_err(|s| SnapshotError::device("use a CUDA context", s))?;
            // SAFETY: a live context is current.
            check(unsafe { sys::cuCtxSynchronize() })
                .map_err(|s| SnapshotError::device("finish rebuilding CUDA objects", s))?;
        }

        // Guest handles, with their reference counts.
        macro_rules! publish {
            ($list:expr, $map:expr, $table:expr) => {
                for item in &$list {
                    if let Some(g) = item.guest {
                        let object = $map.get(&item.id).cloned().expect("built above");
                        $table
                            .insert_shared(g.handle, object, g.refs)
                            .map_err(rebuild_error("guest handle".into(), g.handle))?;
                    }
                }
            };
        }
        publish!(cuda.contexts, contexts, self.contexts);
        publish!(cuda.modules, modules, self.modules);
        publish!(cuda.functions, functions, self.functions);
        publish!(cuda.streams, streams, self.streams);
        publish!(cuda.events, events, self.events);
        self.primary = cuda.primary.and_then(|p| {
            let guest = cuda.contexts.iter().find(|c| c.id == p.context)?.guest?;
            Some((guest.handle, p.refs))
        });
        Ok(sinks)
    }
}
