//! Transfers through two page-locked staging slots, the host copy of one
//! chunk running while the device moves the other.
//!
//! A loopback peer's pages cannot be handed to a GPU driver (they belong to
//! another process), so their bytes go through the worker's own
//! page-locked staging: one CPU copy (`peer_copy`, striped over threads)
//! and one DMA per chunk. Done one after the other, a transfer costs the
//! sum of the two; with two slots the copy of chunk k+1 overlaps the DMA
//! of chunk k, as the driver's own pageable path overlaps its staging, so
//! a transfer costs about the slower of the two.
//!
//! Executors provide the slots and the device side ([`Slots`]); this module
//! walks a stream of pieces through them.

use vgpu_protocol::Status;

use super::staged_profile::{timed, Step, Way};
use crate::chain::Piece;
use crate::peer::PeerMemory;

/// Two staging slots and the device moves between them and one device
/// range.
pub trait Slots {
    /// Bytes one slot holds.
    fn slot_len(&self) -> usize;
    /// The slot a transfer starts with: the one not started last, so that
    /// back-to-back transfers need not wait for each other's last move.
    fn first_slot(&self) -> usize;
    /// Where slot `slot` (0 or 1) lies.
    fn slot_ptr(&self, slot: usize) -> *mut u8;
    /// Waits until the device's last move from or into `slot` finished.
    fn wait(&mut self, slot: usize) -> Result<(), Status>;
    /// Starts moving `len` bytes between `slot` and the device range,
    /// `at` bytes into it: into the device when `to_device`, else out.
    fn start(&mut self, slot: usize, at: usize, len: usize, to_device: bool) -> Result<(), Status>;
}

/// Bytes moved per chunk of a `total`-byte transfer: as much as a slot
/// holds. Smaller chunks would overlap more of the copy with the DMA, but
/// each chunk's copy is striped over threads by the peer's 2 MiB regions
/// (`peer_copy`), and a chunk of few regions keeps threads idle: measured
/// on the H100, a 4 MiB copy took longer in two chunks than in one.
fn chunk_for(total: usize, slot_len: usize) -> usize {
    total.clamp(1, slot_len)
}

/// Sends the bytes of `pieces` to the device range through `slots`. The
/// device moves may still run when this returns (`Slots::wait` before the
/// slots are touched again).
pub fn to_device(
    slots: &mut impl Slots,
    pieces: &[Piece],
    peer: Option<&PeerMemory>,
) -> Result<(), Status> {
    let begun = crate::vgpu::profile::start();
    let total: usize = pieces.iter().map(Piece::len).sum();
    let chunk = chunk_for(total, slots.slot_len());
    let mut at = 0usize;
    let mut slot = slots.first_slot();
    while at < total {
        let n = (total - at).min(chunk);
        timed(Way::ToDevice, Step::Wait, || slots.wait(slot))?;
        let staging = slots.slot_ptr(slot);
        // SAFETY: the slot holds `chunk >= n` bytes and the device is done
        // with it (waited above).
        timed(Way::ToDevice, Step::Copy, || unsafe {
            crate::piece_copy::gather(pieces, at, staging, n, peer)
        })?;
        timed(Way::ToDevice, Step::Start, || {
            slots.start(slot, at, n, true)
        })?;
        at += n;
        slot ^= 1;
    }
    if let Some(begun) = begun {
        super::staged_profile::note_transfer(Way::ToDevice, total, begun.elapsed());
    }
    Ok(())
}

