//! Compiles a [`Policy`] into a seccomp filter and installs it.
//!
//! Layout: the architecture check (anything but native x86-64, including
//! the x32 call numbers, kills the process: there is no second table of
//! call numbers to get wrong), then a binary search over the sorted call
//! numbers, so a call costs about log2(n) comparisons rather than n, then
//! the rule of the call found.

use std::io;

use super::bpf::{Assembler, Cmp, Result, Target};
use super::policy::{Policy, Rule, Verdict};

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
/// Bit of the call number that selects the x32 ABI on x86-64.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// Offsets into `struct seccomp_data`.
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARGS: u32 = 16;
/// A leaf of the search tests this many calls one by one.
const LEAF: usize = 4;

fn verdict(v: Verdict) -> u32 {
    match v {
        Verdict::Allow => libc::SECCOMP_RET_ALLOW,
        Verdict::Errno(e) => libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA),
    }
}

/// Offset of the low 32 bits of argument `arg` (little-endian).
fn arg_low(arg: u8) -> u32 {
    OFFSET_ARGS + 8 * u32::from(arg)
}

fn emit_rule(asm: &mut Assembler, rule: &Rule) {
    match rule {
        Rule::Always(v) => asm.ret(verdict(*v)),
        Rule::ArgIn {
            arg,
            values,
            matched,
            otherwise,
        } => {
            let hit = asm.label();
            asm.load(arg_low(*arg));
            for &value in values {
                asm.branch(Cmp::Eq, value, Target::To(hit), Target::Next);
            }
            asm.ret(verdict(*otherwise));
            asm.bind(hit);
            asm.ret(verdict(*matched));
        }
        Rule::ArgAnyBit {
            arg,
            mask,
            set,
            clear,
        } => {
            let hit = asm.label();
            asm.load(arg_low(*arg));
            asm.branch(Cmp::AnyBit, *mask, Target::To(hit), Target::Next);
            asm.ret(verdict(*clear));
            asm.bind(hit);
            asm.ret(verdict(*set));
        }
    }
}

/// Emits the search over `calls` (sorted); the call number is in the
/// accumulator.
fn emit_search(asm: &mut Assembler, calls: &[(u32, &Rule)], default: u32) {
    if calls.len() <= LEAF {
        for (nr, rule) in calls {
            let other = asm.label();
            asm.branch(Cmp::Eq, *nr, Target::Next, Target::To(other));
            emit_rule(asm, rule);
            asm.bind(other);
        }
        asm.ret(default);
        return;
    }
    let (low, high) = calls.split_at(calls.len() / 2);
    let (low_half, high_half) = (asm.label(), asm.label());
    // Conditional jumps are short: go one step to reach the long jump.
    asm.branch(Cmp::Ge, high[0].0, Target::Next, Target::To(low_half));
    asm.goto(high_half);
    asm.bind(low_half);
    emit_search(asm, low, default);
    asm.bind(high_half);
    emit_search(asm, high, default);
}

/// The filter program for `policy`.
pub fn compile(policy: &Policy) -> Result<Vec<libc::sock_filter>> {
    let mut asm = Assembler::new();
    let kill = libc::SECCOMP_RET_KILL_PROCESS;
    let (native, not_x32) = (asm.label(), asm.label());
    asm.load(OFFSET_ARCH);
    asm.branch(Cmp::Eq, AUDIT_ARCH_X86_64, Target::To(native), Target::Next);
    asm.ret(kill);
    asm.bind(native);
    asm.load(OFFSET_NR);
    asm.branch(
        Cmp::AnyBit,
        X32_SYSCALL_BIT,
        Target::Next,
        Target::To(not_x32),
    );
    asm.ret(kill);
    asm.bind(not_x32);
    let calls: Vec<(u32, &Rule)> = policy.rules.iter().map(|(nr, r)| (*nr, r)).collect();
    emit_search(&mut asm, &calls, verdict(policy.default));
    asm.finish()
}

