//! Calls that create objects under guest-chosen handles, and kernel
//! arguments. Each object records what a restore needs to build it again.

use std::ffi::CString;
use std::sync::{Arc, Mutex};

use cl3::types::{cl_context_properties, cl_kernel, cl_mem, cl_platform_id};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, Request, Status};

use super::args;
use super::objects::*;
use super::session::OpenClSession;
use super::subdevice::DeviceRef;
use crate::chain::GuestIo;

/// The most devices one context may name (sub-devices of a partition).
const MAX_CONTEXT_DEVICES: usize = 256;

/// Buffer flags under which the host may not write the buffer after
/// creation (`CL_MEM_HOST_READ_ONLY`, `CL_MEM_HOST_NO_ACCESS`).
const HOST_UNWRITABLE: u64 = (1 << 8) | (1 << 9);

pub(super) fn cstring(bytes: &[u8], invalid: Status) -> Result<CString, Status> {
    CString::new(bytes.to_vec()).map_err(|_| invalid)
}

/// Context properties a guest may pass: the platform (whose value names
/// the guest's platform object and is replaced by the host's) and
/// `CL_CONTEXT_INTEROP_USER_SYNC` with `CL_TRUE` or `CL_FALSE`. Everything
/// else (GL, D3D, VA and EGL interop handles, vendor extensions) would hand
/// the driver a value that means something only in the guest's process:
/// `CL_INVALID_PROPERTY`, as for a name given twice. Lists end with 0.
pub(super) fn context_properties(
    guest: &[u64],
    platform: cl_platform_id,
) -> Result<Vec<cl_context_properties>, Status> {
    const PLATFORM: u64 = 0x1084;
    const INTEROP_USER_SYNC: u64 = 0x1085;
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for pair in guest.chunks(2) {
        match *pair {
            [0] | [0, _] => break,
            [key, _] if seen.contains(&key) => return Err(Status::INVALID_PROPERTY),
            [PLATFORM, _] => out.extend([PLATFORM as cl_context_properties, platform as _]),
            [INTEROP_USER_SYNC, value @ (0 | 1)] => out.extend([
                INTEROP_USER_SYNC as cl_context_properties,
                value as cl_context_properties,
            ]),
            _ => return Err(Status::INVALID_PROPERTY),
        }
        seen.push(pair[0]);
    }
    out.push(0);
    Ok(out)
}

/// Queue properties as a zero-terminated list of pairs.
pub(super) fn queue_properties(guest: &[u64]) -> Result<Vec<u64>, Status> {
    let mut props = guest.to_vec();
    if props.len() % 2 == 1 && props.last() == Some(&0) {
        props.pop();
    }
    if props.len() % 2 == 1 {
        return Err(Status::INVALID_VALUE);
    }
    props.push(0);
    Ok(props)
}

impl OpenClSession {
    pub(super) fn new_context(
        &self,
        properties: &[u64],
        devices: Vec<DeviceRef>,
    ) -> Result<ContextEntry, Status> {
        let props = context_properties(properties, self.platform)?;
        let ids: Vec<_> = devices.iter().map(|d| d.raw.0).collect();
        let raw = cl3::context::create_context(&ids, props.as_ptr(), None, std::ptr::null_mut())
            .map_err(Status)?;
        Ok(ContextEntry {
            ctx: HostContext(raw),
            properties: properties.to_vec(),
            devices,
        })
    }

    pub(super) fn create_context(&mut self, m: &CreateContext) -> Result<(), Status> {
        let entry = self.new_context(&m.properties, self.device_refs(&[])?)?;
        self.contexts.insert(m.context, entry)?;
        self.prepare_staging(m.context);
        Ok(())
    }

    /// Makes the context's staging for peer transfers now, where they will
    /// need it, so that its allocation (a pinned buffer and its map, ~10 ms
    /// measured on NVIDIA) falls in the program's set-up, as the driver's
    /// own pinned pools do, rather than in its first transfer. A failure
    /// leaves it to the first transfer, which reports it.
    fn prepare_staging(&mut self, handle: u64) {
        if crate::peer::peer().is_none() {
            return;
        }
        let Ok(context) = self.contexts.get(handle).cloned() else {
            return;
        };
        if super::staging::wanted(&context) {
            if let Err(status) = self.staging_for(&context) {
                log::debug!("staging for a new context not made yet: {status}");
            }
        }
    }

