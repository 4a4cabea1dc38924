//! `--program-user`: the OpenCL programs, native and vgpu alike, run as an
//! unprivileged user. A confined backend worker started by root runs as
//! `nobody` (or `--user`), and cross-memory attach (`--peer-memory`) only
//! reaches a program of the worker's own user: a benchmark run as root
//! measures the loopback's one-copy path only when its programs run as
//! that user too.

use std::ffi::CString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{io, Error, Result};

/// Who the programs run as, and the driver cache they may write.
#[derive(Debug, Clone)]
pub struct ProgramUser {
    pub name: String,
    uid: libc::uid_t,
    gid: libc::gid_t,
    /// PoCL's kernel cache (the user's home may not exist, as `nobody`'s).
    cache: PathBuf,
}

impl ProgramUser {
    /// Looks `name` up and makes its cache directory under `scratch`.
    pub fn new(name: &str, scratch: &Path) -> Result<ProgramUser> {
        let cname = CString::new(name).map_err(|_| Error::Build("user name with NUL".into()))?;
        // SAFETY: `cname` is a valid C string; getpwnam's result is read
        // at once, before any other call could reuse its storage.
        let (uid, gid) = unsafe {
            let pw = libc::getpwnam(cname.as_ptr());
            if pw.is_null() {
                return Err(Error::Build(format!("--program-user: no user {name:?}")));
            }
            ((*pw).pw_uid, (*pw).pw_gid)
        };
        let cache = scratch.join(format!("cache-{name}"));
        std::fs::create_dir_all(&cache).map_err(io("create", &cache))?;
        std::os::unix::fs::chown(&cache, Some(uid), Some(gid)).map_err(io("chown", &cache))?;
        Ok(ProgramUser {
            name: name.to_string(),
            uid,
            gid,
            cache,
        })
    }

    /// Makes `command` run as this user (no supplementary groups: std
    /// drops them when root changes the uid), with its own PoCL cache.
    pub fn apply(&self, command: &mut Command) {
        command
            .uid(self.uid)
            .gid(self.gid)
            .env("POCL_CACHE_DIR", &self.cache);
    }

    /// Makes `command` (a backend) create its sockets so that this user may
    /// connect: a umask that leaves them writable by others. The sockets
    /// live in the run's scratch directory.
    pub fn open_sockets(command: &mut Command) {
        // SAFETY: umask is async-signal-safe and touches nothing else.
        unsafe {
            command.pre_exec(|| {
                libc::umask(0o000);
                Ok(())
            });
        }
    }
}
