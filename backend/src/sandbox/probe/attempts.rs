//! The calls a confined worker must not get, each tried for real.
//!
//! Each attempt runs in a forked child (same filter, same user), so one
//! that the kernel would grant changes nothing in the probe itself: a
//! namespace, a descriptor or a grandchild it makes dies with the child.
//! The arguments are chosen so that, without the filter, most calls
//! succeed or fail with an errno other than the filter's: the probe run
//! with `--sandbox none` shows the difference.

use std::ffi::CStr;
use std::io;

use libc::{c_long, pid_t};

/// One argument of a call, turned into a register value in the child.
#[derive(Debug, Clone, Copy)]
enum Arg {
    Int(i64),
    /// A NUL-terminated string the kernel only reads.
    Str(&'static CStr),
    /// The probe's own pid (the child's parent).
    Parent,
    /// A zeroed buffer of `SCRATCH` bytes the kernel may write.
    Scratch,
    /// A `struct clone_args` asking for a new user namespace.
    CloneArgs,
}
use Arg::{Int, Parent, Scratch, Str};

const SCRATCH: usize = 4096;
const NOWHERE: &CStr = c"/nonexistent-vgpu-probe";
const EMPTY: &CStr = c"";
const EPERM: i32 = libc::EPERM;
const EAFNOSUPPORT: i32 = libc::EAFNOSUPPORT;

/// One forbidden call.
#[derive(Debug)]
pub struct Attempt {
    pub name: &'static str,
    /// The errno the filter answers with.
    pub expected: i32,
    nr: c_long,
    args: &'static [Arg],
}

/// What a call got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Errno(i32),
    Succeeded,
    KilledBy(i32),
    /// The child could not be started or waited for.
    NotRun(i32),
}

const fn attempt(name: &'static str, expected: i32, nr: c_long, args: &'static [Arg]) -> Attempt {
    Attempt {
        name,
        expected,
        nr,
        args,
    }
}

const NEWNET: i64 = (libc::CLONE_NEWNET | libc::SIGCHLD) as i64;
const NEWUSER: i64 = (libc::CLONE_NEWUSER | libc::SIGCHLD) as i64;
const KEY_SPEC_SESSION_KEYRING: i64 = -3;
const KEY_SPEC_PROCESS_KEYRING: i64 = -2;
const AT_FDCWD: i64 = libc::AT_FDCWD as i64;

