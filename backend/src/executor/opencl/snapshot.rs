//! Save an OpenCL session into the state model, and build one from it on
//! this executor's device. Objects the guest released but another object
//! still holds (a released context of a live buffer, a released buffer still
//! set as a kernel argument) are saved too, under ids of their own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use vgpu_migration as m;
use vgpu_protocol::Status;

use super::objects::*;
use super::session::OpenClSession;
use crate::executor::{BufferSink, BufferSource, RestoredSession, SavedSession, SnapshotError};

const EXECUTION_STATUS: u32 = 0x11D3; // CL_EVENT_COMMAND_EXECUTION_STATUS
const SUBMITTED: i32 = 2; // CL_SUBMITTED

/// Ids of one object kind: guest handles for held objects, fresh ids for
/// the rest.
struct Ids<T> {
    by_ptr: HashMap<*const T, u64>,
    order: Vec<(u64, Arc<T>, Option<m::GuestRef>)>,
    next_hidden: u64,
}

impl<T> Ids<T> {
    fn new() -> Self {
        Ids {
            by_ptr: HashMap::new(),
            order: Vec::new(),
            next_hidden: 1 << 63,
        }
    }

    fn guest(&mut self, handle: u64, object: &Arc<T>, refs: u32) {
        self.by_ptr.insert(Arc::as_ptr(object), handle);
        self.order
            .push((handle, object.clone(), Some(m::GuestRef { handle, refs })));
    }

    /// The id of `object`, adding it as a hidden object when unknown.
    fn id(&mut self, object: &Arc<T>) -> u64 {
        if let Some(id) = self.by_ptr.get(&Arc::as_ptr(object)) {
            return *id;
        }
        let id = self.next_hidden;
        self.next_hidden += 1;
        self.by_ptr.insert(Arc::as_ptr(object), id);
        self.order.push((id, object.clone(), None));
        id
    }
}

fn save_origin(origin: &ProgramOrigin, device: &m::DeviceIdentity) -> m::ProgramOrigin {
    match origin {
        ProgramOrigin::Source(s) => m::ProgramOrigin::Source(s.clone()),
        ProgramOrigin::Il(il) => m::ProgramOrigin::Il(il.clone()),
        ProgramOrigin::Binary(b) => m::ProgramOrigin::Binary(m::DeviceBinary {
            device: device.clone(),
            bytes: b.clone(),
        }),
        ProgramOrigin::Linked { inputs, .. } => m::ProgramOrigin::Linked(
            inputs
                .iter()
                .map(|input| m::LinkInput {
                    origin: save_origin(&input.origin, device),
                    compile_options: match &*input.build.lock().unwrap_or_else(|e| e.into_inner()) {
                        BuildRecord::Compiled { options } => options.clone(),
                        _ => Vec::new(),
                    },
                })
                .collect(),
        ),
    }
}

fn save_build(build: &BuildRecord) -> m::ProgramBuild {
    match build.clone() {
        BuildRecord::None => m::ProgramBuild::None,
        BuildRecord::Built { options } => m::ProgramBuild::Built { options },
        BuildRecord::Compiled { options } => m::ProgramBuild::Compiled { options },
        BuildRecord::Failed {
            options,
            compile_only,
        } => m::ProgramBuild::Failed {
            options,
            compile_only,
        },
    }
}

fn event_status(event: &EventEntry) -> i32 {
    cl3::event::get_event_data(event.event.0, EXECUTION_STATUS)
        .ok()
        .and_then(|b| Some(i32::from_le_bytes(b.get(..4)?.try_into().ok()?)))
        .unwrap_or(SUBMITTED)
}

/// Reads a buffer's contents through a queue of the backend's own.
pub(super) struct DeviceBufferSource {
    pub(super) mem: Arc<HostMem>,
    pub(super) queue: Arc<QueueEntry>,
}

impl BufferSource for DeviceBufferSource {
    fn size(&self) -> u64 {
        self.mem.size
    }

    fn read(&mut self, offset: u64, buf: &mut [u8]) -> Result<(), Status> {
        super::bounce::transfer(
            self.queue.queue.0,
            &self.mem,
            offset,
            super::bounce::Direction::ToHost(buf),
        )
    }

