//! What a confined worker may ask of the kernel: an allow-list of system
//! calls, some with argument checks, and an explicit list of refusals.
//!
//! The list comes from `strace -f` of the daemon serving the end-to-end
//! tests on PoCL 3.1 (its LLVM JIT maps code, starts threads, writes its
//! kernel cache and forks `/usr/bin/ld` to link each kernel) plus what the
//! NVIDIA OpenCL and CUDA drivers are known to use (ioctl and mmap on
//! `/dev/nvidia*`, memfd, eventfd, epoll, NUMA and scheduling calls). It
//! is generous with ordinary process calls and strict with the classes
//! that reach beyond the process: namespaces, mounts, tracing, kernel
//! administration, raw networking and credentials.
//!
//! A call on neither list gets `ENOSYS`, not a kill: a newer glibc or
//! driver that tries a new call first falls back (glibc does so for
//! `clone3`) or reports an error, so an update degrades rather than
//! crashes the VM's worker. Refusals that a program might probe for get
//! their own errno: `EPERM` in general, `EAFNOSUPPORT` for non-unix
//! sockets, `ENOSYS` for `clone3`.

use std::collections::BTreeMap;

/// What the filter answers for one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Errno(i32),
}

/// How one system call is judged. Arguments are compared on their low
/// 32 bits: every argument checked here is an `int` (or, for `clone`,
/// flags the kernel truncates to 32 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    Always(Verdict),
    /// `matched` when argument `arg` is one of `values`, else `otherwise`.
    ArgIn {
        arg: u8,
        values: Vec<u32>,
        matched: Verdict,
        otherwise: Verdict,
    },
    /// `set` when argument `arg` has any bit of `mask`, else `clear`.
    ArgAnyBit {
        arg: u8,
        mask: u32,
        set: Verdict,
        clear: Verdict,
    },
}

/// The whole policy: a rule per listed call, a verdict for the rest.
#[derive(Debug, Clone)]
pub struct Policy {
    pub rules: BTreeMap<u32, Rule>,
    pub default: Verdict,
}

impl Policy {
    /// The verdict for a call, straight from the table: the reference the
    /// compiled filter is tested against.
    pub fn judge(&self, nr: u32, args: &[u64; 6]) -> Verdict {
        let low = |arg: u8| args[usize::from(arg)] as u32;
        match self.rules.get(&nr) {
            None => self.default,
            Some(Rule::Always(v)) => *v,
            Some(Rule::ArgIn {
                arg,
                values,
                matched,
                otherwise,
            }) => {
                if values.contains(&low(*arg)) {
                    *matched
                } else {
                    *otherwise
                }
            }
            Some(Rule::ArgAnyBit {
                arg,
                mask,
                set,
                clear,
            }) => {
                if low(*arg) & mask != 0 {
                    *set
                } else {
                    *clear
                }
            }
        }
    }
}

const EPERM: Verdict = Verdict::Errno(libc::EPERM);

/// Files, directories, pipes and descriptors.
const FILES: &[libc::c_long] = &[
    libc::SYS_read,
    libc::SYS_write,
    libc::SYS_readv,
    libc::SYS_writev,
    libc::SYS_pread64,
    libc::SYS_pwrite64,
    libc::SYS_preadv,
    libc::SYS_pwritev,
    libc::SYS_preadv2,
    libc::SYS_pwritev2,
    libc::SYS_open,
    libc::SYS_openat,
    libc::SYS_openat2,
    libc::SYS_creat,
    libc::SYS_close,
    libc::SYS_close_range,
    libc::SYS_lseek,
    libc::SYS_stat,
    libc::SYS_fstat,
    libc::SYS_lstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_access,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    libc::SYS_readlink,
    libc::SYS_readlinkat,
    libc::SYS_getdents,
    libc::SYS_getdents64,
    libc::SYS_mkdir,
    libc::SYS_mkdirat,
    libc::SYS_rmdir,
    libc::SYS_unlink,
    libc::SYS_unlinkat,
    libc::SYS_rename,
    libc::SYS_renameat,
    libc::SYS_renameat2,
    libc::SYS_link,
    libc::SYS_linkat,
    libc::SYS_symlink,
    libc::SYS_symlinkat,
    libc::SYS_chmod,
    libc::SYS_fchmod,
    libc::SYS_fchmodat,
    libc::SYS_fchmodat2,
    libc::SYS_truncate,
    libc::SYS_ftruncate,
    libc::SYS_fallocate,
    libc::SYS_fsync,
    libc::SYS_fdatasync,
    libc::SYS_sync_file_range,
    libc::SYS_flock,
    libc::SYS_fcntl,
    libc::SYS_dup,
    libc::SYS_dup2,
    libc::SYS_dup3,
    libc::SYS_pipe,
    libc::SYS_pipe2,
    libc::SYS_getcwd,
    libc::SYS_chdir,
    libc::SYS_fchdir,
    libc::SYS_umask,
    libc::SYS_utimensat,
    libc::SYS_copy_file_range,
    libc::SYS_sendfile,
    libc::SYS_splice,
    libc::SYS_tee,
    libc::SYS_fadvise64,
    libc::SYS_readahead,
    libc::SYS_getxattr,
    libc::SYS_lgetxattr,
    libc::SYS_fgetxattr,
    libc::SYS_listxattr,
    libc::SYS_llistxattr,
    libc::SYS_flistxattr,
    libc::SYS_inotify_init1,
    libc::SYS_inotify_add_watch,
    libc::SYS_inotify_rm_watch,
    libc::SYS_memfd_create,
];

