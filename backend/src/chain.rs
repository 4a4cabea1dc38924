//! Turns a submit-queue descriptor chain into the four byte streams of the
//! protocol (request, out-data, reply, in-data), each a list of host
//! pointers straight into guest memory: bulk data is never copied here.

use std::sync::Arc;

use vgpu_protocol::frame::{BatchHeader, BATCH_HEADER_LEN, REPLY_HEADER_LEN};
use vgpu_protocol::limits::MAX_CHAIN_DESCRIPTORS;
use vgpu_protocol::{DataRef, DecodeError, Status};
use virtio_queue::{desc::split::Descriptor, DescriptorChain};
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryMmap};

/// Guest memory as the backend maps it.
/// Guest memory as the backend maps it, with the dirty log QEMU reads
/// during live migration.
pub type GuestRam = GuestMemoryMmap<vhost_user_backend::bitmap::BitmapMmapRegion>;

/// Why a chain was dropped without a reply.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("descriptor chain is cut short (loop, bad index or unreadable table)")]
    Broken,
    #[error("descriptor chain has more than {MAX_CHAIN_DESCRIPTORS} descriptors")]
    TooLong,
    #[error("descriptor [{addr:#x}, +{len:#x}) is outside guest memory")]
    OutOfRange { addr: u64, len: u32 },
    #[error("a readable descriptor follows a writable one")]
    ReadableAfterWritable,
    #[error("request stream shorter than a batch header")]
    NoHeader,
    #[error("reply stream has no room for a reply header")]
    NoReplyRoom,
}

/// A run of guest memory mapped in this process.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: a segment is a plain address range inside a guest-memory mapping;
// the chain that owns it keeps the mapping alive (`ResolvedChain::mem`).
unsafe impl Send for Segment {}

/// A byte stream made of guest-memory segments.
#[derive(Debug, Default)]
pub struct ByteStream {
    segments: Vec<Segment>,
    len: u64,
}

impl ByteStream {
    /// A stream of one segment.
    pub fn from_segment(segment: Segment) -> ByteStream {
        let mut stream = ByteStream::default();
        stream.push(segment);
        stream
    }

    fn push(&mut self, segment: Segment) {
        self.len += segment.len as u64;
        self.segments.push(segment);
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Splits off the bytes from `at` on into a second stream.
    fn split_off(&mut self, at: u64) -> ByteStream {
        let mut rest = ByteStream::default();
        let mut start = 0u64;
        let mut keep = Vec::new();
        for seg in self.segments.drain(..) {
            let end = start + seg.len as u64;
            if end <= at {
                keep.push(seg);
            } else if start >= at {
                rest.push(seg);
            } else {
                let head = (at - start) as usize;
                keep.push(Segment {
                    ptr: seg.ptr,
                    len: head,
                });
                // SAFETY: `head < seg.len`, so the offset stays inside the segment.
                let tail_ptr = unsafe { seg.ptr.add(head) };
                rest.push(Segment {
                    ptr: tail_ptr,
                    len: seg.len - head,
                });
            }
            start = end;
        }
        self.segments = keep;
        self.len = self.len.min(at);
        rest
    }

    /// The host pieces that cover `data`, in order.
    pub fn slices(&self, data: DataRef) -> Result<Vec<Segment>, Status> {
        let end = data.end().ok_or(Status::INVALID_VALUE)?;
        if end > self.len {
            return Err(Status::INVALID_VALUE);
        }
        let mut out = Vec::new();
        let mut start = 0u64;
        for seg in &self.segments {
            let seg_end = start + seg.len as u64;
            let lo = data.offset.max(start);
            let hi = end.min(seg_end);
            if lo < hi {
                // SAFETY: `lo - start < seg.len`, inside the segment.
                let ptr = unsafe { seg.ptr.add((lo - start) as usize) };
                out.push(Segment {
                    ptr,
                    len: (hi - lo) as usize,
                });
            }
            start = seg_end;
            if start >= end {
                break;
            }
        }
        Ok(out)
    }

    /// Copies `dst.len()` bytes from `offset` out of guest memory.
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), Status> {
        let mut at = 0usize;
        for seg in self.slices(DataRef {
            offset,
            len: dst.len() as u64,
        })? {
            // SAFETY: `seg` lies inside live guest memory (see `Segment`);
            // `dst` has room for it because the slices add up to its length.
            // The guest may change the bytes meanwhile: they are untrusted
            // data either way.
            unsafe { std::ptr::copy_nonoverlapping(seg.ptr, dst[at..].as_mut_ptr(), seg.len) };
            at += seg.len;
        }
        Ok(())
    }

    /// Copies `src` into guest memory at `offset`.
    pub fn write(&self, offset: u64, src: &[u8]) -> Result<(), Status> {
        let mut at = 0usize;
        for seg in self.slices(DataRef {
            offset,
            len: src.len() as u64,
        })? {
            // SAFETY: as in `read`, the segment is live guest memory and
            // `src[at..]` holds at least `seg.len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src[at..].as_ptr(), seg.ptr, seg.len) };
            at += seg.len;
        }
        Ok(())
    }
}