    pub(super) fn create_context_on_devices(
        &mut self,
        m: &CreateContextOnDevices,
    ) -> Result<(), Status> {
        if m.devices.is_empty() || m.devices.len() > MAX_CONTEXT_DEVICES {
            return Err(Status::INVALID_VALUE);
        }
        let devices = self.device_refs(&m.devices)?;
        let entry = self.new_context(&m.properties, devices)?;
        self.contexts.insert(m.context, entry)?;
        self.prepare_staging(m.context);
        Ok(())
    }

    /// A queue, for a guest call and for a restore alike: the properties
    /// pass the same guard either way.
    pub(super) fn new_queue(
        &self,
        context: Arc<ContextEntry>,
        device: DeviceRef,
        properties: &[u64],
    ) -> Result<QueueEntry, Status> {
        // CL_INVALID_DEVICE if device is not one of the context's.
        if !context.devices.iter().any(|d| d.raw == device.raw) {
            return Err(Status::INVALID_DEVICE);
        }
        super::guard::check_queue_properties(properties)?;
        let props = queue_properties(properties)?;
        // SAFETY: `props` is a zero-terminated list that outlives the call.
        let raw = unsafe {
            cl3::command_queue::create_command_queue_with_properties(
                context.ctx.0,
                device.raw.0,
                props.as_ptr(),
            )
        }
        .map_err(Status)?;
        Ok(QueueEntry {
            queue: HostQueue(raw),
            context,
            device,
            properties: props,
            in_flight: Default::default(),
        })
    }

    pub(super) fn create_queue(&mut self, m: &CreateQueue) -> Result<(), Status> {
        let context = self.contexts.get(m.context)?.clone();
        let device = context.devices[0].clone();
        let entry = self.new_queue(context, device, &m.properties)?;
        self.queues.insert(m.queue, entry)?;
        Ok(())
    }

    pub(super) fn create_queue_on_device(&mut self, m: &CreateQueueOnDevice) -> Result<(), Status> {
        let context = self.contexts.get(m.context)?.clone();
        let device = self.device_ref(m.device)?;
        let entry = self.new_queue(context, device, &m.properties)?;
        self.queues.insert(m.queue, entry)?;
        Ok(())
    }

    /// A buffer, filled from `init` (host memory of `size` bytes) when given.
    pub(super) fn new_buffer(
        &self,
        context: Arc<ContextEntry>,
        flags: u64,
        size: u64,
        init: Option<*mut u8>,
    ) -> Result<HostMem, Status> {
        use cl3::memory::{CL_MEM_ALLOC_HOST_PTR, CL_MEM_COPY_HOST_PTR, CL_MEM_USE_HOST_PTR};
        if size == 0 || size > self.largest_allocation()? {
            return Err(Status::INVALID_BUFFER_SIZE);
        }
        // Host pointers of the guest mean nothing here: initial data comes
        // from the chain, copied in at creation.
        // A restored placed buffer becomes an ordinary one (its storage
        // was the old front-end's memory).
        let mut host_flags = flags
            & !(CL_MEM_USE_HOST_PTR
                | CL_MEM_COPY_HOST_PTR
                | CL_MEM_ALLOC_HOST_PTR
                | MEM_FLAG_PLACED);
        if init.is_some() {
            host_flags |= CL_MEM_COPY_HOST_PTR;
        }
        let len = usize::try_from(size).map_err(|_| Status::INVALID_BUFFER_SIZE)?;
        let charge = self
            .quota
            .as_ref()
            .map(|q| q.charge_memory(size))
            .transpose()?;
        let host_ptr = init.unwrap_or(std::ptr::null_mut());
        // SAFETY: with COPY_HOST_PTR, `host_ptr` points at `size` readable
        // bytes (the caller's contract); otherwise it is NULL.
        let raw = unsafe {
            cl3::memory::create_buffer(context.ctx.0, host_flags, len, host_ptr as *mut _)
        }
        .map_err(Status)?;
        Ok(HostMem {
            raw,
            size,
            flags,
            context,
            parent: None,
            charge: std::sync::Mutex::new(charge),
            image: None,
            written: Default::default(),
            storage: None,
        })
    }