/// Waiting for descriptors, timers and signals.
const EVENTS: &[libc::c_long] = &[
    libc::SYS_eventfd,
    libc::SYS_eventfd2,
    libc::SYS_epoll_create,
    libc::SYS_epoll_create1,
    libc::SYS_epoll_ctl,
    libc::SYS_epoll_wait,
    libc::SYS_epoll_pwait,
    libc::SYS_epoll_pwait2,
    libc::SYS_poll,
    libc::SYS_ppoll,
    libc::SYS_select,
    libc::SYS_pselect6,
    libc::SYS_timerfd_create,
    libc::SYS_timerfd_settime,
    libc::SYS_timerfd_gettime,
    libc::SYS_signalfd,
    libc::SYS_signalfd4,
    libc::SYS_rt_sigaction,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigsuspend,
    libc::SYS_rt_sigpending,
    libc::SYS_sigaltstack,
    libc::SYS_restart_syscall,
    libc::SYS_pause,
    libc::SYS_alarm,
    libc::SYS_setitimer,
    libc::SYS_getitimer,
    libc::SYS_timer_create,
    libc::SYS_timer_settime,
    libc::SYS_timer_gettime,
    libc::SYS_timer_getoverrun,
    libc::SYS_timer_delete,
    libc::SYS_nanosleep,
    libc::SYS_clock_nanosleep,
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_time,
];

/// Memory: the JIT maps code, drivers map device memory and bind NUMA
/// nodes.
const MEMORY: &[libc::c_long] = &[
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mprotect,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_brk,
    libc::SYS_msync,
    libc::SYS_mincore,
    libc::SYS_mlock,
    libc::SYS_mlock2,
    libc::SYS_munlock,
    libc::SYS_mlockall,
    libc::SYS_munlockall,
    libc::SYS_membarrier,
    libc::SYS_get_mempolicy,
    libc::SYS_set_mempolicy,
    libc::SYS_mbind,
    libc::SYS_mseal,
];

/// Threads, children (PoCL runs the linker), scheduling and self-queries.
const PROCESS: &[libc::c_long] = &[
    libc::SYS_fork,
    libc::SYS_vfork,
    libc::SYS_execve,
    libc::SYS_execveat,
    libc::SYS_wait4,
    libc::SYS_waitid,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_set_tid_address,
    libc::SYS_set_robust_list,
    libc::SYS_get_robust_list,
    libc::SYS_rseq,
    libc::SYS_futex,
    libc::SYS_futex_waitv,
    libc::SYS_arch_prctl,
    libc::SYS_gettid,
    libc::SYS_getpid,
    libc::SYS_getppid,
    libc::SYS_getuid,
    libc::SYS_geteuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getresuid,
    libc::SYS_getresgid,
    libc::SYS_getgroups,
    libc::SYS_getpgrp,
    libc::SYS_getpgid,
    libc::SYS_getsid,
    libc::SYS_capget,
    libc::SYS_getcpu,
    libc::SYS_getrlimit,
    libc::SYS_setrlimit,
    libc::SYS_getpriority,
    libc::SYS_setpriority,
    libc::SYS_sched_yield,
    libc::SYS_sched_getaffinity,
    libc::SYS_sched_setaffinity,
    libc::SYS_sched_getparam,
    libc::SYS_sched_setparam,
    libc::SYS_sched_getscheduler,
    libc::SYS_sched_setscheduler,
    libc::SYS_sched_get_priority_max,
    libc::SYS_sched_get_priority_min,
    libc::SYS_sched_rr_get_interval,
    libc::SYS_sched_getattr,
    libc::SYS_sched_setattr,
    libc::SYS_getrusage,
    libc::SYS_times,
    libc::SYS_sysinfo,
    libc::SYS_uname,
    libc::SYS_getrandom,
];

