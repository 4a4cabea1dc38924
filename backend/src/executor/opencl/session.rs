//! One guest process's OpenCL objects and the calls that create, change and
//! release them. Enqueued commands live in `commands.rs`, queries in `info.rs`.

use std::ffi::CString;
use std::sync::{Arc, Mutex};

use cl3::types::{cl_context_properties, cl_device_id, cl_mem, cl_platform_id};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, ObjectKind, Request, Status};

use super::objects::*;
use crate::chain::GuestIo;
use crate::executor::ExecSession;
use crate::handles::HandleTable;

pub struct OpenClSession {
    pub(super) platform: cl_platform_id,
    pub(super) device: cl_device_id,
    pub(super) contexts: HandleTable<HostContext>,
    pub(super) queues: HandleTable<QueueEntry>,
    pub(super) mems: HandleTable<HostMem>,
    pub(super) programs: HandleTable<HostProgram>,
    pub(super) kernels: HandleTable<HostKernel>,
    pub(super) events: HandleTable<EventEntry>,
    /// User events, shared with `aborter` (which may run on another thread).
    user_events: Arc<Mutex<Vec<Arc<EventEntry>>>>,
    pub(super) limits: QueueLimits,
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

fn cstring(bytes: &[u8], invalid: Status) -> Result<CString, Status> {
    CString::new(bytes.to_vec()).map_err(|_| invalid)
}

/// Properties lists from the guest end with 0; the platform entry, which
/// names the guest's platform object, is replaced by the host's.
fn context_properties(
    guest: &[u64],
    platform: cl_platform_id,
) -> Result<Vec<cl_context_properties>, Status> {
    let mut out = Vec::new();
    let mut pairs = guest.chunks(2);
    for pair in &mut pairs {
        match pair {
            [0] | [0, _] => break,
            [key, value] => {
                let key = *key as cl_context_properties;
                if key == cl3::context::CL_CONTEXT_PLATFORM as cl_context_properties {
                    out.push(key);
                    out.push(platform as cl_context_properties);
                } else {
                    out.push(key);
                    out.push(*value as cl_context_properties);
                }
            }
            _ => return Err(Status::INVALID_PROPERTY),
        }
    }
    out.push(0);
    Ok(out)
}

impl OpenClSession {
    pub fn new(platform: cl_platform_id, device: cl_device_id, queue_depth: usize) -> Self {
        OpenClSession {
            platform,
            device,
            contexts: HandleTable::new(Status::INVALID_CONTEXT),
            queues: HandleTable::new(Status::INVALID_COMMAND_QUEUE),
            mems: HandleTable::new(Status::INVALID_MEM_OBJECT),
            programs: HandleTable::new(Status::INVALID_PROGRAM),
            kernels: HandleTable::new(Status::INVALID_KERNEL),
            events: HandleTable::new(Status::INVALID_EVENT),
            user_events: Arc::new(Mutex::new(Vec::new())),
            limits: QueueLimits {
                queue_depth,
                ..Default::default()
            },
        }
    }

    fn create_context(&mut self, m: &CreateContext) -> Result<(), Status> {
        let props = context_properties(&m.properties, self.platform)?;
        let raw = cl3::context::create_context(
            &[self.device],
            props.as_ptr(),
            None,
            std::ptr::null_mut(),
        )
        .map_err(Status)?;
        self.contexts.insert(m.context, HostContext(raw))?;
        Ok(())
    }

    fn create_queue(&mut self, m: &CreateQueue) -> Result<(), Status> {
        let context = self.contexts.get(m.context)?.clone();
        let mut props: Vec<u64> = m.properties.clone();
        if props.len() % 2 == 1 && props.last() == Some(&0) {
            props.pop();
        }
        if props.len() % 2 == 1 {
            return Err(Status::INVALID_VALUE);
        }
        props.push(0);
        // SAFETY: `props` is a zero-terminated list that outlives the call.
        let raw = unsafe {
            cl3::command_queue::create_command_queue_with_properties(
                context.0,
                self.device,
                props.as_ptr(),
            )
        }
        .map_err(Status)?;
        self.queues.insert(
            m.queue,
            QueueEntry {
                queue: HostQueue(raw),
                context,
                in_flight: Default::default(),
            },
        )?;
        Ok(())
    }