/// Every attempt, in the order the report lists them: one line each.
#[rustfmt::skip]
pub const ALL: &[Attempt] = &[
    attempt("ptrace_attach_parent", EPERM, libc::SYS_ptrace, &[Int(libc::PTRACE_SEIZE as i64), Parent, Int(0), Int(0)]),
    attempt("process_vm_readv_parent", EPERM, libc::SYS_process_vm_readv, &[Parent, Int(0), Int(0), Int(0), Int(0), Int(0)]),
    attempt("mount_tmpfs", EPERM, libc::SYS_mount, &[Str(c"none"), Str(NOWHERE), Str(c"tmpfs"), Int(0), Int(0)]),
    attempt("umount2", EPERM, libc::SYS_umount2, &[Str(NOWHERE), Int(0)]),
    attempt("fsopen", EPERM, libc::SYS_fsopen, &[Str(c"tmpfs"), Int(0)]),
    attempt("fsconfig", EPERM, libc::SYS_fsconfig, &[Int(-1), Int(0), Int(0), Int(0), Int(0)]),
    attempt("fsmount", EPERM, libc::SYS_fsmount, &[Int(-1), Int(0), Int(0)]),
    attempt("fspick", EPERM, libc::SYS_fspick, &[Int(AT_FDCWD), Str(c"/"), Int(0)]),
    attempt("move_mount", EPERM, libc::SYS_move_mount, &[Int(-1), Str(EMPTY), Int(-1), Str(EMPTY), Int(0)]),
    attempt("open_tree", EPERM, libc::SYS_open_tree, &[Int(AT_FDCWD), Str(c"/"), Int(0)]),
    attempt("mount_setattr", EPERM, libc::SYS_mount_setattr, &[Int(-1), Str(EMPTY), Int(0), Int(0), Int(0)]),
    attempt("pivot_root", EPERM, libc::SYS_pivot_root, &[Str(NOWHERE), Str(NOWHERE)]),
    attempt("chroot", EPERM, libc::SYS_chroot, &[Str(NOWHERE)]),
    attempt("unshare_newuser", EPERM, libc::SYS_unshare, &[Int(libc::CLONE_NEWUSER as i64)]),
    attempt("unshare_newns", EPERM, libc::SYS_unshare, &[Int(libc::CLONE_NEWNS as i64)]),
    attempt("setns", EPERM, libc::SYS_setns, &[Int(-1), Int(0)]),
    // Without a new stack, clone behaves like fork: a child that gets
    // through returns from the call and exits at once.
    attempt("clone_newnet", EPERM, libc::SYS_clone, &[Int(NEWNET), Int(0), Int(0), Int(0), Int(0)]),
    attempt("clone_newuser", EPERM, libc::SYS_clone, &[Int(NEWUSER), Int(0), Int(0), Int(0), Int(0)]),
    attempt("clone3_newuser", libc::ENOSYS, libc::SYS_clone3, &[Arg::CloneArgs, Int(CLONE_ARGS_SIZE as i64)]),
    attempt("io_uring_setup", EPERM, libc::SYS_io_uring_setup, &[Int(1), Scratch]),
    attempt("pidfd_open", EPERM, libc::SYS_pidfd_open, &[Parent, Int(0)]),
    attempt("pidfd_getfd", EPERM, libc::SYS_pidfd_getfd, &[Int(-1), Int(0), Int(0)]),
    attempt("pidfd_send_signal", EPERM, libc::SYS_pidfd_send_signal, &[Int(-1), Int(0), Int(0), Int(0)]),
    attempt("tkill_parent", EPERM, libc::SYS_tkill, &[Parent, Int(0)]),
    attempt("kill_init", EPERM, libc::SYS_kill, &[Int(1), Int(0)]),
    attempt("socket_inet", EAFNOSUPPORT, libc::SYS_socket, &[Int(libc::AF_INET as i64), Int(libc::SOCK_STREAM as i64), Int(0)]),
    attempt("socket_inet6", EAFNOSUPPORT, libc::SYS_socket, &[Int(libc::AF_INET6 as i64), Int(libc::SOCK_DGRAM as i64), Int(0)]),
    attempt("socket_netlink", EAFNOSUPPORT, libc::SYS_socket, &[Int(libc::AF_NETLINK as i64), Int(libc::SOCK_RAW as i64), Int(0)]),
    attempt("socket_packet", EAFNOSUPPORT, libc::SYS_socket, &[Int(libc::AF_PACKET as i64), Int(libc::SOCK_RAW as i64), Int(0)]),
    attempt("socketpair_inet", EAFNOSUPPORT, libc::SYS_socketpair, &[Int(libc::AF_INET as i64), Int(libc::SOCK_STREAM as i64), Int(0), Scratch]),
    attempt("bpf", EPERM, libc::SYS_bpf, &[Int(0), Int(0), Int(0)]),
    attempt("perf_event_open", EPERM, libc::SYS_perf_event_open, &[Int(0), Int(0), Int(-1), Int(-1), Int(0)]),
    attempt("userfaultfd", EPERM, libc::SYS_userfaultfd, &[Int(libc::O_CLOEXEC as i64)]),
    // KEYCTL_GET_KEYRING_ID (0).
    attempt("keyctl", EPERM, libc::SYS_keyctl, &[Int(0), Int(KEY_SPEC_SESSION_KEYRING), Int(0)]),
    attempt("add_key", EPERM, libc::SYS_add_key, &[Str(c"user"), Str(c"vgpu-probe"), Str(c"x"), Int(1), Int(KEY_SPEC_PROCESS_KEYRING)]),
    attempt("request_key", EPERM, libc::SYS_request_key, &[Str(c"user"), Str(c"vgpu-probe"), Int(0), Int(0)]),
    // Invalid flags: the kernel refuses before loading anything.
    attempt("kexec_load", EPERM, libc::SYS_kexec_load, &[Int(0), Int(0), Int(0), Int(0xffff_ffff)]),
    attempt("finit_module", EPERM, libc::SYS_finit_module, &[Int(-1), Str(EMPTY), Int(0)]),
    attempt("delete_module", EPERM, libc::SYS_delete_module, &[Str(c"vgpu_probe_none"), Int(libc::O_NONBLOCK as i64)]),
    // Wrong magic numbers: the kernel refuses whoever asks.
    attempt("reboot", EPERM, libc::SYS_reboot, &[Int(0), Int(0), Int(0), Int(0)]),
    attempt("swapon", EPERM, libc::SYS_swapon, &[Str(NOWHERE), Int(0)]),
    attempt("clock_settime", EPERM, libc::SYS_clock_settime, &[Int(-1), Int(0)]),
    attempt("setuid_root", EPERM, libc::SYS_setuid, &[Int(0)]),
    attempt("setresgid_root", EPERM, libc::SYS_setresgid, &[Int(0), Int(0), Int(0)]),
    attempt("setgroups", EPERM, libc::SYS_setgroups, &[Int(0), Int(0)]),
    attempt("personality", EPERM, libc::SYS_personality, &[Int(0xffff_ffff)]),
    attempt("iopl", EPERM, libc::SYS_iopl, &[Int(0)]),
    attempt("open_by_handle_at", EPERM, libc::SYS_open_by_handle_at, &[Int(-1), Int(0), Int(0)]),
    attempt("prctl_set_dumpable", EPERM, libc::SYS_prctl, &[Int(libc::PR_SET_DUMPABLE as i64), Int(1)]),
    attempt("ioctl_tiocsti", EPERM, libc::SYS_ioctl, &[Int(-1), Int(libc::TIOCSTI as i64), Str(c"x")]),
];