    /// With `init` shorter than the buffer, only that prefix is written now
    /// (the guest library sends the rest with `InitBuffer`).
    pub(super) fn create_buffer(
        &mut self,
        m: &CreateBuffer,
        io: &mut GuestIo,
    ) -> Result<(), Status> {
        let context = self.contexts.get(m.context)?.clone();
        if m.init.len > m.size {
            return Err(Status::INVALID_VALUE);
        }
        if m.flags & MEM_FLAG_PLACED != 0 {
            let mem = self.new_placed_buffer(context, m, io)?;
            self.mems.insert(m.mem, mem)?;
            return Ok(());
        }
        // Contiguous initial data is copied in at creation. Data over many
        // descriptors is never gathered into a host copy of the guest's
        // length: it is streamed in after creation, like the prefix below,
        // through a bounded map of the buffer. Only buffers the host may not
        // write (HOST_READ_ONLY, HOST_NO_ACCESS) must be filled at
        // creation; their copy is staged once the size has passed the quota.
        let whole = m.init.len == m.size && m.size > 0;
        let mut staging = Vec::new();
        let mut stream = !whole && m.init.len > 0;
        let init = if whole {
            match io.out_slices(m.init)?.as_slice() {
                [only] => Some(only.ptr),
                _ if m.flags & HOST_UNWRITABLE == 0 => {
                    stream = true;
                    None
                }
                _ => {
                    self.check_memory_room(m.size)?;
                    staging.resize(
                        usize::try_from(m.size).map_err(|_| Status::INVALID_BUFFER_SIZE)?,
                        0,
                    );
                    io.out.read(m.init.offset, &mut staging)?;
                    Some(staging.as_mut_ptr())
                }
            }
        } else {
            None
        };
        let mem = self.new_buffer(context, m.flags, m.size, init)?;
        self.mems.insert(m.mem, mem)?;
        if stream {
            let prefix = InitBuffer {
                mem: m.mem,
                offset: 0,
                data: m.init,
            };
            if let Err(status) = self.init_buffer(&prefix, io) {
                let _ = self.mems.release(m.mem);
                return Err(status);
            }
        }
        Ok(())
    }

    /// The largest single allocation the guest may make: the one it was
    /// told of (the vGPU's, from its memory size), as for images, within
    /// the device's own. A bigger buffer is refused the same way on every
    /// host, whatever this device would take.
    pub(super) fn largest_allocation(&self) -> Result<u64, Status> {
        let device =
            cl3::device::get_device_info(self.device, cl3::device::CL_DEVICE_MAX_MEM_ALLOC_SIZE)
                .map_err(Status)?
                .to_ulong();
        Ok(self
            .advertised
            .as_ref()
            .map_or(device, |p| p.max_mem_alloc_size.min(device)))
    }

    /// Refuses a buffer of `size` bytes before anything is allocated for
    /// it: beyond the largest allocation or the VM's free quota.
    fn check_memory_room(&self, size: u64) -> Result<(), Status> {
        if size > self.largest_allocation()? {
            return Err(Status::INVALID_BUFFER_SIZE);
        }
        if let Some(quota) = &self.quota {
            let limit = quota.limits.memory_bytes;
            if limit != 0 && size > limit.saturating_sub(quota.memory_used()) {
                return Err(Status::OUT_OF_RESOURCES);
            }
        }
        Ok(())
    }

