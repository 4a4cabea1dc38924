//! The worker's file system seen from inside: paths it must not reach,
//! chosen so that its user alone would not keep it out (world-readable
//! files, world-writable `/tmp`, the control socket's directory), and the
//! paths its driver needs, which it must still reach.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::errno_name;
use crate::sandbox::files::Outcome;

/// What an attempt does with its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Read,
    /// Open for writing, truncating (as a thread's name is set).
    Write,
    List,
    /// Create a new file in the directory (removed again if it worked).
    Create,
}

struct Attempt {
    name: &'static str,
    path: PathBuf,
    action: Action,
    /// Whether a confined worker must get it.
    allowed: bool,
}

/// The attempts; `control` is the control socket's path if one is set,
/// `cache` the worker's cache directory.
fn attempts(control: Option<&Path>, cache: Option<&Path>) -> Vec<Attempt> {
    let mut all = vec![
        refused("read_etc_passwd", "/etc/passwd", Action::Read),
        refused("read_etc_shadow", "/etc/shadow", Action::Read),
        refused("list_etc", "/etc", Action::List),
        refused("list_tmp", "/tmp", Action::List),
        refused("create_in_tmp", "/tmp", Action::Create),
        refused("list_run", "/run", Action::List),
        refused("list_root_home", "/root", Action::List),
        allowed("read_proc_self_status", "/proc/self/status", Action::Read),
        allowed("read_dev_urandom", "/dev/urandom", Action::Read),
        // What CUDA does for each thread it starts (cuInit fails without).
        allowed("name_own_thread", "/proc/thread-self/comm", Action::Write),
    ];
    if Path::new("/home").is_dir() {
        all.push(refused("list_home", "/home", Action::List));
    }
    if let Some(dir) = control.and_then(Path::parent) {
        all.push(refused("list_control_socket_dir", dir, Action::List));
        all.push(refused("create_in_control_socket_dir", dir, Action::Create));
    }
    if let Some(cache) = cache {
        all.push(allowed("create_in_own_cache", cache, Action::Create));
    }
    all
}

fn refused(name: &'static str, path: impl Into<PathBuf>, action: Action) -> Attempt {
    Attempt {
        name,
        path: path.into(),
        action,
        allowed: false,
    }
}

fn allowed(name: &'static str, path: impl Into<PathBuf>, action: Action) -> Attempt {
    Attempt {
        allowed: true,
        ..refused(name, path, action)
    }
}

/// Makes the attempt; `Ok` or the errno it got.
fn try_path(attempt: &Attempt) -> Result<(), i32> {
    let target = match attempt.action {
        Action::Create => attempt
            .path
            .join(format!("vgpu-probe-{}", std::process::id())),
        Action::Read | Action::Write | Action::List => attempt.path.clone(),
    };
    let c_path = CString::new(target.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
    let flags = match attempt.action {
        Action::Read => libc::O_RDONLY,
        Action::Write => libc::O_WRONLY | libc::O_TRUNC,
        Action::List => libc::O_RDONLY | libc::O_DIRECTORY,
        Action::Create => libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL,
    };
    // SAFETY: a valid NUL-terminated path; the descriptor is closed below.
    let fd = unsafe { libc::open(c_path.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: `fd` was just opened by this call and is closed once.
    unsafe { libc::close(fd) };
    if attempt.action == Action::Create {
        let _ = std::fs::remove_file(&target);
    }
    Ok(())
}

/// Tries every path; the report and whether each came out as the
/// confinement says (with no Landlock, nothing is expected of the
/// refused paths).
pub fn check(outcome: &Outcome, control: Option<&Path>, cache: Option<&Path>) -> (Value, bool) {
    let confined = matches!(outcome, Outcome::Confined { .. });
    let mut paths = Map::new();
    let mut all_as_expected = true;
    for attempt in attempts(control, cache) {
        let got = try_path(&attempt);
        let as_expected = match (attempt.allowed, got) {
            (true, result) => result.is_ok(),
            (false, Err(libc::EACCES)) => true,
            (false, _) => !confined,
        };
        all_as_expected &= as_expected;
        let (errno, name) = match got {
            Ok(()) => (0, "succeeded".to_string()),
            Err(e) => (e, errno_name(e)),
        };
        paths.insert(
            attempt.name.to_string(),
            json!({
                "path": attempt.path,
                "errno": errno,
                "name": name,
                "expected": if attempt.allowed { "succeeded" } else { "EACCES" },
                "as_expected": as_expected,
            }),
        );
    }
    let landlock = match outcome {
        Outcome::Confined { abi } => json!(abi),
        Outcome::Unavailable | Outcome::Off | Outcome::PeerMemory => Value::Null,
    };
    let report = json!({
        "landlock_abi": landlock,
        "confined": confined,
        "all_as_expected": all_as_expected,
        "paths": paths,
    });
    (report, all_as_expected)
}