/// `struct clone_args` up to `tls` (CLONE_ARGS_SIZE_VER0).
const CLONE_ARGS_SIZE: usize = 64;

/// clone_args { flags: CLONE_NEWUSER, exit_signal: SIGCHLD, rest 0 }.
fn clone_args() -> [u64; CLONE_ARGS_SIZE / 8] {
    let mut args = [0u64; CLONE_ARGS_SIZE / 8];
    args[0] = libc::CLONE_NEWUSER as u64;
    args[4] = libc::SIGCHLD as u64;
    args
}

/// Makes the call in the child; its errno, or 0 when it went through.
fn call(attempt: &Attempt, parent: pid_t) -> i32 {
    let mut scratch = [0u8; SCRATCH];
    let clone = clone_args();
    let mut regs = [0 as c_long; 6];
    for (reg, arg) in regs.iter_mut().zip(attempt.args) {
        *reg = match *arg {
            Int(v) => v as c_long,
            Str(s) => s.as_ptr() as c_long,
            Parent => c_long::from(parent),
            Scratch => scratch.as_mut_ptr() as c_long,
            Arg::CloneArgs => clone.as_ptr() as c_long,
        };
    }
    let [a, b, c, d, e, f] = regs;
    // SAFETY: every pointer argument points at a static NUL-terminated
    // string the kernel only reads, at `clone` (a valid clone_args of the
    // size passed), or at `scratch`, large enough for any structure these
    // calls write; all outlive the call. The call's effects stay in this
    // child, which exits right after.
    let rc = unsafe { libc::syscall(attempt.nr, a, b, c, d, e, f) };
    if rc < 0 {
        io::Error::last_os_error().raw_os_error().unwrap_or(255)
    } else {
        0
    }
}

/// Makes `attempt`'s call in a forked child and reports what it got.
pub fn run(attempt: &Attempt) -> Outcome {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: the child only fills a few stack values, makes one system
    // call and _exits (no locks, no allocation): safe after fork in a
    // threaded process.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = call(attempt, parent);
        // SAFETY: leaves the child without running the parent's
        // destructors or atexit handlers.
        unsafe { libc::_exit(code.clamp(0, 255)) };
    }
    let os_error = || io::Error::last_os_error().raw_os_error().unwrap_or(0);
    if pid < 0 {
        return Outcome::NotRun(os_error());
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` is valid.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return Outcome::NotRun(os_error());
    }
    if libc::WIFSIGNALED(status) {
        return Outcome::KilledBy(libc::WTERMSIG(status));
    }
    match libc::WEXITSTATUS(status) {
        0 => Outcome::Succeeded,
        e => Outcome::Errno(e),
    }
}