    pub(super) fn new_sub_buffer(
        &self,
        parent: Arc<HostMem>,
        flags: u64,
        origin: u64,
        size: u64,
    ) -> Result<HostMem, Status> {
        let region = cl3::memory::cl_buffer_region {
            origin: usize::try_from(origin).map_err(|_| Status::INVALID_VALUE)?,
            size: usize::try_from(size).map_err(|_| Status::INVALID_VALUE)?,
        };
        // SAFETY: `region` is a valid cl_buffer_region for the duration of the call.
        let raw = unsafe {
            cl3::memory::create_sub_buffer(
                parent.raw,
                flags,
                cl3::memory::CL_BUFFER_CREATE_TYPE_REGION,
                &region as *const _ as *const _,
            )
        }
        .map_err(Status)?;
        Ok(HostMem {
            raw,
            size,
            flags,
            context: parent.context.clone(),
            written: parent.written.clone(),
            parent: Some((parent, origin)),
            charge: std::sync::Mutex::new(None),
            image: None,
            storage: None,
        })
    }

    pub(super) fn create_sub_buffer(&mut self, m: &CreateSubBuffer) -> Result<(), Status> {
        let parent = self.mems.get(m.parent)?.clone();
        if parent.image.is_some() {
            return Err(Status::INVALID_MEM_OBJECT);
        }
        let mem = self.new_sub_buffer(parent, m.flags, m.origin, m.size)?;
        self.mems.insert(m.mem, mem)?;
        Ok(())
    }

    /// A program created (not built) from its origin, for a guest call and
    /// for a restore alike: sources, binaries and options pass the same
    /// guards either way.
    pub(super) fn new_program(
        &self,
        context: Arc<ContextEntry>,
        origin: ProgramOrigin,
    ) -> Result<ProgramEntry, Status> {
        let raw = match &origin {
            ProgramOrigin::Source(source) => {
                super::guard::check_source(source)?;
                let source = std::str::from_utf8(source).map_err(|_| Status::INVALID_VALUE)?;
                let source = super::pragma::guarded_source(context.ctx.0, self.device, source);
                cl3::program::create_program_with_source(context.ctx.0, &[&source])
            }
            ProgramOrigin::Il(il) => cl3::program::create_program_with_il(context.ctx.0, il),
            ProgramOrigin::Binary(binary) => {
                if binary.is_empty() {
                    return Err(Status::INVALID_VALUE);
                }
                let device = super::seal::device_context(self.platform, self.device);
                let binary = super::seal::unseal(&device, binary)?;
                // Every device of a context is the served device or a part
                // of it: one binary serves them all.
                let ids = context.device_ids();
                let binaries = vec![binary; ids.len()];
                // SAFETY: one binary per device, slices that outlive the call.
                unsafe { cl3::program::create_program_with_binary(context.ctx.0, &ids, &binaries) }
            }
            ProgramOrigin::Linked { inputs, options } => {
                super::guard::check_options(options, Status::INVALID_LINKER_OPTIONS)?;
                let options = cstring(options, Status::INVALID_LINKER_OPTIONS)?;
                let raw_inputs: Vec<_> = inputs.iter().map(|p| p.program.0).collect();
                if raw_inputs.is_empty() {
                    return Err(Status::INVALID_VALUE);
                }
                // SAFETY: every input program is live (held in `inputs`).
                unsafe {
                    cl3::program::link_program(
                        context.ctx.0,
                        &context.device_ids(),
                        &options,
                        &raw_inputs,
                        None,
                        std::ptr::null_mut(),
                    )
                }
            }
        }
        .map_err(Status)?;
        let build = match &origin {
            ProgramOrigin::Linked { options, .. } => BuildRecord::Built {
                options: options.clone(),
            },
            _ => BuildRecord::None,
        };
        Ok(ProgramEntry {
            program: HostProgram(raw),
            context,
            origin,
            build: Mutex::new(build),
        })
    }