    fn object(&self) -> Option<(u64, u64)> {
        Some((self.mem.written.serial(), 0))
    }

    fn written_at(&self) -> u64 {
        self.mem.written.epoch()
    }
}

struct DeviceBufferSink(DeviceBufferSource);

impl BufferSink for DeviceBufferSink {
    fn write(&mut self, offset: u64, data: &[u8]) -> Result<(), Status> {
        let source = &self.0;
        super::bounce::transfer(
            source.queue.queue.0,
            &source.mem,
            offset,
            super::bounce::Direction::ToDevice(data),
        )
    }
}

impl OpenClSession {
    /// Waits until every queue of the session has run everything issued.
    /// Commands behind a user event nobody sets would hold this forever,
    /// and with it the quiesce of the whole vGPU: when the queues have not
    /// drained within `QUIESCE_DRAIN` and the session has unset user
    /// events, those are failed (as when the session closes), so only
    /// this session sees an error. A kernel that is merely long is waited
    /// for.
    pub(super) fn drain(&mut self) -> Result<(), Status> {
        let queues: Vec<_> = self
            .queues
            .entries()
            .map(|(_, queue, _)| queue.queue.0)
            .chain(self.internal_queues.iter().map(|q| q.queue.0))
            .collect();
        let deadline = std::time::Instant::now() + crate::executor::QUIESCE_DRAIN;
        for &queue in &queues {
            // SAFETY: a live queue of the session; no wait list.
            let marker = unsafe {
                cl3::command_queue::enqueue_marker_with_wait_list(queue, 0, std::ptr::null())
            }
            .map_err(Status)?;
            let marker = HostEvent(marker);
            // Unflushed, a marker may never leave the host queue.
            cl3::command_queue::flush(queue).map_err(Status)?;
            let pending = || {
                cl3::event::get_event_data(marker.0, EXECUTION_STATUS)
                    .ok()
                    .and_then(|b| Some(i32::from_le_bytes(b.get(..4)?.try_into().ok()?)))
                    .is_some_and(|status| status > 0)
            };
            while pending() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            if pending() && self.has_unset_user_events() {
                crate::guest_warn!(
                    super::guard::warnings(),
                    "a session's commands wait on user events nobody set after {:?} of a quiesce: failing those events",
                    crate::executor::QUIESCE_DRAIN
                );
                (crate::executor::ExecSession::aborter(self))();
            }
        }
        for queue in queues {
            cl3::command_queue::finish(queue).map_err(Status)?;
        }
        Ok(())
    }