/// Installs `prog` on every thread of the process (TSYNC: driver threads
/// already running are confined too). Needs no_new_privs or
/// CAP_SYS_ADMIN.
pub fn install(prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::Error::other("filter too long"))?,
        filter: prog.as_ptr().cast_mut(),
    };
    // SAFETY: `fprog` points at `prog`, valid for the call; the kernel
    // copies the program and does not write through the pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_TSYNC,
            &fprog as *const libc::sock_fprog,
        )
    };
    match rc {
        0 => Ok(()),
        // With TSYNC, a positive value is the id of a thread that could
        // not be synchronised.
        tid if tid > 0 => Err(io::Error::other(format!(
            "seccomp: thread {tid} has a conflicting filter"
        ))),
        _ => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::bpf::run;
    use crate::sandbox::policy;

    const PID: u32 = 4242;

    fn data(arch: u32, nr: u32, args: [u64; 6]) -> Vec<u8> {
        let mut d = Vec::with_capacity(64);
        d.extend_from_slice(&nr.to_ne_bytes());
        d.extend_from_slice(&arch.to_ne_bytes());
        d.extend_from_slice(&0u64.to_ne_bytes());
        args.iter()
            .for_each(|a| d.extend_from_slice(&a.to_ne_bytes()));
        d
    }

    fn eval(nr: libc::c_long, args: [u64; 6]) -> u32 {
        let prog = compile(&policy::worker(PID)).expect("the worker policy compiles");
        run(&prog, &data(AUDIT_ARCH_X86_64, nr as u32, args))
    }

    fn errno(e: i32) -> u32 {
        verdict(Verdict::Errno(e))
    }

    #[test]
    fn compiled_filter_agrees_with_the_table_for_every_call_number() {
        let policy = policy::worker(PID);
        let prog = compile(&policy).expect("the worker policy compiles");
        let arg_sets = [
            [0; 6],
            [libc::CLONE_NEWNET as u64, 0, 0, 0, 0, 0],
            [libc::AF_INET as u64, libc::TIOCSTI, 0, 0, 0, 0],
            [u64::from(PID), 0, 0, 0, 0, 0],
            [libc::AF_UNIX as u64 | 0xffff_0000_0000, 0, 0, 0, 0, 0],
        ];
        for nr in 0..600u32 {
            for args in &arg_sets {
                let got = run(&prog, &data(AUDIT_ARCH_X86_64, nr, *args));
                assert_eq!(got, verdict(policy.judge(nr, args)), "call {nr} {args:?}");
            }
        }
    }

    #[test]
    fn ordinary_calls_are_allowed() {
        let allow = libc::SECCOMP_RET_ALLOW;
        assert_eq!(eval(libc::SYS_read, [0; 6]), allow);
        assert_eq!(eval(libc::SYS_mprotect, [0, 0, 7, 0, 0, 0]), allow);
        assert_eq!(eval(libc::SYS_execve, [0; 6]), allow);
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(eval(libc::SYS_clone, [thread, 0, 0, 0, 0, 0]), allow);
        let unix = libc::AF_UNIX as u64;
        assert_eq!(eval(libc::SYS_socket, [unix, 1, 0, 0, 0, 0]), allow);
    }

    #[test]
    fn dangerous_calls_are_refused_with_their_errno() {
        let eperm = errno(libc::EPERM);
        for nr in policy::REFUSED {
            assert_eq!(eval(*nr, [0; 6]), eperm, "call {nr}");
        }
        let newnet = libc::CLONE_NEWNET as u64 | libc::SIGCHLD as u64;
        assert_eq!(eval(libc::SYS_clone, [newnet, 0, 0, 0, 0, 0]), eperm);
        assert_eq!(eval(libc::SYS_clone3, [0; 6]), errno(libc::ENOSYS));
        let inet = libc::AF_INET as u64;
        assert_eq!(
            eval(libc::SYS_socket, [inet, 1, 0, 0, 0, 0]),
            errno(libc::EAFNOSUPPORT)
        );
        assert_eq!(eval(libc::SYS_kill, [1, 9, 0, 0, 0, 0]), eperm);
        let tiocsti = libc::TIOCSTI;
        assert_eq!(eval(libc::SYS_ioctl, [0, tiocsti, 0, 0, 0, 0]), eperm);
        let dumpable = libc::PR_SET_DUMPABLE as u64;
        assert_eq!(eval(libc::SYS_prctl, [dumpable, 1, 0, 0, 0, 0]), eperm);
    }

    #[test]
    fn peer_memory_is_opened_by_the_option_and_narrowed_to_the_front_end() {
        let eperm = errno(libc::EPERM);
        let allow = libc::SECCOMP_RET_ALLOW;
        let open = compile(&policy::allow_peer_memory(policy::worker(PID))).expect("compiles");
        let peer = |pid: u32| -> [u64; 6] { [u64::from(pid), 0, 0, 0, 0, 0] };
        for nr in [libc::SYS_process_vm_readv, libc::SYS_process_vm_writev] {
            let nr = nr as u32;
            assert_eq!(
                eval(nr.into(), peer(77)),
                eperm,
                "refused without the option"
            );
            assert_eq!(run(&open, &data(AUDIT_ARCH_X86_64, nr, peer(77))), allow);
            let narrowed = compile(&policy::peer_only(Some(77))).expect("compiles");
            assert_eq!(
                run(&narrowed, &data(AUDIT_ARCH_X86_64, nr, peer(77))),
                allow
            );
            assert_eq!(
                run(&narrowed, &data(AUDIT_ARCH_X86_64, nr, peer(78))),
                eperm
            );
            let closed = compile(&policy::peer_only(None)).expect("compiles");
            assert_eq!(run(&closed, &data(AUDIT_ARCH_X86_64, nr, peer(77))), eperm);
        }
        // The stacked filter leaves every other call to the ones below.
        let narrowed = compile(&policy::peer_only(Some(77))).expect("compiles");
        let read = libc::SYS_read as u32;
        assert_eq!(
            run(&narrowed, &data(AUDIT_ARCH_X86_64, read, [0; 6])),
            allow
        );
        // ptrace stays refused whatever the option says.
        let ptrace = libc::SYS_ptrace as u32;
        assert_eq!(
            run(&open, &data(AUDIT_ARCH_X86_64, ptrace, peer(77))),
            eperm
        );
    }

    #[test]
    fn unlisted_calls_get_enosys() {
        assert_eq!(eval(10_000, [0; 6]), errno(libc::ENOSYS));
        assert_eq!(eval(libc::SYS_lookup_dcookie, [0; 6]), errno(libc::ENOSYS));
    }

    #[test]
    fn foreign_architectures_and_x32_calls_are_killed() {
        let prog = compile(&policy::worker(PID)).expect("the worker policy compiles");
        let kill = libc::SECCOMP_RET_KILL_PROCESS;
        const AUDIT_ARCH_I386: u32 = 0x4000_0003;
        assert_eq!(run(&prog, &data(AUDIT_ARCH_I386, 0, [0; 6])), kill);
        let x32_read = X32_SYSCALL_BIT | libc::SYS_read as u32;
        assert_eq!(run(&prog, &data(AUDIT_ARCH_X86_64, x32_read, [0; 6])), kill);
    }
}
