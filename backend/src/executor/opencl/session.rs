//! One guest process's OpenCL objects and the calls that create, change and
//! release them. Enqueued commands live in `commands.rs`, queries in `info.rs`.

use std::sync::{Arc, Mutex};

use cl3::types::{cl_device_id, cl_platform_id};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ObjectKind, Request, Status};

use super::objects::*;
use crate::chain::GuestIo;
use crate::executor::ExecSession;
use crate::handles::HandleTable;

pub struct OpenClSession {
    /// The launch thread and where the calls it refused are answered
    /// (declared first: the thread is stopped, after issuing what it holds,
    /// before the objects go).
    pub(super) launches: super::launch_jobs::LaunchState,
    pub(super) platform: cl_platform_id,
    pub(super) device: cl_device_id,
    pub(super) contexts: HandleTable<ContextEntry>,
    pub(super) queues: HandleTable<QueueEntry>,
    pub(super) mems: HandleTable<HostMem>,
    pub(super) programs: HandleTable<ProgramEntry>,
    pub(super) kernels: HandleTable<HostKernel>,
    pub(super) events: HandleTable<EventEntry>,
    pub(super) samplers: HandleTable<super::image::HostSampler>,
    pub(super) sub_devices: HandleTable<super::subdevice::SubDevice>,
    /// User events, shared with `aborter` (which may run on another thread).
    user_events: Arc<Mutex<Vec<Arc<EventEntry>>>>,
    pub(super) limits: QueueLimits,
    /// The VM's quota, when it has one.
    pub(super) quota: Option<Arc<crate::quota::Quota>>,
    /// Device-info values come from this profile where it has them (the
    /// VM's; `None` only for sessions made outside an executor).
    pub(super) advertised: Option<Arc<vgpu_migration::Profile>>,
    /// Queues of the backend's own (initial uploads, snapshots), per context.
    pub(super) internal_queues: Vec<Arc<QueueEntry>>,
    /// Pinned staging buffers of peer transfers, per context (GPUs).
    pub(super) staging: Vec<super::staging::Staging>,
    /// Where the guest copies into placed buffers itself, if it said.
    pub(super) placement_gate: Option<super::placed::Gate>,
    /// Contents owed to checkpoints being written (copy-on-write).
    pub(super) debts: super::cow::Debts,
    /// SVM allocations (declared last: dropped after what uses them).
    pub(super) svm: super::svm::SvmTable,
    /// Allocations named by `CL_KERNEL_EXEC_INFO_SVM_PTRS`, per kernel.
    pub(super) svm_exec: std::collections::HashMap<u64, Vec<Arc<super::svm::SvmAllocation>>>,
}

/// The queue-depth bound and what it cost.
#[derive(Debug, Default, Clone)]
pub struct QueueLimits {
    /// At most this many commands ahead of completion per queue; 0: unbounded.
    pub queue_depth: usize,
    /// Time spent waiting for the oldest command because of the bound.
    pub depth_wait: std::time::Duration,
}

// SAFETY: platform and device ids are thread-safe OpenCL handles; every
// other field is Send on its own.
unsafe impl Send for OpenClSession {}

impl OpenClSession {
    pub fn new(platform: cl_platform_id, device: cl_device_id, queue_depth: usize) -> Self {
        OpenClSession {
            launches: Default::default(),
            platform,
            device,
            contexts: HandleTable::new(Status::INVALID_CONTEXT),
            queues: HandleTable::new(Status::INVALID_COMMAND_QUEUE),
            mems: HandleTable::new(Status::INVALID_MEM_OBJECT),
            programs: HandleTable::new(Status::INVALID_PROGRAM),
            kernels: HandleTable::new(Status::INVALID_KERNEL),
            events: HandleTable::new(Status::INVALID_EVENT),
            samplers: HandleTable::new(Status::INVALID_SAMPLER),
            sub_devices: HandleTable::new(Status::INVALID_DEVICE),
            user_events: Arc::new(Mutex::new(Vec::new())),
            internal_queues: Vec::new(),
            staging: Vec::new(),
            placement_gate: None,
            debts: Default::default(),
            svm: Default::default(),
            svm_exec: Default::default(),
            advertised: None,
            quota: None,
            limits: QueueLimits {
                queue_depth,
                ..Default::default()
            },
        }
    }

    fn create_user_event(&mut self, m: &CreateUserEvent) -> Result<(), Status> {
        let context = self.contexts.get(m.context)?.clone();
        let raw = cl3::event::create_user_event(context.ctx.0).map_err(Status)?;
        let entry = self.events.insert(
            m.event,
            EventEntry {
                event: HostEvent(raw),
                context,
                user: Some(Mutex::new(None)),
            },
        )?;
        self.user_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(entry);
        Ok(())
    }