    pub(super) fn create_program(&mut self, request: &Request) -> Result<Vec<u8>, Status> {
        let (handle, context, origin) = match request {
            Request::CreateProgramWithSource(m) => (
                m.program,
                m.context,
                ProgramOrigin::Source(m.source.clone()),
            ),
            Request::CreateProgramWithBinary(m) => (
                m.program,
                m.context,
                ProgramOrigin::Binary(m.binary.clone()),
            ),
            Request::CreateProgramWithIl(m) => {
                (m.program, m.context, ProgramOrigin::Il(m.il.clone()))
            }
            Request::LinkProgram(m) => {
                let inputs = self.programs.get_all(&m.inputs, Status::INVALID_PROGRAM)?;
                (
                    m.program,
                    m.context,
                    ProgramOrigin::Linked {
                        inputs,
                        options: m.options.clone(),
                    },
                )
            }
            _ => return Err(Status::INVALID_OPERATION),
        };
        let context = self.contexts.get(context)?.clone();
        let entry = self.new_program(context, origin)?;
        self.programs.insert(handle, entry)?;
        Ok(Vec::new())
    }

    /// Builds (or only compiles) a program and records it.
    pub(super) fn build(&self, program: &ProgramEntry, record: BuildRecord) -> Result<(), Status> {
        let result = match &record {
            BuildRecord::None => Ok(()),
            BuildRecord::Built { options }
            | BuildRecord::Failed {
                options,
                compile_only: false,
            } => {
                super::guard::check_options(options, Status::INVALID_BUILD_OPTIONS)?;
                arg_info_or_not(options, Status::INVALID_BUILD_OPTIONS, |options| {
                    cl3::program::build_program(
                        program.program.0,
                        &program.context.device_ids(),
                        options,
                        None,
                        std::ptr::null_mut(),
                    )
                })?
            }
            BuildRecord::Compiled { options }
            | BuildRecord::Failed {
                options,
                compile_only: true,
            } => {
                super::guard::check_options(options, Status::INVALID_COMPILER_OPTIONS)?;
                arg_info_or_not(options, Status::INVALID_COMPILER_OPTIONS, |options| {
                    cl3::program::compile_program(
                        program.program.0,
                        &program.context.device_ids(),
                        options,
                        &[],
                        &[],
                        None,
                        std::ptr::null_mut(),
                    )
                })?
            }
        };
        let record = match (result, record) {
            (
                Ok(()),
                BuildRecord::Failed {
                    options,
                    compile_only: true,
                },
            ) => BuildRecord::Compiled { options },
            (Ok(()), BuildRecord::Failed { options, .. }) => BuildRecord::Built { options },
            (Ok(()), record) => record,
            (Err(_), BuildRecord::Compiled { options }) => BuildRecord::Failed {
                options,
                compile_only: true,
            },
            (Err(_), BuildRecord::Built { options }) => BuildRecord::Failed {
                options,
                compile_only: false,
            },
            (Err(_), record) => record,
        };
        *program.build.lock().unwrap_or_else(|e| e.into_inner()) = record;
        result.map_err(Status)
    }

    pub(super) fn build_program(&mut self, m: &BuildProgram) -> Result<Vec<u8>, Status> {
        let program = self.programs.get(m.program)?;
        self.build(
            program,
            BuildRecord::Built {
                options: m.options.clone(),
            },
        )?;
        Ok(Vec::new())
    }

    pub(super) fn compile_program(&mut self, m: &CompileProgram) -> Result<Vec<u8>, Status> {
        let program = self.programs.get(m.program)?;
        self.build(
            program,
            BuildRecord::Compiled {
                options: m.options.clone(),
            },
        )?;
        Ok(Vec::new())
    }

    pub(super) fn new_kernel(
        &self,
        program: Arc<ProgramEntry>,
        name: &[u8],
    ) -> Result<HostKernel, Status> {
        let cname = cstring(name, Status::INVALID_KERNEL_NAME)?;
        let raw = cl3::kernel::create_kernel(program.program.0, &cname).map_err(Status)?;
        Ok(kernel_entry(raw, program, name.to_vec()))
    }

    pub(super) fn create_kernel(&mut self, m: &CreateKernel) -> Result<(), Status> {
        let program = self.programs.get(m.program)?.clone();
        let kernel = self.new_kernel(program, &m.name)?;
        self.kernels.insert(m.kernel, kernel)?;
        Ok(())
    }

