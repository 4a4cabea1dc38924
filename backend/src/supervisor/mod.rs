//! The supervisor: what `vgpu-backend` runs as. It holds the listening
//! socket, the control socket and the metrics endpoints, and never loads
//! an OpenCL or CUDA library or reads a byte from a guest. Every front-end
//! gets a worker process of its own (see [`crate::worker`]): one worker
//! always stands by, with its device open and its confinement applied,
//! accepting on the shared socket; when a front-end connects it becomes
//! that VM's worker and the supervisor starts the next standby. A worker
//! that dies takes only its own VM's vGPU with it.

pub mod control;
pub mod exporter;
mod gather;
mod incremental;
mod link;
mod precopy;
mod uids;

use std::ffi::OsString;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::channel::WorkerEvent;
use crate::config::Config;
use crate::control_schema::DeviceFigures;
use crate::startup::ServerError;

pub use gather::{metrics, status};
use link::Spawn;
pub use link::WorkerLink;

/// How long a standby that failed waits before the next one starts: a
/// device that cannot be opened must not turn into a fork loop.
const RESTART_DELAY: Duration = Duration::from_secs(1);
/// How long workers get to end their service on shutdown.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

pub struct Supervisor {
    args: Vec<OsString>,
    listener: std::os::fd::RawFd,
    /// The vhost-user socket's path, unlinked when shutting down starts.
    socket: std::path::PathBuf,
    /// Every worker alive: the serving ones and the standby.
    links: Mutex<Vec<Arc<WorkerLink>>>,
    /// What the workers serve, as the newest ready one described it.
    devices: RwLock<Vec<String>>,
    /// Device counters of the workers that ended, summed per API.
    retired: Mutex<Vec<DeviceFigures>>,
    /// The OpenCL device of later workers after a re-home.
    rehomed_to: Mutex<Option<String>>,
    /// Whether the next standby rebuilds `--restore`'s checkpoint.
    restore_pending: AtomicBool,
    next_id: AtomicU64,
    shutting_down: AtomicBool,
    /// `--worker-uids`: a uid of its own for each worker.
    uids: Option<uids::UidPool>,
    /// `--peer-memory`: the driver cache all workers share
    /// (`sandbox::shared_loopback_cache`).
    shared_cache: Option<std::path::PathBuf>,
}

impl Supervisor {
    /// The worker serving front-end `id`, or the only one.
    pub fn serving(&self, id: Option<u64>) -> Vec<Arc<WorkerLink>> {
        let links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        links
            .iter()
            .filter(|l| l.is_serving() && id.is_none_or(|id| id == l.vm_id))
            .cloned()
            .collect()
    }

