//! Cross-memory attach to a loopback front-end (`--peer-memory`).
//!
//! A loopback program copies bulk data into the shared memfd and the
//! device copies it again: two copies where a native program makes one.
//! With cross-memory attach (`process_vm_readv` / `process_vm_writev`)
//! the worker moves the bytes straight between the program's own pages
//! and the device buffer, so the program names them by descriptors in the
//! peer window (`PEER_WINDOW_BASE` plus its own virtual address) instead.
//!
//! The kernel is the judge of every access: the peer's pid comes from the
//! connection (`SO_PEERCRED`), not from the program; the kernel lets the
//! worker attach only to a process of its own user that is dumpable, and
//! the worker's seccomp filter then narrows the two calls to that one pid
//! (`sandbox::restrict_peer_memory`). A bad address fails with `EFAULT`,
//! which fails the one call that named it. A worker serves one front-end
//! in its life, so the peer is kept process-wide.

use std::io;
use std::os::fd::RawFd;
use std::sync::OnceLock;

/// The loopback program whose memory this worker may read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerMemory {
    pid: libc::pid_t,
}

static PEER: OnceLock<PeerMemory> = OnceLock::new();

/// The front-end's memory, once [`attach`] found it reachable.
pub fn peer() -> Option<PeerMemory> {
    PEER.get().copied()
}

/// Makes `peer` the front-end whose memory chains may name. Only the
/// first call counts: a worker has one front-end.
pub fn attach(peer: PeerMemory) {
    if PEER.set(peer).is_err() {
        log::warn!("peer memory: a front-end was attached already");
    }
}

impl PeerMemory {
    /// `pid`'s memory, if this process may read and write it: a read of
    /// address 0 (never mapped) fails with `EFAULT` where access is
    /// allowed, and with `EPERM` or `ESRCH` where it is not.
    pub fn probe(pid: libc::pid_t) -> io::Result<PeerMemory> {
        let peer = PeerMemory { pid };
        let mut byte = [0u8; 1];
        match peer.transfer(0, byte.as_mut_ptr(), 1, Direction::FromPeer) {
            Err(e) if e.raw_os_error() == Some(libc::EFAULT) => Ok(peer),
            Err(e) => Err(e),
            Ok(()) => Err(io::Error::other("address 0 of the peer is readable")),
        }
    }

    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Fills `dst` from the peer's address `remote`.
    pub fn read(&self, remote: u64, dst: &mut [u8]) -> io::Result<()> {
        self.transfer(remote, dst.as_mut_ptr(), dst.len(), Direction::FromPeer)
    }

    /// Copies `src` to the peer's address `remote`.
    pub fn write(&self, remote: u64, src: &[u8]) -> io::Result<()> {
        self.transfer(
            remote,
            src.as_ptr().cast_mut(),
            src.len(),
            Direction::ToPeer,
        )
    }

    /// Fills `len` bytes at `dst` from the peer's address `remote`.
    ///
    /// # Safety
    /// `dst` must be valid for writes of `len` bytes, and nothing else may
    /// access them during the call.
    pub unsafe fn read_raw(&self, remote: u64, dst: *mut u8, len: usize) -> io::Result<()> {
        self.transfer(remote, dst, len, Direction::FromPeer)
    }

    /// Copies `len` bytes at `src` to the peer's address `remote`.
    ///
    /// # Safety
    /// `src` must be valid for reads of `len` bytes during the call.
    pub unsafe fn write_raw(&self, remote: u64, src: *const u8, len: usize) -> io::Result<()> {
        self.transfer(remote, src.cast_mut(), len, Direction::ToPeer)
    }

