//! Turns a submit-queue descriptor chain into the four byte streams of the
//! protocol (request, out-data, reply, in-data), each a list of host
//! pointers straight into guest memory: bulk data is never copied here.
//! A loopback front-end served with `--peer-memory` may also name bulk data
//! in its own memory (the peer window, see [`crate::peer`]); executors that
//! can move such pieces in one copy ask for [`Piece`]s, the others get a
//! bounce copy from [`GuestIo::out_slices`] / [`GuestIo::in_slices`].

use std::sync::Arc;

use vgpu_protocol::frame::{BatchHeader, BATCH_HEADER_LEN, REPLY_HEADER_LEN};
use vgpu_protocol::limits::{MAX_CHAIN_DESCRIPTORS, PEER_WINDOW_BASE};
use vgpu_protocol::{DataRef, DecodeError, Status};
use virtio_queue::desc::split::Descriptor;
use vm_memory::GuestMemoryMmap;

pub use crate::desc_walk::ChainStart;
use crate::desc_walk::DescWalk;
use crate::peer::PeerMemory;

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
    #[error("the request or reply stream lies in the front-end's own memory")]
    PeerControlStream,
}

/// Largest bulk range copied through a bounce buffer at once: more is
/// refused (`OUT_OF_RESOURCES`) rather than allocated.
const MAX_BOUNCE_LEN: u64 = 1 << 30;

/// A run of guest memory mapped in this process.
#[derive(Debug, Clone, Copy)]
pub struct Segment {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: a segment is a plain address range inside a guest-memory mapping;
// the chain that owns it keeps the mapping alive (`ResolvedChain::mem`).
unsafe impl Send for Segment {}

/// A run of the loopback front-end's own memory, by its address there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerRange {
    pub addr: u64,
    pub len: usize,
}

/// A stretch of a stream: mapped guest memory, or the peer's memory.
#[derive(Debug, Clone, Copy)]
pub enum Piece {
    Local(Segment),
    Peer(PeerRange),
}

