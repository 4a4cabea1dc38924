//! `vgpu-backend --probe-sandbox`: confines itself exactly as a worker
//! does, then shows from inside that the device still computes, that the
//! forbidden calls are refused and that the paths outside the worker's
//! file system cannot be reached. Prints one JSON object; succeeds only
//! when the kernel's result is right, every call got the errno the filter
//! gives and every path came out as the file-system confinement says.

mod attempts;
mod device;
mod files;
mod kernel;

use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};

use super::{drop_worker_privileges, filter_worker, prepare_worker, user::status_field, Sandbox};
use crate::config::DeviceSpec;
use attempts::Outcome;
use device::Device;

/// The symbolic name of the errnos the probe expects or commonly meets.
fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EBADF => "EBADF",
        libc::EFAULT => "EFAULT",
        libc::EINVAL => "EINVAL",
        libc::EACCES => "EACCES",
        libc::ENOSYS => "ENOSYS",
        libc::EAFNOSUPPORT => "EAFNOSUPPORT",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOKEY => "ENOKEY",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EEXIST => "EEXIST",
        _ => return format!("errno {errno}"),
    };
    name.to_string()
}

fn identity() -> Value {
    // SAFETY: the get*id calls have no preconditions.
    let ids = unsafe {
        (
            libc::getuid(),
            libc::geteuid(),
            libc::getgid(),
            libc::getegid(),
        )
    };
    json!({
        "uid": ids.0,
        "euid": ids.1,
        "gid": ids.2,
        "egid": ids.3,
        "groups": status_field("Groups"),
        "cap_eff": status_field("CapEff"),
        "no_new_privs": status_field("NoNewPrivs"),
        "seccomp": status_field("Seccomp"),
        "dumpable": {
            // SAFETY: prctl with a constant option and no pointers.
            "value": unsafe { libc::prctl(libc::PR_GET_DUMPABLE, 0, 0, 0, 0) },
        },
    })
}

/// Tries every forbidden call; the report and whether all were refused as
/// the filter says.
fn forbidden_calls() -> (Value, bool) {
    let mut report = Map::new();
    let mut all_refused = true;
    for attempt in attempts::ALL {
        let outcome = attempts::run(attempt);
        let as_expected = outcome == Outcome::Errno(attempt.expected);
        all_refused &= as_expected;
        let got = match outcome {
            Outcome::Errno(e) => json!({ "errno": e, "name": errno_name(e) }),
            Outcome::Succeeded => json!({ "errno": 0, "name": "succeeded" }),
            Outcome::KilledBy(sig) => {
                json!({ "errno": null, "name": format!("killed by signal {sig}") })
            }
            Outcome::NotRun(e) => {
                json!({ "errno": null, "name": format!("not run: {}", errno_name(e)) })
            }
        };
        let mut entry = got;
        entry["expected"] = json!(errno_name(attempt.expected));
        entry["refused"] = json!(as_expected);
        report.insert(attempt.name.to_string(), entry);
    }
    (Value::Object(report), all_refused)
}

/// Runs the probe on the device `spec` (OpenCL or CUDA) under `sandbox`, in the
/// worker's order (cache, user and file system, device, filter); the JSON
/// report and whether everything held. `control` is the control socket
/// (`--control`), whose directory a worker must not reach.
pub fn run(spec: &DeviceSpec, sandbox: &Sandbox, control: Option<&Path>) -> (Value, bool) {
    let fail = |stage: &str, error: String| {
        let report = json!({ "ok": false, "stage": stage, "error": error, "identity": identity() });
        (report, false)
    };
    let cache = match prepare_worker(sandbox) {
        Ok(dir) => dir,
        Err(e) => return fail("prepare", e.to_string()),
    };
    let files = match drop_worker_privileges(sandbox, false) {
        Ok(files) => files,
        Err(e) => return fail("drop privileges", e.to_string()),
    };
    let device = match Device::open(spec) {
        Ok(device) => device,
        Err(e) => return fail("open device", e),
    };
    if let Err(e) = filter_worker(sandbox, false) {
        return fail("filter", e.to_string());
    }
    let kernel = match device.compute() {
        Ok(elements) => json!({ "ok": true, "elements": elements }),
        Err(e) => json!({ "ok": false, "error": e }),
    };
    let kernel_ok = kernel["ok"] == json!(true);
    let (calls, all_refused) = forbidden_calls();
    let own_cache = std::env::var_os("POCL_CACHE_DIR").map(PathBuf::from);
    let (file_system, files_ok) = files::check(&files, control, own_cache.as_deref());
    if let Some(dir) = cache {
        // The worker's own directory: it may remove it, confined or not.
        let _ = std::fs::remove_dir_all(dir);
    }
    let ok = kernel_ok && all_refused && files_ok;
    let report = json!({
        "ok": ok,
        "device": device.describe(),
        "identity": identity(),
        "kernel": kernel,
        "all_refused": all_refused,
        "forbidden_calls": calls,
        "file_system": file_system,
    });
    (report, ok)
}
