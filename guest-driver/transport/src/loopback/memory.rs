//! The loopback's "guest RAM": one memfd, mapped here and handed to the
//! backend with `SET_MEM_TABLE`, at a nonzero guest-physical address so that
//! address 0 is outside guest memory. What lives where is [`MemoryLayout`].

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd};

use vgpu_protocol::{EVENT_QUEUE_SIZE, SUBMIT_QUEUE_SIZE};
use vhost::VhostUserMemoryRegionInfo;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

use crate::vring::{RingLayout, RING_ALIGN};

/// Bytes of each writable buffer posted on the event queue (the protocol
/// asks for at least 32).
pub const EVENT_BUFFER_LEN: usize = 64;

/// Where the rings, the event buffers and the data area sit, as offsets from
/// the start of guest memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryLayout {
    pub submit_ring: usize,
    pub event_ring: usize,
    pub event_buffers: usize,
    pub event_buffer_count: u16,
    pub data: usize,
    pub data_len: usize,
    /// Size of the whole memfd.
    pub total: usize,
}

impl MemoryLayout {
    pub fn new(data_len: usize, event_buffer_count: u16) -> io::Result<MemoryLayout> {
        let ring = |size| RingLayout::new(size).map_err(io::Error::other);
        let submit_ring = 0;
        let event_ring = submit_ring + ring(SUBMIT_QUEUE_SIZE)?.total;
        let event_buffers = event_ring + ring(EVENT_QUEUE_SIZE)?.total;
        let data = (event_buffers + EVENT_BUFFER_LEN * usize::from(event_buffer_count))
            .next_multiple_of(RING_ALIGN);
        let total = data
            .checked_add(data_len)
            .map(|end| end.next_multiple_of(RING_ALIGN))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "data area too large"))?;
        Ok(MemoryLayout {
            submit_ring,
            event_ring,
            event_buffers,
            event_buffer_count,
            data,
            data_len,
            total,
        })
    }
}

/// Guest memory backed by a memfd shared with the backend.
pub struct GuestRam {
    memory: GuestMemoryMmap,
    memfd: File,
    base: u64,
    len: usize,
}

impl std::fmt::Debug for GuestRam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuestRam")
            .field("base", &format_args!("{:#x}", self.base))
            .field("len", &self.len)
            .finish()
    }
}

impl GuestRam {
    /// A fresh zeroed memfd of `len` bytes, mapped shared, known to the
    /// device as guest-physical `base..base + len`.
    pub fn new(base: u64, len: usize) -> io::Result<GuestRam> {
        let memfd = memfd("vgpu-loopback-ram")?;
        memfd.set_len(len as u64)?;
        let file = FileOffset::new(memfd.try_clone()?, 0);
        let memory =
            GuestMemoryMmap::from_ranges_with_files([(GuestAddress(base), len, Some(file))])
                .map_err(io::Error::other)?;
        Ok(GuestRam {
            memory,
            memfd,
            base,
            len,
        })
    }

    /// Guest-physical address of the first byte.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Guest-physical range of the whole memory.
    pub fn range(&self) -> Range<u64> {
        self.base..self.base + self.len as u64
    }

    /// Copies `bytes` to guest-physical `gpa`; fails when any byte falls
    /// outside guest memory.
    pub fn write(&self, gpa: u64, bytes: &[u8]) -> io::Result<()> {
        self.check(gpa, bytes.len())?;
        self.memory
            .write_slice(bytes, GuestAddress(gpa))
            .map_err(io::Error::other)
    }

    /// Fills `buf` from guest-physical `gpa`; fails when any byte falls
    /// outside guest memory.
    pub fn read(&self, gpa: u64, buf: &mut [u8]) -> io::Result<()> {
        self.check(gpa, buf.len())?;
        self.memory
            .read_slice(buf, GuestAddress(gpa))
            .map_err(io::Error::other)
    }

    /// Host pointer to guest-physical `gpa`, valid for `len` bytes while
    /// `self` lives.
    pub fn host_ptr(&self, gpa: u64, len: usize) -> io::Result<*mut u8> {
        self.check(gpa, len)?;
        self.memory
            .get_host_address(GuestAddress(gpa))
            .map_err(io::Error::other)
    }

    /// The `SET_MEM_TABLE` entry describing this memory.
    pub fn region_info(&self) -> io::Result<VhostUserMemoryRegionInfo> {
        Ok(VhostUserMemoryRegionInfo {
            guest_phys_addr: self.base,
            memory_size: self.len as u64,
            userspace_addr: self.host_ptr(self.base, self.len)? as u64,
            mmap_offset: 0,
            mmap_handle: self.memfd.as_raw_fd(),
        })
    }

    fn check(&self, gpa: u64, len: usize) -> io::Result<()> {
        let inside = gpa
            .checked_sub(self.base)
            .and_then(|offset| offset.checked_add(len as u64))
            .is_some_and(|end| end <= self.len as u64);
        if !inside {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("guest range {gpa:#x}+{len:#x} is outside guest memory"),
            ));
        }
        Ok(())
    }
}

fn memfd(name: &str) -> io::Result<File> {
    let name = std::ffi::CString::new(name).map_err(io::Error::other)?;
    let name: &CStr = &name;
    // SAFETY: `name` is a valid NUL-terminated string; the call has no other
    // memory effects.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x1_0000_0000;

    #[test]
    fn layout_puts_rings_first_and_data_page_aligned() {
        let layout = MemoryLayout::new(1 << 20, 16).expect("fits");
        assert_eq!(layout.submit_ring, 0);
        assert_eq!(layout.event_ring, 0x8000);
        assert_eq!(layout.event_buffers, 0xb000);
        assert_eq!(layout.data, 0xc000);
        assert_eq!(layout.data % RING_ALIGN, 0);
        assert!(layout.data >= layout.event_buffers + 16 * EVENT_BUFFER_LEN);
        assert_eq!(layout.total, layout.data + (1 << 20));
    }

    #[test]
    fn layout_rejects_an_overflowing_data_area() {
        assert!(MemoryLayout::new(usize::MAX, 16).is_err());
    }

    #[test]
    fn write_then_read_round_trips() {
        let ram = GuestRam::new(BASE, 1 << 16).expect("memfd");
        ram.write(BASE + 100, b"hello").expect("inside");
        let mut back = [0u8; 5];
        ram.read(BASE + 100, &mut back).expect("inside");
        assert_eq!(&back, b"hello");
    }

    #[test]
    fn access_outside_guest_memory_fails() {
        let ram = GuestRam::new(BASE, 1 << 16).expect("memfd");
        let mut buf = [0u8; 2];
        assert!(ram.read(0, &mut buf).is_err());
        assert!(ram.read(BASE + (1 << 16) - 1, &mut buf).is_err());
        assert!(ram.write(BASE - 1, &buf).is_err());
        assert!(ram.write(u64::MAX, &buf).is_err());
        assert!(ram.host_ptr(BASE + (1 << 16), 1).is_err());
    }

    #[test]
    fn region_info_describes_the_memfd() {
        let ram = GuestRam::new(BASE, 1 << 16).expect("memfd");
        let info = ram.region_info().expect("mapped");
        assert_eq!(info.guest_phys_addr, BASE);
        assert_eq!(info.memory_size, 1 << 16);
        assert_eq!(info.mmap_offset, 0);
        assert!(info.mmap_handle >= 0);
        assert_ne!(info.userspace_addr, 0);
    }
}
