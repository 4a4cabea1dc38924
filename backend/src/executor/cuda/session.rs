//! One guest process's CUDA objects: handle tables, the contexts, and the
//! call dispatch. Memory calls live in `transfer.rs`, modules and launches
//! in `launch.rs`, streams and events in `sync.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use cudarc::driver::sys;
use vgpu_protocol::cuda::{result, CuInitReply, CuMemInfoReply};
use vgpu_protocol::{ObjectKind, Request, Status, Wire};

use super::account::{check_context_flags, MemoryAccount};
use super::driver::{check, make_current, set_current};
use super::memory::{Allocation, Ranges};
use super::objects::*;
use super::DeviceShared;
use crate::chain::GuestIo;
use crate::executor::ExecSession;
use crate::handles::HandleTable;

pub(super) fn cuda(code: i32) -> Status {
    Status(code)
}

/// `ptr` moved along with the relocated range (guest start → (length,
/// host start)) it falls in, if any.
fn relocate(relocations: &BTreeMap<u64, (u64, u64)>, ptr: u64) -> u64 {
    match relocations.range(..=ptr).next_back() {
        Some((&start, &(len, host))) if ptr - start < len.max(1) => host.wrapping_add(ptr - start),
        _ => ptr,
    }
}

pub struct CudaSession {
    pub(super) shared: Arc<DeviceShared>,
    pub(super) contexts: HandleTable<HostContext>,
    /// The guest's handle for the primary context and its retain count.
    pub(super) primary: Option<(u64, u32)>,
    pub(super) modules: HandleTable<HostModule>,
    pub(super) functions: HandleTable<HostFunction>,
    pub(super) streams: HandleTable<HostStream>,
    pub(super) events: HandleTable<HostEvent>,
    /// Allocations by device address (shared with a snapshot reading them).
    pub(super) allocations: BTreeMap<u64, Arc<Allocation>>,
    /// Device ranges this session may name (allocations, module globals).
    pub(super) ranges: Ranges,
    /// Globals a restore found elsewhere than the guest was told:
    /// guest address → (length, host address).
    pub(super) relocations: BTreeMap<u64, (u64, u64)>,
    /// Device memory charged to the VM's quota, per allocation.
    pub(super) memory: MemoryAccount,
    /// Context limits the guest set, and their charges.
    pub(super) limits: super::limits::ContextLimits,
    /// Module images arriving in chunks.
    pub(super) uploads: super::library::Uploads,
    /// Quota charges of module images that arrived in chunks, by module.
    pub(super) image_charges: std::collections::HashMap<u64, super::library::ImageCharge>,
    /// Device-to-host copies that returned at once, until collected.
    pub(super) readbacks: super::readback::Readbacks,
    /// Guest memory page-locked with the driver.
    pub(super) pinned: super::pinned::PinnedGuestMemory,
    /// Page-locked staging for copies from and to a loopback peer's
    /// memory, one per context that made such a copy.
    pub(super) peer_staging: Vec<super::peer_staging::PeerStaging>,
    /// When a kernel launch, or a write outside any allocation (a module
    /// global), last may have written the session's memory: a kernel
    /// writes through raw pointers, so it counts for every allocation.
    pub(super) written: Arc<crate::executor::written::WriteMark>,
    /// The thread issuing this session's runs of launches, and where the
    /// launches it refused are answered.
    pub(super) launches: super::launcher::LaunchState,
}

// SAFETY: the raw driver handles in the tables are usable from any thread
// (each call makes its context current on the calling thread first).
unsafe impl Send for CudaSession {}

impl CudaSession {
    pub fn new(shared: Arc<DeviceShared>) -> CudaSession {
        super::device_output::begin();
        let invalid_handle = cuda(result::ERROR_INVALID_HANDLE);
        CudaSession {
            shared,
            contexts: HandleTable::new(cuda(result::ERROR_INVALID_CONTEXT)),
            primary: None,
            modules: HandleTable::new(invalid_handle),
            functions: HandleTable::new(invalid_handle),
            streams: HandleTable::new(invalid_handle),
            events: HandleTable::new(invalid_handle),
            allocations: BTreeMap::new(),
            ranges: Ranges::default(),
            relocations: BTreeMap::new(),
            memory: MemoryAccount::default(),
            limits: Default::default(),
            uploads: Default::default(),
            image_charges: Default::default(),
            readbacks: Default::default(),
            pinned: Default::default(),
            peer_staging: Vec::new(),
            written: Default::default(),
            launches: Default::default(),
        }
    }

    /// Waits until every launch handed to the launch thread was issued, so
    /// that the next call reaches the driver after them.
    pub(super) fn drain_launches(&mut self) {
        self.launches.drain();
    }

