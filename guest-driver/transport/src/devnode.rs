//! Transport over the guest kernel driver's `/dev/vgpuN` (`virtio_vgpu.ko`).
//!
//! One open file is one session. A batch goes down with `VGPU_IOC_SUBMIT`
//! (request stream, reply capacity, and the out/in data as segments of the
//! caller's own memory, which the driver pins: zero copy), and its reply
//! comes back with `VGPU_IOC_WAIT`.

pub mod uapi;

use uapi::{
    VgpuSegment, VgpuSubmit, VgpuWait, VGPU_IOC_SUBMIT, VGPU_IOC_WAIT, VGPU_MAX_DATA_LEN,
    VGPU_MAX_DESCRIPTORS, VGPU_MAX_REPLY_LEN, VGPU_MAX_REQUEST_LEN, VGPU_MAX_SEGMENTS,
};

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use crate::{Submission, Transport};

/// Bytes the driver's kernel buffers hold per descriptor (request, reply).
const KERNEL_CHUNK: usize = 128 << 10;
/// The smallest page the program's data may sit on.
const PAGE: usize = 4096;

/// Data bytes per direction and submission such that the chain fits the
/// device's descriptor limit on ordinary 4 KiB pages, however scattered:
/// a 32 MiB chunk of scattered pages needed 8192 descriptors and failed
/// with `E2BIG`. Transfers larger than this go in several submissions.
pub const MAX_SCATTERED_DATA_LEN: usize = (VGPU_MAX_DESCRIPTORS
    - VGPU_MAX_REQUEST_LEN.div_ceil(KERNEL_CHUNK)
    - VGPU_MAX_REPLY_LEN.div_ceil(KERNEL_CHUNK)
    - 4 * VGPU_MAX_SEGMENTS)
    / 2
    * PAGE;

/// An open `/dev/vgpuN`.
#[derive(Debug)]
pub struct DevNode {
    file: File,
}

impl DevNode {
    /// Opens the device node (read-write, close-on-exec).
    pub fn open(path: &Path) -> io::Result<DevNode> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        Ok(DevNode { file })
    }
}

impl Transport for DevNode {
    fn submit(&mut self, submission: Submission<'_>) -> io::Result<usize> {
        if submission.request.len() > VGPU_MAX_REQUEST_LEN {
            return Err(invalid("request stream longer than VGPU_MAX_REQUEST_LEN"));
        }
        if submission.reply.len() > VGPU_MAX_REPLY_LEN {
            return Err(invalid("reply capacity larger than VGPU_MAX_REPLY_LEN"));
        }
        let out = segments(submission.out.iter().map(|s| (s.as_ptr(), s.len())))?;
        let in_ = segments(
            submission
                .in_
                .iter_mut()
                .map(|s| (s.as_mut_ptr().cast_const(), s.len())),
        )?;
        let reply_capacity = submission.reply.len() as u32;
        let mut submit = VgpuSubmit {
            request: submission.request.as_ptr() as u64,
            request_len: submission.request.len() as u32,
            reply_capacity,
            out_segs: out.as_ptr() as u64,
            in_segs: in_.as_ptr() as u64,
            n_out: out.len() as u32,
            n_in: in_.len() as u32,
            ticket: 0,
        };
        // SAFETY: `submit` matches `struct vgpu_submit`; every pointer in it
        // (request, segment arrays, the segments themselves) refers to memory
        // borrowed for this whole call, and the call does not return before
        // the WAIT below has finished with it.
        retry_interrupted(|| unsafe {
            libc::ioctl(self.file.as_raw_fd(), VGPU_IOC_SUBMIT as _, &mut submit)
        })?;
        let mut wait = VgpuWait {
            ticket: submit.ticket,
            reply: submission.reply.as_mut_ptr() as u64,
            reply_capacity,
            reply_len: 0,
            timeout_ms: -1,
        };
        // SAFETY: `wait` matches `struct vgpu_wait`; `reply` points at
        // `reply_capacity` writable bytes borrowed for this call.
        retry_interrupted(|| unsafe {
            libc::ioctl(self.file.as_raw_fd(), VGPU_IOC_WAIT as _, &mut wait)
        })?;
        Ok((wait.reply_len as usize).min(submission.reply.len()))
    }

