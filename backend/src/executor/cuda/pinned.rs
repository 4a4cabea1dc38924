//! Guest memory page-locked with the host driver (`CuHostRegister`): the
//! guest library's page-locked allocations, which the transport names in
//! place. Copies from and to such memory are DMA, like a native program's
//! pinned copies, and copies on a stream may finish after their chain
//! returned: the memory is the program's own, which CUDA forbids it to
//! touch until the stream got there, and the driver holds its pages while
//! it is registered.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_void;

use cudarc::driver::sys;
use vgpu_protocol::cuda::result;
use vgpu_protocol::Status;

use super::driver::check;
use super::session::cuda;
use crate::chain::Segment;

/// `CU_MEMHOSTREGISTER_PORTABLE`: pinned for every context.
const PORTABLE: u32 = 0x01;
/// Blocks one session may register.
pub const MAX_BLOCKS: usize = 4096;
/// Bytes one session may keep page-locked: pinned pages cannot be swapped
/// or moved by the host, so a guest must not pin without bound.
pub const MAX_REGISTERED_BYTES: usize = 4 << 30;

/// A session's registered guest ranges.
#[derive(Default)]
pub struct PinnedGuestMemory {
    /// Host address → length, of every registered range.
    ranges: BTreeMap<usize, usize>,
    /// Guest block → the host ranges registered for it, and whether this
    /// registered them (else they lie in guest memory registered as a
    /// whole, `guest_pins.rs`, and stay registered when the block goes).
    blocks: HashMap<u64, (Vec<usize>, bool)>,
    warnings: crate::ratelimit::WarnLimiter,
}

// SAFETY: only addresses are kept; the driver owns the registrations.
unsafe impl Send for PinnedGuestMemory {}

impl PinnedGuestMemory {
    /// Registers the guest memory under `pieces` as block `block`; pieces
    /// for which `pinned_already` holds are only recorded.
    pub fn register(
        &mut self,
        block: u64,
        pieces: &[Segment],
        pinned_already: impl Fn(&Segment) -> bool,
    ) -> Result<(), Status> {
        if self.blocks.contains_key(&block) || self.blocks.len() >= MAX_BLOCKS {
            return Err(cuda(result::ERROR_INVALID_VALUE));
        }
        if pieces
            .iter()
            .any(|p| p.len == 0 || self.overlaps(p.ptr as usize, p.len))
        {
            return Err(cuda(result::ERROR_HOST_MEMORY_ALREADY_REGISTERED));
        }
        let held: usize = self.ranges.values().sum();
        let asked = pieces
            .iter()
            .map(|p| p.len)
            .fold(0usize, usize::saturating_add);
        if held.saturating_add(asked) > MAX_REGISTERED_BYTES {
            crate::guest_warn!(
                self.warnings,
                "a guest asked to page-lock more than {MAX_REGISTERED_BYTES} bytes"
            );
            return Err(cuda(result::ERROR_OUT_OF_MEMORY));
        }
        if pieces.iter().all(&pinned_already) {
            for piece in pieces {
                self.ranges.insert(piece.ptr as usize, piece.len);
            }
            let starts = pieces.iter().map(|p| p.ptr as usize).collect();
            self.blocks.insert(block, (starts, false));
            return Ok(());
        }
        let mut done = Vec::with_capacity(pieces.len());
        for piece in pieces {
            // SAFETY: `piece` is mapped guest memory (resolved from the
            // chain); the driver pins its pages until unregistered.
            let code =
                unsafe { sys::cuMemHostRegister_v2(piece.ptr as *mut c_void, piece.len, PORTABLE) };
            if let Err(status) = check(code) {
                crate::guest_warn!(
                    self.warnings,
                    "page-locking {} bytes of guest memory failed: {status}",
                    piece.len
                );
                for &start in &done {
                    Self::unregister_range(start);
                }
                return Err(status);
            }
            done.push(piece.ptr as usize);
        }
        for piece in pieces {
            self.ranges.insert(piece.ptr as usize, piece.len);
        }
        self.blocks.insert(block, (done, true));
        Ok(())
    }

    /// Unregisters block `block`; the caller waited for work using it.
    pub fn unregister(&mut self, block: u64) -> Result<(), Status> {
        let (starts, owned) = self
            .blocks
            .remove(&block)
            .ok_or_else(|| cuda(result::ERROR_HOST_MEMORY_NOT_REGISTERED))?;
        for start in starts {
            self.ranges.remove(&start);
            if owned {
                Self::unregister_range(start);
            }
        }
        Ok(())
    }