    fn create_buffer(&mut self, m: &CreateBuffer, io: &mut GuestIo) -> Result<(), Status> {
        use cl3::memory::{CL_MEM_ALLOC_HOST_PTR, CL_MEM_COPY_HOST_PTR, CL_MEM_USE_HOST_PTR};
        let context = self.contexts.get(m.context)?.clone();
        // Host pointers of the guest mean nothing here: the data comes from
        // the chain's out-data (`init`), copied in at creation.
        let mut flags =
            m.flags & !(CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR | CL_MEM_ALLOC_HOST_PTR);
        if m.size == 0 {
            return Err(Status::INVALID_BUFFER_SIZE);
        }
        let mut staging = Vec::new();
        let host_ptr: *mut std::ffi::c_void = if m.init.len > 0 {
            if m.init.len != m.size {
                return Err(Status::INVALID_VALUE);
            }
            let slices = io.out_slices(m.init)?;
            if let [only] = slices.as_slice() {
                only.ptr as *mut _
            } else {
                staging.resize(m.size as usize, 0);
                io.out.read(m.init.offset, &mut staging)?;
                staging.as_mut_ptr() as *mut _
            }
        } else {
            std::ptr::null_mut()
        };
        if !host_ptr.is_null() {
            flags |= CL_MEM_COPY_HOST_PTR;
        }
        let size = usize::try_from(m.size).map_err(|_| Status::INVALID_BUFFER_SIZE)?;
        // SAFETY: with COPY_HOST_PTR, `host_ptr` points at `size` readable
        // bytes (guest memory checked by `out_slices`, or `staging`).
        let raw = unsafe { cl3::memory::create_buffer(context.0, flags, size, host_ptr) }
            .map_err(Status)?;
        let mem = HostMem {
            raw,
            size: m.size,
            flags: m.flags,
            parent: None,
        };
        self.mems.insert(m.mem, mem)?;
        drop(context);
        Ok(())
    }

    fn create_sub_buffer(&mut self, m: &CreateSubBuffer) -> Result<(), Status> {
        let parent = self.mems.get(m.parent)?.clone();
        let region = cl3::memory::cl_buffer_region {
            origin: usize::try_from(m.origin).map_err(|_| Status::INVALID_VALUE)?,
            size: usize::try_from(m.size).map_err(|_| Status::INVALID_VALUE)?,
        };
        // SAFETY: `region` is a valid cl_buffer_region for the duration of the call.
        let raw = unsafe {
            cl3::memory::create_sub_buffer(
                parent.raw,
                m.flags,
                cl3::memory::CL_BUFFER_CREATE_TYPE_REGION,
                &region as *const _ as *const _,
            )
        }
        .map_err(Status)?;
        let mem = HostMem {
            raw,
            size: m.size,
            flags: m.flags,
            parent: Some(parent),
        };
        self.mems.insert(m.mem, mem)?;
        Ok(())
    }

    fn create_program(&mut self, request: &Request) -> Result<Vec<u8>, Status> {
        let (handle, context, raw) = match request {
            Request::CreateProgramWithSource(m) => {
                let context = self.contexts.get(m.context)?;
                let source = std::str::from_utf8(&m.source).map_err(|_| Status::INVALID_VALUE)?;
                (
                    m.program,
                    m.context,
                    cl3::program::create_program_with_source(context.0, &[source]),
                )
            }
            Request::CreateProgramWithBinary(m) => {
                let context = self.contexts.get(m.context)?;
                if m.binary.is_empty() {
                    return Err(Status::INVALID_VALUE);
                }
                // SAFETY: one device, one binary slice that outlives the call.
                let raw = unsafe {
                    cl3::program::create_program_with_binary(
                        context.0,
                        &[self.device],
                        &[&m.binary],
                    )
                };
                (m.program, m.context, raw)
            }
            Request::CreateProgramWithIl(m) => {
                let context = self.contexts.get(m.context)?;
                (
                    m.program,
                    m.context,
                    cl3::program::create_program_with_il(context.0, &m.il),
                )
            }
            _ => return Err(Status::INVALID_OPERATION),
        };
        let _ = context;
        self.programs
            .insert(handle, HostProgram(raw.map_err(Status)?))?;
        Ok(Vec::new())
    }

    fn build_program(&mut self, m: &BuildProgram) -> Result<Vec<u8>, Status> {
        let program = self.programs.get(m.program)?;
        let options = cstring(&m.options, Status::INVALID_BUILD_OPTIONS)?;
        cl3::program::build_program(
            program.0,
            &[self.device],
            &options,
            None,
            std::ptr::null_mut(),
        )
        .map_err(Status)?;
        Ok(Vec::new())
    }

    fn compile_program(&mut self, m: &CompileProgram) -> Result<Vec<u8>, Status> {
        let program = self.programs.get(m.program)?;
        let options = cstring(&m.options, Status::INVALID_COMPILER_OPTIONS)?;
        cl3::program::compile_program(
            program.0,
            &[self.device],
            &options,
            &[],
            &[],
            None,
            std::ptr::null_mut(),
        )
        .map_err(Status)?;
        Ok(Vec::new())
    }

