//! Guest-memory ranges looked up straight in the memory table, for the
//! vring thread's per-chain work. `vm_memory`'s `get_slice` and `read_obj`
//! clone and drop the region's dirty-bitmap handle (an `Arc`) on every
//! access; a chain touches guest memory for each descriptor, each reply
//! and each dirty mark, and those reference counts were a visible share
//! of a synchronous call's cost. Here a range is found by the region
//! table's own binary search and used through the region's borrowed
//! bitmap: the same checks, no reference counting.

use vhost_user_backend::bitmap::BitmapMmapRegion;
use vm_memory::bitmap::Bitmap;
use vm_memory::{GuestAddress, GuestMemoryBackend, GuestMemoryRegion, GuestRegionMmap, MmapRegion};

use crate::chain::GuestRam;

/// The region of `mem` that holds all of `[addr, addr + len)`, and the
/// range's offset in it; `None` when the range leaves guest memory or
/// spans two regions (as `GuestMemory::get_slice` refuses it).
fn region_of(
    mem: &GuestRam,
    addr: u64,
    len: usize,
) -> Option<(&GuestRegionMmap<BitmapMmapRegion>, usize)> {
    let region = mem.find_region(GuestAddress(addr))?;
    let offset = addr.checked_sub(region.start_addr().0)?;
    let end = offset.checked_add(len as u64)?;
    if end > region.len() {
        return None;
    }
    Some((region, usize::try_from(offset).ok()?))
}

/// The host address of the `len` guest bytes at `addr`, which lie in one
/// mapped region; `None` otherwise. The address stays valid while `mem`
/// (the mapping) lives.
pub fn host_address(mem: &GuestRam, addr: u64, len: usize) -> Option<*mut u8> {
    let (region, offset) = region_of(mem, addr, len)?;
    // `offset + len <= region.len()`: the pointer stays inside the mapping.
    Some(MmapRegion::as_ptr(region).wrapping_add(offset))
}

/// Whether the host range `[host, host + len)` lies in one region of
/// `mem`'s mapping (an address kept from an earlier chain may not, after
/// a new memory table).
pub fn maps_host_range(mem: &GuestRam, host: usize, len: usize) -> bool {
    mem.iter().any(|region| {
        let start = MmapRegion::as_ptr(region) as usize;
        let region_len = region.len() as usize;
        host.checked_sub(start)
            .is_some_and(|offset| offset.checked_add(len).is_some_and(|end| end <= region_len))
    })
}

/// Marks the pages of `[addr, addr + len)` dirty in the front-end's log,
/// exactly as a write through `vm_memory` would (nothing while the
/// front-end does not log). A range outside one region is left as a
/// `get_slice` would leave it: unmarked, since nothing was written there.
pub fn mark_dirty(mem: &GuestRam, addr: u64, len: usize) {
    if let Some((region, offset)) = region_of(mem, addr, len) {
        // The region's own bitmap (not a clone of it): it reads the log
        // under the lock `SET_LOG_BASE` takes to install one, so a log
        // enabled while the chain ran is honoured here.
        MmapRegion::bitmap(region).mark_dirty(offset, len);
    }
}
