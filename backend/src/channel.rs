//! The link between the supervisor and one worker: a `SOCK_SEQPACKET`
//! socket pair, so every message arrives whole, each carrying one JSON
//! value and up to [`MAX_FDS`] file descriptors (a control stream, the file
//! a command names). The worker is confined and may run as another user:
//! files reach it open, never by path.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use serde::{Deserialize, Serialize};

use crate::control_schema::DeviceFigures;

/// Descriptors one message may carry.
pub const MAX_FDS: usize = 2;
/// The largest message: replies travel on their own streams, so these
/// stay small.
const MAX_MESSAGE: usize = 64 << 10;

/// What a worker tells the supervisor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkerEvent {
    /// The device is open, the worker confined, and it is about to accept.
    Ready {
        devices: Vec<String>,
        /// The worker's private driver cache, for the supervisor to remove
        /// once the worker has ended, however it ended.
        #[serde(default)]
        cache: Option<std::path::PathBuf>,
    },
    /// Setting up failed; the worker exits.
    Failed { error: String },
    /// A front-end connected: the supervisor starts the next standby.
    /// `front_end` is its pid where known, so its pre-copy channel can
    /// be passed to this worker.
    Connected {
        #[serde(default)]
        front_end: Option<u32>,
    },
    /// The front-end went away; the worker is ending (control commands no
    /// longer reach its VM).
    Disconnected,
    /// The front-end went away: the device counters of its whole life,
    /// so the supervisor's per-device totals keep them.
    Finished { devices: Vec<DeviceFigures> },
}

/// What the supervisor asks of a worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SupervisorRequest {
    /// Serve one control command on the stream passed along (the first
    /// descriptor); the second, if any, is the file the command names.
    Control,
    /// Serve the VM's pre-copy channel on the connection passed along
    /// (`crate::worker::precopy`).
    Precopy,
}

pub struct Channel {
    socket: OwnedFd,
}

impl Channel {
    /// A connected pair: one end for each side. Both are close-on-exec; the
    /// supervisor hands its worker's end over explicitly.
    pub fn pair() -> io::Result<(Channel, Channel)> {
        let mut fds = [0; 2];
        // SAFETY: `fds` is valid storage for the two descriptors.
        let rc = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: socketpair returned two fresh descriptors we now own.
        let (a, b) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok((Channel { socket: a }, Channel { socket: b }))
    }

    /// A channel on a descriptor this process inherited.
    ///
    /// # Safety
    /// `fd` must be an open SOCK_SEQPACKET socket owned by nothing else.
    pub unsafe fn from_inherited(fd: RawFd) -> Channel {
        Channel {
            // SAFETY: the caller passes ownership of an open descriptor.
            socket: unsafe { OwnedFd::from_raw_fd(fd) },
        }
    }

    pub fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    pub fn send(&self, message: &impl Serialize, fds: &[RawFd]) -> io::Result<()> {
        let bytes = serde_json::to_vec(message).map_err(io::Error::other)?;
        send_with_fds(self.fd(), &bytes, fds)
    }

    /// The next message and the descriptors it carried; `None` once the
    /// other side has closed.
    pub fn recv<T: for<'de> Deserialize<'de>>(&self) -> io::Result<Option<(T, Vec<OwnedFd>)>> {
        let Some((bytes, fds)) = recv_with_fds(self.fd())? else {
            return Ok(None);
        };
        let message = serde_json::from_slice(&bytes).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("malformed channel message: {e}"),
            )
        })?;
        Ok(Some((message, fds)))
    }
}

/// Room for [`MAX_FDS`] descriptors in a control message, aligned as the
/// kernel's `cmsghdr` needs.
#[repr(C, align(8))]
struct FdSpace([u8; 64]);

fn send_with_fds(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
    if fds.len() > MAX_FDS || bytes.len() > MAX_MESSAGE {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "channel message too large",
        ));
    }
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut space = FdSpace([0; 64]);
    // SAFETY: an all-zero msghdr is a valid empty header.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    if !fds.is_empty() {
        let payload = std::mem::size_of_val(fds) as u32;
        // SAFETY: CMSG_SPACE is a pure size computation.
        header.msg_controllen = unsafe { libc::CMSG_SPACE(payload) } as usize;
        header.msg_control = space.0.as_mut_ptr().cast();
        // SAFETY: `space` is aligned and large enough for one cmsghdr with
        // MAX_FDS descriptors (64 bytes > CMSG_SPACE(8)), so CMSG_FIRSTHDR
        // points inside it and the copy stays within it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&header);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(payload) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(cmsg).cast::<RawFd>(),
                fds.len(),
            );
        }
    }
    loop {
        // SAFETY: the header points at live buffers for the call.
        let sent = unsafe { libc::sendmsg(socket, &header, libc::MSG_NOSIGNAL) };
        if sent >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

fn recv_with_fds(socket: RawFd) -> io::Result<Option<(Vec<u8>, Vec<OwnedFd>)>> {
    let mut bytes = vec![0u8; MAX_MESSAGE];
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    let mut space = FdSpace([0; 64]);
    // SAFETY: an all-zero msghdr is a valid empty header.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = space.0.as_mut_ptr().cast();
    header.msg_controllen = space.0.len();
    let received = loop {
        // SAFETY: the header points at live buffers for the call; received
        // descriptors are close-on-exec.
        let n = unsafe { libc::recvmsg(socket, &mut header, libc::MSG_CMSG_CLOEXEC) };
        if n >= 0 {
            break n as usize;
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    };
    let mut fds = Vec::new();
    // SAFETY: the kernel filled `header`'s control area; the CMSG macros
    // walk it within msg_controllen, and each SCM_RIGHTS descriptor is new
    // and ours to own.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let count =
                    ((*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&header, cmsg);
        }
    }
    if header.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "channel message truncated",
        ));
    }
    if received == 0 && fds.is_empty() {
        return Ok(None);
    }
    bytes.truncate(received);
    Ok(Some((bytes, fds)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};

    #[test]
    fn messages_carry_their_descriptors() {
        let (a, b) = Channel::pair().unwrap();
        let mut file = tempfile_in_dir();
        file.write_all(b"passed along").unwrap();
        a.send(&SupervisorRequest::Control, &[file.as_raw_fd()])
            .unwrap();
        a.send(&WorkerEvent::Connected { front_end: None }, &[])
            .unwrap();
        let (request, fds): (SupervisorRequest, _) = b.recv().unwrap().unwrap();
        assert_eq!(request, SupervisorRequest::Control);
        assert_eq!(fds.len(), 1);
        let mut received = std::fs::File::from(fds.into_iter().next().unwrap());
        received.rewind().unwrap();
        let mut text = String::new();
        received.read_to_string(&mut text).unwrap();
        assert_eq!(text, "passed along");
        let (event, fds): (WorkerEvent, _) = b.recv().unwrap().unwrap();
        assert_eq!(event, WorkerEvent::Connected { front_end: None });
        assert!(fds.is_empty());
        drop(a);
        assert!(b.recv::<WorkerEvent>().unwrap().is_none());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let (a, b) = Channel::pair().unwrap();
        send_with_fds(a.fd(), b"{not json", &[]).unwrap();
        assert!(b.recv::<WorkerEvent>().is_err());
    }

    fn tempfile_in_dir() -> std::fs::File {
        let path = std::env::temp_dir().join(format!("vgpu-channel-test-{}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file
    }
}