    fn link_program(&mut self, m: &LinkProgram) -> Result<Vec<u8>, Status> {
        let context = self.contexts.get(m.context)?.clone();
        let options = cstring(&m.options, Status::INVALID_LINKER_OPTIONS)?;
        let inputs = self.programs.get_all(&m.inputs, Status::INVALID_PROGRAM)?;
        let raw_inputs: Vec<_> = inputs.iter().map(|p| p.0).collect();
        if raw_inputs.is_empty() {
            return Err(Status::INVALID_VALUE);
        }
        // SAFETY: every input program is live (held in `inputs`) for the call.
        let raw = unsafe {
            cl3::program::link_program(
                context.0,
                &[self.device],
                &options,
                &raw_inputs,
                None,
                std::ptr::null_mut(),
            )
        }
        .map_err(Status)?;
        self.programs.insert(m.program, HostProgram(raw))?;
        Ok(Vec::new())
    }

    fn create_kernel(&mut self, m: &CreateKernel) -> Result<(), Status> {
        let program = self.programs.get(m.program)?.clone();
        let name = cstring(&m.name, Status::INVALID_KERNEL_NAME)?;
        let raw = cl3::kernel::create_kernel(program.0, &name).map_err(Status)?;
        self.insert_kernel(m.kernel, raw, program)
    }

    fn insert_kernel(
        &mut self,
        handle: u64,
        raw: cl3::types::cl_kernel,
        program: Arc<HostProgram>,
    ) -> Result<(), Status> {
        let num_args = cl3::kernel::get_kernel_data(raw, cl3::kernel::CL_KERNEL_NUM_ARGS)
            .ok()
            .and_then(|b| {
                b.get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            })
            .unwrap_or(0);
        let kernel = HostKernel {
            raw,
            num_args,
            program,
            arg_mems: Mutex::new(vec![None; num_args as usize]),
        };
        self.kernels.insert(handle, kernel)?;
        Ok(())
    }

    fn clone_kernel(&mut self, m: &CloneKernel) -> Result<(), Status> {
        let source = self.kernels.get(m.source)?.clone();
        let raw = cl3::kernel::clone_kernel(source.raw).map_err(Status)?;
        let program = source.program.clone();
        self.insert_kernel(m.kernel, raw, program)?;
        let args = source
            .arg_mems
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Ok(kernel) = self.kernels.get(m.kernel) {
            *kernel.arg_mems.lock().unwrap_or_else(|e| e.into_inner()) = args;
        }
        Ok(())
    }

    fn set_kernel_arg(&mut self, m: &SetKernelArg) -> Result<(), Status> {
        let kernel = self.kernels.get(m.kernel)?.clone();
        if m.index >= kernel.num_args {
            return Err(Status::INVALID_ARG_INDEX);
        }
        let size = usize::try_from(m.size).map_err(|_| Status::INVALID_ARG_SIZE)?;
        let mut held = None;
        let kind = ArgKind::from_u32(m.arg_kind).ok_or(Status::INVALID_VALUE)?;
        let null_mem: cl_mem = std::ptr::null_mut();
        let result = match kind {
            ArgKind::Value => {
                if m.value.len() != size {
                    return Err(Status::INVALID_ARG_SIZE);
                }
                // SAFETY: `value` holds `size` bytes for the call.
                unsafe {
                    cl3::kernel::set_kernel_arg(
                        kernel.raw,
                        m.index,
                        size,
                        m.value.as_ptr() as *const _,
                    )
                }
            }
            ArgKind::Mem => {
                let mem = self
                    .mems
                    .get(m.handle)
                    .map_err(|_| Status::INVALID_MEM_OBJECT)?
                    .clone();
                let raw = mem.raw;
                held = Some(mem);
                // SAFETY: a pointer to a live cl_mem, sized as the spec asks.
                unsafe {
                    cl3::kernel::set_kernel_arg(
                        kernel.raw,
                        m.index,
                        std::mem::size_of::<cl_mem>(),
                        &raw as *const cl_mem as *const _,
                    )
                }
            }
            ArgKind::NullMem => {
                // SAFETY: a pointer to a NULL cl_mem: a NULL buffer argument.
                unsafe {
                    cl3::kernel::set_kernel_arg(
                        kernel.raw,
                        m.index,
                        std::mem::size_of::<cl_mem>(),
                        &null_mem as *const cl_mem as *const _,
                    )
                }
            }
            ArgKind::Local => {
                // SAFETY: a NULL value with a size: `__local` memory (or a
                // NULL buffer for a pointer argument), as the spec defines.
                unsafe { cl3::kernel::set_kernel_arg(kernel.raw, m.index, size, std::ptr::null()) }
            }
            ArgKind::Sampler => return Err(Status::INVALID_SAMPLER),
        };
        result.map_err(Status)?;
        let mut args = kernel.arg_mems.lock().unwrap_or_else(|e| e.into_inner());
        args[m.index as usize] = held;
        Ok(())
    }

