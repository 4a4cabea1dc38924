//! Command line and the configuration it yields.

use std::path::PathBuf;

use clap::Parser;

use crate::executor::opencl::DeviceSelector;

/// vhost-user vGPU back-end: runs a VM's OpenCL calls on this host's device.
///
/// QEMU (patched, see qemu-configs/) connects to SOCKET with
/// `-chardev socket,id=vgpu0,path=SOCKET -device vhost-user-vgpu-pci,chardev=vgpu0`
/// and needs shared guest memory (`-object memory-backend-memfd,share=on`).
/// Guest libraries on this host can also connect directly (loopback) with
/// `VGPU_SOCKET=SOCKET`. Several front-ends may be connected at once; each
/// gets its own vGPU. Log verbosity: --log-level, or RUST_LOG for per-module
/// filters.
#[derive(Debug, Parser)]
#[command(name = "vgpu-backend", version, about, long_about)]
pub struct Args {
    /// Unix socket to listen on for vhost-user front-ends.
    #[arg(long, value_name = "PATH", required_unless_present_any = ["print_capabilities", "list_devices", "write_profile", "probe_sandbox"])]
    pub socket: Option<PathBuf>,

    /// Device to serve: `opencl:<platform-index>:<device-index>`,
    /// `opencl:<name-substring>`, `opencl` for the first device, or
    /// `cuda:<index>` for a CUDA device (driver API).
    #[arg(long, value_name = "SPEC", default_value = "opencl")]
    pub device: String,

    /// A further device to serve beside --device (same SPEC forms; may be
    /// repeated), e.g. `--device opencl --extra-device cuda:0`. A CUDA
    /// device that cannot be opened (no driver, no GPU) is left out with a
    /// warning.
    #[arg(long, value_name = "SPEC")]
    pub extra_device: Vec<String>,

    /// One of error, warn, info, debug, trace.
    #[arg(long, value_name = "LEVEL", default_value = "info")]
    pub log_level: String,

    /// Unix socket for `vgpu-ctl`: status, checkpoint, restore, re-home,
    /// pause and resume.
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,

    /// Unix socket for the pre-copy channel of QEMU's migration
    /// (`vhost-user-vgpu-pci,precopy-socket=PATH`): each QEMU's connection
    /// reaches the worker serving that QEMU's vGPU.
    #[arg(long, value_name = "PATH")]
    pub precopy_socket: Option<PathBuf>,

    /// Most commands a guest queue may run ahead of completion (0: no
    /// bound). A bound makes the drain before a snapshot or migration wait
    /// for at most N commands, at some cost in throughput.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub queue_depth: usize,

    /// The vGPU's memory size, e.g. 4G: the global memory its guests see
    /// and may allocate, fixed when the VM starts and carried by
    /// checkpoints and migration (like QEMU's -m). At most what the device
    /// offers. Default: the device's memory rounded down to 256 MiB (half
    /// of it for a CPU device, whose reported memory follows the host's
    /// free memory).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub memory: Option<u64>,

    /// Device memory one VM may allocate, e.g. 4G or 512M (0: no limit).
    /// Default: the vGPU's memory size (--memory).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,

    /// Objects (OpenCL contexts, queues, buffers, programs, kernels,
    /// events; CUDA contexts, modules, functions, streams, events) one VM
    /// may hold (0: no limit). The default bounds the host memory a guest
    /// can pin in handle tables and driver objects.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    pub max_objects: u64,

    /// Descriptor chains one VM may have in flight (0: no limit).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_in_flight: u64,

    /// Messages one batch may carry (0: the protocol's limit, 4096).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub max_batch: u64,

    /// Confinement once set up: `default` (no new privileges, no network,
    /// a seccomp filter; see SECURITY.md) or `none` for debugging.
    #[arg(long, value_name = "MODE", default_value = "default")]
    pub sandbox: String,

    /// Run the worker processes (one per front-end, the ones that read
    /// guest input) as this unprivileged user once their device is open.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,

