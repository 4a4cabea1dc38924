//! The file system a worker sees: only what its driver needs, enforced
//! with Landlock (see `landlock`).
//!
//! The worker is restricted right after it drops root and before it opens
//! its device, while it is still one thread (Landlock binds the calling
//! thread and those it starts later, not threads that already exist), so
//! everything the driver reads at start-up and later (a kernel build, a
//! re-home to another device) must be on the list:
//!
//! - read and execute: the system's programs and libraries (`/usr`,
//!   `/lib*`, `/bin`, `/sbin`), the directories the dynamic loader is told
//!   about (`LD_LIBRARY_PATH`, `/etc/ld.so.conf`), and those of the
//!   libraries the OpenCL vendor files name by absolute path;
//! - read: the loader's cache and configuration, the OpenCL vendor files,
//!   `/etc/nvidia`, `/proc` (the driver reads `/proc/self/*`,
//!   `/proc/cpuinfo`, `/proc/driver/nvidia`; a per-process rule cannot be
//!   had, since procfs makes new inodes for a process's directory when
//!   memory is short and a rule holds to an inode; write too, for thread
//!   names), and the parts of `/sys` that hwloc, PoCL and NVIDIA's library
//!   read;
//! - read, write and ioctl: `/dev/null`-like nodes, `/dev/nvidia*`,
//!   `/dev/dri`;
//! - everything: the worker's own cache directory (`POCL_CACHE_DIR`,
//!   where PoCL also keeps its temporary files; CUDA's cache is beneath).
//!
//! Everything else is refused with `EACCES`: `/etc` beyond the files
//! above, `/home`, `/root`, `/tmp`, `/run` and the control socket's
//! directory, `/var`, other workers' caches. With ABI 4 and later no TCP
//! socket can be bound or connected (the seccomp filter already refuses
//! them), with ABI 6 no signal or abstract unix socket reaches outside the
//! worker. A kernel without Landlock (gVisor, an old or differently built
//! kernel) gets a warning and a worker confined by its user and the
//! seccomp filter only.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::landlock::{self, fs, Ruleset};

const READ: u64 = fs::READ_FILE | fs::READ_DIR;
const READ_EXEC: u64 = READ | fs::EXECUTE;
const DEVICE: u64 = READ | fs::WRITE_FILE | fs::IOCTL_DEV;

/// Programs and libraries.
const SYSTEM: &[&str] = &[
    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin",
];
/// Configuration the loader and the drivers read.
const CONFIG: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/OpenCL/vendors",
    "/etc/nvidia",
];
/// What hwloc, PoCL and NVIDIA's library read of the kernel's view.
const KERNEL_VIEW: &[&str] = &[
    "/sys/devices",
    "/sys/bus",
    "/sys/class",
    "/sys/dev",
    "/sys/kernel/mm",
    "/sys/fs/cgroup",
    "/sys/module",
];
/// Nodes any program may use.
const COMMON_NODES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// How a worker's file system was confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Landlock of this ABI version holds the worker to its list.
    Confined { abi: u32 },
    /// The kernel has no Landlock: the file system is not confined.
    Unavailable,
    /// The sandbox is off (`--sandbox none`).
    Off,
    /// Left out for `--peer-memory`: Landlock forbids reading the memory
    /// of a process outside the worker's domain, which that option needs.
    PeerMemory,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Confined { abi } => write!(f, "landlock ABI {abi}"),
            Outcome::Unavailable => f.write_str("not confined: the kernel has no Landlock"),
            Outcome::Off => f.write_str("not confined: sandbox off"),
            Outcome::PeerMemory => f.write_str("not confined: --peer-memory"),
        }
    }
}

/// This process's outcome, once [`confine`] ran.
static OUTCOME: OnceLock<Outcome> = OnceLock::new();

/// Records how this process's file system is confined (once).
pub fn record(outcome: Outcome) {
    let _ = OUTCOME.set(outcome);
}

/// How this process's file system is confined, for `vgpu-ctl status`.
pub fn describe() -> String {
    OUTCOME
        .get()
        .map_or_else(|| "not confined".to_string(), Outcome::to_string)
}

/// One rule: a path and what may be done beneath it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub access: u64,
}

fn grant(path: impl Into<PathBuf>, access: u64) -> Grant {
    Grant {
        path: path.into(),
        access,
    }
}

