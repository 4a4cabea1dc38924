//! The worker's confinement seen from inside: `vgpu-backend
//! --probe-sandbox` opens the real OpenCL device (PoCL here), confines
//! itself with `confine_worker`, builds and runs a kernel, and tries the
//! calls a worker must never get.

use std::process::Command;

use serde_json::Value;

const EPERM: i64 = libc::EPERM as i64;
const ENOSYS: i64 = libc::ENOSYS as i64;
const EAFNOSUPPORT: i64 = libc::EAFNOSUPPORT as i64;

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

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
