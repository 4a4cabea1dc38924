//! Confines the daemon once it is set up, as virtiofsd and crosvm do: no new
//! privileges, no network, an optional unprivileged user, and a seccomp
//! filter that refuses the system calls a compromised backend could use
//! against the host. GPU drivers need a wide set of calls (threads, JIT
//! memory, ioctls on their device nodes, files for kernel caches), so the
//! filter is a deny-list of what neither the daemon nor the drivers need.

use std::io;

/// How much confinement to apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sandbox {
    /// Nothing (debugging).
    None,
    /// No new privileges, a private network namespace, the seccomp filter,
    /// and the user named, if any.
    Default { user: Option<String> },
}

/// System calls refused with EPERM: kernel and system administration,
/// tracing other processes, namespaces and mounts, raw networking.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_userfaultfd,
    libc::SYS_fanotify_init,
    libc::SYS_lookup_dcookie,
    libc::SYS_vhangup,
    libc::SYS_personality,
];

#[repr(C)]
struct SockFilter {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

const BPF_LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
const BPF_JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
const BPF_RET_K: u16 = 0x06; // BPF_RET | BPF_K
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;

/// The filter program: other architectures are killed (no 32-bit entry
/// points), denied calls get EPERM, everything else runs.
fn filter() -> Vec<SockFilter> {
    let mut prog = vec![
        SockFilter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: OFFSET_ARCH,
        },
        SockFilter {
            code: BPF_JEQ_K,
            jt: 1,
            jf: 0,
            k: AUDIT_ARCH_X86_64,
        },
        SockFilter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: SECCOMP_RET_KILL_PROCESS,
        },
        SockFilter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: OFFSET_NR,
        },
    ];
    for &nr in DENIED {
        prog.push(SockFilter {
            code: BPF_JEQ_K,
            jt: 0,
            jf: 1,
            k: nr as u32,
        });
        prog.push(SockFilter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: SECCOMP_RET_ERRNO | libc::EPERM as u32,
        });
    }
    prog.push(SockFilter {
        code: BPF_RET_K,
        jt: 0,
        jf: 0,
        k: SECCOMP_RET_ALLOW,
    });
    prog
}

fn check(rc: libc::c_int, what: &str) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    }
}

/// Switches to an unprivileged user by name.
fn become_user(name: &str) -> io::Result<()> {
    let cname =
        std::ffi::CString::new(name).map_err(|_| io::Error::other("user name contains NUL"))?;
    // SAFETY: getpwnam reads a NUL-terminated name; the result, if not
    // NULL, points at static storage we read at once.
    let pw = unsafe { libc::getpwnam(cname.as_ptr()) };
    if pw.is_null() {
        return Err(io::Error::other(format!("no such user {name:?}")));
    }
    // SAFETY: `pw` is a valid passwd entry (checked above).
    let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
    // SAFETY: plain system calls on this process's credentials.
    unsafe {
        check(libc::setgroups(0, std::ptr::null()), "setgroups")?;
        check(libc::setgid(gid), "setgid")?;
        check(libc::setuid(uid), "setuid")?;
    }
    Ok(())
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

/// Applies the rest of the sandbox to the whole process. Call after every
/// socket and device is open, before any guest input is read.
pub fn apply(sandbox: &Sandbox) -> io::Result<()> {
    let Sandbox::Default { user } = sandbox else {
        log::warn!("sandbox disabled (--sandbox none)");
        return Ok(());
    };
    if let Some(user) = user {
        become_user(user)?;
    }
    // SAFETY: prctl with constant arguments on this process.
    let rc = unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) };
    check(rc, "no_new_privs")?;
    let prog = filter();
    let fprog = SockFprog {
        len: prog.len() as u16,
        filter: prog.as_ptr(),
    };
    // SAFETY: `fprog` points at a valid filter that outlives the call (the
    // kernel copies it); TSYNC applies it to every thread already running.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &fprog as *const SockFprog,
        )
    };
    if rc != 0 {
        return Err(io::Error::other(format!(
            "seccomp: {}",
            io::Error::last_os_error()
        )));
    }
    log::info!(
        "sandbox: no new privileges, seccomp filter of {} denied calls",
        DENIED.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_has_a_jump_pair_per_denied_call() {
        let prog = filter();
        assert_eq!(prog.len(), 4 + 2 * DENIED.len() + 1);
        assert!(
            prog.len() < 4096,
            "BPF programs are limited to 4096 instructions"
        );
        assert_eq!(prog.last().map(|i| i.k), Some(SECCOMP_RET_ALLOW));
    }
}