/// Fills `pieces` from the device range through `slots`; every byte has
/// landed when this returns `Ok`.
pub fn to_host(
    slots: &mut impl Slots,
    pieces: &[Piece],
    peer: Option<&PeerMemory>,
) -> Result<(), Status> {
    let begun = crate::vgpu::profile::start();
    let total: usize = pieces.iter().map(Piece::len).sum();
    let chunk = chunk_for(total, slots.slot_len());
    // The chunk the device is filling, not yet copied out: (slot, at, n).
    let mut filling: Option<(usize, usize, usize)> = None;
    let mut at = 0usize;
    let mut slot = slots.first_slot();
    while at < total || filling.is_some() {
        let next = if at < total {
            let n = (total - at).min(chunk);
            timed(Way::ToHost, Step::Wait, || slots.wait(slot))?;
            timed(Way::ToHost, Step::Start, || slots.start(slot, at, n, false))?;
            Some((slot, at, n))
        } else {
            None
        };
        if let Some((ready, from, n)) = filling {
            timed(Way::ToHost, Step::Wait, || slots.wait(ready))?;
            let staging = slots.slot_ptr(ready);
            // SAFETY: the device finished writing the slot's `n <= chunk`
            // bytes (waited above) and does not touch it again until a
            // later `start` on it.
            timed(Way::ToHost, Step::Copy, || unsafe {
                crate::piece_copy::scatter(pieces, from, staging, n, peer)
            })?;
        }
        filling = next;
        if let Some((_, from, n)) = next {
            at = from + n;
            slot ^= 1;
        }
    }
    if let Some(begun) = begun {
        super::staged_profile::note_transfer(Way::ToHost, total, begun.elapsed());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::Segment;

    /// Host memory standing in for the device, moves done at once but
    /// checked against the slot protocol: a slot is never refilled or
    /// re-targeted before it was waited for.
    struct FakeDevice {
        device: Vec<u8>,
        slots: [Vec<u8>; 2],
        busy: [bool; 2],
        next: usize,
        moves: usize,
    }

    impl Slots for FakeDevice {
        fn slot_len(&self) -> usize {
            self.slots[0].len()
        }
        fn first_slot(&self) -> usize {
            self.next
        }
        fn slot_ptr(&self, slot: usize) -> *mut u8 {
            self.slots[slot].as_ptr().cast_mut()
        }
        fn wait(&mut self, slot: usize) -> Result<(), Status> {
            self.busy[slot] = false;
            Ok(())
        }
        fn start(
            &mut self,
            slot: usize,
            at: usize,
            len: usize,
            to_device: bool,
        ) -> Result<(), Status> {
            assert!(!self.busy[slot], "slot {slot} reused before its wait");
            self.busy[slot] = true;
            self.next = slot ^ 1;
            self.moves += 1;
            if to_device {
                self.device[at..at + len].copy_from_slice(&self.slots[slot][..len]);
            } else {
                self.slots[slot][..len].copy_from_slice(&self.device[at..at + len]);
            }
            Ok(())
        }
    }

    fn pieces_of(bufs: &mut [Vec<u8>]) -> Vec<Piece> {
        bufs.iter_mut()
            .map(|b| {
                Piece::Local(Segment {
                    ptr: b.as_mut_ptr(),
                    len: b.len(),
                })
            })
            .collect()
    }

    #[test]
    fn chunks_cross_piece_boundaries_both_ways() {
        let mut parts = vec![vec![0u8; 5], vec![0u8; 17], vec![0u8; 1], vec![0u8; 30]];
        let total: usize = parts.iter().map(Vec::len).sum();
        let mut fake = FakeDevice {
            device: (0..total).map(|i| i as u8 ^ 0x5a).collect(),
            slots: [vec![0; 8], vec![0; 8]],
            busy: [false; 2],
            next: 0,
            moves: 0,
        };
        let pieces = pieces_of(&mut parts);
        to_host(&mut fake, &pieces, None).expect("to host");
        let joined: Vec<u8> = parts.concat();
        assert_eq!(joined, fake.device);
        assert_eq!(fake.moves, total.div_ceil(8));
        assert_eq!(fake.next, total.div_ceil(8) % 2, "slots taken in turn");

        let mut fresh = FakeDevice {
            device: vec![0; total],
            slots: [vec![0; 8], vec![0; 8]],
            busy: [false; 2],
            next: 0,
            moves: 0,
        };
        to_device(&mut fresh, &pieces, None).expect("to device");
        assert_eq!(fresh.device, joined);
    }

    #[test]
    fn chunks_fill_a_slot() {
        assert_eq!(chunk_for(4096, 8 << 20), 4096);
        assert_eq!(chunk_for(4 << 20, 8 << 20), 4 << 20);
        assert_eq!(chunk_for(256 << 20, 8 << 20), 8 << 20);
    }

    #[test]
    fn a_peer_piece_without_a_peer_is_refused() {
        let mut fake = FakeDevice {
            device: vec![0; 16],
            slots: [vec![0; 8], vec![0; 8]],
            busy: [false; 2],
            next: 0,
            moves: 0,
        };
        let pieces = [Piece::Peer(crate::chain::PeerRange {
            addr: 4096,
            len: 16,
        })];
        assert_eq!(
            to_device(&mut fake, &pieces, None),
            Err(Status::INVALID_VALUE)
        );
    }
}
