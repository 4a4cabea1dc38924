//! Confines the process that serves a VM before it reads any guest input,
//! as virtiofsd and crosvm do: resource limits, no new privileges, an
//! unprivileged user, a file system of only what the driver needs
//! (Landlock, see `files`) and a seccomp allow-list (see `policy`).
//!
//! A per-VM worker is confined in two halves around opening its device,
//! [`drop_worker_privileges`] and [`filter_worker`]; [`apply`] is what the single-process daemon still uses (the same
//! filter, the user only when `--user` is given). `probe` checks the
//! result from inside (`vgpu-backend --probe-sandbox`).

mod bpf;
pub mod files;
pub mod landlock;
pub mod policy;
pub mod probe;
mod seccomp;
pub mod user;

use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// How much confinement to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// Nothing (debugging).
    None,
    /// No new privileges, the seccomp allow-list and the user named; a
    /// worker ([`drop_worker_privileges`]) also sets resource limits,
    /// confines its file system and, started as root without a user,
    /// becomes `vgpu` or `nobody`; `own_uid` (a worker of
    /// `--worker-uids`) becomes that uid instead.
    Default {
        user: Option<String>,
        own_uid: Option<u32>,
    },
}

/// Descriptors a worker may hold: its vrings, guest memory regions and
/// the driver's files need a few hundred at most.
const MAX_OPEN_FILES: libc::rlim_t = 4096;

/// Processes and threads a worker with a uid of its own may have: the
/// driver's threads (PoCL starts one per core, CUDA a few), a vring and a
/// session thread per queue, the linker PoCL forks; far below a host's
/// `pid_max`.
pub const MAX_WORKER_TASKS: libc::rlim_t = 1024;