impl Piece {
    pub fn len(&self) -> usize {
        match self {
            Piece::Local(s) => s.len,
            Piece::Peer(p) => p.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The first `n` bytes and the rest.
    fn split_at(self, n: usize) -> (Piece, Piece) {
        match self {
            Piece::Local(s) => (
                Piece::Local(Segment { ptr: s.ptr, len: n }),
                Piece::Local(Segment {
                    // SAFETY: callers keep `n <= s.len`, inside the segment.
                    ptr: unsafe { s.ptr.add(n) },
                    len: s.len - n,
                }),
            ),
            Piece::Peer(p) => (
                Piece::Peer(PeerRange {
                    addr: p.addr,
                    len: n,
                }),
                Piece::Peer(PeerRange {
                    addr: p.addr.wrapping_add(n as u64),
                    len: p.len - n,
                }),
            ),
        }
    }
}

/// A byte stream made of guest-memory segments (and, from a loopback
/// front-end with peer memory, runs of its own memory).
#[derive(Debug, Default)]
pub struct ByteStream {
    segments: Vec<Piece>,
    len: u64,
}

impl ByteStream {
    /// A stream of one segment.
    pub fn from_segment(segment: Segment) -> ByteStream {
        let mut stream = ByteStream::default();
        stream.push(Piece::Local(segment));
        stream
    }

    fn push(&mut self, piece: Piece) {
        self.len += piece.len() as u64;
        self.segments.push(piece);
    }

    /// Whether any byte lies in the peer's memory.
    fn has_peer(&self) -> bool {
        self.segments.iter().any(|p| matches!(p, Piece::Peer(_)))
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Splits off the bytes from `at` on into a second stream.
    /// In place: the stream keeps its vector, and the rest gets one only
    /// when it has pieces (a synchronous call's request and reply streams
    /// are whole, so splitting them allocates nothing).
    fn split_off(&mut self, at: u64) -> ByteStream {
        let mut start = 0u64;
        let mut index = self.segments.len();
        let mut straddling = None;
        for (i, seg) in self.segments.iter().enumerate() {
            let end = start + seg.len() as u64;
            if start >= at {
                index = i;
                break;
            }
            if end > at {
                // `at - start < seg.len()`: the split stays inside the piece.
                straddling = Some((i, (at - start) as usize));
                index = i + 1;
                break;
            }
            start = end;
        }
        let mut rest = ByteStream {
            segments: self.segments.split_off(index),
            len: 0,
        };
        if let Some((i, n)) = straddling {
            let (head, tail) = self.segments[i].split_at(n);
            self.segments[i] = head;
            rest.segments.insert(0, tail);
        }
        rest.len = rest.segments.iter().map(|p| p.len() as u64).sum();
        self.len = self.len.min(at);
        rest
    }

    /// The pieces that cover `data`, in order.
    pub fn pieces(&self, data: DataRef) -> Result<Vec<Piece>, Status> {
        let mut out = Vec::new();
        self.visit(data, |piece| {
            out.push(piece);
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `f` with each piece that covers `data`, in order, and stops
    /// at its first error: what `pieces` lists, without a vector (the
    /// vring thread reads every request and writes every reply this way).
    fn visit(
        &self,
        data: DataRef,
        mut f: impl FnMut(Piece) -> Result<(), Status>,
    ) -> Result<(), Status> {
        let end = data.end().ok_or(Status::INVALID_VALUE)?;
        if end > self.len {
            return Err(Status::INVALID_VALUE);
        }
        let mut start = 0u64;
        for seg in &self.segments {
            let seg_end = start + seg.len() as u64;
            let lo = data.offset.max(start);
            let hi = end.min(seg_end);
            if lo < hi {
                // `lo - start < hi - start <= seg.len()`: inside the piece.
                let (_, tail) = seg.split_at((lo - start) as usize);
                let (piece, _) = tail.split_at((hi - lo) as usize);
                f(piece)?;
            }
            start = seg_end;
            if start >= end {
                break;
            }
        }
        Ok(())
    }

    /// The host pieces that cover `data`, in order; a range that reaches
    /// into the peer's memory is refused (see [`GuestIo::out_slices`]).
    pub fn slices(&self, data: DataRef) -> Result<Vec<Segment>, Status> {
        let mut out = Vec::new();
        self.visit_local(data, |segment| {
            out.push(segment);
            Ok(())
        })?;
        Ok(out)
    }

    /// [`Self::visit`] for host pieces only: a range that reaches into the
    /// peer's memory is refused before `f` sees any of it.
    fn visit_local(
        &self,
        data: DataRef,
        mut f: impl FnMut(Segment) -> Result<(), Status>,
    ) -> Result<(), Status> {
        if self.has_peer() {
            self.visit(data, |piece| match piece {
                Piece::Local(_) => Ok(()),
                Piece::Peer(_) => Err(Status::INVALID_VALUE),
            })?;
        }
        self.visit(data, |piece| match piece {
            Piece::Local(segment) => f(segment),
            Piece::Peer(_) => Err(Status::INVALID_VALUE),
        })
    }

    /// Copies `dst.len()` bytes from `offset` out of guest memory.
    pub fn read(&self, offset: u64, dst: &mut [u8]) -> Result<(), Status> {
        let mut at = 0usize;
        let data = DataRef {
            offset,
            len: dst.len() as u64,
        };
        self.visit_local(data, |seg| {
            // SAFETY: `seg` lies inside live guest memory (see `Segment`);
            // `dst` has room for it because the pieces add up to its
            // length. The guest may change the bytes meanwhile: they are
            // untrusted data either way.
            unsafe { std::ptr::copy_nonoverlapping(seg.ptr, dst[at..].as_mut_ptr(), seg.len) };
            at += seg.len;
            Ok(())
        })
    }

    /// Copies `src` into guest memory at `offset`.
    pub fn write(&self, offset: u64, src: &[u8]) -> Result<(), Status> {
        let mut at = 0usize;
        let data = DataRef {
            offset,
            len: src.len() as u64,
        };
        self.visit_local(data, |seg| {
            // SAFETY: as in `read`, the segment is live guest memory and
            // `src[at..]` holds at least `seg.len` bytes.
            unsafe { std::ptr::copy_nonoverlapping(src[at..].as_ptr(), seg.ptr, seg.len) };
            at += seg.len;
            Ok(())
        })
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
    /// The loopback front-end whose memory peer pieces name, if any.
    pub peer: Option<PeerMemory>,
    /// Copies of out-data read from the peer for executors that need host
    /// pointers; each stays put (its heap block) until the chain ends.
    bounces: std::cell::RefCell<Bounces>,
    /// In-data written by executors into bounce buffers, to be copied to
    /// the pieces it stands for by [`GuestIo::flush_bounced_in`].
    bounced_in: Vec<(Vec<u8>, Vec<Piece>)>,
    /// The guest memory mapping behind the segments, for executors that
    /// keep a segment's address beyond the chain (placed buffers): holding
    /// it keeps the mapping alive whatever memory table comes later.
    pub mem: Option<Arc<GuestRam>>,
}

impl GuestIo {
    /// A chain's bulk streams, without peer memory.
    pub fn new(out: ByteStream, in_: ByteStream) -> GuestIo {
        GuestIo {
            out,
            in_,
            ..GuestIo::default()
        }
    }

    /// Pieces of the out-data stream, host or peer memory.
    pub fn out_pieces(&self, data: DataRef) -> Result<Vec<Piece>, Status> {
        let pieces = self.out.pieces(data)?;
        self.moved_out.set(self.moved_out.get() + data.len);
        Ok(pieces)
    }

    /// Pieces of the in-data stream, host or peer memory, noted as written.
    pub fn in_pieces(&mut self, data: DataRef) -> Result<Vec<Piece>, Status> {
        let pieces = self.in_.pieces(data)?;
        self.in_written = self.in_written.max(data.offset + data.len);
        self.moved_in += data.len;
        Ok(pieces)
    }

    /// Pieces of the out-data stream as host memory: bytes in the peer's
    /// memory are first copied into a bounce buffer.
    pub fn out_slices(&self, data: DataRef) -> Result<Vec<Segment>, Status> {
        let pieces = self.out_pieces(data)?;
        if !pieces.iter().any(|p| matches!(p, Piece::Peer(_))) {
            return Ok(local_segments(pieces));
        }
        let mut bounce = bounce_buffer(data.len)?;
        let len = data.len as usize;
        // SAFETY: the bounce buffer holds at least `len` bytes, this
        // thread's own; the pieces add up to `len`.
        unsafe {
            crate::piece_copy::gather(&pieces, 0, bounce.as_mut_ptr(), len, self.peer.as_ref())
        }?;
        let segment = Segment {
            ptr: bounce.as_mut_ptr(),
            len,
        };
        self.bounces.borrow_mut().0.push(bounce);
        Ok(vec![segment])
    }

    /// Pieces of the in-data stream as host memory, noted as written: a
    /// range reaching into the peer's memory is a bounce buffer, copied
    /// out by [`GuestIo::flush_bounced_in`] once the call has run.
    pub fn in_slices(&mut self, data: DataRef) -> Result<Vec<Segment>, Status> {
        let pieces = self.in_pieces(data)?;
        if !pieces.iter().any(|p| matches!(p, Piece::Peer(_))) {
            return Ok(local_segments(pieces));
        }
        let mut bounce = bounce_buffer(data.len)?;
        let segment = Segment {
            ptr: bounce.as_mut_ptr(),
            len: data.len as usize,
        };
        self.bounced_in.push((bounce, pieces));
        Ok(vec![segment])
    }

    /// Copies in-data the last call wrote into bounce buffers to where it
    /// belongs. Executors finish their device-to-host copies before they
    /// return, so this runs after each call.
    pub fn flush_bounced_in(&mut self) -> Result<(), Status> {
        let bounced = std::mem::take(&mut self.bounced_in);
        let mut result = Ok(());
        for (bounce, pieces) in &bounced {
            result = result.and_then(|()| self.scatter(bounce, pieces));
        }
        keep_spare(bounced.into_iter().map(|(b, _)| b));
        result
    }

    /// Copies a bounce buffer's bytes to the pieces it stands for.
    fn scatter(&self, bounce: &[u8], pieces: &[Piece]) -> Result<(), Status> {
        let len: usize = pieces.iter().map(Piece::len).sum();
        if len > bounce.len() {
            return Err(Status::INVALID_VALUE);
        }
        // SAFETY: `bounce` is readable for `len` bytes (checked above), and
        // the pieces add up to `len`.
        unsafe { crate::piece_copy::scatter(pieces, 0, bounce.as_ptr(), len, self.peer.as_ref()) }
    }

    /// The peer whose memory a peer piece names; a chain only has such
    /// pieces when there is one.
    pub fn peer_memory(&self) -> Result<&PeerMemory, Status> {
        self.peer.as_ref().ok_or(Status::INVALID_VALUE)
    }
}

fn local_segments(pieces: Vec<Piece>) -> Vec<Segment> {
    pieces
        .into_iter()
        .filter_map(|piece| match piece {
            Piece::Local(segment) => Some(segment),
            Piece::Peer(_) => None,
        })
        .collect()
}

/// Largest bounce buffer a thread keeps for the next chain.
const MAX_SPARE_LEN: usize = 256 << 20;

thread_local! {
    /// The bounce buffer of this thread's last chain: a fresh one of many
    /// MiB costs a page fault per page on every call (measured: CUDA
    /// copies through peer memory at a third of the speed), a kept one
    /// none.
    static SPARE_BOUNCE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A buffer of at least `len` initialized bytes (only the first `len`
/// are used), this thread's spare where it is large enough; refused
/// rather than allocated when `len` is larger than [`MAX_BOUNCE_LEN`].
fn bounce_buffer(len: u64) -> Result<Vec<u8>, Status> {
    if len > MAX_BOUNCE_LEN {
        log::warn!("a bulk range of {len} bytes in peer memory is larger than a bounce buffer");
        return Err(Status::OUT_OF_RESOURCES);
    }
    let len = len as usize;
    let spare = SPARE_BOUNCE.with(|spare| std::mem::take(&mut *spare.borrow_mut()));
    if spare.len() >= len {
        return Ok(spare);
    }
    drop(spare);
    // Zeroed by the allocator (fresh pages for large sizes), not written.
    Ok(vec![0u8; len])
}

/// Keeps the largest of `buffers` as this thread's spare.
fn keep_spare(buffers: impl Iterator<Item = Vec<u8>>) {
    if let Some(largest) = buffers
        .filter(|b| b.len() <= MAX_SPARE_LEN)
        .max_by_key(|b| b.len())
    {
        SPARE_BOUNCE.with(|spare| {
            let mut spare = spare.borrow_mut();
            if largest.len() > spare.len() {
                *spare = largest;
            }
        });
    }
}

/// A chain's out-data bounce buffers; the largest becomes the thread's
/// spare when the chain ends.
#[derive(Debug, Default)]
struct Bounces(Vec<Vec<u8>>);

impl Drop for Bounces {
    fn drop(&mut self) {
        keep_spare(std::mem::take(&mut self.0).into_iter());
    }
}

/// A failed copy from or to the peer: its address was not mapped (or not
/// writable), which fails the one call that named it.
pub fn peer_failed(e: std::io::Error) -> Status {
    log::warn!("peer memory: {e}");
    Status::INVALID_VALUE
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
        for (addr, len) in &self.writable {
            crate::guest_ranges::mark_dirty(&self.mem, *addr, *len as usize);
        }
    }
}

fn host_segment(mem: &GuestRam, desc: &Descriptor) -> Result<Segment, ChainError> {
    let out_of_range = || ChainError::OutOfRange {
        addr: desc.addr().0,
        len: desc.len(),
    };
    let ptr = crate::guest_ranges::host_address(mem, desc.addr().0, desc.len() as usize)
        .ok_or_else(out_of_range)?;
    Ok(Segment {
        ptr,
        len: desc.len() as usize,
    })
}

/// Checks a chain and splits it into streams.
/// `mem` is the memory the chain was popped with; descriptors in the peer
/// window are followed only when the worker has a peer
/// ([`crate::peer::peer`]), else they are outside guest memory.
pub fn resolve(start: ChainStart, mem: Arc<GuestRam>) -> Result<ResolvedChain, ChainError> {
    resolve_with_peer(start, mem, crate::peer::peer())
}

/// [`resolve`] with the peer given.
pub fn resolve_with_peer(
    start: ChainStart,
    mem: Arc<GuestRam>,
    peer: Option<PeerMemory>,
) -> Result<ResolvedChain, ChainError> {
    let head = start.head;
    let mut readable = ByteStream::default();
    let mut writable = ByteStream::default();
    let mut writable_ranges = Vec::new();
    let mut count = 0usize;
    let mut last_had_next = false;
    for desc in DescWalk::new(&mem, start) {
        count += 1;
        if count > MAX_CHAIN_DESCRIPTORS {
            return Err(ChainError::TooLong);
        }
        last_had_next = desc.has_next();
        if desc.len() == 0 {
            continue;
        }
        let segment = match desc.addr().0.checked_sub(PEER_WINDOW_BASE) {
            Some(addr) if peer.is_some() => Piece::Peer(PeerRange {
                addr,
                len: desc.len() as usize,
            }),
            _ => Piece::Local(host_segment(&mem, &desc)?),
        };
        if desc.is_write_only() {
            if let Piece::Local(_) = segment {
                writable_ranges.push((desc.addr().0, desc.len()));
            }
            writable.push(segment);
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
            if readable.has_peer() || writable.has_peer() {
                return Err(ChainError::PeerControlStream);
            }
            (request, out, writable, in_)
        }
        Err(_) => {
            if writable.len() < REPLY_HEADER_LEN as u64 {
                return Err(ChainError::NoReplyRoom);
            }
            if writable.has_peer() {
                return Err(ChainError::PeerControlStream);
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
            peer,
            mem: Some(mem.clone()),
            ..GuestIo::new(out, in_)
        },
        mem,
        writable: writable_ranges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream over `buf` cut into pieces of `lens`, a peer range after
    /// them when `peer` says so.
    fn stream(buf: &mut [u8], lens: &[usize], peer: bool) -> ByteStream {
        let mut stream = ByteStream::default();
        let mut at = 0;
        for &len in lens {
            stream.push(Piece::Local(Segment {
                ptr: buf[at..].as_mut_ptr(),
                len,
            }));
            at += len;
        }
        if peer {
            stream.push(Piece::Peer(PeerRange {
                addr: 0x1000,
                len: 8,
            }));
        }
        stream
    }

    fn lens(stream: &ByteStream) -> Vec<usize> {
        stream.segments.iter().map(Piece::len).collect()
    }

    #[test]
    fn split_off_cuts_at_piece_boundaries_and_inside_pieces() {
        let mut buf = vec![0u8; 64];
        for (at, head, tail) in [
            (0u64, vec![], vec![10, 20, 30]),
            (10, vec![10], vec![20, 30]),
            (15, vec![10, 5], vec![15, 30]),
            (59, vec![10, 20, 29], vec![1]),
            (60, vec![10, 20, 30], vec![]),
            (99, vec![10, 20, 30], vec![]),
        ] {
            let mut s = stream(&mut buf, &[10, 20, 30], false);
            let rest = s.split_off(at);
            assert_eq!((lens(&s), lens(&rest)), (head, tail), "split at {at}");
            assert_eq!(s.len(), at.min(60));
            assert_eq!(rest.len(), 60 - at.min(60));
        }
    }

    #[test]
    fn reads_and_writes_span_pieces_and_refuse_peer_ranges_whole() {
        let mut buf: Vec<u8> = (0..64).collect();
        let s = stream(&mut buf, &[10, 20, 30], true);
        let mut got = [0u8; 12];
        s.read(5, &mut got).expect("inside the host pieces");
        assert_eq!(got.to_vec(), (5..17).collect::<Vec<u8>>());
        s.write(8, &[0xaa; 4]).expect("inside the host pieces");
        // A range reaching into the peer's memory moves no byte at all.
        assert_eq!(s.write(56, &[0xbb; 8]), Err(Status::INVALID_VALUE));
        assert_eq!(s.read(0, &mut [0u8; 68]), Err(Status::INVALID_VALUE));
        assert_eq!(
            s.read(0, &mut [0u8; 69]),
            Err(Status::INVALID_VALUE),
            "past the end"
        );
        drop(s);
        assert_eq!(&buf[8..12], &[0xaa; 4]);
        assert_eq!(&buf[56..60], &[56, 57, 58, 59]);
    }
}
