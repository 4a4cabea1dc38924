//! What the supervisor and its workers share: start-up errors, opening the
//! devices, the binary key and profile files, signal masks.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{Config, DeviceSpec};
use crate::executor::opencl::{OpenClError, OpenClExecutor, ProfileError};
use crate::executor::Executor;

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot open the OpenCL device")]
    Device(#[source] OpenClError),
    #[error("cannot listen on {0}")]
    Listen(PathBuf, #[source] std::io::Error),
    #[error("cannot start the control socket {0}")]
    Control(PathBuf, #[source] std::io::Error),
    #[error("cannot start the pre-copy socket {0}")]
    Precopy(PathBuf, #[source] std::io::Error),
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
    #[error("lost the link to the supervisor")]
    Channel(#[source] std::io::Error),
    #[error("cannot start a worker process")]
    Worker(#[source] std::io::Error),
    /// Set-up failed in the first worker; its own message.
    #[error("{0}")]
    Start(String),
}

/// What `--print-capabilities` prints (libvirt's vhost-user.json protocol).
/// The schema has no accelerator type: `rpmsg` is the one no QEMU device or
/// libvirt feature uses, as `qemu-configs/vhost-user.json` explains.
pub fn capabilities_json() -> String {
    r#"{"type": "rpmsg", "features": []}"#.to_string()
}

/// SIGINT and SIGTERM.
pub fn shutdown_signal_set() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is valid storage for sigemptyset to fill.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid for the calls.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
    }
    set
}

/// Blocks SIGINT and SIGTERM in this thread and so in every thread it
/// starts later: called before the devices are opened, whose libraries
/// (PoCL) start threads that would otherwise take a SIGTERM and end the
/// process without the clean shutdown.
pub fn block_shutdown_signals() -> std::io::Result<()> {
    let set = shutdown_signal_set();
    // SAFETY: `set` is valid; the call only changes this thread's mask.
    let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
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
pub fn install_binary_key(config: &Config) -> Result<(), ServerError> {
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
pub fn read_profile(path: &Path) -> Result<vgpu_migration::Profile, ServerError> {
    let bad = |why: String| ServerError::Profile(path.to_path_buf(), why);
    let bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
    vgpu_migration::Profile::from_bytes(&bytes)
        .map_err(|e| bad(format!("not a device profile: {e}")))
}

/// Opens every configured device. An OpenCL device that cannot be opened is
/// an error; a CUDA one is left out with a warning (a host without CUDA
/// simply offers none).
pub fn open_executors(
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
            DeviceSpec::Cuda(index) => {
                executors.extend(open_cuda(*index, config.cuda_pin_guest_memory))
            }
        }
    }
    if executors.is_empty() {
        return Err(ServerError::NoDevice);
    }
    Ok(executors)
}

#[cfg(feature = "cuda")]
fn open_cuda(index: u32, pin_limit: u64) -> Option<Arc<dyn Executor>> {
    match crate::executor::cuda::CudaExecutor::open(index) {
        Ok(executor) => {
            executor.set_pin_limit(pin_limit);
            Some(Arc::new(executor))
        }
        Err(e) => {
            let cause = std::error::Error::source(&e).map(|c| format!(": {c}"));
            log::warn!("cuda:{index} not offered: {e}{}", cause.unwrap_or_default());
            None
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn open_cuda(index: u32, _pin_limit: u64) -> Option<Arc<dyn Executor>> {
    log::warn!("cuda:{index} not offered: built without the cuda feature");
    None
}