/// Bulk data of one chain, as executors see it.
#[derive(Debug, Default)]
pub struct GuestIo {
    /// Driver → device (sources of writes).
    pub out: ByteStream,
    /// Device → driver (destinations of reads).
    pub in_: ByteStream,
    /// Bytes of `in_` that may have been written, for the used length.
    pub in_written: u64,
    /// Bulk bytes handed out for reading and for writing (metrics).
    pub moved_out: std::cell::Cell<u64>,
    pub moved_in: u64,
}

impl GuestIo {
    /// Pieces of the out-data stream.
    pub fn out_slices(&self, data: DataRef) -> Result<Vec<Segment>, Status> {
        let slices = self.out.slices(data)?;
        self.moved_out.set(self.moved_out.get() + data.len);
        Ok(slices)
    }

    /// Pieces of the in-data stream, noted as written.
    pub fn in_slices(&mut self, data: DataRef) -> Result<Vec<Segment>, Status> {
        let slices = self.in_.slices(data)?;
        self.in_written = self.in_written.max(data.offset + data.len);
        self.moved_in += data.len;
        Ok(slices)
    }
}

/// A chain checked and split into its streams.
pub struct ResolvedChain {
    pub head: u16,
    pub header: Result<BatchHeader, DecodeError>,
    /// A private copy of the request stream, so the guest cannot change it
    /// while it is decoded.
    pub request: Vec<u8>,
    pub reply: ByteStream,
    pub io: GuestIo,
    /// Keeps the mapping behind every segment alive.
    pub mem: Arc<GuestRam>,
    /// Guest ranges the device may write, marked dirty when the chain is
    /// returned (writes through host pointers bypass the memory's own log).
    pub writable: Vec<(u64, u32)>,
}

impl ResolvedChain {
    /// Marks every writable descriptor's pages dirty for live migration.
    pub fn mark_written(&self) {
        use vm_memory::bitmap::Bitmap;
        for (addr, len) in &self.writable {
            if let Ok(slice) = self.mem.get_slice(GuestAddress(*addr), *len as usize) {
                slice.bitmap().mark_dirty(0, *len as usize);
            }
        }
    }
}

fn host_segment(mem: &GuestRam, desc: &Descriptor) -> Result<Segment, ChainError> {
    let out_of_range = || ChainError::OutOfRange {
        addr: desc.addr().0,
        len: desc.len(),
    };
    let slice = mem
        .get_slice(GuestAddress(desc.addr().0), desc.len() as usize)
        .map_err(|_| out_of_range())?;
    Ok(Segment {
        ptr: slice.ptr_guard_mut().as_ptr(),
        len: desc.len() as usize,
    })
}

/// Checks a chain and splits it into streams.
/// `mem` is the memory the chain was popped with.
pub fn resolve(
    chain: DescriptorChain<Arc<GuestRam>>,
    mem: Arc<GuestRam>,
) -> Result<ResolvedChain, ChainError> {
    let head = chain.head_index();
    let mut readable = ByteStream::default();
    let mut writable = ByteStream::default();
    let mut writable_ranges = Vec::new();
    let mut count = 0usize;
    let mut last_had_next = false;
    for desc in chain {
        count += 1;
        if count > MAX_CHAIN_DESCRIPTORS {
            return Err(ChainError::TooLong);
        }
        last_had_next = desc.has_next();
        if desc.len() == 0 {
            continue;
        }
        let segment = host_segment(&mem, &desc)?;
        if desc.is_write_only() {
            writable.push(segment);
            writable_ranges.push((desc.addr().0, desc.len()));
        } else if writable.is_empty() {
            readable.push(segment);
        } else {
            return Err(ChainError::ReadableAfterWritable);
        }
    }
    if count == 0 || last_had_next {
        return Err(ChainError::Broken);
    }
    if readable.len() < BATCH_HEADER_LEN as u64 {
        return Err(ChainError::NoHeader);
    }
    let mut header_bytes = [0u8; BATCH_HEADER_LEN];
    readable
        .read(0, &mut header_bytes)
        .map_err(|_| ChainError::NoHeader)?;
    let header = BatchHeader::decode(&header_bytes).and_then(|h| {
        if u64::from(h.request_len) > readable.len() {
            Err(DecodeError::BadHeader(
                "request_len exceeds the readable descriptors",
            ))
        } else if u64::from(h.reply_capacity) > writable.len() {
            Err(DecodeError::BadHeader(
                "reply_capacity exceeds the writable descriptors",
            ))
        } else {
            Ok(h)
        }
    });
    let (request, out, reply, in_) = match &header {
        Ok(h) => {
            let out = readable.split_off(h.request_len.into());
            let mut request = vec![0u8; h.request_len as usize];
            readable
                .read(0, &mut request)
                .map_err(|_| ChainError::NoHeader)?;
            let in_ = writable.split_off(h.reply_capacity.into());
            (request, out, writable, in_)
        }
        Err(_) => {
            if writable.len() < REPLY_HEADER_LEN as u64 {
                return Err(ChainError::NoReplyRoom);
            }
            (
                Vec::new(),
                ByteStream::default(),
                writable,
                ByteStream::default(),
            )
        }
    };
    Ok(ResolvedChain {
        head,
        header,
        request,
        reply,
        io: GuestIo {
            out,
            in_,
            in_written: 0,
            moved_out: Default::default(),
            moved_in: 0,
        },
        mem,
        writable: writable_ranges,
    })
}