    /// Give each worker a uid of its own from FIRST-LAST (and the group of
    /// the same number), instead of --user's: workers of different VMs
    /// cannot signal each other, and each gets its own process limit.
    /// Needs root; reserve the range for vgpu (no files, no other
    /// processes). At most LAST-FIRST+1 front-ends are served at once (one
    /// more is the standby); a uid is reused only once no process of it is
    /// left. Not with --peer-memory (the program would need the worker's
    /// uid).
    #[arg(long, value_name = "FIRST-LAST")]
    pub worker_uids: Option<String>,

    /// Front-ends of this socket are loopback programs (the guest
    /// library's `VGPU_SOCKET` transport), never VMs: a worker reads and
    /// writes its program's bulk data in place (cross-memory attach), one
    /// copy instead of two. It needs the program to run as the worker's
    /// user (`--user`; see SECURITY.md), else data is copied as without.
    /// Never give it for a socket QEMU uses: a guest could then name the
    /// memory of QEMU's process.
    #[arg(long)]
    pub peer_memory: bool,

    /// Start from a checkpoint written by `vgpu-ctl checkpoint`: the first
    /// front-end that connects gets the checkpoint's vGPU (a loopback
    /// program reconnecting after a backend restart resumes its session).
    #[arg(long, value_name = "FILE")]
    pub restore: Option<PathBuf>,

    /// Print the vhost-user back-end capabilities as JSON and exit (for
    /// libvirt's vhost-user.json).
    #[arg(long)]
    pub print_capabilities: bool,

    /// Advertise this device profile (written by --write-profile, or the
    /// common subset of a pool of devices) instead of the device's own, so
    /// a vGPU can later move to any device of the pool. The device must
    /// honour it.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,

    /// The key that seals the program binaries guests get, so that every
    /// backend sharing it accepts them (created, mode 0600, when absent).
    /// Default: /var/lib/vgpu/binary-key for root, else
    /// $XDG_STATE_HOME/vgpu/binary-key (~/.local/state/vgpu/binary-key);
    /// where the default cannot be created, binaries are accepted only by
    /// the backend process that handed them out.
    #[arg(long, value_name = "FILE")]
    pub binary_key: Option<PathBuf>,

    /// Write the profile a new vGPU on the selected OpenCL device sees
    /// (with the --memory size) to FILE and exit.
    #[arg(long, value_name = "FILE")]
    pub write_profile: Option<PathBuf>,

    /// List the OpenCL devices this host offers, with their SPEC, and exit.
    #[arg(long)]
    pub list_devices: bool,

    /// Open the --device (OpenCL or CUDA), confine this process as a VM's
    /// worker is confined (--sandbox, --user), run a kernel, try the
    /// forbidden system calls and paths outside the worker's file system
    /// (--control: its directory too); print a JSON report and exit (see
    /// SECURITY.md).
    #[arg(long, hide = true)]
    pub probe_sandbox: bool,

    /// Serve Prometheus metrics (HTTP GET /metrics) on `unix:PATH` or
    /// `tcp:ADDRESS:PORT` (e.g. tcp:127.0.0.1:9464); may be repeated. Off
    /// by default.
    #[arg(long, value_name = "ENDPOINT", value_parser = parse_endpoint)]
    pub metrics: Vec<Endpoint>,

    /// How long, in microseconds, a VM's vring thread keeps looking for the
    /// guest's next request after the last one before it sleeps until the
    /// guest kicks (adaptive polling: a busy guest then needs no kick and
    /// no wake-up per call; at most one polling thread per VM, and none
    /// while a call runs on a session thread). After a signalled CUDA copy
    /// the budget counts from when its signal lands (up to 10 ms later),
    /// as the guest waits for that first. 0: always sleep.
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 50,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub poll_us: u64,

