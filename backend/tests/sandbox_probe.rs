//! The worker's confinement seen from inside: `vgpu-backend
//! --probe-sandbox` confines itself as a worker does, opens the real
//! OpenCL device (PoCL here), builds and runs a kernel, tries the calls a
//! worker must never get and the paths outside its file system.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

const EPERM: i64 = libc::EPERM as i64;
const ENOSYS: i64 = libc::ENOSYS as i64;
const EAFNOSUPPORT: i64 = libc::EAFNOSUPPORT as i64;
const EACCES: i64 = libc::EACCES as i64;

/// A directory standing for the control socket's: world-readable and
/// world-writable, so that only the file-system confinement keeps a worker
/// out of it.
struct ControlDir(PathBuf);

impl ControlDir {
    fn new(name: &str) -> ControlDir {
        let dir = std::env::temp_dir().join(format!("vgpu-probe-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("control socket directory");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
            .expect("open the directory to everyone");
        ControlDir(dir)
    }

    fn socket(&self) -> String {
        self.0.join("control.sock").display().to_string()
    }
}

impl Drop for ControlDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs the probe with `args`; its exit status and JSON report.
fn probe(args: &[&str]) -> (bool, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
        .args(["--probe-sandbox", "--device", "opencl"])
        .args(args)
        .output()
        .expect("run vgpu-backend --probe-sandbox");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "probe printed no JSON ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.success(), report)
}

fn errno_of(report: &Value, call: &str) -> Option<i64> {
    report["forbidden_calls"][call]["errno"].as_i64()
}

/// Whether this kernel has Landlock (the confinement's file-system part).
fn kernel_has_landlock() -> bool {
    // SAFETY: with the VERSION flag (1) the kernel reads no attribute.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    abi > 0
}

/// Paths a worker must not reach though its user could; and the ones
/// its driver needs.
const REFUSED_PATHS: &[&str] = &[
    "read_etc_passwd",
    "list_etc",
    "list_tmp",
    "create_in_tmp",
    "list_run",
    "list_control_socket_dir",
    "create_in_control_socket_dir",
];
const ALLOWED_PATHS: &[&str] = &[
    "read_proc_self_status",
    "name_own_thread",
    "read_dev_urandom",
    "create_in_own_cache",
];

fn path_errno(report: &Value, name: &str) -> i64 {
    report["file_system"]["paths"][name]["errno"]
        .as_i64()
        .unwrap_or_else(|| panic!("no {name} in {:#}", report["file_system"]))
}

#[test]
fn confined_worker_reaches_only_its_drivers_files() {
    let control = ControlDir::new("confined");
    let (success, report) = probe(&["--control", &control.socket()]);
    assert!(success, "probe failed: {report:#}");
    let fs = &report["file_system"];
    if !kernel_has_landlock() {
        assert_eq!(fs["confined"], false, "{fs:#}");
        eprintln!("this kernel has no Landlock: the file system is not confined");
        return;
    }
    assert_eq!(fs["confined"], true, "{fs:#}");
    assert!(
        fs["landlock_abi"].as_u64().is_some_and(|abi| abi >= 1),
        "{fs:#}"
    );
    for name in REFUSED_PATHS {
        assert_eq!(path_errno(&report, name), EACCES, "{name}: {fs:#}");
    }
    for name in ALLOWED_PATHS {
        assert_eq!(path_errno(&report, name), 0, "{name}: {fs:#}");
    }
    // PoCL built (in its cache) and ran the kernel inside that view.
    assert_eq!(report["kernel"]["elements"], 4096, "{}", report["kernel"]);
}

#[test]
fn confined_worker_computes_and_is_refused_every_forbidden_call() {
    let (success, report) = probe(&[]);
    assert!(success, "probe failed: {report:#}");
    assert_eq!(report["ok"], true);

    let id = &report["identity"];
    assert_eq!(id["seccomp"], "2", "{id}");
    assert_eq!(id["no_new_privs"], "1", "{id}");
    assert_eq!(id["dumpable"]["value"], 0, "{id}");
    assert_eq!(id["cap_eff"], "0000000000000000", "{id}");
    if is_root() {
        for field in ["uid", "euid", "gid", "egid"] {
            let value = id[field].as_u64().expect("numeric id");
            assert_ne!(value, 0, "{field} is still root after the drop: {id}");
        }
    }

    assert_eq!(report["kernel"]["ok"], true, "{}", report["kernel"]);
    assert_eq!(report["kernel"]["elements"], 4096);

    let expected = [
        ("ptrace_attach_parent", EPERM),
        ("process_vm_readv_parent", EPERM),
        ("mount_tmpfs", EPERM),
        ("fsopen", EPERM),
        ("fsmount", EPERM),
        ("move_mount", EPERM),
        ("open_tree", EPERM),
        ("fsconfig", EPERM),
        ("fspick", EPERM),
        ("mount_setattr", EPERM),
        ("pivot_root", EPERM),
        ("chroot", EPERM),
        ("unshare_newuser", EPERM),
        ("setns", EPERM),
        ("clone_newnet", EPERM),
        ("clone_newuser", EPERM),
        ("clone3_newuser", ENOSYS),
        ("io_uring_setup", EPERM),
        ("pidfd_open", EPERM),
        ("pidfd_getfd", EPERM),
        ("socket_inet", EAFNOSUPPORT),
        ("socket_inet6", EAFNOSUPPORT),
        ("socket_netlink", EAFNOSUPPORT),
        ("bpf", EPERM),
        ("perf_event_open", EPERM),
        ("keyctl", EPERM),
        ("add_key", EPERM),
        ("kexec_load", EPERM),
        ("finit_module", EPERM),
        ("reboot", EPERM),
        ("swapon", EPERM),
        ("clock_settime", EPERM),
        ("userfaultfd", EPERM),
        ("setuid_root", EPERM),
        ("setresgid_root", EPERM),
        ("personality", EPERM),
        ("iopl", EPERM),
        ("open_by_handle_at", EPERM),
    ];
    for (call, errno) in expected {
        assert_eq!(
            errno_of(&report, call),
            Some(errno),
            "{call}: {}",
            report["forbidden_calls"][call]
        );
    }
    let calls = report["forbidden_calls"]
        .as_object()
        .expect("forbidden_calls is an object");
    for (call, result) in calls {
        assert_eq!(result["refused"], true, "{call}: {result}");
    }
}

/// The same probe without the sandbox: the calls go through (or fail for
/// the kernel's own reasons), so the refusals above are the filter's, and
/// the probe says it failed.
#[test]
fn unconfined_probe_reports_the_calls_it_got_and_fails() {
    let (success, report) = probe(&["--sandbox", "none"]);
    assert!(!success, "an unconfined probe must not pass: {report:#}");
    assert_eq!(report["ok"], false);
    assert_eq!(report["identity"]["seccomp"], "0");
    assert_eq!(report["kernel"]["ok"], true, "{}", report["kernel"]);
    assert_eq!(errno_of(&report, "socket_inet"), Some(0), "{report:#}");
    assert_eq!(report["forbidden_calls"]["socket_inet"]["refused"], false);
}

/// Without the sandbox the same paths open: the refusals above are the
/// confinement's, not the files' modes.
#[test]
fn unconfined_probe_reaches_the_paths_a_worker_is_refused() {
    let control = ControlDir::new("unconfined");
    let (_, report) = probe(&["--sandbox", "none", "--control", &control.socket()]);
    assert_eq!(report["file_system"]["confined"], false);
    for name in REFUSED_PATHS {
        assert_eq!(
            path_errno(&report, name),
            0,
            "{name}: {:#}",
            report["file_system"]
        );
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