    /// Clones by creating a fresh kernel and re-applying the recorded
    /// arguments: PoCL's `clCloneKernel` over-reads its heap when a `__local`
    /// argument was set (fuzz finding F8), and a fresh kernel needs nothing
    /// from the driver's clone path.
    pub(super) fn clone_kernel(&mut self, m: &CloneKernel) -> Result<(), Status> {
        let source = self.kernels.get(m.source)?.clone();
        let kernel = self.new_kernel(source.program.clone(), &source.name)?;
        let args = source
            .args
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (index, arg) in args.into_iter().enumerate() {
            if !matches!(arg, ArgRecord::Unset) {
                Self::apply_arg(&kernel, index as u32, arg)?;
            }
        }
        self.kernels.insert(m.kernel, kernel)?;
        Ok(())
    }

    /// Sets one argument on the host kernel and records it.
    pub(super) fn apply_arg(kernel: &HostKernel, index: u32, arg: ArgRecord) -> Result<(), Status> {
        let arg = Self::admit_arg(kernel, index, arg)?;
        set_driver_arg(kernel, index, &arg)?;
        kernel.args.lock().unwrap_or_else(|e| e.into_inner())[index as usize] = arg;
        Ok(())
    }

    /// The argument as the kernel may take it (`args::admit`), or why not.
    fn admit_arg(kernel: &HostKernel, index: u32, arg: ArgRecord) -> Result<ArgRecord, Status> {
        if index >= kernel.num_args {
            return Err(Status::INVALID_ARG_INDEX);
        }
        args::admit(kernel.classes[index as usize], arg)
    }

    /// `clSetKernelArg`, call `call` of the batch: issued here, or, while
    /// the launch thread has launches, handed to it after them.
    pub(super) fn set_kernel_arg(&mut self, m: &SetKernelArg, call: usize) -> Result<(), Status> {
        let kernel = self.kernels.get(m.kernel)?.clone();
        let arg = match ArgKind::from_u32(m.arg_kind).ok_or(Status::INVALID_VALUE)? {
            ArgKind::Value => {
                if m.value.len() as u64 != m.size {
                    return Err(Status::INVALID_ARG_SIZE);
                }
                ArgRecord::Value(m.value.clone())
            }
            ArgKind::Mem => ArgRecord::Mem(self.mems.get(m.handle)?.clone()),
            ArgKind::NullMem => ArgRecord::NullMem,
            ArgKind::Local => ArgRecord::Local(m.size),
            ArgKind::Sampler => ArgRecord::Sampler(self.samplers.get(m.handle)?.clone()),
            ArgKind::Svm => self.svm_arg(&kernel, &m.value)?,
        };
        if !self.launches.busy() {
            return Self::apply_arg(&kernel, m.index, arg);
        }
        let arg = Self::admit_arg(&kernel, m.index, arg)?;
        kernel.args.lock().unwrap_or_else(|e| e.into_inner())[m.index as usize] = arg.clone();
        let origin = self.launches.origin(call);
        self.launches.hand_over(
            super::launch_jobs::OpenClJob::SetArg {
                origin,
                kernel,
                index: m.index,
                arg,
            },
            "opencl",
        );
        Ok(())
    }
}