    fn max_data_len(&self) -> usize {
        MAX_SCATTERED_DATA_LEN.min(VGPU_MAX_DATA_LEN)
    }

    fn max_request_len(&self) -> usize {
        VGPU_MAX_REQUEST_LEN
    }
}

fn invalid(why: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, why)
}

/// One segment per non-empty slice, bounded by the driver's limits.
fn segments(slices: impl Iterator<Item = (*const u8, usize)>) -> io::Result<Vec<VgpuSegment>> {
    let mut total = 0usize;
    let mut out = Vec::new();
    for (addr, len) in slices.filter(|&(_, len)| len > 0) {
        total = total.saturating_add(len);
        out.push(VgpuSegment {
            addr: addr as u64,
            len: len as u64,
        });
    }
    if out.len() > VGPU_MAX_SEGMENTS {
        return Err(invalid("more data segments than VGPU_MAX_SEGMENTS"));
    }
    if total > VGPU_MAX_DATA_LEN {
        return Err(invalid("data stream longer than VGPU_MAX_DATA_LEN"));
    }
    Ok(out)
}

/// Runs an ioctl again while a signal interrupts it. The driver answers
/// `EINTR` from SUBMIT only before it has queued anything (the ticket is
/// dropped), and from WAIT with the ticket still valid and the caller's pages
/// still pinned (see `vgpu_uapi.h`), so a retry is safe either way.
fn retry_interrupted(mut ioctl: impl FnMut() -> libc::c_int) -> io::Result<()> {
    loop {
        if ioctl() >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The most descriptors a chain can need: the request and reply streams
    /// one per kernel chunk, each data direction one per page it spans (a
    /// segment spans at most two pages more than its length fills).
    const fn worst_case_descriptors(data_len_per_direction: usize) -> usize {
        VGPU_MAX_REQUEST_LEN.div_ceil(KERNEL_CHUNK)
            + VGPU_MAX_REPLY_LEN.div_ceil(KERNEL_CHUNK)
            + 2 * (data_len_per_direction / PAGE + 2 * VGPU_MAX_SEGMENTS)
    }

    // Checked when the tests compile: the bound is the largest that fits,
    // and large enough that a transfer takes few round trips.
    const _: () = assert!(worst_case_descriptors(MAX_SCATTERED_DATA_LEN) <= VGPU_MAX_DESCRIPTORS);
    const _: () =
        assert!(worst_case_descriptors(MAX_SCATTERED_DATA_LEN + PAGE) > VGPU_MAX_DESCRIPTORS);
    const _: () = assert!(MAX_SCATTERED_DATA_LEN >= 4 << 20);

    #[test]
    fn segments_skip_empty_slices() {
        let a = [1u8; 4];
        let b: [u8; 0] = [];
        let segs =
            segments([(a.as_ptr(), a.len()), (b.as_ptr(), 0)].into_iter()).expect("within limits");
        assert_eq!(
            segs,
            vec![VgpuSegment {
                addr: a.as_ptr() as u64,
                len: 4
            }]
        );
    }

    #[test]
    fn segments_reject_too_many_or_too_much() {
        let a = [0u8; 1];
        let many = std::iter::repeat_n((a.as_ptr(), 1), VGPU_MAX_SEGMENTS + 1);
        assert_eq!(
            segments(many).map_err(|e| e.kind()),
            Err(io::ErrorKind::InvalidInput)
        );
        let huge = [(a.as_ptr(), VGPU_MAX_DATA_LEN), (a.as_ptr(), 1)];
        assert!(segments(huge.into_iter()).is_err());
    }

    #[test]
    fn open_of_a_missing_node_is_an_error() {
        let err = DevNode::open(Path::new("/nonexistent/vgpu0")).expect_err("no such node");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn submit_to_a_file_that_is_no_device_fails_with_enotty() {
        let mut node = DevNode {
            file: File::open("/dev/null").expect("/dev/null exists"),
        };
        let request = [0u8; 32];
        let mut reply = [0u8; 64];
        let err = node
            .submit(Submission {
                request: &request,
                out: &[],
                reply: &mut reply,
                in_: &mut [],
            })
            .expect_err("not a vgpu node");
        assert_eq!(err.raw_os_error(), Some(libc::ENOTTY));
    }
}