    /// Records a write issued now to `[ptr, ptr+len)` (checked to be the
    /// session's): the allocation holding it, or the whole session.
    pub(super) fn mark_written(&self, ptr: u64) {
        match self.allocations.range(..=ptr).next_back() {
            Some((start, a)) if ptr - start < a.size => a.written.mark(),
            _ => self.written.mark(),
        }
    }

    /// Where a guest device address really is: the same address, except
    /// inside a global a restore found elsewhere.
    pub(super) fn host_ptr(&self, ptr: u64) -> u64 {
        relocate(&self.relocations, ptr)
    }

    /// Makes a raw context current on the calling thread unless it
    /// already is (see `driver::make_current`).
    pub(super) fn make_current(&mut self, raw: sys::CUcontext) -> Result<(), Status> {
        make_current(raw)
    }

    /// Makes the guest's context `ctx` current.
    pub(super) fn enter(&mut self, ctx: u64) -> Result<Arc<HostContext>, Status> {
        let context = self.contexts.get(ctx)?.clone();
        self.make_current(context.raw)?;
        Ok(context)
    }

    /// The host stream for a guest stream (0: `ctx`'s NULL stream), with
    /// its context current.
    pub(super) fn stream(&mut self, ctx: u64, stream: u64) -> Result<sys::CUstream, Status> {
        if stream == 0 {
            self.enter(ctx)?;
            return Ok(std::ptr::null_mut());
        }
        let entry = self.streams.get(stream)?.clone();
        self.make_current(entry.ctx.raw)?;
        Ok(entry.raw)
    }

    fn create_context(&mut self, handle: u64, device: u32, flags: u32) -> Result<(), Status> {
        if device != 0 {
            return Err(cuda(result::ERROR_INVALID_DEVICE));
        }
        check_context_flags(flags)?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: `raw` is valid for writes. The new context becomes current
        // on this thread.
        check(unsafe {
            sys::cuCtxCreate_v4(&mut raw, std::ptr::null_mut(), flags, self.shared.device)
        })?;
        self.contexts.insert(handle, HostContext { raw, flags })?;
        if crate::peer::peer().is_some() {
            // Peer copies will come: their page-locked staging is made now
            // (2 x 8 MiB, milliseconds), in the program's set-up rather
            // than in its first copy; a failure leaves it to that copy.
            if let Err(status) = self.peer_staging_for(handle, 0) {
                log::debug!("staging for a new context not made yet: {status}");
            }
        }
        Ok(())
    }

    fn destroy_context(&mut self, handle: u64) -> Result<(), Status> {
        let context = self.contexts.get(handle)?.clone();
        // Its work ends first, as the driver's destroy waits for it, and
        // what its kernels printed reaches the driver's output now, for
        // this call's reply (`device_output.rs`), whatever else still
        // holds the context.
        if self.make_current(context.raw).is_ok() {
            // SAFETY: a live context is current.
            let _ = unsafe { sys::cuCtxSynchronize() };
        }
        self.peer_staging
            .retain(|s| !Arc::ptr_eq(&s.context, &context));
        self.contexts.release(handle)?;
        if self.contexts.get(handle).is_err() {
            // The guest's last reference: its limits go (the address may
            // name another context later).
            self.limits.forget(context.raw);
        }
        drop(context);
        if self.primary.is_some_and(|(h, _)| h == handle) {
            self.primary = None;
        }
        self.forget_current();
        Ok(())
    }

    /// After a context may have been destroyed, nothing stays current
    /// (its address could be reused by the next context).
    pub(super) fn forget_current(&mut self) {
        let _ = set_current(std::ptr::null_mut());
    }

    fn retain_primary(&mut self, handle: u64, device: u32) -> Result<(), Status> {
        match &mut self.primary {
            Some((h, refs)) if *h == handle => {
                *refs = refs.saturating_add(1);
                Ok(())
            }
            Some(_) => Err(cuda(result::ERROR_INVALID_VALUE)),
            None => {
                self.create_context(handle, device, 0)?;
                self.primary = Some((handle, 1));
                Ok(())
            }
        }
    }

    fn release_primary(&mut self, device: u32, reset: bool) -> Result<(), Status> {
        if device != 0 {
            return Err(cuda(result::ERROR_INVALID_DEVICE));
        }
        let Some((handle, refs)) = self.primary else {
            return if reset {
                Ok(())
            } else {
                Err(cuda(result::ERROR_INVALID_CONTEXT))
            };
        };
        if reset || refs <= 1 {
            self.primary = None;
            self.destroy_context(handle)
        } else {
            self.primary = Some((handle, refs - 1));
            Ok(())
        }
    }

    fn synchronize(&mut self, ctx: u64) -> Result<(), Status> {
        self.enter(ctx)?;
        // SAFETY: a context is current.
        check(unsafe { sys::cuCtxSynchronize() })
    }