    /// Register each region of a front-end's guest memory of at most SIZE
    /// with the CUDA driver when it is mapped (0: none), so copies between
    /// the GPU and ordinary guest memory run as DMA, like a native
    /// program's page-locked copies, instead of the driver's staged
    /// pageable copies. Registering pins those pages while the VM runs (as
    /// a GPU given to a VM with VFIO does): in loopback, the transport's
    /// data area; in a VM, every RAM region up to SIZE. Only with a CUDA
    /// device.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size)]
    pub cuda_pin_guest_memory: u64,

    /// Internal: run as the worker the supervisor started, on the channel
    /// and listening descriptors given, for the VM id given.
    #[arg(long, hide = true, value_name = "CHANNEL,LISTENER,VM")]
    pub worker: Option<String>,

    /// Internal: this worker rebuilds --restore's checkpoint.
    #[arg(long, hide = true, requires = "worker")]
    pub worker_restore: bool,

    /// Internal: this worker opens this OpenCL device (after a re-home)
    /// instead of --device's.
    #[arg(long, hide = true, value_name = "SPEC", requires = "worker")]
    pub worker_device: Option<String>,

    /// Internal: this worker's own uid, from --worker-uids.
    #[arg(long, hide = true, value_name = "UID", requires = "worker")]
    pub worker_uid: Option<u32>,
}

/// A problem with the command line.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid --device {0:?}: expected opencl, opencl:<platform>:<device>, opencl:<name-substring> or cuda:<index>")]
    BadDevice(String),
    #[error("invalid --log-level {0:?}: expected error, warn, info, debug or trace")]
    BadLogLevel(String),
    #[error("invalid --sandbox {0:?}: expected default or none")]
    BadSandbox(String),
    #[error("--socket is required")]
    NoSocket,
    #[error("invalid --worker {0:?}")]
    BadWorker(String),
    #[error("invalid --worker-uids {0:?}: {1}")]
    BadWorkerUids(String, &'static str),
    #[error("--worker-uids and --peer-memory exclude each other: cross-memory attach needs the program to run as its worker's uid")]
    WorkerUidsWithPeerMemory,
}

#[derive(Debug)]
pub struct Config {
    pub socket: PathBuf,
    /// Every device to serve, --device first.
    pub devices: Vec<DeviceSpec>,
    pub log_level: log::LevelFilter,
    pub control: Option<PathBuf>,
    /// `--precopy-socket`.
    pub precopy_socket: Option<PathBuf>,
    pub queue_depth: usize,
    pub restore: Option<PathBuf>,
    pub profile: Option<PathBuf>,
    /// `--binary-key`, if given.
    pub binary_key: Option<PathBuf>,
    /// `--memory`: the vGPU memory size new VMs get.
    pub memory: Option<u64>,
    /// Per-VM limits; the memory limit comes from `max_memory`.
    pub limits: crate::quota::Limits,
    /// `--max-memory`; without it a VM may allocate its vGPU memory size.
    pub max_memory: Option<u64>,
    pub sandbox: crate::sandbox::Sandbox,
    /// `--worker-uids`: the uids the supervisor hands out, one per worker.
    pub worker_uids: Option<std::ops::RangeInclusive<u32>>,
    /// `--peer-memory`: serve loopback programs by cross-memory attach.
    pub peer_memory: bool,
    /// `--metrics` endpoints.
    pub metrics: Vec<Endpoint>,
    /// Set in a worker process.
    pub worker: Option<WorkerRole>,
    /// The vring thread's poll budget (`--poll-us`).
    pub poll: std::time::Duration,
    /// `--cuda-pin-guest-memory`: the largest guest memory region
    /// registered with the CUDA driver.
    pub cuda_pin_guest_memory: u64,
}

/// One device to serve.
/// What the supervisor tells a worker on its command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRole {
    /// The worker's end of its channel to the supervisor.
    pub channel: std::os::fd::RawFd,
    /// The shared vhost-user listening socket.
    pub listener: std::os::fd::RawFd,
    /// The VM id this worker's front-end gets.
    pub vm_id: u64,
    /// Whether this worker rebuilds `--restore`'s checkpoint.
    pub restore: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    OpenCl(DeviceSelector),
    /// `cuda:<index>` (`cuda` alone: 0).
    Cuda(u32),
}