    fn set_user_event_status(&mut self, m: &SetUserEventStatus) -> Result<(), Status> {
        let event = self.events.get(m.event)?;
        let Some(status) = &event.user else {
            return Err(Status::INVALID_EVENT);
        };
        cl3::event::set_user_event_status(event.event.0, m.status).map_err(Status)?;
        *status.lock().unwrap_or_else(|e| e.into_inner()) = Some(m.status);
        self.user_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|e| !Arc::ptr_eq(e, event));
        Ok(())
    }

    /// Whether a user event of the session is still waiting to be set.
    pub(super) fn has_unset_user_events(&self) -> bool {
        !self
            .user_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    fn retain_or_release(&mut self, kind: u32, handle: u64, retain: bool) -> Result<(), Status> {
        macro_rules! apply {
            ($table:expr) => {
                if retain {
                    $table.retain(handle)
                } else {
                    $table.release(handle)
                }
            };
        }
        match ObjectKind::from_u32(kind).ok_or(Status::INVALID_VALUE)? {
            ObjectKind::Context => apply!(self.contexts),
            ObjectKind::Queue => apply!(self.queues),
            ObjectKind::Mem => apply!(self.mems),
            ObjectKind::Program => apply!(self.programs),
            ObjectKind::Kernel => apply!(self.kernels),
            ObjectKind::Event => apply!(self.events),
            ObjectKind::Sampler => apply!(self.samplers),
            ObjectKind::Device => apply!(self.sub_devices),
        }
    }

    fn wait_for_events(&mut self, m: &WaitForEvents) -> Result<(), Status> {
        if m.events.is_empty() {
            return Err(Status::INVALID_VALUE);
        }
        let events = self.events.get_all(&m.events, Status::INVALID_EVENT)?;
        let raw: Vec<_> = events.iter().map(|e| e.event.0).collect();
        cl3::event::wait_for_events(&raw).map_err(Status)
    }
}

fn done(result: Result<(), Status>) -> Result<Vec<u8>, Status> {
    result.map(|()| Vec::new())
}

impl OpenClSession {
    /// Remembers a user event whose status is not set yet (see `aborter`).
    pub(super) fn track_user_event(&self, event: Arc<EventEntry>) {
        self.user_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(event);
    }
}

impl OpenClSession {
    /// Waits until every call handed to the launch thread was issued, so
    /// that the next call reaches the driver after them.
    pub(super) fn drain_launches(&mut self) {
        self.launches.drain();
    }
}

impl ExecSession for OpenClSession {
    fn execute(&mut self, request: &Request, io: &mut GuestIo) -> Result<Vec<u8>, Status> {
        let call = self.launches.next_call();
        match request {
            Request::EnqueueNdRange(m) => return done(self.nd_range(m, call)),
            Request::SetKernelArg(m) => return done(self.set_kernel_arg(m, call)),
            _ => self.drain_launches(),
        }
        match request {
            Request::GetInfo(m) => self.get_info(m),
            Request::CreateContext(m) => done(self.create_context(m)),
            Request::CreateQueue(m) => done(self.create_queue(m)),
            Request::CreateBuffer(m) => done(self.create_buffer(m, io)),
            Request::SetPlacementGate(m) => done(self.set_placement_gate(m, io)),
            Request::CreateSubBuffer(m) => done(self.create_sub_buffer(m)),
            Request::CreateProgramWithSource(_)
            | Request::CreateProgramWithBinary(_)
            | Request::CreateProgramWithIl(_) => self.create_program(request),
            Request::BuildProgram(m) => self.build_program(m),
            Request::CompileProgram(m) => self.compile_program(m),
            Request::LinkProgram(_) => self.create_program(request),
            Request::CreateKernel(m) => done(self.create_kernel(m)),
            Request::CloneKernel(m) => done(self.clone_kernel(m)),
            Request::CreateUserEvent(m) => done(self.create_user_event(m)),
            Request::Retain(m) => done(self.retain_or_release(m.kind, m.handle, true)),
            Request::Release(m) => done(self.retain_or_release(m.kind, m.handle, false)),
            Request::SetUserEventStatus(m) => done(self.set_user_event_status(m)),
            Request::InitBuffer(m) => done(self.init_buffer(m, io)),
            Request::WaitForEvents(m) => done(self.wait_for_events(m)),
            Request::EnqueueWriteBuffer(m) => done(self.write_buffer(m, io)),
            Request::EnqueueReadBuffer(m) => done(self.read_buffer(m, io)),
            Request::EnqueueCopyBuffer(m) => done(self.copy_buffer(m)),
            Request::EnqueueFillBuffer(m) => done(self.fill_buffer(m)),
            Request::EnqueueWriteBufferRect(m) => done(self.write_buffer_rect(m, io)),
            Request::EnqueueReadBufferRect(m) => done(self.read_buffer_rect(m, io)),
            Request::EnqueueCopyBufferRect(m) => done(self.copy_buffer_rect(m)),
            Request::EnqueueMarker(m) => done(self.marker(m.queue, &m.wait, m.event, false)),
            Request::EnqueueBarrier(m) => done(self.marker(m.queue, &m.wait, m.event, true)),
            Request::Flush(m) => done(self.flush(m.queue)),
            Request::GetImageFormats(m) => self.image_formats(m),
            Request::CreateImage(m) => done(self.create_image(m)),
            Request::InitImage(m) => done(self.init_image(m, io)),
            Request::EnqueueWriteImage(m) => done(self.write_image(m, io)),
            Request::EnqueueReadImage(m) => done(self.read_image(m, io)),
            Request::EnqueueCopyImage(m) => done(self.copy_image(m)),
            Request::EnqueueCopyImageToBuffer(m) => done(self.copy_image_to_buffer(m)),
            Request::EnqueueCopyBufferToImage(m) => done(self.copy_buffer_to_image(m)),
            Request::EnqueueFillImage(m) => done(self.fill_image(m)),
            Request::CreateSampler(m) => done(self.create_sampler(m)),
            Request::Finish(m) => done(self.finish(m.queue)),
            Request::CreateSubDevices(m) => self.create_sub_devices(m),
            Request::CreateContextOnDevices(m) => done(self.create_context_on_devices(m)),
            Request::CreateQueueOnDevice(m) => done(self.create_queue_on_device(m)),
            Request::SvmAlloc(m) => self.svm_alloc(m),
            Request::SvmFree(m) => done(self.svm_free(m)),
            Request::EnqueueSvmWrite(m) => done(self.svm_write(m, io)),
            Request::EnqueueSvmRead(m) => done(self.svm_read(m, io)),
            Request::EnqueueSvmCopy(m) => done(self.svm_copy(m)),
            Request::EnqueueSvmFill(m) => done(self.svm_fill(m)),
            Request::SetKernelExecSvm(m) => done(self.set_kernel_exec_svm(m)),
            Request::CreateSvmBuffer(m) => done(self.create_svm_buffer(m)),
            // Control messages are the vGPU layer's; other APIs' calls are
            // other executors'.
            _ => Err(Status::INVALID_OPERATION),
        }
    }