/// Sockets once open; `socket` and `socketpair` are checked below.
const SOCKETS: &[libc::c_long] = &[
    libc::SYS_connect,
    libc::SYS_accept,
    libc::SYS_accept4,
    libc::SYS_bind,
    libc::SYS_listen,
    libc::SYS_sendto,
    libc::SYS_recvfrom,
    libc::SYS_sendmsg,
    libc::SYS_recvmsg,
    libc::SYS_sendmmsg,
    libc::SYS_recvmmsg,
    libc::SYS_shutdown,
    libc::SYS_getsockname,
    libc::SYS_getpeername,
    libc::SYS_setsockopt,
    libc::SYS_getsockopt,
];

/// Refused with `EPERM`: other processes, namespaces and mounts, kernel
/// and machine administration, the kernel's attack surface of choice
/// (`io_uring`, `bpf`, `perf_event_open`, `userfaultfd`, keyrings), and
/// every change of credentials (the worker has dropped them for good).
pub const REFUSED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_process_madvise,
    libc::SYS_kcmp,
    libc::SYS_pidfd_open,
    libc::SYS_pidfd_getfd,
    libc::SYS_pidfd_send_signal,
    libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_tgsigqueueinfo,
    libc::SYS_tkill,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_mount_setattr,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
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
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_sethostname,
    libc::SYS_setdomainname,
    libc::SYS_syslog,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_fanotify_init,
    libc::SYS_vhangup,
    libc::SYS_personality,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_mknod,
    libc::SYS_mknodat,
    libc::SYS_setuid,
    libc::SYS_setgid,
    libc::SYS_setreuid,
    libc::SYS_setregid,
    libc::SYS_setresuid,
    libc::SYS_setresgid,
    libc::SYS_setfsuid,
    libc::SYS_setfsgid,
    libc::SYS_setgroups,
    libc::SYS_capset,
];

/// `clone` flags that create a namespace (`CLONE_NEWTIME` shares its bit
/// with the exit signal in `clone`, and exists only for `clone3`).
pub const CLONE_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;

/// `prctl` options refused: they would undo the confinement (dumpable
/// again, capability bits, a tracer) or rewrite the memory map's anchors.
const PRCTL_REFUSED: &[libc::c_int] = &[
    libc::PR_SET_DUMPABLE,
    libc::PR_SET_SECUREBITS,
    libc::PR_CAP_AMBIENT,
    libc::PR_SET_MM,
    libc::PR_SET_PTRACER,
];

/// `ioctl` requests refused: pushing input into a terminal the worker may
/// have inherited.
const IOCTL_REFUSED: &[libc::c_ulong] = &[libc::TIOCSTI, libc::TIOCLINUX];