    /// One copy between `local..local+len` of this process and
    /// `remote..remote+len` of the peer; a short copy (the peer's range
    /// runs into an unmapped page) is an `EFAULT` error.
    fn transfer(
        &self,
        remote: u64,
        local: *mut u8,
        len: usize,
        direction: Direction,
    ) -> io::Result<()> {
        let mut done = 0usize;
        while done < len {
            let remote_at = remote
                .checked_add(done as u64)
                .and_then(|a| usize::try_from(a).ok())
                .ok_or_else(|| io::Error::from_raw_os_error(libc::EFAULT))?;
            let local_iov = libc::iovec {
                // SAFETY: `done < len`, inside the caller's range.
                iov_base: unsafe { local.add(done) }.cast(),
                iov_len: len - done,
            };
            let remote_iov = libc::iovec {
                iov_base: remote_at as *mut libc::c_void,
                iov_len: len - done,
            };
            // SAFETY: the local iovec covers memory the callers guarantee
            // valid (a slice, or the contract of `read_raw`/`write_raw`);
            // the remote one is only interpreted in the peer's address
            // space by the kernel, which checks it.
            let n = unsafe {
                match direction {
                    Direction::FromPeer => {
                        libc::process_vm_readv(self.pid, &local_iov, 1, &remote_iov, 1, 0)
                    }
                    Direction::ToPeer => {
                        libc::process_vm_writev(self.pid, &local_iov, 1, &remote_iov, 1, 0)
                    }
                }
            };
            match n {
                n if n > 0 => done += n as usize,
                0 => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Direction {
    FromPeer,
    ToPeer,
}

/// The address a unix socket is bound to (the listener's path, which its
/// accepted connections share), `None` for an unnamed one.
pub fn socket_name(fd: RawFd) -> Option<Vec<u8>> {
    // SAFETY: an all-zero sockaddr_un is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
    // SAFETY: `addr` and `len` are valid for writes; the kernel writes at
    // most `len` bytes.
    let rc =
        unsafe { libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_un).cast(), &mut len) };
    let path_start = std::mem::size_of::<libc::sa_family_t>();
    if rc != 0
        || addr.sun_family != libc::AF_UNIX as libc::sa_family_t
        || len as usize <= path_start
    {
        return None;
    }
    let path = &addr.sun_path[..len as usize - path_start];
    Some(path.iter().map(|&c| c as u8).collect())
}

/// The pid of the process at the other end of the one connection this
/// process accepted on the socket named `listener_name` (the listener
/// itself, `listener`, excepted). The vhost-user library accepts it and
/// keeps the stream to itself, so it is found among the open descriptors:
/// an accepted unix socket carries its listener's address.
pub fn front_end_pid(listener: RawFd, listener_name: &[u8]) -> Option<libc::pid_t> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `limit` is valid for writing.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return None;
    }
    let max = RawFd::try_from(limit.rlim_cur.min(1 << 16)).unwrap_or(1 << 16);
    (0..max)
        .filter(|&fd| fd != listener)
        .filter(|&fd| socket_name(fd).as_deref() == Some(listener_name))
        .find_map(peer_pid)
}

pub(crate) fn peer_pid(fd: RawFd) -> Option<libc::pid_t> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// A child process of this test's own user, paused until it is
    /// killed: after the fork its memory holds what this process's did,
    /// at the same addresses, as a copy of its own.
    struct Child {
        pid: libc::pid_t,
    }

    impl Drop for Child {
        fn drop(&mut self) {
            // SAFETY: signals and reaps this test's own child.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            }
        }
    }

    fn paused_child() -> Child {
        // SAFETY: the child only calls pause (async-signal-safe) until it
        // is killed.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            loop {
                // SAFETY: no preconditions.
                unsafe { libc::pause() };
            }
        }
        Child { pid }
    }

    #[test]
    fn reads_and_writes_another_process_of_the_same_user() {
        let bytes = b"peer-mem".to_vec();
        let child = paused_child();
        let addr = bytes.as_ptr() as u64;
        let peer = PeerMemory::probe(child.pid).expect("same user");
        let mut got = [0u8; 8];
        peer.read(addr, &mut got).expect("read");
        assert_eq!(&got, b"peer-mem");
        peer.write(addr, b"changed!").expect("write");
        peer.read(addr, &mut got).expect("read back");
        assert_eq!(&got, b"changed!");
        assert_eq!(&bytes, b"peer-mem", "the child's copy changed, not ours");
    }

    #[test]
    fn a_bad_peer_address_is_efault_not_a_crash() {
        static READ_ONLY: [u8; 4] = *b"abcd";
        let child = paused_child();
        let peer = PeerMemory::probe(child.pid).expect("same user");
        let mut buf = [0u8; 16];
        for addr in [0u64, 8, u64::MAX - 4, 1 << 62] {
            let err = peer.read(addr, &mut buf).expect_err("unmapped");
            assert_eq!(err.raw_os_error(), Some(libc::EFAULT), "{addr:#x}");
        }
        let err = peer
            .write(READ_ONLY.as_ptr() as u64, b"xy")
            .expect_err("read-only page");
        assert_eq!(err.raw_os_error(), Some(libc::EFAULT));
    }

    #[test]
    fn probe_refuses_a_process_that_is_gone() {
        let pid = paused_child().pid;
        assert!(PeerMemory::probe(pid).is_err());
    }

    #[test]
    fn finds_the_pid_behind_an_accepted_connection() {
        let dir = std::env::temp_dir().join(format!("vgpu-peer-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("s.sock");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let name = socket_name(listener.as_raw_fd()).expect("named");
        assert!(name.starts_with(path.as_os_str().as_encoded_bytes()));
        let _client = std::os::unix::net::UnixStream::connect(&path).expect("connect");
        let (_accepted, _) = listener.accept().expect("accept");
        assert_eq!(
            front_end_pid(listener.as_raw_fd(), &name),
            Some(std::process::id() as libc::pid_t)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