fn set_limit(resource: libc::__rlimit_resource_t, value: libc::rlim_t) -> io::Result<()> {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `old` is valid for writing.
    if unsafe { libc::getrlimit(resource, &mut old) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // Never raise: an unprivileged worker cannot, and need not.
    let value = value.min(old.rlim_max);
    let new = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: `new` is a valid rlimit read by the call.
    if unsafe { libc::setrlimit(resource, &new) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn prctl(option: libc::c_int, arg: libc::c_ulong, what: &str) -> io::Result<()> {
    // SAFETY: prctl with integer arguments on this process only.
    if unsafe { libc::prctl(option, arg, 0, 0, 0) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

fn install_worker_filter(peer_memory: bool) -> io::Result<()> {
    let policy = policy::worker(std::process::id());
    install_filter(if peer_memory {
        policy::allow_peer_memory(policy)
    } else {
        policy
    })
}

fn install_filter(policy: policy::Policy) -> io::Result<()> {
    let prog = seccomp::compile(&policy).map_err(io::Error::other)?;
    seccomp::install(&prog)?;
    let allowed = policy
        .rules
        .values()
        .filter(|rule| **rule == policy::Rule::Always(policy::Verdict::Allow))
        .count();
    log::info!(
        "sandbox: seccomp filter of {} BPF instructions: {allowed} calls allowed, {} checked \
         or refused, the rest {}",
        prog.len(),
        policy.rules.len() - allowed,
        match policy.default {
            policy::Verdict::Allow => "as the filters below decide".to_string(),
            policy::Verdict::Errno(e) => io::Error::from_raw_os_error(e).to_string(),
        },
    );
    Ok(())
}

/// A new directory under `$TMPDIR`, made by this call: creation fails if
/// the path exists, symlinks included, so a directory someone else made is
/// never reused.
fn private_dir(prefix: &str) -> io::Result<PathBuf> {
    let mut last = None;
    for _ in 0..8 {
        let mut nonce = [0u8; 8];
        // SAFETY: `nonce` is valid for writes of its length.
        let n = unsafe { libc::getrandom(nonce.as_mut_ptr().cast(), nonce.len(), 0) };
        if n != nonce.len() as isize {
            return Err(io::Error::last_os_error());
        }
        let name = format!(
            "{prefix}-{}-{:016x}",
            std::process::id(),
            u64::from_ne_bytes(nonce)
        );
        let dir = std::env::temp_dir().join(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no private directory")))
}

/// Gives a worker that will drop root a driver cache of its own: PoCL
/// compiles and links every kernel in `POCL_CACHE_DIR` (by default under
/// root's home, which the worker can no longer write), and a cache shared
/// between VMs would let one VM's worker plant binaries another loads.
/// Creates `$TMPDIR/vgpu-worker-<pid>-<random>` (mode 0700, owned by the
/// worker's user; random, since a killed backend leaves its workers'
/// directories behind and pids come round again) and points
/// `POCL_CACHE_DIR` at it, unless already set.
///
/// Call before the device is opened (PoCL reads the variable once) and
/// while the process has a single thread (it changes the environment).
/// Returns the directory created, for the caller to remove at exit.
pub fn prepare_worker(sandbox: &Sandbox) -> io::Result<Option<PathBuf>> {
    let Sandbox::Default { user, own_uid } = sandbox else {
        return Ok(None);
    };
    if std::env::var_os("POCL_CACHE_DIR").is_some() {
        return Ok(None);
    }
    let dir = workers_dir("vgpu-worker", user.as_deref(), *own_uid)?;
    for (name, value) in driver_cache_env(&dir) {
        std::env::set_var(name, value);
    }
    Ok(Some(dir))
}

/// A new private directory (`private_dir`) owned by the user a worker
/// runs as.
fn workers_dir(prefix: &str, user: Option<&str>, own_uid: Option<u32>) -> io::Result<PathBuf> {
    let creds = user::for_worker(user, own_uid)?;
    let dir = private_dir(prefix)?;
    if let Some(creds) = &creds {
        std::os::unix::fs::chown(&dir, Some(creds.uid), Some(creds.gid))?;
    }
    Ok(dir)
}

/// The environment that puts the drivers' caches in `dir`: PoCL's, and
/// CUDA's JIT cache (cubins keyed by the PTX's hash) beneath it unless
/// the operator named one.
pub fn driver_cache_env(dir: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut env = vec![("POCL_CACHE_DIR", dir.to_path_buf())];
    if std::env::var_os("CUDA_CACHE_PATH").is_none() {
        env.push(("CUDA_CACHE_PATH", dir.join("cuda")));
    }
    env
}

/// Removes a driver cache made by `prepare_worker` or
/// `shared_loopback_cache` once no worker uses it; one already gone is
/// fine, any other failure is logged.
pub fn remove_cache(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != io::ErrorKind::NotFound {
            log::warn!("cannot remove {}: {e}", dir.display());
        }
    }
}

/// `--peer-memory`: one driver cache for every worker of this backend,
/// made by the supervisor before it is confined, owned by the workers'
/// user, and removed by the supervisor when it stops. A loopback program
/// runs as that user and each program is a front-end of its own, so with
/// private caches every run rebuilt each kernel and each of PoCL's
/// work-group variants (several milliseconds per variant) where a native
/// program finds them in its cache. Sharing adds no reach: the workers of
/// such a socket run as the programs' user with their file system
/// unconfined (cross-memory attach rules Landlock out), so each could
/// already open the others' caches. VM sockets keep a cache per worker.
/// `None` without `--peer-memory`, without the sandbox, or when
/// `POCL_CACHE_DIR` is set (the operator's cache then serves all).
pub fn shared_loopback_cache(sandbox: &Sandbox, peer_memory: bool) -> io::Result<Option<PathBuf>> {
    let Sandbox::Default { user, own_uid } = sandbox else {
        return Ok(None);
    };
    if !peer_memory || std::env::var_os("POCL_CACHE_DIR").is_some() {
        return Ok(None);
    }
    workers_dir("vgpu-cache", user.as_deref(), *own_uid).map(Some)
}

/// The first half of a worker's confinement, done before its driver
/// starts (so every file the driver makes, its kernel cache first, belongs
/// to the user it keeps running as): RLIMIT_CORE 0 and a bounded
/// RLIMIT_NOFILE (and RLIMIT_NPROC with a uid of its own), no new
/// privileges, the unprivileged user (when root: a uid of
/// `--worker-uids`, else `--user`, else `vgpu`, else `nobody`;
/// supplementary groups of that user, none for `nobody`), not dumpable
/// (other workers may run as the same
/// user), and the file system of [`files`] (the worker's cache directory
/// being `POCL_CACHE_DIR`). Files only root may read, and files outside
/// that list, must be open before. Call while the process has one thread.
pub fn drop_worker_privileges(sandbox: &Sandbox, peer_memory: bool) -> io::Result<files::Outcome> {
    let Sandbox::Default { user, own_uid } = sandbox else {
        log::warn!("sandbox disabled (--sandbox none): the worker is not confined");
        files::record(files::Outcome::Off);
        return Ok(files::Outcome::Off);
    };
    // Looked up first: the user database may need files the filter
    // would still allow but the new user could not read.
    let creds = user::for_worker(user.as_deref(), *own_uid)?;
    set_limit(libc::RLIMIT_CORE, 0)?;
    set_limit(libc::RLIMIT_NOFILE, MAX_OPEN_FILES)?;
    if own_uid.is_some() {
        // Counted per user: only a uid of the worker's own makes this a
        // bound on one VM (a guest's CPU kernel is native code and may
        // fork) rather than a pool the workers of every VM share.
        set_limit(libc::RLIMIT_NPROC, MAX_WORKER_TASKS)?;
    }
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")?;
    if let Some(creds) = &creds {
        user::drop_to(creds)?;
        log::info!(
            "sandbox: running as {} ({}:{})",
            creds.name,
            creds.uid,
            creds.gid
        );
        // A change of user clears the parent-death signal the supervisor
        // set: a worker must still end with it.
        prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGTERM as libc::c_ulong,
            "pdeathsig",
        )?;
    }
    prctl(libc::PR_SET_DUMPABLE, 0, "dumpable")?;
    if peer_memory {
        // Landlock refuses cross-memory attach to a process outside the
        // worker's domain, and the loopback program always is: the option
        // trades the file-system rules for the single copy.
        log::warn!(
            "sandbox: --peer-memory: the worker's file system is not confined \
             (Landlock would forbid reading the program's memory)"
        );
        files::record(files::Outcome::PeerMemory);
        return Ok(files::Outcome::PeerMemory);
    }
    let cache = std::env::var_os("POCL_CACHE_DIR").map(PathBuf::from);
    files::confine(cache.as_deref())
}

/// The second half: the seccomp allow-list on every thread, once the
/// device is open and before the first byte from a guest; with
/// `peer_memory` (`--peer-memory`) cross-memory attach stays allowed until
/// [`restrict_peer_memory`] narrows it.
pub fn filter_worker(sandbox: &Sandbox, peer_memory: bool) -> io::Result<()> {
    if *sandbox == Sandbox::None {
        return Ok(());
    }
    install_worker_filter(peer_memory)
}

/// Once the front-end connected (`--peer-memory`): cross-memory attach
/// only to its pid, or to nothing when it has none to offer.
pub fn restrict_peer_memory(sandbox: &Sandbox, peer: Option<u32>) -> io::Result<()> {
    if *sandbox == Sandbox::None {
        return Ok(());
    }
    install_filter(policy::peer_only(peer))
}

/// Leaves the host's network: the daemon speaks only over unix sockets.
/// Call first, before any thread exists (namespaces are per thread, and
/// threads inherit them). Needs CAP_SYS_ADMIN; without it, a warning.
pub fn isolate_network(sandbox: &Sandbox) {
    if *sandbox == Sandbox::None {
        return;
    }
    // SAFETY: unshare only changes this (still single) thread's namespace.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        log::warn!(
            "sandbox: no private network namespace: {}",
            io::Error::last_os_error()
        );
    }
}

/// Confines the supervisor once its sockets are bound: no new privileges
/// and the supervisor's seccomp allow-list (the worker's, plus starting
/// and confining workers). It keeps its user: `--user` is for the workers,
/// which read guest input; the supervisor reads none.
/// With `peer_memory` its workers may attach to their front-ends (a
/// filter is inherited, so the supervisor's must allow it).
pub fn apply(sandbox: &Sandbox, peer_memory: bool) -> io::Result<()> {
    if *sandbox == Sandbox::None {
        log::warn!("sandbox disabled (--sandbox none)");
        return Ok(());
    }
    prctl(libc::PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")?;
    let policy = policy::supervisor();
    install_filter(if peer_memory {
        policy::allow_peer_memory(policy)
    } else {
        policy
    })
}