    /// The host address of the aligned 4-byte word at `offset` in the
    /// first range of block `block`, if the word lies there.
    pub fn word_in_block(&self, block: u64, offset: u64) -> Option<usize> {
        let (starts, _) = self.blocks.get(&block)?;
        let start = *starts.first()?;
        let len = *self.ranges.get(&start)?;
        let offset = usize::try_from(offset).ok()?;
        let at = start.checked_add(offset)?;
        (at % 4 == 0 && offset.checked_add(4)? <= len).then_some(at)
    }

    fn unregister_range(start: usize) {
        // SAFETY: `start` was registered by `register` and not since
        // unregistered.
        unsafe { sys::cuMemHostUnregister(start as *mut c_void) };
    }

    fn overlaps(&self, start: usize, len: usize) -> bool {
        let end = start.saturating_add(len);
        self.ranges
            .range(..end)
            .next_back()
            .is_some_and(|(&s, &l)| s + l > start)
    }

    /// Whether every piece lies inside one registered range.
    pub fn covers(&self, pieces: &[Segment]) -> bool {
        !pieces.is_empty()
            && pieces.iter().all(|p| {
                let start = p.ptr as usize;
                self.ranges
                    .range(..=start)
                    .next_back()
                    .is_some_and(|(&s, &l)| start + p.len <= s + l)
            })
    }

    /// Unregisters everything (the session synchronized its contexts).
    pub fn clear(&mut self) {
        for (starts, owned) in std::mem::take(&mut self.blocks).into_values() {
            for start in starts {
                if owned {
                    Self::unregister_range(start);
                }
            }
        }
        self.ranges.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(ptr: usize, len: usize) -> Segment {
        Segment {
            ptr: ptr as *mut u8,
            len,
        }
    }

    #[test]
    fn covers_only_pieces_inside_one_range() {
        let mut pinned = PinnedGuestMemory::default();
        pinned.ranges.insert(0x1000, 0x2000);
        pinned.ranges.insert(0x3000, 0x1000);
        assert!(pinned.covers(&[segment(0x1000, 0x2000)]));
        assert!(pinned.covers(&[segment(0x1800, 0x10), segment(0x3000, 0x1000)]));
        assert!(
            !pinned.covers(&[segment(0x2800, 0x1000)]),
            "spans two ranges"
        );
        assert!(!pinned.covers(&[segment(0x800, 0x10)]));
        assert!(!pinned.covers(&[segment(0x4000, 1)]));
        assert!(!pinned.covers(&[]));
    }

    #[test]
    fn a_signal_word_must_lie_aligned_in_a_block_of_the_session() {
        let mut pinned = PinnedGuestMemory::default();
        pinned
            .register(7, &[segment(0x1000, 0x1000)], |_| true)
            .expect("recorded");
        assert_eq!(pinned.word_in_block(7, 0), Some(0x1000));
        assert_eq!(pinned.word_in_block(7, 0xffc), Some(0x1ffc));
        // Forged by a guest: past the block, straddling its end, misaligned,
        // overflowing, or naming a block this session never registered.
        assert_eq!(pinned.word_in_block(7, 0x1000), None);
        assert_eq!(pinned.word_in_block(7, 0xffe), None);
        assert_eq!(pinned.word_in_block(7, 2), None);
        assert_eq!(pinned.word_in_block(7, u64::MAX), None);
        assert_eq!(pinned.word_in_block(8, 0), None);
    }

    #[test]
    fn blocks_in_memory_pinned_already_are_recorded_not_registered() {
        // No driver is loaded here: a registration would fail, so success
        // shows none was attempted.
        let mut pinned = PinnedGuestMemory::default();
        let pieces = [segment(0x10_000, 0x1000), segment(0x20_000, 0x2000)];
        assert_eq!(pinned.register(7, &pieces, |_| true), Ok(()));
        assert!(pinned.covers(&pieces));
        assert_eq!(
            pinned.register(8, &[segment(0x10_800, 0x10)], |_| true),
            Err(cuda(result::ERROR_HOST_MEMORY_ALREADY_REGISTERED))
        );
        assert_eq!(pinned.unregister(7), Ok(()));
        assert!(!pinned.covers(&pieces));
        assert_eq!(
            pinned.unregister(7),
            Err(cuda(result::ERROR_HOST_MEMORY_NOT_REGISTERED))
        );
        assert_eq!(pinned.register(9, &pieces, |_| true), Ok(()));
        pinned.clear();
        assert!(!pinned.covers(&pieces));
    }

    #[test]
    fn overlap_is_found_on_either_side() {
        let mut pinned = PinnedGuestMemory::default();
        pinned.ranges.insert(0x1000, 0x1000);
        assert!(pinned.overlaps(0x1fff, 1));
        assert!(pinned.overlaps(0x800, 0x900));
        assert!(!pinned.overlaps(0x2000, 0x1000));
        assert!(!pinned.overlaps(0x0, 0x1000));
    }
}