    fn create_user_event(&mut self, m: &CreateUserEvent) -> Result<(), Status> {
        let context = self.contexts.get(m.context)?;
        let raw = cl3::event::create_user_event(context.0).map_err(Status)?;
        let entry = self.events.insert(
            m.event,
            EventEntry {
                event: HostEvent(raw),
                is_user: true,
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
        if !event.is_user {
            return Err(Status::INVALID_EVENT);
        }
        cl3::event::set_user_event_status(event.event.0, m.status).map_err(Status)?;
        self.user_events
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|e| !Arc::ptr_eq(e, event));
        Ok(())
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
            ObjectKind::Sampler => Err(Status::INVALID_SAMPLER),
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

impl ExecSession for OpenClSession {
    fn execute(&mut self, request: &Request, io: &mut GuestIo) -> Result<Vec<u8>, Status> {
        match request {
            Request::GetInfo(m) => self.get_info(m),
            Request::CreateContext(m) => done(self.create_context(m)),
            Request::CreateQueue(m) => done(self.create_queue(m)),
            Request::CreateBuffer(m) => done(self.create_buffer(m, io)),
            Request::CreateSubBuffer(m) => done(self.create_sub_buffer(m)),
            Request::CreateProgramWithSource(_)
            | Request::CreateProgramWithBinary(_)
            | Request::CreateProgramWithIl(_) => self.create_program(request),
            Request::BuildProgram(m) => self.build_program(m),
            Request::CompileProgram(m) => self.compile_program(m),
            Request::LinkProgram(m) => self.link_program(m),
            Request::CreateKernel(m) => done(self.create_kernel(m)),
            Request::CloneKernel(m) => done(self.clone_kernel(m)),
            Request::CreateUserEvent(m) => done(self.create_user_event(m)),
            Request::Retain(m) => done(self.retain_or_release(m.kind, m.handle, true)),
            Request::Release(m) => done(self.retain_or_release(m.kind, m.handle, false)),
            Request::SetKernelArg(m) => done(self.set_kernel_arg(m)),
            Request::SetUserEventStatus(m) => done(self.set_user_event_status(m)),
            Request::WaitForEvents(m) => done(self.wait_for_events(m)),
            Request::EnqueueWriteBuffer(m) => done(self.write_buffer(m, io)),
            Request::EnqueueReadBuffer(m) => done(self.read_buffer(m, io)),
            Request::EnqueueCopyBuffer(m) => done(self.copy_buffer(m)),
            Request::EnqueueFillBuffer(m) => done(self.fill_buffer(m)),
            Request::EnqueueWriteBufferRect(m) => done(self.write_buffer_rect(m, io)),
            Request::EnqueueReadBufferRect(m) => done(self.read_buffer_rect(m, io)),
            Request::EnqueueCopyBufferRect(m) => done(self.copy_buffer_rect(m)),
            Request::EnqueueNdRange(m) => done(self.nd_range(m)),
            Request::EnqueueMarker(m) => done(self.marker(m.queue, &m.wait, m.event, false)),
            Request::EnqueueBarrier(m) => done(self.marker(m.queue, &m.wait, m.event, true)),
            Request::Flush(m) => done(self.flush(m.queue)),
            Request::Finish(m) => done(self.finish(m.queue)),
            // Control messages are the vGPU layer's; other APIs' calls are
            // other executors'.
            _ => Err(Status::INVALID_OPERATION),
        }
    }

    fn object_counts(&self) -> Vec<u64> {
        let mut counts = vec![0u64; ObjectKind::ALL.len()];
        counts[ObjectKind::Context.index()] = self.contexts.len() as u64;
        counts[ObjectKind::Queue.index()] = self.queues.len() as u64;
        counts[ObjectKind::Mem.index()] = self.mems.len() as u64;
        counts[ObjectKind::Program.index()] = self.programs.len() as u64;
        counts[ObjectKind::Kernel.index()] = self.kernels.len() as u64;
        counts[ObjectKind::Event.index()] = self.events.len() as u64;
        counts
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
