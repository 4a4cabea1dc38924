//! What kernels print (`printf`, failed `assert`s), for the guest.
//!
//! The driver writes a context's device output to its process's standard
//! output when the context synchronizes (or is destroyed): here that is
//! the worker serving the VM, not the guest's program. So the worker's
//! standard output becomes a memory file from its first CUDA session on,
//! and what the driver wrote during a synchronizing call goes back as that
//! call's reply payload (otherwise empty), which the guest library writes
//! to the program's own standard output. The worker serves one VM; output
//! of two of its programs synchronizing at the same moment can be handed
//! to either, which the driver cannot tell apart either.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, OnceLock};

use vgpu_protocol::cuda::DEVICE_OUTPUT_CHUNK;

/// Size past which the file starts over once everything was read.
const REWIND_AT: u64 = 1 << 20;

/// The memory file behind standard output, and how far it was read.
struct Capture {
    file: File,
    read_at: u64,
}

fn capture() -> Option<&'static Mutex<Capture>> {
    static CAPTURE: OnceLock<Option<Mutex<Capture>>> = OnceLock::new();
    CAPTURE
        .get_or_init(|| match start() {
            Ok(capture) => Some(Mutex::new(capture)),
            Err(e) => {
                log::warn!("device output (kernel printf) not captured: {e}");
                None
            }
        })
        .as_ref()
}

fn start() -> std::io::Result<Capture> {
    // SAFETY: the name is a NUL-terminated string; flags are plain.
    let fd = unsafe { libc::memfd_create(c"vgpu-device-output".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    flush_stdio();
    // SAFETY: both descriptors are open; standard output now names the
    // memory file (its own offset, shared with `file`'s description).
    if unsafe { libc::dup2(file.as_raw_fd(), libc::STDOUT_FILENO) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Capture { file, read_at: 0 })
}

/// Flushes the C library's buffered streams (the driver prints through
/// them).
fn flush_stdio() {
    // SAFETY: `fflush(NULL)` flushes every open output stream.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

/// Starts capturing, if not yet (at a worker's first CUDA session: the
/// supervisor never captures).
pub fn begin() {
    let _ = capture();
}

/// What the driver printed since the last call, at most
/// [`DEVICE_OUTPUT_CHUNK`] bytes (the rest stays for the next, which the
/// guest asks for with `CuTakeDeviceOutput` while replies come back full).
pub fn take() -> Vec<u8> {
    let Some(capture) = capture() else {
        return Vec::new();
    };
    let mut capture = capture.lock().unwrap_or_else(|e| e.into_inner());
    flush_stdio();
    // SAFETY: a query of standard output's offset, which is where the
    // driver's writes have reached.
    let end = unsafe { libc::lseek(libc::STDOUT_FILENO, 0, libc::SEEK_CUR) };
    let Ok(end) = u64::try_from(end) else {
        return Vec::new();
    };
    if end <= capture.read_at {
        return Vec::new();
    }
    let len = (end - capture.read_at).min(DEVICE_OUTPUT_CHUNK as u64) as usize;
    let mut out = vec![0u8; len];
    match capture.file.read_exact_at(&mut out, capture.read_at) {
        Ok(()) => capture.read_at += len as u64,
        Err(e) => {
            log::warn!("device output lost: {e}");
            capture.read_at = end;
            out.clear();
        }
    }
    if capture.read_at == end && end >= REWIND_AT {
        // Everything read: start the file over (the writer's offset too).
        // SAFETY: standard output is the memory file; nothing else writes
        // it while the lock is held and the driver is not printing (it
        // prints inside the calls this worker makes, not concurrently).
        unsafe { libc::lseek(libc::STDOUT_FILENO, 0, libc::SEEK_SET) };
        let _ = capture.file.set_len(0);
        capture.read_at = 0;
    }
    out
}