    pub(super) fn save_session(
        &mut self,
        device: &m::DeviceIdentity,
    ) -> Result<SavedSession, SnapshotError> {
        // SVM addresses are device addresses the guest keeps in its own
        // memory; another driver instance cannot hand out the same ones.
        if self.holds_svm() {
            return Err(SnapshotError::Unsupported(
                "a session holding shared virtual memory (SVM) allocations",
            ));
        }
        let started = std::time::Instant::now();
        self.drain()
            .map_err(|s| SnapshotError::device("drain the queues", s))?;
        let drain = started.elapsed();

        let mut contexts = Ids::<ContextEntry>::new();
        let mut queues = Ids::<QueueEntry>::new();
        let mut mems = Ids::<HostMem>::new();
        let mut programs = Ids::<ProgramEntry>::new();
        let mut kernels = Ids::<HostKernel>::new();
        let mut events = Ids::<EventEntry>::new();
        let mut samplers = Ids::<super::image::HostSampler>::new();
        for (h, o, r) in self.samplers.entries() {
            samplers.guest(h, o, r);
        }
        for (h, o, r) in self.contexts.entries() {
            contexts.guest(h, o, r);
        }
        for (h, o, r) in self.queues.entries() {
            queues.guest(h, o, r);
        }
        for (h, o, r) in self.mems.entries() {
            mems.guest(h, o, r);
        }
        for (h, o, r) in self.programs.entries() {
            programs.guest(h, o, r);
        }
        for (h, o, r) in self.kernels.entries() {
            kernels.guest(h, o, r);
        }
        for (h, o, r) in self.events.entries() {
            events.guest(h, o, r);
        }

        let mut state = m::OpenClStateV1::default();
        // Kernels first: they may pull in hidden programs and buffers.
        let mut i = 0;
        while i < kernels.order.len() {
            let (kid, kernel, guest) = kernels.order[i].clone();
            let args = kernel
                .args
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let args = args
                .iter()
                .map(|a| match a {
                    ArgRecord::Unset => m::KernelArg::Unset,
                    ArgRecord::Value(v) => m::KernelArg::Value(v.clone()),
                    ArgRecord::Mem(mem) => m::KernelArg::Buffer(mems.id(mem)),
                    ArgRecord::Local(size) => m::KernelArg::Local(*size),
                    ArgRecord::NullMem => m::KernelArg::NullBuffer,
                    ArgRecord::Sampler(s) => m::KernelArg::Sampler(samplers.id(s)),
                    // Never reached: a session holding SVM refuses to save.
                    ArgRecord::Svm(..) => m::KernelArg::Unset,
                })
                .collect();
            state.kernels.push(m::KernelState {
                id: kid,
                guest,
                program: programs.id(&kernel.program),
                name: String::from_utf8_lossy(&kernel.name).into_owned(),
                args,
            });
            i += 1;
        }
        let mut i = 0;
        while i < programs.order.len() {
            let (pid, program, guest) = programs.order[i].clone();
            let build = program
                .build
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            state.programs.push(m::ProgramState {
                id: pid,
                guest,
                context: contexts.id(&program.context),
                origin: save_origin(&program.origin, device),
                build: save_build(&build),
                executable: None,
            });
            i += 1;
        }
        // Parents of sub-buffers and buffers of images may be hidden; they
        // join the list as found.
        let mut images = Vec::new();
        let mut i = 0;
        while i < mems.order.len() {
            let (mid, mem, guest) = mems.order[i].clone();
            if let Some(image) = &mem.image {
                images.push(super::image::save_image(
                    mid,
                    guest,
                    contexts.id(&mem.context),
                    &mem,
                    image,
                    image.buffer.as_ref().map(|b| mems.id(b)),
                ));
                i += 1;
                continue;
            }
            let parent = mem.parent.as_ref().map(|(p, origin)| m::SubRegion {
                parent: mems.id(p),
                origin: *origin,
            });
            state.buffers.push(m::BufferState {
                id: mid,
                guest,
                context: contexts.id(&mem.context),
                flags: mem.flags,
                size: mem.size,
                parent,
            });
            i += 1;
        }
        // Parents before sub-buffers, as a restore creates them.
        state.buffers.sort_by_key(|b| b.parent.is_some());
        for (qid, queue, guest) in queues.order.clone() {
            state.queues.push(m::QueueState {
                id: qid,
                guest,
                context: contexts.id(&queue.context),
                properties: queue.properties.clone(),
            });
        }
        for (sid, sampler, guest) in samplers.order.clone() {
            state.samplers.push(m::SamplerState {
                id: sid,
                guest,
                context: contexts.id(&sampler.context),
                properties: sampler.properties.clone(),
            });
        }
        for (eid, event, guest) in events.order.clone() {
            let status = event_status(&event);
            let kind = match &event.user {
                Some(set) => m::EventKind::User {
                    status: set
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .unwrap_or(status),
                },
                None => m::EventKind::Command { status },
            };
            state.events.push(m::EventState {
                id: eid,
                guest,
                context: contexts.id(&event.context),
                kind,
            });
        }
        for (cid, context, guest) in contexts.order.clone() {
            state.contexts.push(m::ContextState {
                id: cid,
                guest,
                properties: context.properties.clone(),
            });
        }
        let topology = self.save_topology(
            &contexts
                .order
                .iter()
                .map(|(id, c, _)| (*id, c.clone()))
                .collect::<Vec<_>>(),
            &queues
                .order
                .iter()
                .map(|(id, q, _)| (*id, q.clone()))
                .collect::<Vec<_>>(),
        );

        // Contents are read through debts: as of now, whenever read.
        self.prune_debts();
        let mut buffers: Vec<(u64, Box<dyn BufferSource>)> = Vec::new();
        for buffer in state.buffers.iter().filter(|b| b.parent.is_none()) {
            let (_, mem, _) = mems
                .order
                .iter()
                .find(|(id, _, _)| *id == buffer.id)
                .expect("listed above");
            let queue = self
                .internal_queue(&mem.context)
                .map_err(|s| SnapshotError::device("create a queue to read buffers", s))?;
            let source = DeviceBufferSource {
                mem: mem.clone(),
                queue,
            };
            // Placed buffers too: `save` closed the placement gate, so
            // from now on the guest's copies into one go through commands.
            buffers.push((buffer.id, self.owe_buffer(source)));
        }
        for image in images.iter().filter(|i| i.buffer.is_none()) {
            let (_, mem, _) = mems
                .order
                .iter()
                .find(|(id, _, _)| *id == image.id)
                .expect("listed above");
            let queue = self
                .internal_queue(&mem.context)
                .map_err(|s| SnapshotError::device("create a queue to read images", s))?;
            let source = Box::new(super::image::ImageContents::new(mem.clone(), queue));
            buffers.push((image.id, self.owe_image(mem, source)));
        }
        state.images = images;
        state.devices = topology;
        Ok(SavedSession {
            state: state.into(),
            buffers,
            drain,
        })
    }

