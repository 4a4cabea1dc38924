//! Copies between a stream of pieces (mapped guest memory, or a loopback
//! peer's memory) and one contiguous host buffer: a bounce buffer, a
//! mapped device buffer or a staging slot. Peer pieces go through
//! `peer_copy`, which splits large ones over threads.

use vgpu_protocol::Status;

use crate::chain::{peer_failed, Piece};
use crate::peer::PeerMemory;

/// Fills `n` bytes at `buf` from the pieces' stream, starting `from` bytes
/// into it. A peer piece without a `peer` is `INVALID_VALUE`; the copy
/// stops at the first piece that fails.
///
/// # Safety
/// `buf` must be valid for writes of `n` bytes and not in use elsewhere
/// until this returns; the stream holds at least `from + n` bytes.
pub unsafe fn gather(
    pieces: &[Piece],
    from: usize,
    buf: *mut u8,
    n: usize,
    peer: Option<&PeerMemory>,
) -> Result<(), Status> {
    // SAFETY: the caller's contract.
    unsafe { copy(pieces, from, buf, n, peer, Way::IntoBuffer) }
}

/// Writes `n` bytes at `buf` into the pieces' stream, starting `from`
/// bytes into it; errors as [`gather`].
///
/// # Safety
/// `buf` must be valid for reads of `n` bytes until this returns; the
/// stream holds at least `from + n` bytes.
pub unsafe fn scatter(
    pieces: &[Piece],
    from: usize,
    buf: *const u8,
    n: usize,
    peer: Option<&PeerMemory>,
) -> Result<(), Status> {
    // SAFETY: the caller's contract; nothing writes through the pointer
    // in this direction.
    unsafe { copy(pieces, from, buf.cast_mut(), n, peer, Way::OutOfBuffer) }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    IntoBuffer,
    OutOfBuffer,
}

/// # Safety
/// As [`gather`] or [`scatter`], by `way`.
unsafe fn copy(
    pieces: &[Piece],
    from: usize,
    buf: *mut u8,
    n: usize,
    peer: Option<&PeerMemory>,
    way: Way,
) -> Result<(), Status> {
    let mut skip = from;
    let mut done = 0usize;
    for piece in pieces {
        if done == n {
            break;
        }
        if skip >= piece.len() {
            skip -= piece.len();
            continue;
        }
        let take = (piece.len() - skip).min(n - done);
        // SAFETY: `done + take <= n`, inside the caller's buffer.
        let here = unsafe { buf.add(done) };
        match piece {
            // SAFETY: the segment is live guest memory of `s.len` bytes and
            // `skip + take <= s.len`.
            Piece::Local(s) => unsafe {
                let there = s.ptr.add(skip);
                match way {
                    Way::IntoBuffer => std::ptr::copy_nonoverlapping(there, here, take),
                    Way::OutOfBuffer => std::ptr::copy_nonoverlapping(here, there, take),
                }
            },
            Piece::Peer(p) => {
                let peer = peer.ok_or(Status::INVALID_VALUE)?;
                let remote = p.addr.wrapping_add(skip as u64);
                // SAFETY: `here` is valid for `take` bytes (above) and
                // reserved for this copy (the caller's contract).
                unsafe {
                    match way {
                        Way::IntoBuffer => crate::peer_copy::read(peer, remote, here, take),
                        Way::OutOfBuffer => crate::peer_copy::write(peer, remote, here, take),
                    }
                }
                .map_err(peer_failed)?;
            }
        }
        done += take;
        skip = 0;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::{PeerRange, Segment};

    fn local(buf: &mut [u8]) -> Piece {
        Piece::Local(Segment {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        })
    }

    #[test]
    fn windows_of_the_stream_cross_piece_boundaries_both_ways() {
        let mut a: Vec<u8> = (0..5).collect();
        let mut b: Vec<u8> = (5..22).collect();
        let mut c: Vec<u8> = (22..30).collect();
        let pieces = [local(&mut a), local(&mut b), local(&mut c)];
        let mut window = [0u8; 12];
        // SAFETY: `window` is writable for 12 bytes; the stream holds 30.
        unsafe { gather(&pieces, 3, window.as_mut_ptr(), 12, None) }.expect("gather");
        assert_eq!(window, [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
        let ones = [0xffu8; 20];
        // SAFETY: `ones` is readable for 20 bytes; the stream holds 30.
        unsafe { scatter(&pieces, 4, ones.as_ptr(), 20, None) }.expect("scatter");
        assert_eq!(a, [0, 1, 2, 3, 0xff]);
        assert!(b.iter().all(|&x| x == 0xff));
        assert_eq!(c, [0xff, 0xff, 24, 25, 26, 27, 28, 29]);
    }

    #[test]
    fn a_peer_piece_without_a_peer_is_refused() {
        let pieces = [Piece::Peer(PeerRange {
            addr: 4096,
            len: 16,
        })];
        let mut buf = [0u8; 16];
        // SAFETY: `buf` is writable for 16 bytes.
        let copied = unsafe { gather(&pieces, 0, buf.as_mut_ptr(), 16, None) };
        assert_eq!(copied, Err(Status::INVALID_VALUE));
    }
}