/// Where the binary key is kept when `--binary-key` is not given.
pub fn default_binary_key() -> Option<PathBuf> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return Some(PathBuf::from("/var/lib/vgpu/binary-key"));
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(state.join("vgpu").join("binary-key"))
}

/// Parses a `--device` or `--extra-device` SPEC of either API.
pub fn parse_spec(spec: &str) -> Result<DeviceSpec, ConfigError> {
    match spec.strip_prefix("cuda") {
        Some("") => Ok(DeviceSpec::Cuda(0)),
        Some(rest) => rest
            .strip_prefix(':')
            .and_then(|index| index.parse().ok())
            .map(DeviceSpec::Cuda)
            .ok_or_else(|| ConfigError::BadDevice(spec.to_string())),
        None => parse_device(spec).map(DeviceSpec::OpenCl),
    }
}

/// Parses an OpenCL `--device` SPEC.
pub fn parse_device(spec: &str) -> Result<DeviceSelector, ConfigError> {
    let bad = || ConfigError::BadDevice(spec.to_string());
    let rest = match spec.strip_prefix("opencl") {
        Some("") => return Ok(DeviceSelector::First),
        Some(rest) => rest.strip_prefix(':').ok_or_else(bad)?,
        None => return Err(bad()),
    };
    if rest.is_empty() {
        return Err(bad());
    }
    let mut parts = rest.splitn(2, ':');
    let first = parts.next().unwrap_or_default();
    match (first.parse::<usize>(), parts.next()) {
        (Ok(platform), Some(device)) => {
            let device = device.parse().map_err(|_| bad())?;
            Ok(DeviceSelector::Index { platform, device })
        }
        (Ok(_), None) => Err(bad()),
        (Err(_), _) => Ok(DeviceSelector::Name(rest.to_string())),
    }
}

/// A `vgpu-ctl rehome` target: an OpenCL device (`parse_device`). A CUDA
/// device is refused with what to do instead.
pub fn parse_rehome_target(spec: &str) -> Result<DeviceSelector, String> {
    if spec.starts_with("cuda") {
        return Err(format!(
            "cannot re-home to {spec}: re-home moves OpenCL vGPUs; a CUDA vGPU moves by \
             checkpoint and restore (vgpu-ctl checkpoint FILE --then exit, then \
             vgpu-backend --device {spec} --restore FILE on the same socket)"
        ));
    }
    parse_device(spec).map_err(|e| e.to_string())
}

/// A byte count with an optional K, M, G or T suffix (powers of 1024).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (digits, shift) = match text.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&text[..text.len() - 1], 10),
        Some('M') => (&text[..text.len() - 1], 20),
        Some('G') => (&text[..text.len() - 1], 30),
        Some('T') => (&text[..text.len() - 1], 40),
        _ => (text, 0),
    };
    let value: u64 = digits.parse().map_err(|_| {
        format!("invalid size {text:?}: expected a number with an optional K, M, G or T suffix")
    })?;
    value
        .checked_mul(1u64 << shift)
        .ok_or(format!("size {text:?} is too large"))
}

/// Where to serve the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(std::path::PathBuf),
    Tcp(std::net::SocketAddr),
}

/// `unix:PATH` or `tcp:ADDRESS:PORT`.
pub fn parse_endpoint(text: &str) -> Result<Endpoint, String> {
    let bad = || {
        format!("invalid --metrics {text:?}: expected unix:PATH or tcp:ADDRESS:PORT (e.g. tcp:127.0.0.1:9464)")
    };
    if let Some(path) = text.strip_prefix("unix:") {
        if path.is_empty() {
            return Err(bad());
        }
        return Ok(Endpoint::Unix(std::path::PathBuf::from(path)));
    }
    let address = text.strip_prefix("tcp:").ok_or_else(bad)?;
    address.parse().map(Endpoint::Tcp).map_err(|_| bad())
}