    /// Builds a session from its saved state on this device; buffer contents
    /// arrive afterwards through the returned sinks. Contexts and buffers
    /// that `ahead` has the same are taken from it instead of created.
    /// Also answers what it built, by the state's ids.
    pub(super) fn restore_objects(
        mut self,
        saved: &m::OpenClStateV1,
        device: &m::DeviceIdentity,
        mut ahead: Option<&mut super::adopt::Ahead>,
    ) -> Result<(RestoredSession, super::adopt::Built), SnapshotError> {
        let images = &saved.images;
        let topology = &saved.devices;
        let fail = |what: &str, id: u64| {
            let what = what.to_string();
            move |status: Status| SnapshotError::Rebuild { what, id, status }
        };
        let subs = self.restore_sub_devices(topology)?;
        let mut contexts: HashMap<u64, Arc<ContextEntry>> = HashMap::new();
        for c in &saved.contexts {
            let devices = topology
                .context_devices(c.id)
                .into_iter()
                .map(|d| self.restored_device(&subs, d))
                .collect::<Result<Vec<_>, _>>()?;
            let placed = topology.context_devices(c.id);
            let prepared = ahead
                .as_deref_mut()
                .and_then(|a| a.context(c.id, &c.properties, &placed));
            let context = match prepared {
                Some(context) => context,
                None => Arc::new(
                    self.new_context(&c.properties, devices)
                        .map_err(fail("context", c.id))?,
                ),
            };
            contexts.insert(c.id, context);
        }
        let context = |id: u64| {
            contexts.get(&id).cloned().ok_or(SnapshotError::Dangling {
                what: "context",
                id,
            })
        };

        let mut mems: HashMap<u64, Arc<HostMem>> = HashMap::new();
        for b in &saved.buffers {
            let prepared = match ahead.as_deref_mut() {
                Some(a) if b.parent.is_none() => a.buffer(b, &context(b.context)?),
                _ => None,
            };
            if let Some(mem) = prepared {
                mems.insert(b.id, mem);
                continue;
            }
            let mem = match &b.parent {
                None => self.new_buffer(context(b.context)?, b.flags, b.size, None),
                Some(sub) => {
                    let parent = mems
                        .get(&sub.parent)
                        .cloned()
                        .ok_or(SnapshotError::Dangling {
                            what: "buffer",
                            id: sub.parent,
                        })?;
                    self.new_sub_buffer(parent, b.flags, sub.origin, b.size)
                }
            }
            .map_err(fail("buffer", b.id))?;
            mems.insert(b.id, Arc::new(mem));
        }
        for image in images {
            let buffer = match image.buffer {
                Some(id) => Some(
                    mems.get(&id)
                        .cloned()
                        .ok_or(SnapshotError::Dangling { what: "buffer", id })?,
                ),
                None => None,
            };
            let record = super::image::restore_record(image, buffer);
            let mem = self
                .new_image(context(image.context)?, image.flags, record)
                .map_err(fail("image", image.id))?;
            if mem.size != image.size && image.buffer.is_none() {
                return Err(fail("image", image.id)(Status::INVALID_IMAGE_SIZE));
            }
            mems.insert(image.id, Arc::new(mem));
        }

        let mut samplers: HashMap<u64, Arc<super::image::HostSampler>> = HashMap::new();
        for s in &saved.samplers {
            let sampler = self
                .new_sampler(context(s.context)?, &s.properties)
                .map_err(fail("sampler", s.id))?;
            samplers.insert(s.id, Arc::new(sampler));
        }

        let mut programs: HashMap<u64, Arc<ProgramEntry>> = HashMap::new();
        for p in &saved.programs {
            let program = self
                .restore_program(context(p.context)?, &p.origin, &p.build, device)
                .map_err(|e| e.for_object("program", p.id))?;
            programs.insert(p.id, Arc::new(program));
        }

        let mut kernels: HashMap<u64, Arc<HostKernel>> = HashMap::new();
        for k in &saved.kernels {
            let program = programs
                .get(&k.program)
                .cloned()
                .ok_or(SnapshotError::Dangling {
                    what: "program",
                    id: k.program,
                })?;
            let kernel = self
                .new_kernel(program, k.name.as_bytes())
                .map_err(fail("kernel", k.id))?;
            for (index, arg) in k.args.iter().enumerate() {
                let arg = match arg {
                    m::KernelArg::Unset => continue,
                    m::KernelArg::Value(v) => ArgRecord::Value(v.clone()),
                    m::KernelArg::Buffer(id) => {
                        ArgRecord::Mem(mems.get(id).cloned().ok_or(SnapshotError::Dangling {
                            what: "buffer",
                            id: *id,
                        })?)
                    }
                    m::KernelArg::NullBuffer => ArgRecord::NullMem,
                    m::KernelArg::Local(size) => ArgRecord::Local(*size),
                    m::KernelArg::Sampler(id) => ArgRecord::Sampler(
                        samplers.get(id).cloned().ok_or(SnapshotError::Dangling {
                            what: "sampler",
                            id: *id,
                        })?,
                    ),
                };
                Self::apply_arg(&kernel, index as u32, arg)
                    .map_err(fail("kernel argument", k.id))?;
            }
            kernels.insert(k.id, Arc::new(kernel));
        }

        let mut queues: HashMap<u64, Arc<QueueEntry>> = HashMap::new();
        for q in &saved.queues {
            queues.insert(
                q.id,
                Arc::new(
                    {
                        let device = self.restored_device(&subs, topology.queue_device(q.id))?;
                        self.new_queue(context(q.context)?, device, &q.properties)
                    }
                    .map_err(fail("queue", q.id))?,
                ),
            );
        }

        let mut events: HashMap<u64, Arc<EventEntry>> = HashMap::new();
        for e in &saved.events {
            let ctx = context(e.context)?;
            let raw = cl3::event::create_user_event(ctx.ctx.0)
                .map_err(|s| fail("event", e.id)(Status(s)))?;
            let event = HostEvent(raw);
            // A finished command comes back as a user event in the same final
            // state, so waits and status queries answer as before.
            let (status, user) = match e.kind {
                m::EventKind::User { status } => {
                    (status, Some(Mutex::new((status <= 0).then_some(status))))
                }
                m::EventKind::Command { status } => (status.min(0), None),
            };
            if status <= 0 {
                cl3::event::set_user_event_status(event.0, status)
                    .map_err(|s| fail("event", e.id)(Status(s)))?;
            }
            events.insert(
                e.id,
                Arc::new(EventEntry {
                    event,
                    context: ctx,
                    user,
                }),
            );
        }

        // Guest handles, with their reference counts.
        macro_rules! publish {
            ($list:expr, $map:expr, $table:expr) => {
                for item in &$list {
                    if let Some(g) = item.guest {
                        let object = $map.get(&item.id).cloned().expect("built above");
                        $table
                            .insert_shared(g.handle, object, g.refs)
                            .map_err(fail("guest handle", g.handle))?;
                    }
                }
            };
        }
        publish!(saved.contexts, contexts, self.contexts);
        publish!(saved.buffers, mems, self.mems);
        publish!(*images, mems, self.mems);
        publish!(saved.programs, programs, self.programs);
        publish!(saved.kernels, kernels, self.kernels);
        publish!(saved.queues, queues, self.queues);
        publish!(saved.events, events, self.events);
        publish!(saved.samplers, samplers, self.samplers);
        for (_, event, _) in self.events.entries() {
            if event
                .user
                .as_ref()
                .is_some_and(|s| s.lock().unwrap_or_else(|e| e.into_inner()).is_none())
            {
                self.track_user_event(event.clone());
            }
        }

        let mut sinks: HashMap<u64, Box<dyn BufferSink>> = HashMap::new();
        for b in saved.buffers.iter().filter(|b| b.parent.is_none()) {
            let mem = mems[&b.id].clone();
            let queue = self
                .internal_queue(&mem.context)
                .map_err(fail("queue", b.id))?;
            sinks.insert(
                b.id,
                Box::new(DeviceBufferSink(DeviceBufferSource { mem, queue })),
            );
        }
        for image in images.iter().filter(|i| i.buffer.is_none()) {
            let mem = mems[&image.id].clone();
            let queue = self
                .internal_queue(&mem.context)
                .map_err(fail("queue", image.id))?;
            sinks.insert(
                image.id,
                Box::new(super::image::ImageContents::new(mem, queue)),
            );
        }
        Ok((
            RestoredSession {
                session: Box::new(self),
                sinks,
            },
            super::adopt::Built { contexts, mems },
        ))
    }