    /// Every worker alive, standby included.
    pub fn all(&self) -> Vec<Arc<WorkerLink>> {
        self.links.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn set_devices(&self, devices: Vec<String>) {
        *self.devices.write().unwrap_or_else(|e| e.into_inner()) = devices;
    }

    pub fn devices(&self) -> Vec<String> {
        self.devices
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn retired(&self) -> Vec<DeviceFigures> {
        self.retired
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Makes later workers open `spec`, and returns the workers that
    /// started before (they are re-homed by command).
    pub fn rehome_later_workers(&self, spec: &str) -> Vec<Arc<WorkerLink>> {
        let links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        *self.rehomed_to.lock().unwrap_or_else(|e| e.into_inner()) = Some(spec.to_string());
        links.clone()
    }

    /// Ends every worker and, with them, the backend.
    pub fn shut_down(&self) {
        // First, so that a front-end reconnecting when its worker ends
        // cannot reach this backend's standby (it waits for the next one).
        if !self.shutting_down.swap(true, Ordering::SeqCst) {
            remove_socket(&self.socket);
        }
        for link in self.all() {
            link.signal(libc::SIGTERM);
        }
    }

    fn spawn_standby(&self) -> std::io::Result<Arc<WorkerLink>> {
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        let device = self
            .rehomed_to
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let uid = self.uids.as_ref().map(|pool| pool.take()).transpose()?;
        let spawned = WorkerLink::spawn(&Spawn {
            args: &self.args,
            listener: self.listener,
            vm_id: self.next_id.fetch_add(1, Ordering::SeqCst),
            restore: self.restore_pending.load(Ordering::SeqCst),
            device: device.as_deref(),
            uid,
            cache: self.shared_cache.as_deref(),
        });
        let link = match spawned {
            Ok(link) => Arc::new(link),
            Err(e) => {
                self.give_back_uid(uid);
                return Err(e);
            }
        };
        links.push(link.clone());
        Ok(link)
    }

    /// Called once the worker was reaped.
    fn forget(&self, link: &WorkerLink) {
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        links.retain(|l| l.pid != link.pid);
        self.give_back_uid(link.uid);
    }

    fn give_back_uid(&self, uid: Option<u32>) {
        if let (Some(pool), Some(uid)) = (&self.uids, uid) {
            pool.give_back(uid);
        }
    }

    fn retire(&self, devices: Vec<DeviceFigures>) {
        let mut retired = self.retired.lock().unwrap_or_else(|e| e.into_inner());
        *retired = gather::sum_devices(retired.iter().cloned().chain(devices));
    }

    fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

pub fn run(config: Config) -> Result<(), ServerError> {
    crate::startup::block_shutdown_signals().map_err(ServerError::Signals)?;
    // Bound in the host's network namespace, before leaving it.
    let metrics = config
        .metrics
        .iter()
        .map(|e| {
            crate::supervisor::exporter::bind(e)
                .map_err(|err| ServerError::Metrics(format!("{e:?}"), err))
        })
        .collect::<Result<Vec<_>, _>>()?;
    crate::sandbox::isolate_network(&config.sandbox);
    if let Some(path) = &config.restore {
        if !path.is_file() {
            return Err(ServerError::Restore(path.clone(), "no such file".into()));
        }
    }
    let precopy = match &config.precopy_socket {
        Some(path) => Some(
            // Only the supervisor's user may connect (QEMU runs as that
            // user, as for the vhost-user socket), like the control socket.
            crate::supervisor::control::bind(path)
                .map_err(|e| ServerError::Precopy(path.clone(), e))?,
        ),
        None => None,
    };
    let control = match &config.control {
        Some(path) => Some(
            crate::supervisor::control::bind(path)
                .map_err(|e| ServerError::Control(path.clone(), e))?,
        ),
        None => None,
    };
    // Made before the supervisor is confined; removed once it stops.
    let shared_cache = crate::sandbox::shared_loopback_cache(&config.sandbox, config.peer_memory)
        .map_err(ServerError::Sandbox)?;
    let cache_guard = SharedCache(shared_cache.clone());
    // The supervisor keeps the user it was started as (it starts the
    // workers, which load the binary key and then drop to --user); it
    // reads no guest input, but is confined all the same, before the
    // vhost-user socket appears.
    crate::sandbox::apply(&config.sandbox, config.peer_memory).map_err(ServerError::Sandbox)?;
    // Bound here and unlinked by `shut_down` (not when dropped): once the
    // backend is stopping no new front-end may reach its standby worker,
    // and a later backend may already have bound the same path.
    remove_socket(&config.socket);
    let listener = std::os::unix::net::UnixListener::bind(&config.socket)
        .map_err(|e| ServerError::Listen(config.socket.clone(), e))?;
    let supervisor = Arc::new(Supervisor {
        args: std::env::args_os().skip(1).collect(),
        listener: listener.as_raw_fd(),
        socket: config.socket.clone(),
        links: Mutex::new(Vec::new()),
        devices: RwLock::new(Vec::new()),
        retired: Mutex::new(Vec::new()),
        rehomed_to: Mutex::new(None),
        restore_pending: AtomicBool::new(config.restore.is_some()),
        next_id: AtomicU64::new(1),
        shutting_down: AtomicBool::new(false),
        uids: config.worker_uids.clone().map(uids::UidPool::new),
        shared_cache,
    });
    // A start that fails leaves no socket behind.
    let failed = |e: ServerError| {
        remove_socket(&config.socket);
        e
    };
    spawn_signal_thread(supervisor.clone())
        .map_err(ServerError::Signals)
        .map_err(failed)?;
    // The first standby opens the device: a configuration it cannot serve
    // is the backend's start-up error, as before workers.
    let standby = supervisor
        .spawn_standby()
        .map_err(ServerError::Worker)
        .map_err(failed)?;
    match standby.next_event() {
        Some(WorkerEvent::Ready { devices, .. }) => {
            log::info!("serving {}", devices.join("; "));
            *supervisor
                .devices
                .write()
                .unwrap_or_else(|e| e.into_inner()) = devices;
        }
        Some(WorkerEvent::Failed { error }) => {
            standby.reap();
            standby.remove_cache();
            return Err(failed(ServerError::Start(error)));
        }
        other => {
            let status = standby.reap();
            standby.remove_cache();
            return Err(failed(ServerError::Start(format!(
                "the first worker ended before it was ready ({other:?}, {status})"
            ))));
        }
    }
    if let (Some(path), Some(listener)) = (&config.control, control) {
        crate::supervisor::control::spawn(listener, supervisor.clone())
            .map_err(|e| failed(ServerError::Control(path.clone(), e)))?;
    }
    if let (Some(path), Some(listener)) = (&config.precopy_socket, precopy) {
        crate::supervisor::precopy::spawn(listener, supervisor.clone())
            .map_err(|e| failed(ServerError::Precopy(path.clone(), e)))?;
    }
    let metric_paths: Vec<_> = metrics.iter().filter_map(|m| m.path()).collect();
    for bound in metrics {
        bound
            .serve(supervisor.clone())
            .map_err(|e| failed(ServerError::Metrics("endpoint".into(), e)))?;
    }
    log::info!("listening on {}", config.socket.display());
    serve_front_ends(&supervisor, standby);
    wait_for_workers(&supervisor);
    drop(listener);
    for path in config.control.iter().chain(&config.precopy_socket) {
        remove_socket(path);
    }
    metric_paths.iter().for_each(|p| remove_socket(p));
    drop(cache_guard);
    Ok(())
}

/// Removes the shared driver cache when the supervisor stops, also when
/// it fails to start.
struct SharedCache(Option<std::path::PathBuf>);

impl Drop for SharedCache {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            crate::sandbox::remove_cache(dir);
        }
    }
}

/// Hands each front-end to the standby that accepted it, and starts the
/// next standby, until shutdown.
fn serve_front_ends(supervisor: &Arc<Supervisor>, mut standby: Arc<WorkerLink>) {
    loop {
        match standby.next_event() {
            Some(WorkerEvent::Ready { devices, .. }) => {
                *supervisor
                    .devices
                    .write()
                    .unwrap_or_else(|e| e.into_inner()) = devices;
                continue;
            }
            Some(WorkerEvent::Connected { front_end }) => {
                *standby.front_end.lock().unwrap_or_else(|e| e.into_inner()) = front_end;
                log::info!(
                    "front-end {} connected: worker {}",
                    standby.vm_id,
                    standby.pid
                );
                supervisor.restore_pending.store(false, Ordering::SeqCst);
                standby.set_serving(true);
                watch(supervisor.clone(), standby.clone());
            }
            Some(WorkerEvent::Failed { error }) => {
                log::error!("a standby worker could not start: {error}");
                standby.reap();
                supervisor.forget(&standby);
                standby.remove_cache();
                pause_before_restart(supervisor);
            }
            Some(WorkerEvent::Finished { .. } | WorkerEvent::Disconnected) | None => {
                let status = standby.reap();
                supervisor.forget(&standby);
                standby.remove_cache();
                if !supervisor.is_shutting_down() {
                    log::error!("the standby worker {} ended: {status}", standby.pid);
                    pause_before_restart(supervisor);
                }
            }
        }
        if supervisor.is_shutting_down() {
            return;
        }
        let mut said = false;
        standby = loop {
            match supervisor.spawn_standby() {
                Ok(link) => break link,
                // Every uid taken: said once, then waited out quietly.
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if !std::mem::replace(&mut said, true) {
                        log::warn!("{e}");
                    }
                    pause_before_restart(supervisor);
                    if supervisor.is_shutting_down() {
                        return;
                    }
                }
                Err(e) => {
                    log::error!("cannot start a worker: {e}");
                    pause_before_restart(supervisor);
                    if supervisor.is_shutting_down() {
                        return;
                    }
                }
            }
        };
    }
}

fn pause_before_restart(supervisor: &Supervisor) {
    if !supervisor.is_shutting_down() {
        std::thread::sleep(RESTART_DELAY);
    }
}

/// Follows a serving worker to its end: keeps its device counters and
/// says how it ended.
fn watch(supervisor: Arc<Supervisor>, link: Arc<WorkerLink>) {
    let pid = link.pid;
    let spawned = std::thread::Builder::new()
        .name(format!("worker-{}", link.vm_id))
        .spawn(move || {
            let mut finished = false;
            while let Some(event) = link.next_event() {
                match event {
                    WorkerEvent::Disconnected => link.set_serving(false),
                    WorkerEvent::Finished { devices } => {
                        supervisor.retire(devices);
                        finished = true;
                    }
                    _ => {}
                }
            }
            let status = link.reap();
            supervisor.forget(&link);
            link.remove_cache();
            if finished {
                log::info!("worker {} of front-end {} ended", link.pid, link.vm_id);
            } else {
                log::error!(
                    "worker {} of front-end {} died ({status}): that VM's vGPU is lost, the others go on",
                    link.pid,
                    link.vm_id
                );
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot follow worker {pid}: {e}");
    }
}

/// Gives the workers time to end their service, then ends them.
fn wait_for_workers(supervisor: &Supervisor) {
    let deadline = std::time::Instant::now() + SHUTDOWN_GRACE;
    let workers = supervisor.all();
    loop {
        let alive: Vec<_> = supervisor
            .all()
            .into_iter()
            .filter(|l| !l.has_ended())
            .collect();
        if alive.is_empty() {
            break;
        }
        if std::time::Instant::now() > deadline {
            for link in alive {
                log::warn!("worker {} did not end in time: killed", link.pid);
                link.signal(libc::SIGKILL);
                link.reap();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    workers.iter().for_each(|w| w.remove_cache());
}

/// Waits for SIGINT or SIGTERM (blocked everywhere) on a thread of its own.
fn spawn_signal_thread(supervisor: Arc<Supervisor>) -> std::io::Result<()> {
    let set = crate::startup::shutdown_signal_set();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: `set` and `signal` are valid for the call.
            while unsafe { libc::sigwait(&set, &mut signal) } != 0 {}
            log::info!("signal {signal}: shutting down");
            supervisor.shut_down();
        })?;
    Ok(())
}

pub fn remove_socket(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            log::warn!("cannot remove {}: {e}", path.display());
        }
    }
}
