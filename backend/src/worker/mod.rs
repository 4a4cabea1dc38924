//! A worker: the process that serves one front-end (one VM's QEMU, or one
//! loopback program). The supervisor starts it by fork+exec before any
//! OpenCL or CUDA library is loaded; it opens the device, rebuilds a
//! checkpoint if it is the one to, confines itself, tells the supervisor
//! it is ready, and accepts one connection on the shared listening socket.
//! From then on it serves that front-end's vrings and device state and
//! holds all of that VM's objects; when the front-end goes away the worker
//! exits. A fault in a worker (a driver abort, a kernel reading memory it
//! should not) ends only that VM's vGPU.

mod commands;
mod precopy;
mod registry;
mod requests;

use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use vhost::vhost_user::Listener;
use vhost_user_backend::VhostUserDaemon;
use vm_memory::GuestMemoryAtomic;

use crate::chain::GuestRam;
use crate::channel::{Channel, WorkerEvent};
use crate::config::Config;
use crate::startup::{error_chain, ServerError};
use crate::vgpu::Vgpu;
use crate::vhost::device::VgpuDevice;

pub use crate::config::WorkerRole;
pub use registry::Registry;

/// Set once a front-end connected: a shutdown signal then ends the
/// service cleanly instead of just exiting.
static CONNECTED: AtomicBool = AtomicBool::new(false);
/// How that signal ends the service (the daemon has one only once
/// connected).
static SERVICE: Mutex<Option<vhost_user_backend::ShutdownHandle>> = Mutex::new(None);

/// Runs the worker to its end. Errors before it is ready go to the
/// supervisor too, which reports them (at start-up, as its own).
pub fn run(config: Config, role: WorkerRole) -> Result<(), ServerError> {
    // SAFETY: the supervisor passed this descriptor for us alone.
    let channel = Arc::new(unsafe { Channel::from_inherited(role.channel) });
    // SAFETY: the shared listening socket, inherited; only this worker's
    // accept uses it, and `Listener::from` never unlinks its path.
    let listener = unsafe { std::os::unix::net::UnixListener::from_raw_fd(role.listener) };
    let listener_name = crate::peer::socket_name(role.listener);
    let mut listener = Listener::from(listener);
    let set_up = match set_up(&config, &role) {
        Ok(set_up) => set_up,
        Err(e) => {
            let _ = channel.send(
                &WorkerEvent::Failed {
                    error: error_chain(&e),
                },
                &[],
            );
            return Err(e);
        }
    };
    let SetUp {
        registry,
        vgpu,
        mut daemon,
        device,
        cache,
    } = set_up;
    spawn_signal_thread().map_err(ServerError::Signals)?;
    requests::spawn(channel.clone(), registry.clone()).map_err(ServerError::Signals)?;
    let devices = registry.executors().iter().map(|e| e.describe()).collect();
    channel
        .send(&WorkerEvent::Ready { devices, cache }, &[])
        .map_err(ServerError::Channel)?;
    daemon
        .start(&mut listener)
        .map_err(|e| ServerError::Daemon(e.to_string()))?;
    *SERVICE.lock().unwrap_or_else(|e| e.into_inner()) = daemon.shutdown_handle();
    CONNECTED.store(true, Ordering::SeqCst);
    // The front-end's pid, for the supervisor to pass its pre-copy
    // channel here: the connection's credentials, not anything it says.
    let front_end = config
        .precopy_socket
        .as_ref()
        .and(listener_name.as_deref())
        .and_then(|name| crate::peer::front_end_pid(role.listener, name))
        .map(|pid| pid as u32);
    if config.peer_memory {
        attach_peer(&config, role.listener, listener_name.as_deref())?;
    }
    drop(listener);
    drop(vgpu);
    let id = registry.id;
    channel
        .send(&WorkerEvent::Connected { front_end }, &[])
        .map_err(ServerError::Channel)?;
    log::info!("front-end {id} connected (worker {})", std::process::id());
    match daemon.wait() {
        Ok(()) => {}
        // A front-end that goes away is the normal end of a VM.
        Err(e) if e.to_string().contains("disconnected") => log::debug!("front-end {id}: {e}"),
        Err(e) => log::warn!("front-end {id}: {e}"),
    }
    registry.release();
    let _ = channel.send(&WorkerEvent::Disconnected, &[]);
    for handler in daemon.get_epoll_handlers() {
        handler.send_exit_event();
    }
    device.signal_exit();
    let devices = commands::device_figures(&registry, 0);
    drop(daemon);
    drop(device);
    log::info!("front-end {id} disconnected; its vGPU is released");
    let _ = channel.send(&WorkerEvent::Finished { devices }, &[]);
    Ok(())
}