    fn restore_program(
        &self,
        context: Arc<ContextEntry>,
        origin: &m::ProgramOrigin,
        build: &m::ProgramBuild,
        device: &m::DeviceIdentity,
    ) -> Result<ProgramEntry, SnapshotError> {
        let origin = match origin {
            m::ProgramOrigin::Source(s) => ProgramOrigin::Source(s.clone()),
            m::ProgramOrigin::Il(il) => ProgramOrigin::Il(il.clone()),
            m::ProgramOrigin::Binary(b) if b.device.binaries_run_on(device) => {
                ProgramOrigin::Binary(b.bytes.clone())
            }
            m::ProgramOrigin::Binary(b) => {
                return Err(SnapshotError::BinaryOnly {
                    built_for: b.device.to_string(),
                    here: device.to_string(),
                })
            }
            m::ProgramOrigin::Linked(inputs) => {
                let mut built = Vec::new();
                for input in inputs {
                    let compiled = m::ProgramBuild::Compiled {
                        options: input.compile_options.clone(),
                    };
                    built.push(Arc::new(self.restore_program(
                        context.clone(),
                        &input.origin,
                        &compiled,
                        device,
                    )?));
                }
                let options = match build {
                    m::ProgramBuild::Built { options }
                    | m::ProgramBuild::Failed { options, .. } => options.clone(),
                    _ => Vec::new(),
                };
                ProgramOrigin::Linked {
                    inputs: built,
                    options,
                }
            }
        };
        let linked = matches!(origin, ProgramOrigin::Linked { .. });
        let binary = matches!(origin, ProgramOrigin::Binary(_));
        let program = self
            .new_program(context, origin)
            .map_err(|status| match status {
                Status::INVALID_BINARY if binary => SnapshotError::ForeignBinary { id: 0 },
                status => SnapshotError::Rebuild {
                    what: "program".into(),
                    id: 0,
                    status,
                },
            })?;
        let record = match build.clone() {
            _ if linked => return Ok(program),
            m::ProgramBuild::None => BuildRecord::None,
            m::ProgramBuild::Built { options } => BuildRecord::Built { options },
            m::ProgramBuild::Compiled { options } => BuildRecord::Compiled { options },
            m::ProgramBuild::Failed {
                options,
                compile_only,
            } => BuildRecord::Failed {
                options,
                compile_only,
            },
        };
        let expect_failure = matches!(record, BuildRecord::Failed { .. });
        match self.build(&program, record) {
            Ok(()) => Ok(program),
            Err(_) if expect_failure => Ok(program),
            Err(status) => Err(SnapshotError::Rebuild {
                what: "program build".into(),
                id: 0,
                status,
            }),
        }
    }
}