/// The directories `/etc/ld.so.conf` names, following its `include`
/// lines one level (as distributions write it).
fn loader_dirs(conf: &Path, depth: u32) -> Vec<PathBuf> {
    let Ok(text) = std::fs::read_to_string(conf) else {
        return Vec::new();
    };
    let mut dirs = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(pattern) = line.strip_prefix("include") {
            if depth > 0 {
                continue;
            }
            for included in glob_conf(pattern.trim()) {
                dirs.extend(loader_dirs(&included, depth + 1));
            }
        } else if line.starts_with('/') {
            dirs.push(PathBuf::from(line));
        }
    }
    dirs
}

/// The files of an `include DIR/*.conf` line (the only form used).
fn glob_conf(pattern: &str) -> Vec<PathBuf> {
    let path = Path::new(pattern);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Vec::new();
    };
    let name = name.to_string_lossy();
    let suffix = name.strip_prefix('*').unwrap_or(&name).to_string();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(&suffix))
        .collect()
}

/// The directories of the libraries the OpenCL vendor files name by an
/// absolute path (a bare name is found through the loader's paths).
/// `vendors` is a directory of `.icd` files or, as ocl-icd also takes
/// in `OCL_ICD_VENDORS`, one such file.
fn icd_library_dirs(vendors: &Path) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = if vendors.is_file() {
        vec![vendors.to_path_buf()]
    } else {
        std::fs::read_dir(vendors)
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    files
        .iter()
        .filter_map(|file| std::fs::read_to_string(file).ok())
        .filter_map(|text| {
            let library = PathBuf::from(text.trim());
            library
                .is_absolute()
                .then(|| library.parent().map(Path::to_path_buf))
                .flatten()
        })
        .collect()
}

/// The device nodes of NVIDIA's driver and of DRM.
fn device_nodes() -> Vec<PathBuf> {
    let mut nodes: Vec<PathBuf> = std::fs::read_dir("/dev")
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("nvidia"))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    nodes.push(PathBuf::from("/dev/dri"));
    nodes
}

/// Everything a worker may reach, `cache` being its own directory.
pub fn grants(cache: Option<&Path>) -> Vec<Grant> {
    let mut grants: Vec<Grant> = SYSTEM.iter().map(|p| grant(*p, READ_EXEC)).collect();
    let vendors = std::env::var_os("OCL_ICD_VENDORS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/OpenCL/vendors"));
    let library_dirs = std::env::var_os("LD_LIBRARY_PATH")
        .map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(loader_dirs(Path::new("/etc/ld.so.conf"), 0))
        .chain(icd_library_dirs(&vendors))
        .filter(|dir| dir.is_absolute());
    grants.extend(library_dirs.map(|dir| grant(dir, READ_EXEC)));
    grants.extend(CONFIG.iter().map(|p| grant(*p, READ)));
    grants.push(grant(vendors, READ));
    // CUDA names its threads through /proc/self/task/TID/comm and fails
    // cuInit (CUDA_ERROR_OPERATING_SYSTEM, seen on the H100) when it
    // cannot. The rule cannot be narrower than /proc (see above); what
    // else there is writable is the worker's own, root's alone, or behind
    // a ptrace check that Landlock already limits to the worker.
    grants.push(grant("/proc", READ | fs::WRITE_FILE | fs::TRUNCATE));
    grants.extend(KERNEL_VIEW.iter().map(|p| grant(*p, READ)));
    grants.extend(
        COMMON_NODES
            .iter()
            .map(|p| grant(*p, READ | fs::WRITE_FILE)),
    );
    grants.extend(device_nodes().into_iter().map(|p| grant(p, DEVICE)));
    if let Some(cache) = cache {
        grants.push(grant(cache, fs::ALL));
    }
    grants
}

/// Whether `path` names the root directory, however spelled.
fn is_root_dir(path: &Path) -> bool {
    std::fs::canonicalize(path).is_ok_and(|p| p.parent().is_none())
}

