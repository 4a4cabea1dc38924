//! Accepts front-ends on the vhost-user socket (one vGPU each, served
//! concurrently), and shuts down cleanly on SIGINT/SIGTERM.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use vhost::vhost_user::Listener;
use vhost_user_backend::VhostUserDaemon;
use vm_memory::GuestMemoryAtomic;

use crate::chain::GuestRam;
use crate::config::{Config, DeviceSpec};
use crate::control_schema::{ErrorCode, ErrorReply};
use crate::device::VgpuDevice;
use crate::executor::opencl::{OpenClError, OpenClExecutor, ProfileError};
use crate::executor::Executor;
use crate::vgpu::{Vgpu, VgpuStats};

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot open the OpenCL device")]
    Device(#[source] OpenClError),
    #[error("cannot listen on {0}")]
    Listen(PathBuf, #[source] vhost::vhost_user::Error),
    #[error("cannot start the control socket {0}")]
    Control(PathBuf, #[source] std::io::Error),
    #[error("cannot set up signal handling")]
    Signals(#[source] std::io::Error),
    #[error("vhost-user daemon failed: {0}")]
    Daemon(String),
    #[error("cannot confine the daemon (use --sandbox none to run without)")]
    Sandbox(#[source] std::io::Error),
    #[error("invalid --profile {0}: {1}")]
    Profile(PathBuf, String),
    #[error("{0}")]
    Memory(String),
    #[error("invalid --binary-key: {0}")]
    BinaryKey(String),
    #[error("cannot restore {0}: {1}")]
    Restore(PathBuf, String),
    #[error("no device could be opened")]
    NoDevice,
    #[error("cannot serve metrics on {0}")]
    Metrics(String, #[source] std::io::Error),
    #[error("cannot create the device")]
    Device2(#[source] std::io::Error),
}

/// The front-ends currently connected, and the devices new ones get.
#[derive(Default)]
pub struct Registry {
    next_id: std::sync::atomic::AtomicU64,
    vms: Mutex<Vec<(u64, Weak<Vgpu>)>>,
    shutdowns: Mutex<Vec<vhost_user_backend::ShutdownHandle>>,
    executors: std::sync::RwLock<Vec<Arc<dyn Executor>>>,
    queue_depth: usize,
    /// Per-VM limits.
    limits: crate::quota::Limits,
    /// The profile given with --profile and the --memory size, kept by
    /// re-homed devices.
    profile_limit: Option<Arc<vgpu_migration::Profile>>,
    memory: Option<u64>,
    /// A checkpoint the next front-end starts from (`--restore`).
    pending_restore: Mutex<Option<PathBuf>>,
}

impl Registry {
    pub fn executors(&self) -> Vec<Arc<dyn Executor>> {
        self.executors
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// One live vGPU: the one named, or the only one.
    pub fn vm(&self, id: Option<u64>) -> Result<(u64, Arc<Vgpu>), ErrorReply> {
        let live = self.live();
        match id {
            Some(id) => live.into_iter().find(|(i, _)| *i == id).ok_or_else(|| {
                ErrorReply::new(ErrorCode::NoVm, format!("no front-end {id} is connected"))
            }),
            None if live.len() == 1 => Ok(live.into_iter().next().expect("one")),
            None if live.is_empty() => Err(ErrorReply::new(
                ErrorCode::NoVm,
                "no front-end is connected",
            )),
            None => Err(ErrorReply::new(
                ErrorCode::AmbiguousVm,
                format!(
                    "{} front-ends are connected: name one with --vm ID",
                    live.len()
                ),
            )),
        }
    }

    /// Every live vGPU with its id, in connection order.
    pub fn live(&self) -> Vec<(u64, Arc<Vgpu>)> {
        let vms = self.vms.lock().unwrap_or_else(|e| e.into_inner());
        vms.iter()
            .filter_map(|(i, w)| w.upgrade().map(|v| (*i, v)))
            .collect()
    }

    /// Moves every live vGPU, and those to come, to another OpenCL device.
    pub fn rehome(
        &self,
        selector: &crate::executor::opencl::DeviceSelector,
    ) -> Result<Vec<crate::snapshot::Report>, String> {
        let mut opencl = OpenClExecutor::open(selector).map_err(|e| e.to_string())?;
        opencl.queue_depth = self.queue_depth;
        opencl
            .configure_profile(self.profile_limit.clone(), self.memory)
            .map_err(|e| error_chain(&e))?;
        let to: Arc<dyn Executor> = Arc::new(opencl);
        let vms: Vec<Arc<Vgpu>> = {
            let vms = self.vms.lock().unwrap_or_else(|e| e.into_inner());
            vms.iter().filter_map(|(_, w)| w.upgrade()).collect()
        };
        let mut reports = Vec::new();
        for vgpu in vms {
            let started = std::time::Instant::now();
            let report = crate::snapshot::rehome(&vgpu, to.clone()).map_err(|e| error_chain(&e))?;
            vgpu.metrics().rehomes.note(started.elapsed());
            reports.push(report);
        }
        let mut executors = self.executors.write().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = executors.iter_mut().find(|e| e.serves(0x1001)) {
            *slot = to;
        }
        log::info!("re-homed {} vGPU(s) to {}", reports.len(), selector);
        Ok(reports)
    }
    fn add(&self, vgpu: &Arc<Vgpu>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut vms = self.vms.lock().unwrap_or_else(|e| e.into_inner());
        vms.retain(|(_, w)| w.strong_count() > 0);
        vms.push((id, Arc::downgrade(vgpu)));
        id
    }

    /// Live vGPUs with their ids and statistics.
    pub fn snapshot(&self) -> Vec<(u64, VgpuStats)> {
        let vms = self.vms.lock().unwrap_or_else(|e| e.into_inner());
        vms.iter()
            .filter_map(|(id, w)| w.upgrade().map(|v| (*id, v.stats())))
            .collect()
    }
}

/// What `--print-capabilities` prints (libvirt's vhost-user.json protocol).
/// The schema has no accelerator type: `rpmsg` is the one no QEMU device or
/// libvirt feature uses, as `qemu-configs/vhost-user.json` explains.
pub fn capabilities_json() -> String {
    r#"{"type": "rpmsg", "features": []}"#.to_string()
}

static SHUTDOWN: AtomicBool = AtomicBool::new(false);

/// Blocks SIGINT and SIGTERM in this thread and so in every thread it
/// starts later: called before the devices are opened, whose libraries
/// (PoCL) start threads that would otherwise take a SIGTERM and end the
/// process without the clean shutdown.
fn block_shutdown_signals() -> std::io::Result<libc::sigset_t> {
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset to fill.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid; the calls only change this thread's mask.
    let rc = unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut())
    };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(set)
}

/// Waits for SIGINT or SIGTERM (blocked everywhere) on a thread of its own.
fn spawn_signal_thread(socket: PathBuf, registry: Arc<Registry>) -> std::io::Result<()> {
    let set = block_shutdown_signals()?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: `set` and `signal` are valid for the call.
            while unsafe { libc::sigwait(&set, &mut signal) } != 0 {}
            log::info!("signal {signal}: shutting down");
            SHUTDOWN.store(true, Ordering::SeqCst);
            for handle in registry
                .shutdowns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .drain(..)
            {
                handle.shutdown();
            }
            // Wake the accept loop.
            let _ = UnixStream::connect(&socket);
        })?;
    Ok(())
}

/// An error with its causes, one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    message
}

/// Loads (or creates) the key binaries are sealed with, before the
/// sandbox closes the file system.
fn install_binary_key(config: &Config) -> Result<(), ServerError> {
    use crate::executor::opencl::seal::{install_key, BinaryKey};
    let key = match (&config.binary_key, crate::config::default_binary_key()) {
        (Some(path), _) => {
            BinaryKey::load_or_create(path).map_err(|e| ServerError::BinaryKey(error_chain(&e)))?
        }
        (None, Some(path)) => match BinaryKey::load_or_create(&path) {
            Ok(key) => key,
            Err(e) => {
                log::warn!(
                    "{}: program binaries will come back only to this process",
                    error_chain(&e)
                );
                return Ok(());
            }
        },
        (None, None) => return Ok(()),
    };
    install_key(key);
    Ok(())
}

pub fn run(config: Config) -> Result<(), ServerError> {
    block_shutdown_signals().map_err(ServerError::Signals)?;
    // Bound in the host's network namespace, before leaving it.
    let metrics = config
        .metrics
        .iter()
        .map(|e| {
            crate::exporter::bind(e).map_err(|err| ServerError::Metrics(format!("{e:?}"), err))
        })
        .collect::<Result<Vec<_>, _>>()?;
    install_binary_key(&config)?;
    crate::sandbox::isolate_network(&config.sandbox);
    let profile_limit = match &config.profile {
        Some(path) => Some(Arc::new(read_profile(path)?)),
        None => None,
    };
    let executors = open_executors(&config, &profile_limit)?;
    let mut limits = config.limits;
    limits.memory_bytes = config
        .max_memory
        .unwrap_or_else(|| crate::vgpu::offered_profile(&executors).global_mem_size);
    let registry = Arc::new(Registry {
        executors: std::sync::RwLock::new(executors.clone()),
        queue_depth: config.queue_depth,
        limits,
        profile_limit,
        memory: config.memory,
        pending_restore: Mutex::new(config.restore.clone()),
        ..Default::default()
    });
    if let Some(path) = &config.restore {
        if !path.is_file() {
            return Err(ServerError::Restore(path.clone(), "no such file".into()));
        }
    }
    spawn_signal_thread(config.socket.clone(), registry.clone()).map_err(ServerError::Signals)?;
    let described: Vec<String> = executors.iter().map(|e| e.describe()).collect();
    let described = described.join("; ");
    log::info!("serving {described}");
    if let Some(path) = &config.control {
        crate::control::spawn(path, registry.clone())
            .map_err(|e| ServerError::Control(path.clone(), e))?;
    }
    let metric_paths: Vec<PathBuf> = metrics.iter().filter_map(|m| m.path()).collect();
    for bound in metrics {
        bound
            .serve(registry.clone())
            .map_err(|e| ServerError::Metrics("endpoint".into(), e))?;
    }
    let mut listener = Listener::new(&config.socket, true)
        .map_err(|e| ServerError::Listen(config.socket.clone(), e))?;
    log::info!("listening on {}", config.socket.display());
    crate::sandbox::apply(&config.sandbox).map_err(ServerError::Sandbox)?;
    let result = accept_loop(&mut listener, &registry);
    remove_socket(&config.socket);
    if let Some(path) = &config.control {
        remove_socket(path);
    }
    metric_paths.iter().for_each(|p| remove_socket(p));
    result
}

/// `--write-profile`: the profile a new vGPU on the OpenCL device SPEC
/// names would see (with the `--memory` size, if given).
pub fn write_profile(spec: &str, memory: Option<u64>, path: &Path) -> Result<(), String> {
    let selector = crate::config::parse_device(spec).map_err(|e| e.to_string())?;
    let mut executor = OpenClExecutor::open(&selector).map_err(|e| error_chain(&e))?;
    executor
        .configure_profile(None, memory)
        .map_err(|e| error_chain(&e))?;
    let bytes = executor.profile().to_bytes();
    std::fs::write(path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// `--profile`: a profile to advertise instead of the device's own.
fn read_profile(path: &Path) -> Result<vgpu_migration::Profile, ServerError> {
    let bad = |why: String| ServerError::Profile(path.to_path_buf(), why);
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    vgpu_migration::Profile::from_bytes(&bytes)
        .map_err(|e| bad(format!("not a device profile: {e}")))
}

/// Opens every configured device. An OpenCL device that cannot be opened is
/// an error; a CUDA one is left out with a warning (a host without CUDA
/// simply offers none).
fn open_executors(
    config: &Config,
    profile_limit: &Option<Arc<vgpu_migration::Profile>>,
) -> Result<Vec<Arc<dyn Executor>>, ServerError> {
    let mut executors: Vec<Arc<dyn Executor>> = Vec::new();
    for spec in &config.devices {
        match spec {
            DeviceSpec::OpenCl(selector) => {
                let mut opencl = OpenClExecutor::open(selector).map_err(ServerError::Device)?;
                opencl.queue_depth = config.queue_depth;
                opencl
                    .configure_profile(profile_limit.clone(), config.memory)
                    .map_err(|e| match (&e, &config.profile) {
                        (ProfileError::Dishonoured(_), Some(path)) => {
                            ServerError::Profile(path.clone(), error_chain(&e))
                        }
                        _ => ServerError::Memory(error_chain(&e)),
                    })?;
                executors.push(Arc::new(opencl));
            }
            DeviceSpec::Cuda(index) => executors.extend(open_cuda(*index)),
        }
    }
    if executors.is_empty() {
        return Err(ServerError::NoDevice);
    }
    Ok(executors)
}

#[cfg(feature = "cuda")]
fn open_cuda(index: u32) -> Option<Arc<dyn Executor>> {
    match crate::executor::cuda::CudaExecutor::open(index) {
        Ok(executor) => Some(Arc::new(executor)),
        Err(e) => {
            let cause = std::error::Error::source(&e).map(|c| format!(": {c}"));
            log::warn!("cuda:{index} not offered: {e}{}", cause.unwrap_or_default());
            None
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(index: u32) -> Option<Arc<dyn Executor>> {
    log::warn!("cuda:{index} not offered: built without the cuda feature");
    None
}

fn remove_socket(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            log::warn!("cannot remove {}: {e}", path.display());
        }
    }
}

fn accept_loop(listener: &mut Listener, registry: &Arc<Registry>) -> Result<(), ServerError> {
    while !SHUTDOWN.load(Ordering::SeqCst) {
        let vgpu = Vgpu::with_limits(registry.executors(), registry.limits);
        let pending = registry
            .pending_restore
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(path) = pending {
            // Rebuilt before the front-end can send anything.
            let file = std::fs::File::open(&path)
                .map_err(|e| ServerError::Restore(path.clone(), e.to_string()))?;
            let report = crate::snapshot::restore(
                &vgpu,
                std::io::BufReader::new(file),
                crate::snapshot::Continuity::Checked,
            )
            .map_err(|e| ServerError::Restore(path.clone(), error_chain(&e)))?;
            log::info!(
                "restored {} session(s), {} bytes of buffers, from {}",
                report.sessions,
                report.buffer_bytes,
                path.display()
            );
        }
        let device = VgpuDevice::new(vgpu.clone()).map_err(ServerError::Device2)?;
        let memory = GuestMemoryAtomic::new(GuestRam::new());
        let mut daemon = VhostUserDaemon::new("vgpu-backend".into(), device.clone(), memory)
            .map_err(|e| ServerError::Daemon(e.to_string()))?;
        daemon
            .start(listener)
            .map_err(|e| ServerError::Daemon(e.to_string()))?;
        if SHUTDOWN.load(Ordering::SeqCst) {
            break;
        }
        let id = registry.add(&vgpu);
        if let Some(handle) = daemon.shutdown_handle() {
            registry
                .shutdowns
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(handle);
        }
        log::info!("front-end {id} connected");
        drop(vgpu);
        let spawned = std::thread::Builder::new()
            .name(format!("frontend-{id}"))
            .spawn(move || {
                match daemon.wait() {
                    Ok(()) => {}
                    // A front-end that goes away is the normal end of a VM.
                    Err(e) if e.to_string().contains("disconnected") => {
                        log::debug!("front-end {id}: {e}")
                    }
                    Err(e) => log::warn!("front-end {id}: {e}"),
                }
                for handler in daemon.get_epoll_handlers() {
                    handler.send_exit_event();
                }
                device.signal_exit();
                log::info!("front-end {id} disconnected; its vGPU is released");
                drop(daemon);
                drop(device);
                crate::heap::release_free_memory();
            });
        if let Err(e) = spawned {
            log::error!("cannot serve a front-end: {e}");
        }
    }
    Ok(())
}