/// `--peer-memory`: finds the loopback program that connected and, if
/// this worker may reach its memory, lets chains name it; the seccomp
/// filter then allows cross-memory attach to that program alone. Until
/// this ran, sessions are opened without peer memory (their data is
/// copied), so a program that was quicker than this loses only speed.
fn attach_peer(
    config: &Config,
    listener: std::os::fd::RawFd,
    listener_name: Option<&[u8]>,
) -> Result<(), ServerError> {
    let pid = listener_name.and_then(|name| crate::peer::front_end_pid(listener, name));
    let peer = match pid.map(crate::peer::PeerMemory::probe) {
        Some(Ok(peer)) => Some(peer),
        Some(Err(e)) => {
            log::info!(
                "peer memory: cannot reach front-end {}: {e} (bulk data is copied)",
                pid.unwrap_or_default()
            );
            None
        }
        None => {
            log::warn!("peer memory: the front-end's pid is unknown (bulk data is copied)");
            None
        }
    };
    let allowed = peer.map(|p| p.pid() as u32);
    crate::sandbox::restrict_peer_memory(&config.sandbox, allowed).map_err(ServerError::Sandbox)?;
    if let Some(peer) = peer {
        log::info!(
            "peer memory: bulk data of front-end {} moves in place",
            peer.pid()
        );
        crate::peer::attach(peer);
    }
    Ok(())
}

struct SetUp {
    registry: Arc<Registry>,
    vgpu: Arc<Vgpu>,
    daemon: VhostUserDaemon<VgpuDevice>,
    device: VgpuDevice,
    cache: Option<std::path::PathBuf>,
}

/// Everything before the first byte from a guest: the device, the
/// checkpoint to start from, the confinement.
fn set_up(config: &Config, role: &WorkerRole) -> Result<SetUp, ServerError> {
    crate::startup::block_shutdown_signals().map_err(ServerError::Signals)?;
    // Still one thread: the driver's cache moves to a directory of the
    // worker's own before the driver is loaded.
    let cache = crate::sandbox::prepare_worker(&config.sandbox).map_err(ServerError::Sandbox)?;
    // What only the starting user may read: the binary key, the profile,
    // the checkpoint to start from.
    crate::startup::install_binary_key(config)?;
    let profile_limit = match &config.profile {
        Some(path) => Some(Arc::new(crate::startup::read_profile(path)?)),
        None => None,
    };
    let checkpoint = match (role.restore, &config.restore) {
        (true, Some(path)) => Some((
            path,
            std::fs::File::open(path)
                .map_err(|e| ServerError::Restore(path.clone(), e.to_string()))?,
        )),
        _ => None,
    };
    crate::sandbox::drop_worker_privileges(&config.sandbox, config.peer_memory)
        .map_err(ServerError::Sandbox)?;
    let executors = crate::startup::open_executors(config, &profile_limit)?;
    let mut limits = config.limits;
    limits.memory_bytes = config
        .max_memory
        .unwrap_or_else(|| crate::vgpu::offered_profile(&executors).global_mem_size);
    let registry = Arc::new(Registry::new(
        role.vm_id,
        executors.clone(),
        config.queue_depth,
        profile_limit,
        config.memory,
    ));
    let vgpu = Vgpu::with_limits(executors, limits);
    // Registered now so that a re-home before the front-end connects
    // moves it too.
    registry.serve(&vgpu);
    if let Some((path, file)) = checkpoint {
        // Rebuilt before the front-end can send anything.
        let report = crate::persist::restore(
            &vgpu,
            std::io::BufReader::new(file),
            crate::persist::Continuity::Checked,
        )
        .map_err(|e| ServerError::Restore(path.clone(), error_chain(&e)))?;
        log::info!(
            "restored {} session(s), {} bytes of buffers, from {}",
            report.sessions,
            report.buffer_bytes,
            path.display()
        );
    }
    let device = VgpuDevice::new(vgpu.clone(), config.poll).map_err(ServerError::Device2)?;
    let memory = GuestMemoryAtomic::new(GuestRam::new());
    let daemon = VhostUserDaemon::new("vgpu-backend".into(), device.clone(), memory)
        .map_err(|e| ServerError::Daemon(e.to_string()))?;
    crate::sandbox::filter_worker(&config.sandbox, config.peer_memory)
        .map_err(ServerError::Sandbox)?;
    Ok(SetUp {
        registry,
        vgpu,
        daemon,
        device,
        cache,
    })
}

/// SIGINT/SIGTERM (blocked in every thread): a standby worker just exits;
/// a serving one ends its front-end's service cleanly first.
fn spawn_signal_thread() -> std::io::Result<()> {
    let set = crate::startup::shutdown_signal_set();
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            let mut signal = 0;
            // SAFETY: `set` and `signal` are valid for the call.
            while unsafe { libc::sigwait(&set, &mut signal) } != 0 {}
            if !CONNECTED.load(Ordering::SeqCst) {
                std::process::exit(0);
            }
            log::info!("signal {signal}: ending the service of this front-end");
            if let Some(handle) = SERVICE.lock().unwrap_or_else(|e| e.into_inner()).take() {
                handle.shutdown();
            }
        })?;
    Ok(())
}
