//! The kernel's Landlock interface (`linux/landlock.h`), as far as a worker
//! uses it: a ruleset that handles every file-system right the running
//! kernel knows, path rules that grant some of them beneath a directory
//! or on a file, and, where the kernel has them, refusal of TCP and of
//! signals and abstract unix sockets outside the worker.
//!
//! Landlock needs no privilege and stacks on the seccomp filter: what it
//! refuses, it refuses with `EACCES` at `open`, whatever the file's mode
//! says. The kernel's ABI version decides which rights exist; rights a
//! kernel does not know are left out, not asked for (asking fails).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// File-system rights (`LANDLOCK_ACCESS_FS_*`).
pub mod fs {
    pub const EXECUTE: u64 = 1 << 0;
    pub const WRITE_FILE: u64 = 1 << 1;
    pub const READ_FILE: u64 = 1 << 2;
    pub const READ_DIR: u64 = 1 << 3;
    pub const REMOVE_DIR: u64 = 1 << 4;
    pub const REMOVE_FILE: u64 = 1 << 5;
    pub const MAKE_CHAR: u64 = 1 << 6;
    pub const MAKE_DIR: u64 = 1 << 7;
    pub const MAKE_REG: u64 = 1 << 8;
    pub const MAKE_SOCK: u64 = 1 << 9;
    pub const MAKE_FIFO: u64 = 1 << 10;
    pub const MAKE_BLOCK: u64 = 1 << 11;
    pub const MAKE_SYM: u64 = 1 << 12;
    /// ABI 2: link or rename a file into another directory.
    pub const REFER: u64 = 1 << 13;
    /// ABI 3.
    pub const TRUNCATE: u64 = 1 << 14;
    /// ABI 5: ioctl on a device node opened after the restriction.
    pub const IOCTL_DEV: u64 = 1 << 15;

    /// The rights that apply to a file, not only to a directory's entries.
    pub const ON_FILE: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    /// Every right, on a directory one may write.
    pub const ALL: u64 = (1 << 16) - 1;
}

/// `LANDLOCK_ACCESS_NET_*` (ABI 4).
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;
/// `LANDLOCK_SCOPE_*` (ABI 6).
const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

const CREATE_RULESET_VERSION: libc::c_uint = 1 << 0;
const RULE_PATH_BENEATH: libc::c_int = 1;

/// `struct landlock_ruleset_attr`; the kernel reads as many fields as the
/// size passed says, so an older kernel is given only those it knows.
#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

/// `struct landlock_path_beneath_attr`, packed as the kernel declares it.
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version of the running kernel: `Ok(None)` where it has
/// none (not built in, not enabled at boot, or a kernel such as gVisor's
/// that does not implement it).
pub fn abi_version() -> io::Result<Option<u32>> {
    // SAFETY: with the VERSION flag the kernel reads no attribute; a null
    // pointer and size 0 are what the interface asks for.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    if v >= 0 {
        return Ok(Some(v as u32));
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => Ok(None),
        _ => Err(e),
    }
}

/// The file-system rights ABI `abi` knows.
fn fs_rights(abi: u32) -> u64 {
    let mut rights = fs::REFER - 1;
    if abi >= 2 {
        rights |= fs::REFER;
    }
    if abi >= 3 {
        rights |= fs::TRUNCATE;
    }
    if abi >= 5 {
        rights |= fs::IOCTL_DEV;
    }
    rights
}

/// A ruleset being filled, then applied to this process.
pub struct Ruleset {
    fd: OwnedFd,
    /// The file-system rights it handles: every one not granted by a rule
    /// is refused.
    handled: u64,
}

impl Ruleset {
    /// A ruleset for ABI `abi` that handles every file-system right it
    /// knows, every TCP right (ABI 4: no TCP at all, no rule grants any)
    /// and the signal and abstract-socket scopes (ABI 6).
    pub fn new(abi: u32) -> io::Result<Ruleset> {
        let attr = RulesetAttr {
            handled_access_fs: fs_rights(abi),
            handled_access_net: NET_BIND_TCP | NET_CONNECT_TCP,
            scoped: SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL,
        };
        let size = match abi {
            0..=3 => std::mem::size_of::<u64>(),
            4 | 5 => 2 * std::mem::size_of::<u64>(),
            _ => std::mem::size_of::<RulesetAttr>(),
        };
        // SAFETY: `attr` is valid for reads of `size` bytes (its first
        // fields), which is all the kernel reads.
        let fd = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, &attr, size, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Ruleset {
            // SAFETY: the call returned a new descriptor that nothing else
            // owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
            handled: attr.handled_access_fs,
        })
    }

    /// Grants `access` (of `fs`) on `path` and, for a directory, on
    /// everything beneath it. On a file only the rights of a file count.
    /// The rights this ruleset does not handle are dropped.
    pub fn allow(&mut self, path: &Path, access: u64) -> io::Result<()> {
        let c_path = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"))?;
        // SAFETY: a valid NUL-terminated path; O_PATH opens nothing for
        // reading or writing.
        let raw = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `open` returned a new descriptor that nothing else owns.
        let parent = unsafe { OwnedFd::from_raw_fd(raw) };
        let is_dir = std::fs::metadata(path)?.is_dir();
        let mut allowed = access & self.handled;
        if !is_dir {
            allowed &= fs::ON_FILE;
        }
        if allowed == 0 {
            return Ok(());
        }
        let rule = PathBeneathAttr {
            allowed_access: allowed,
            parent_fd: parent.as_raw_fd(),
        };
        // SAFETY: `rule` is a valid path-beneath attribute the kernel only
        // reads; both descriptors are open.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &rule,
                0u32,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Applies the ruleset to the calling thread, and so to every thread
    /// it starts from now on. Needs `no_new_privs` (set before).
    pub fn restrict_self(self) -> io::Result<()> {
        // SAFETY: a ruleset descriptor and no flags.
        let rc =
            unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_rights_grow_with_the_version() {
        assert_eq!(fs_rights(1), (1 << 13) - 1);
        assert_eq!(fs_rights(2) & fs::REFER, fs::REFER);
        assert_eq!(fs_rights(4) & fs::IOCTL_DEV, 0);
        assert_eq!(fs_rights(7), fs::ALL);
    }

    #[test]
    fn path_beneath_attr_has_the_kernel_layout() {
        assert_eq!(std::mem::size_of::<PathBeneathAttr>(), 12);
        assert_eq!(std::mem::size_of::<RulesetAttr>(), 24);
    }
}