/// Holds this process, and every thread and process it starts from now
/// on, to [`grants`]. Call once `no_new_privs` is set, while the process
/// has one thread. A path on the list that does not exist, or that the
/// process's user cannot open, is skipped.
pub fn confine(cache: Option<&Path>) -> io::Result<Outcome> {
    let Some(abi) = landlock::abi_version()? else {
        log::warn!(
            "sandbox: this kernel has no Landlock: the worker's file system is not \
             confined (only its user and the seccomp filter hold it)"
        );
        record(Outcome::Unavailable);
        return Ok(Outcome::Unavailable);
    };
    // Threads started before the restriction would stay outside it.
    if let Some(threads) = super::user::status_field("Threads").filter(|t| t != "1") {
        log::warn!("sandbox: {threads} threads at the file-system confinement: only this one and its later threads are held");
    }
    let mut ruleset = Ruleset::new(abi)?;
    let mut granted = 0;
    for Grant { path, access } in grants(cache) {
        if is_root_dir(&path) {
            // An LD_LIBRARY_PATH or ld.so.conf entry of "/" (or "/usr/..")
            // would open the whole file system.
            log::warn!(
                "sandbox: no rule for {}: it is the root directory",
                path.display()
            );
            continue;
        }
        match ruleset.allow(&path, access) {
            Ok(()) => granted += 1,
            // Missing, or closed to the worker's user (a LD_LIBRARY_PATH
            // under root's home): nothing to grant.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
                ) =>
            {
                log::debug!("sandbox: no rule for {}: {e}", path.display());
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("landlock rule for {}: {e}", path.display()),
                ))
            }
        }
    }
    ruleset.restrict_self()?;
    log::info!("sandbox: Landlock ABI {abi}: the worker reaches {granted} paths, nothing else");
    record(Outcome::Confined { abi });
    Ok(Outcome::Confined { abi })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loader_configuration_names_its_directories_and_includes() {
        let dir = std::env::temp_dir().join(format!("vgpu-files-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).expect("scratch directory");
        std::fs::write(dir.join("conf.d/a.conf"), "/opt/a/lib # vendor\n\n").expect("write");
        std::fs::write(dir.join("conf.d/b.txt"), "/opt/ignored\n").expect("write");
        let main = dir.join("ld.so.conf");
        std::fs::write(
            &main,
            format!(
                "include {}/conf.d/*.conf\n/opt/b/lib\nrelative\n",
                dir.display()
            ),
        )
        .expect("write");
        let dirs = loader_dirs(&main, 0);
        std::fs::remove_dir_all(&dir).expect("remove scratch directory");
        assert_eq!(
            dirs,
            vec![PathBuf::from("/opt/a/lib"), PathBuf::from("/opt/b/lib")]
        );
    }

    #[test]
    fn vendor_files_name_library_directories_from_a_directory_or_one_file() {
        let dir = std::env::temp_dir().join(format!("vgpu-icd-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        std::fs::write(dir.join("a.icd"), "/opt/vendor-a/lib/libA.so\n").expect("write");
        std::fs::write(dir.join("b.icd"), "libB.so.1\n").expect("write");
        let from_dir = icd_library_dirs(&dir);
        let from_file = icd_library_dirs(&dir.join("a.icd"));
        std::fs::remove_dir_all(&dir).expect("remove scratch directory");
        assert_eq!(from_dir, vec![PathBuf::from("/opt/vendor-a/lib")]);
        assert_eq!(from_file, vec![PathBuf::from("/opt/vendor-a/lib")]);
    }

    #[test]
    fn the_root_directory_is_never_granted_however_spelled() {
        for root in ["/", "/usr/..", "//", "/./"] {
            assert!(is_root_dir(Path::new(root)), "{root}");
        }
        for other in ["/usr", "/proc", "/nonexistent-vgpu-test"] {
            assert!(!is_root_dir(Path::new(other)), "{other}");
        }
    }

    #[test]
    fn the_cache_is_the_only_writable_directory() {
        let cache = Path::new("/var/cache/vgpu-worker");
        let writable: Vec<_> = grants(Some(cache))
            .into_iter()
            .filter(|g| g.access & (fs::MAKE_REG | fs::REMOVE_FILE) != 0)
            .collect();
        assert_eq!(writable, vec![grant(cache, fs::ALL)]);
        for g in grants(None) {
            assert!(!g.path.starts_with("/tmp"), "{g:?}");
            assert!(!g.path.starts_with("/home"), "{g:?}");
            assert_ne!(g.path, Path::new("/etc"), "{g:?}");
        }
    }
}