/// `--worker CHANNEL,LISTENER,VM`.
fn parse_worker(text: &str, restore: bool) -> Result<WorkerRole, ConfigError> {
    let bad = || ConfigError::BadWorker(text.to_string());
    let parts: Vec<&str> = text.split(',').collect();
    let [channel, listener, vm_id] = parts[..] else {
        return Err(bad());
    };
    Ok(WorkerRole {
        channel: channel.parse().map_err(|_| bad())?,
        listener: listener.parse().map_err(|_| bad())?,
        vm_id: vm_id.parse().map_err(|_| bad())?,
        restore,
    })
}

/// Parses `--worker-uids FIRST-LAST`.
pub fn parse_worker_uids(text: &str) -> Result<std::ops::RangeInclusive<u32>, ConfigError> {
    let bad = |why| ConfigError::BadWorkerUids(text.to_string(), why);
    let (first, last) = text
        .split_once('-')
        .ok_or_else(|| bad("expected FIRST-LAST, e.g. 200000-200999"))?;
    let number = |n: &str| n.trim().parse::<u32>().map_err(|_| bad("not a number"));
    let (first, last) = (number(first)?, number(last)?);
    if first == 0 {
        return Err(bad("uid 0 is root"));
    }
    if last < first {
        return Err(bad("LAST is below FIRST"));
    }
    if last == u32::MAX {
        return Err(bad("uid 4294967295 means \"no uid\" to the kernel"));
    }
    if last == first {
        // The standby takes a uid too: with one, no front-end is served
        // while the standby waits.
        return Err(bad("needs at least two uids (one is the standby worker's)"));
    }
    Ok(first..=last)
}

/// Parses `--sandbox MODE` together with `--user` and a worker's own uid.
pub fn parse_sandbox(
    mode: &str,
    user: Option<String>,
    own_uid: Option<u32>,
) -> Result<crate::sandbox::Sandbox, ConfigError> {
    match mode {
        "default" => Ok(crate::sandbox::Sandbox::Default { user, own_uid }),
        "none" => Ok(crate::sandbox::Sandbox::None),
        other => Err(ConfigError::BadSandbox(other.to_string())),
    }
}

pub fn parse_log_level(level: &str) -> Result<log::LevelFilter, ConfigError> {
    match level.to_ascii_lowercase().as_str() {
        "error" => Ok(log::LevelFilter::Error),
        "warn" => Ok(log::LevelFilter::Warn),
        "info" => Ok(log::LevelFilter::Info),
        "debug" => Ok(log::LevelFilter::Debug),
        "trace" => Ok(log::LevelFilter::Trace),
        _ => Err(ConfigError::BadLogLevel(level.to_string())),
    }
}

impl TryFrom<Args> for Config {
    type Error = ConfigError;