    fn mem_info(&mut self, ctx: u64) -> Result<Vec<u8>, Status> {
        self.enter(ctx)?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both outputs are valid for writes; a context is current.
        check(unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
        Ok(CuMemInfoReply {
            free: free as u64,
            total: total as u64,
        }
        .to_bytes())
    }
}

fn done(result: Result<(), Status>) -> Result<Vec<u8>, Status> {
    result.map(|()| Vec::new())
}

/// A synchronizing call's reply: what kernels printed meanwhile
/// (`device_output.rs`).
fn printed(result: Result<(), Status>) -> Result<Vec<u8>, Status> {
    result.map(|()| super::device_output::take())
}

impl ExecSession for CudaSession {
    fn execute(&mut self, request: &Request, io: &mut GuestIo) -> Result<Vec<u8>, Status> {
        let call = self.launches.next_call();
        if let Request::CuLaunchKernel(m) = request {
            return done(self.launch(m, call));
        }
        self.drain_launches();
        match request {
            Request::CuInit(_) => Ok(CuInitReply {
                driver_version: self.shared.driver_version,
                device_count: 1,
            }
            .to_bytes()),
            Request::CuDeviceInfo(m) if m.device == 0 => Ok(self.shared.info.to_bytes()),
            Request::CuDeviceInfo(_) => Err(cuda(result::ERROR_INVALID_DEVICE)),
            Request::CuMemGetInfo(m) => self.mem_info(m.ctx),
            Request::CuCtxCreate(m) => done(self.create_context(m.ctx, m.device, m.flags)),
            Request::CuCtxDestroy(m) => printed(self.destroy_context(m.ctx)),
            Request::CuPrimaryCtxRetain(m) => done(self.retain_primary(m.ctx, m.device)),
            Request::CuPrimaryCtxRelease(m) => printed(self.release_primary(m.device, false)),
            Request::CuPrimaryCtxReset(m) => printed(self.release_primary(m.device, true)),
            Request::CuCtxSynchronize(m) => printed(self.synchronize(m.ctx)),
            Request::CuTakeDeviceOutput(_) => Ok(super::device_output::take()),
            Request::CuMemAlloc(m) => self.alloc(m),
            Request::CuMemFree(m) => done(self.free(m.ptr)),
            Request::CuMemcpyHtoD(m) => done(self.copy_to_device(m, io)),
            Request::CuMemcpyDtoH(m) => done(self.copy_from_device(m, io)),
            Request::CuMemcpyDtoHSignalled(m) => self.copy_from_device_signalled(m, io),
            Request::CuMemcpyHtoDSignalled(m) => self.copy_to_device_signalled(m, io),
            Request::CuMemcpyDtoHStart(m) => done(self.start_readback(m)),
            Request::CuMemcpyCollect(m) => done(self.collect_readback(m, io)),
            Request::CuHostRegister(m) => done(self.register_host(m, io)),
            Request::CuHostUnregister(m) => done(self.unregister_host(m.block)),
            Request::CuMemcpyDtoD(m) => done(self.copy_on_device(m)),
            Request::CuMemset(m) => done(self.memset(m)),
            Request::CuMemsetD2D(m) => done(self.memset_2d(m)),
            Request::CuModuleLoad(m) => done(self.load_module(m)),
            Request::CuImageChunk(m) => done(self.image_chunk(m)),
            Request::CuModuleLoadStaged(m) => done(self.load_staged(m)),
            Request::CuCtxGetStreamPriorityRange(m) => self.stream_priority_range(m.ctx),
            Request::CuCtxGetLimit(m) => self.context_limit(m),
            Request::CuCtxSetLimit(m) => done(self.set_limit(m)),
            Request::CuLaunchCooperativeKernel(m) => done(self.launch_cooperative(m, call)),
            Request::CuOccupancyAvailableDynamicSMem(m) => self.available_dynamic_smem(m),
            Request::CuOccupancyMaxActiveClusters(m) => self.max_active_clusters(m),
            Request::CuModuleUnload(m) => done(self.unload_module(m.module)),
            Request::CuModuleGetFunction(m) => self.get_function(m),
            Request::CuModuleGetGlobal(m) => self.get_global(m),
            Request::CuModuleFunctionNames(m) => self.function_names(m),
            Request::CuFuncGetAttribute(m) => self.function_attribute(m),
            Request::CuFuncSetAttribute(m) => done(self.set_function_attribute(m)),
            Request::CuFuncSetCacheConfig(m) => done(self.set_cache_config(m)),
            Request::CuOccupancyMaxActiveBlocks(m) => self.occupancy_blocks(m),
            Request::CuOccupancyMaxPotentialBlockSize(m) => self.occupancy_block_size(m),
            Request::CuStreamCreate(m) => done(self.create_stream(m)),
            Request::CuStreamDestroy(m) => done(self.streams.release(m.stream)),
            Request::CuStreamSynchronize(m) => printed(self.stream_synchronize(m.ctx, m.stream)),
            Request::CuStreamQuery(m) => done(self.stream_query(m.ctx, m.stream)),
            Request::CuStreamWaitEvent(m) => done(self.stream_wait_event(m)),
            Request::CuEventCreate(m) => done(self.create_event(m)),
            Request::CuEventDestroy(m) => done(self.events.release(m.event)),
            Request::CuEventRecord(m) => done(self.record_event(m)),
            Request::CuEventSynchronize(m) => printed(self.event_synchronize(m.event)),
            Request::CuEventQuery(m) => done(self.event_query(m.event)),
            Request::CuEventElapsedTime(m) => self.elapsed_time(m),
            // Other families never reach this executor (see `serves`).
            _ => Err(cuda(result::ERROR_NOT_SUPPORTED)),
        }
    }