/// `clSetKernelArg` (or its SVM form) of an admitted argument.
pub(super) fn set_driver_arg(
    kernel: &HostKernel,
    index: u32,
    arg: &ArgRecord,
) -> Result<(), Status> {
    let null_mem: cl_mem = std::ptr::null_mut();
    let mem_size = std::mem::size_of::<cl_mem>();
    // SAFETY: in every arm the value pointer is valid for its size during
    // the call, as clSetKernelArg requires.
    let result = unsafe {
        match arg {
            ArgRecord::Unset => return Err(Status::INVALID_ARG_VALUE),
            ArgRecord::Value(bytes) => cl3::kernel::set_kernel_arg(
                kernel.raw,
                index,
                bytes.len(),
                bytes.as_ptr() as *const _,
            ),
            ArgRecord::Mem(mem) => cl3::kernel::set_kernel_arg(
                kernel.raw,
                index,
                mem_size,
                &mem.raw as *const cl_mem as *const _,
            ),
            ArgRecord::Sampler(sampler) => cl3::kernel::set_kernel_arg(
                kernel.raw,
                index,
                std::mem::size_of::<cl3::types::cl_sampler>(),
                &sampler.raw as *const cl3::types::cl_sampler as *const _,
            ),
            ArgRecord::NullMem => cl3::kernel::set_kernel_arg(
                kernel.raw,
                index,
                mem_size,
                &null_mem as *const cl_mem as *const _,
            ),
            ArgRecord::Svm(_, addr) => cl3::kernel::set_kernel_arg_svm_pointer(
                kernel.raw,
                index,
                *addr as *const std::ffi::c_void,
            ),
            // A NULL value with a size: `__local` memory (or a NULL
            // buffer for a pointer argument), as the spec defines.
            ArgRecord::Local(size) => cl3::kernel::set_kernel_arg(
                kernel.raw,
                index,
                usize::try_from(*size).map_err(|_| Status::INVALID_ARG_SIZE)?,
                std::ptr::null(),
            ),
        }
    };
    result.map_err(Status)
}

/// The guest's build options plus the one that keeps argument info.
fn with_arg_info(options: &[u8]) -> Vec<u8> {
    let mut all = options.to_vec();
    all.extend_from_slice(args::ARG_INFO_OPTION.as_bytes());
    all
}

/// Runs a build (or compile) with the option that keeps argument info and,
/// when that fails, once more with the guest's options alone: NVIDIA's
/// OpenCL compiler (driver 580) fails every kernel without arguments
/// under `-cl-kernel-arg-info` (ptxas: "Parsing error near '}'"), natively
/// too, so a guest's `kernel void k() {}` would never build. A program
/// built the second way may give no argument info; its arguments are then
/// classed `Unknown` (`args::classify`), the conservative class. A build
/// that fails both ways reports the second, whose log is the guest's own.
fn arg_info_or_not(
    options: &[u8],
    invalid: Status,
    run: impl Fn(&std::ffi::CStr) -> Result<(), cl3::types::cl_int>,
) -> Result<Result<(), cl3::types::cl_int>, Status> {
    let first = run(&cstring(&with_arg_info(options), invalid)?);
    if first.is_ok() {
        return Ok(first);
    }
    Ok(run(&cstring(options, invalid)?))
}

fn kernel_entry(raw: cl_kernel, program: Arc<ProgramEntry>, name: Vec<u8>) -> HostKernel {
    let num_args = cl3::kernel::get_kernel_data(raw, cl3::kernel::CL_KERNEL_NUM_ARGS)
        .ok()
        .and_then(|b| Some(u32::from_le_bytes(b.get(..4)?.try_into().ok()?)))
        .unwrap_or(0);
    let mut classes: Vec<_> = (0..num_args).map(|i| args::classify(raw, i)).collect();
    if let Ok(cname) = CString::new(name.clone()) {
        super::arg_probe::refine(&program, &cname, &mut classes);
    }
    HostKernel {
        raw,
        num_args,
        name,
        program,
        classes,
        args: Mutex::new(vec![ArgRecord::Unset; num_args as usize]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_platform_and_user_sync_context_properties_pass() {
        let platform = 0x5000 as cl_platform_id;
        assert_eq!(
            context_properties(&[0x1084, 7, 0x1085, 1, 0], platform),
            Ok(vec![0x1084, 0x5000, 0x1085, 1, 0])
        );
        assert_eq!(context_properties(&[], platform), Ok(vec![0]));
        for bad in [
            &[0x2008, 0xdead, 0][..],   // CL_GL_CONTEXT_KHR
            &[0x1085, 2, 0],            // not a cl_bool
            &[0x1085, 1, 0x1085, 0, 0], // twice
            &[0x1085],                  // cut short
            &[0x4000_0000, 1, 0],       // a vendor's
        ] {
            assert_eq!(
                context_properties(bad, platform),
                Err(Status::INVALID_PROPERTY),
                "{bad:x?}"
            );
        }
    }
}