    fn try_from(args: Args) -> Result<Config, ConfigError> {
        let mut devices: Vec<DeviceSpec> = std::iter::once(&args.device)
            .chain(&args.extra_device)
            .map(|spec| parse_spec(spec))
            .collect::<Result<_, _>>()?;
        if let Some(spec) = &args.worker_device {
            let moved = DeviceSpec::OpenCl(parse_device(spec)?);
            match devices
                .iter_mut()
                .find(|d| matches!(d, DeviceSpec::OpenCl(_)))
            {
                Some(slot) => *slot = moved,
                None => devices.insert(0, moved),
            }
        }
        let worker = match &args.worker {
            Some(text) => Some(parse_worker(text, args.worker_restore)?),
            None => None,
        };
        let worker_uids = match &args.worker_uids {
            Some(text) => Some(parse_worker_uids(text)?),
            None => None,
        };
        if worker_uids.is_some() && args.peer_memory {
            return Err(ConfigError::WorkerUidsWithPeerMemory);
        }
        Ok(Config {
            socket: args.socket.ok_or(ConfigError::NoSocket)?,
            devices,
            worker,
            poll: std::time::Duration::from_micros(args.poll_us),
            cuda_pin_guest_memory: args.cuda_pin_guest_memory,
            log_level: parse_log_level(&args.log_level)?,
            control: args.control,
            precopy_socket: args.precopy_socket,
            queue_depth: args.queue_depth,
            restore: args.restore,
            profile: args.profile,
            memory: args.memory,
            binary_key: args.binary_key,
            max_memory: args.max_memory,
            sandbox: parse_sandbox(&args.sandbox, args.user.clone(), args.worker_uid)?,
            worker_uids,
            peer_memory: args.peer_memory,
            metrics: args.metrics,
            limits: crate::quota::Limits {
                memory_bytes: 0,
                objects: args.max_objects,
                in_flight: args.max_in_flight,
                batch_messages: args.max_batch,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_uid_ranges_are_checked() {
        assert_eq!(parse_worker_uids("200000-200999"), Ok(200000..=200999));
        for (text, why) in [
            ("200000", "FIRST-LAST"),
            ("0-10", "root"),
            ("10-5", "below"),
            ("7-7", "two uids"),
            ("a-9", "number"),
            ("1-4294967295", "no uid"),
        ] {
            let err = parse_worker_uids(text).expect_err(text).to_string();
            assert!(err.contains(why) && err.contains(text), "{text}: {err}");
        }
    }

    #[test]
    fn device_spec_forms_parse() {
        assert_eq!(parse_device("opencl"), Ok(DeviceSelector::First));
        assert_eq!(
            parse_device("opencl:1:2"),
            Ok(DeviceSelector::Index {
                platform: 1,
                device: 2
            })
        );
        assert_eq!(
            parse_device("opencl:pthread"),
            Ok(DeviceSelector::Name("pthread".into()))
        );
        assert_eq!(
            parse_device("opencl:NVIDIA H100"),
            Ok(DeviceSelector::Name("NVIDIA H100".into()))
        );
    }

    #[test]
    fn bad_device_specs_are_named_in_the_error() {
        for spec in ["cuda:0", "opencl:", "opencl:1", "opencl:1:x", "openclx"] {
            let err = parse_device(spec).unwrap_err();
            assert!(err.to_string().contains(spec), "{err}");
        }
    }

    #[test]
    fn a_cuda_rehome_target_is_refused_with_the_way_to_move_it() {
        let e = parse_rehome_target("cuda:1").unwrap_err();
        assert!(
            e.contains("checkpoint and restore") && e.contains("--device cuda:1"),
            "{e}"
        );
        assert_eq!(parse_rehome_target("opencl"), Ok(DeviceSelector::First));
        assert!(parse_rehome_target("vulkan")
            .unwrap_err()
            .contains("vulkan"));
    }

    #[test]
    fn cuda_specs_parse_and_bad_ones_are_named() {
        assert_eq!(parse_spec("cuda"), Ok(DeviceSpec::Cuda(0)));
        assert_eq!(parse_spec("cuda:3"), Ok(DeviceSpec::Cuda(3)));
        assert_eq!(
            parse_spec("opencl"),
            Ok(DeviceSpec::OpenCl(DeviceSelector::First))
        );
        for spec in ["cuda:", "cuda:x", "cudax", "cuda:-1"] {
            let err = parse_spec(spec).unwrap_err();
            assert!(err.to_string().contains(spec), "{err}");
        }
    }

    #[test]
    fn sizes_parse_with_suffixes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4g"), Ok(4 << 30));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("lots").unwrap_err().contains("lots"));
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn log_levels_parse() {
        assert_eq!(parse_log_level("DEBUG"), Ok(log::LevelFilter::Debug));
        assert!(parse_log_level("loud").is_err());
    }
}