    /// Answers the batch without waiting for the calls still with the
    /// launch thread.
    fn finish_batch(&mut self) -> crate::executor::LateOutcomes {
        self.launches.finish_batch()
    }

    fn add_object_counts(&self, total: &mut [u64]) {
        total[ObjectKind::Context.index()] += self.contexts.len() as u64;
        total[ObjectKind::Queue.index()] += self.queues.len() as u64;
        total[ObjectKind::Mem.index()] += self.mems.len() as u64;
        total[ObjectKind::Program.index()] += self.programs.len() as u64;
        total[ObjectKind::Kernel.index()] += self.kernels.len() as u64;
        total[ObjectKind::Event.index()] += self.events.len() as u64;
        total[ObjectKind::Sampler.index()] += self.samplers.len() as u64;
        total[ObjectKind::Device.index()] += self.sub_devices.len() as u64;
    }

    fn set_profile(&mut self, profile: Arc<vgpu_migration::Profile>) {
        self.advertised = Some(profile);
    }

    fn set_quota(&mut self, quota: Arc<crate::quota::Quota>) {
        for (_, mem, _) in self.mems.entries() {
            // 1D buffer images live in their buffer's memory.
            let own_memory = mem.image.as_ref().is_none_or(|i| i.buffer.is_none());
            if mem.parent.is_none() && own_memory {
                *mem.charge.lock().unwrap_or_else(|e| e.into_inner()) =
                    quota.charge_memory(mem.size).ok();
            }
        }
        self.contexts.set_quota(quota.clone());
        self.queues.set_quota(quota.clone());
        self.mems.set_quota(quota.clone());
        self.programs.set_quota(quota.clone());
        self.kernels.set_quota(quota.clone());
        self.events.set_quota(quota.clone());
        self.samplers.set_quota(quota.clone());
        self.sub_devices.set_quota(quota.clone());
        self.quota = Some(quota);
    }

    fn save(
        &mut self,
        _id: u64,
    ) -> Result<crate::executor::SavedSession, crate::executor::SnapshotError> {
        self.drain_launches();
        self.close_placement_gate()?;
        let device = super::profile::device_identity(self.platform, self.device);
        self.save_session(&device)
    }

    fn may_wait_on_the_guest(&self) -> bool {
        self.has_unset_user_events()
    }

    fn live_buffers(
        &mut self,
    ) -> Result<Vec<Box<dyn crate::executor::BufferSource>>, crate::executor::SnapshotError> {
        self.drain_launches();
        // Copies the guest makes itself would not mark buffers written.
        self.close_placement_gate()?;
        self.live_sources()
    }

    fn settle(
        &mut self,
        limit: std::time::Duration,
    ) -> Result<bool, crate::executor::SnapshotError> {
        self.drain_launches();
        self.settle_within(limit)
    }

    fn aborter(&self) -> Box<dyn Fn() + Send + Sync> {
        let user_events = self.user_events.clone();
        Box::new(move || {
            let pending =
                std::mem::take(&mut *user_events.lock().unwrap_or_else(|e| e.into_inner()));
            for event in pending {
                // A negative status completes the user event with an error,
                // which releases every command and wait that depends on it.
                let _ =
                    cl3::event::set_user_event_status(event.event.0, Status::OUT_OF_RESOURCES.0);
            }
        })
    }
}