    /// Answers the batch without waiting for the launches still with the
    /// launch thread (see `launcher.rs`).
    fn finish_batch(&mut self) -> crate::executor::LateOutcomes {
        self.launches.finish_batch()
    }

    fn add_object_counts(&self, total: &mut [u64]) {
        total[ObjectKind::Context.index()] += self.contexts.len() as u64;
        total[ObjectKind::Queue.index()] += self.streams.len() as u64;
        total[ObjectKind::Mem.index()] += self.allocations.len() as u64;
        total[ObjectKind::Program.index()] += self.modules.len() as u64;
        total[ObjectKind::Kernel.index()] += self.functions.len() as u64;
        total[ObjectKind::Event.index()] += self.events.len() as u64;
    }

    fn aborter(&self) -> Box<dyn Fn() + Send + Sync> {
        // Nothing in the CUDA API waits on the guest.
        Box::new(|| {})
    }

    fn save(
        &mut self,
        id: u64,
    ) -> Result<crate::executor::SavedSession, crate::executor::SnapshotError> {
        self.drain_launches();
        self.save_session(id)
    }

    fn live_buffers(
        &mut self,
    ) -> Result<Vec<Box<dyn crate::executor::BufferSource>>, crate::executor::SnapshotError> {
        self.drain_launches();
        Ok(self.live_sources())
    }

    fn settle(
        &mut self,
        _limit: std::time::Duration,
    ) -> Result<bool, crate::executor::SnapshotError> {
        self.drain_launches();
        self.synchronize_all()
            .map(|()| true)
            .map_err(|s| crate::executor::SnapshotError::device("wait for the session's work", s))
    }

    fn set_quota(&mut self, quota: Arc<crate::quota::Quota>) {
        let existing = self.allocations.values().map(|a| (a.addr, a.size));
        self.memory.set_quota(quota.clone(), existing);
        self.limits.set_quota(&quota);
        self.contexts.set_quota(quota.clone());
        self.modules.set_quota(quota.clone());
        self.functions.set_quota(quota.clone());
        self.streams.set_quota(quota.clone());
        self.events.set_quota(quota);
    }
}

impl Drop for CudaSession {
    fn drop(&mut self) {
        // Launches handed over reach the driver first.
        self.launches.stop();
        // Let running work finish before its memory goes, then release in
        // dependency order: objects hold their contexts, so the contexts go
        // last.
        for context in self.contexts.values() {
            if set_current(context.raw).is_ok() {
                // SAFETY: the context is current.
                unsafe { sys::cuCtxSynchronize() };
            }
        }
        // Every copy into staging or registered guest memory finished with
        // the synchronization above.
        self.readbacks = Default::default();
        self.peer_staging.clear();
        self.pinned.clear();
        self.functions = HandleTable::new(Status::SUCCESS);
        self.modules = HandleTable::new(Status::SUCCESS);
        self.streams = HandleTable::new(Status::SUCCESS);
        self.events = HandleTable::new(Status::SUCCESS);
        // Unmapping needs the driver rather than a context; the primary
        // context is made current in case this driver wants one.
        let _ = set_current(self.shared.primary);
        self.allocations.clear();
        self.contexts = HandleTable::new(Status::SUCCESS);
        let _ = set_current(std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_inside_relocated_globals_move_with_them() {
        let mut relocations = BTreeMap::new();
        assert_eq!(relocate(&relocations, 0x1000), 0x1000);
        relocations.insert(0x1000, (0x100, 0x9000));
        relocations.insert(0x2000, (0, 0xa000));
        assert_eq!(relocate(&relocations, 0x1000), 0x9000);
        assert_eq!(relocate(&relocations, 0x10ff), 0x90ff);
        assert_eq!(relocate(&relocations, 0x1100), 0x1100);
        assert_eq!(relocate(&relocations, 0xfff), 0xfff);
        assert_eq!(relocate(&relocations, 0x2000), 0xa000);
        assert_eq!(relocate(&relocations, 0x2001), 0x2001);
    }
}
