//! Reading a file while it is still being appended to: a reader of the
//! pre-copy stream kept at the destination waits for bytes not there yet
//! instead of taking the file's current end for the stream's.

use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Condvar, Mutex};

/// A file in memory, named `name` (for `/proc/PID/fd` only).
pub(super) fn memory_file(name: &std::ffi::CStr) -> std::io::Result<std::fs::File> {
    // SAFETY: a NUL-terminated name; flags valid for memfd_create.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a new descriptor that nothing else
    // owns.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// How far a file was written, and whether it will grow further.
#[derive(Default)]
pub(super) struct Growth {
    state: Mutex<Grown>,
    changed: Condvar,
}

#[derive(Default, Clone, Copy)]
struct Grown {
    len: u64,
    /// No more bytes will come: the file is whole.
    complete: bool,
    /// The writer gave up: readers fail.
    cancelled: bool,
}

impl Growth {
    fn update(&self, change: impl FnOnce(&mut Grown)) {
        change(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()));
        self.changed.notify_all();
    }

    /// The file now holds `len` bytes.
    pub(super) fn grew(&self, len: u64) {
        self.update(|g| g.len = g.len.max(len));
    }

    pub(super) fn complete(&self) {
        self.update(|g| g.complete = true);
    }

    pub(super) fn cancel(&self) {
        self.update(|g| g.cancelled = true);
    }

    /// Waits until bytes at `at` are there, the file is whole, or the
    /// writer gave up; answers the state then.
    fn wait_past(&self, at: u64) -> Grown {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        while state.len <= at && !state.complete && !state.cancelled {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        *state
    }
}

/// Reads a growing file from its start, at its own offset (`pread`): the
/// writer appends at the file's.
pub(super) struct Follow {
    file: std::fs::File,
    at: u64,
    growth: Arc<Growth>,
}

impl Follow {
    pub(super) fn new(file: std::fs::File, growth: Arc<Growth>) -> Follow {
        Follow {
            file,
            at: 0,
            growth,
        }
    }
}

impl std::io::Read for Follow {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let grown = self.growth.wait_past(self.at);
        if grown.cancelled {
            return Err(std::io::Error::other("the incoming stream was cancelled"));
        }
        let ready = grown.len.saturating_sub(self.at);
        let len = buf.len().min(usize::try_from(ready).unwrap_or(usize::MAX));
        if len == 0 {
            // Whole, and all of it read.
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..len], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_reader_waits_for_appended_bytes_and_ends_when_the_file_is_whole() {
        let mut file = memory_file(c"follow-test").unwrap();
        let growth = Arc::new(Growth::default());
        let mut reader = Follow::new(file.try_clone().unwrap(), growth.clone());
        let read = std::thread::spawn(move || {
            let mut all = Vec::new();
            reader.read_to_end(&mut all).map(|_| all)
        });
        for piece in [b"abc".as_slice(), b"defg"] {
            file.write_all(piece).unwrap();
            growth.grew(file.metadata().unwrap().len());
        }
        growth.complete();
        assert_eq!(read.join().unwrap().unwrap(), b"abcdefg");
    }

    #[test]
    fn a_waiting_reader_fails_when_the_writer_gives_up() {
        let growth = Arc::new(Growth::default());
        let mut reader = Follow::new(memory_file(c"follow-test").unwrap(), growth.clone());
        let read = std::thread::spawn(move || reader.read(&mut [0u8; 4]));
        growth.cancel();
        assert!(read.join().unwrap().is_err());
    }
}