/// The worker's policy. `own_pid` is the only process `kill`, `tgkill`
/// and `prlimit64` may name (besides 0 for `prlimit64`): the workers of
/// other VMs run as the same user.
pub fn worker(own_pid: u32) -> Policy {
    let mut rules = BTreeMap::new();
    let mut add = |nr: libc::c_long, rule: Rule| {
        let previous = rules.insert(nr as u32, rule);
        assert!(previous.is_none(), "system call {nr} listed twice");
    };
    for &nr in [FILES, EVENTS, MEMORY, PROCESS, SOCKETS].concat().iter() {
        add(nr, Rule::Always(Verdict::Allow));
    }
    for &nr in REFUSED {
        add(nr, Rule::Always(EPERM));
    }
    add(libc::SYS_clone3, Rule::Always(Verdict::Errno(libc::ENOSYS)));
    add(
        libc::SYS_clone,
        Rule::ArgAnyBit {
            arg: 0,
            mask: CLONE_NAMESPACES,
            set: EPERM,
            clear: Verdict::Allow,
        },
    );
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        add(
            nr,
            Rule::ArgIn {
                arg: 0,
                values: vec![libc::AF_UNIX as u32],
                matched: Verdict::Allow,
                otherwise: Verdict::Errno(libc::EAFNOSUPPORT),
            },
        );
    }
    for nr in [libc::SYS_kill, libc::SYS_tgkill] {
        add(
            nr,
            Rule::ArgIn {
                arg: 0,
                values: vec![own_pid],
                matched: Verdict::Allow,
                otherwise: EPERM,
            },
        );
    }
    add(
        libc::SYS_prlimit64,
        Rule::ArgIn {
            arg: 0,
            values: vec![0, own_pid],
            matched: Verdict::Allow,
            otherwise: EPERM,
        },
    );
    add(
        libc::SYS_prctl,
        Rule::ArgIn {
            arg: 0,
            values: PRCTL_REFUSED.iter().map(|&o| o as u32).collect(),
            matched: EPERM,
            otherwise: Verdict::Allow,
        },
    );
    add(
        libc::SYS_ioctl,
        Rule::ArgIn {
            arg: 1,
            values: IOCTL_REFUSED.iter().map(|&r| r as u32).collect(),
            matched: EPERM,
            otherwise: Verdict::Allow,
        },
    );
    Policy {
        rules,
        default: Verdict::Errno(libc::ENOSYS),
    }
}

/// Cross-memory attach, refused by default.
const PEER_MEMORY_CALLS: [libc::c_long; 2] =
    [libc::SYS_process_vm_readv, libc::SYS_process_vm_writev];

/// `policy` with cross-memory attach allowed (`--peer-memory`): the
/// supervisor's and a standby worker's, before the front-end is known.
/// The kernel allows it only towards processes of the same user that are
/// dumpable (workers are not), and [`peer_only`] narrows it to the one
/// front-end once that connected.
pub fn allow_peer_memory(mut policy: Policy) -> Policy {
    for nr in PEER_MEMORY_CALLS {
        policy.rules.insert(nr as u32, Rule::Always(Verdict::Allow));
    }
    // For stacking `peer_only` once connected: a filter can only take
    // rights away, so installing one gives the worker nothing.
    policy
        .rules
        .insert(libc::SYS_seccomp as u32, Rule::Always(Verdict::Allow));
    policy
}

/// The filter stacked once a front-end connected: cross-memory attach
/// only to `peer` (none at all without one), everything else as the
/// filters below decide.
pub fn peer_only(peer: Option<u32>) -> Policy {
    let rule = match peer {
        Some(pid) => Rule::ArgIn {
            arg: 0,
            values: vec![pid],
            matched: Verdict::Allow,
            otherwise: EPERM,
        },
        None => Rule::Always(EPERM),
    };
    Policy {
        rules: PEER_MEMORY_CALLS
            .iter()
            .map(|&nr| (nr as u32, rule.clone()))
            .collect(),
        default: Verdict::Allow,
    }
}

/// The supervisor's policy: the worker's calls, since every worker starts
/// under it (a filter is inherited and the worker's own is stacked on
/// top), plus what starting and confining a worker takes: signalling and
/// limiting other processes (its workers), changing user, any `prctl`,
/// giving the worker's driver cache to the worker's user, installing the
/// worker's filter and restricting the worker's file system (Landlock:
/// without these three calls a worker would take the kernel for one
/// without Landlock).
pub fn supervisor() -> Policy {
    let mut policy = worker(0);
    for nr in [
        libc::SYS_kill,
        libc::SYS_tgkill,
        libc::SYS_prlimit64,
        libc::SYS_prctl,
        libc::SYS_seccomp,
        libc::SYS_setuid,
        libc::SYS_setgid,
        libc::SYS_setresuid,
        libc::SYS_setresgid,
        libc::SYS_setgroups,
        libc::SYS_chown,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
    ] {
        policy.rules.insert(nr as u32, Rule::Always(Verdict::Allow));
    }
    policy
}
