//! Device memory through the virtual memory management API. One address
//! range is reserved per device at start-up (the arena); every guest
//! allocation is physical memory mapped at an address inside it. The
//! addresses a guest holds therefore come from a range the backend chose and
//! recorded, and a restore can map the same addresses on another GPU: it
//! reserves the arena at the recorded base and maps each allocation where it
//! was.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;
use vgpu_protocol::cuda::result;
use vgpu_protocol::Status;

use super::driver::{check, check_call, DriverError};

/// Address space reserved per device for guest allocations.
pub const ARENA_SIZE: u64 = 1 << 40;
/// Where the arena is asked for, so a restore elsewhere likely gets the
/// same addresses (the driver may choose another base; the base is recorded).
pub const ARENA_HINT: u64 = 0x2000_0000_0000;

/// The reserved range and its free space (first fit).
pub struct Arena {
    pub base: u64,
    pub size: u64,
    pub granularity: u64,
    device: sys::CUdevice,
    /// Free ranges: start → length.
    free: Mutex<BTreeMap<u64, u64>>,
}

fn location(device: sys::CUdevice) -> sys::CUmemLocation {
    sys::CUmemLocation {
        type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
        id: device,
    }
}

fn allocation_prop(device: sys::CUdevice) -> sys::CUmemAllocationProp {
    // SAFETY: a plain C struct for which all-zero is a valid value (every
    // enum field has a zero variant, the pointer may be null).
    let mut prop: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    prop.type_ = sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location = location(device);
    prop
}

impl Arena {
    /// Reserves the arena on `device` (CUDA initialized, a context current).
    pub fn reserve(device: sys::CUdevice) -> Result<Arena, DriverError> {
        let prop = allocation_prop(device);
        let mut granularity = 0usize;
        // SAFETY: `prop` and `granularity` are valid for the call.
        check_call("cuMemGetAllocationGranularity", unsafe {
            sys::cuMemGetAllocationGranularity(
                &mut granularity,
                &prop,
                sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM,
            )
        })?;
        let granularity = (granularity as u64).max(4096);
        let mut base: sys::CUdeviceptr = 0;
        // SAFETY: `base` is valid for writes; the range is only reserved.
        check_call("cuMemAddressReserve", unsafe {
            sys::cuMemAddressReserve(&mut base, ARENA_SIZE as usize, 0, ARENA_HINT, 0)
        })?;
        log::info!(
            "CUDA arena: {ARENA_SIZE:#x} bytes at {base:#x} (asked {ARENA_HINT:#x}), granularity {granularity:#x}"
        );
        Ok(Arena {
            base,
            size: ARENA_SIZE,
            granularity,
            device,
            free: Mutex::new(BTreeMap::from([(base, ARENA_SIZE)])),
        })
    }

    pub fn contains(&self, ptr: u64) -> bool {
        ptr >= self.base && ptr - self.base < self.size
    }

    fn take(&self, size: u64) -> Option<u64> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let (&start, &len) = free.iter().find(|(_, &len)| len >= size)?;
        free.remove(&start);
        if len > size {
            free.insert(start + size, len - size);
        }
        Some(start)
    }

    fn give_back(&self, start: u64, size: u64) {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let mut start = start;
        let mut size = size;
        if let Some((&prev, &prev_len)) = free.range(..start).next_back() {
            if prev + prev_len == start {
                free.remove(&prev);
                start = prev;
                size += prev_len;
            }
        }
        if let Some(&next_len) = free.get(&(start + size)) {
            free.remove(&(start + size));
            size += next_len;
        }
        free.insert(start, size);
    }

    /// Maps `size` bytes of new physical memory inside the arena.
    pub fn allocate(self: &Arc<Self>, size: u64) -> Result<Allocation, Status> {
        if size == 0 {
            return Err(Status(result::ERROR_INVALID_VALUE));
        }
        let mapped = size
            .checked_next_multiple_of(self.granularity)
            .ok_or(Status(result::ERROR_OUT_OF_MEMORY))?;
        let addr = self
            .take(mapped)
            .ok_or(Status(result::ERROR_OUT_OF_MEMORY))?;
        self.map_taken(addr, size, mapped)
    }

    /// Takes `[addr, addr+size)` off the free list, if all of it is free.
    fn take_at(&self, addr: u64, size: u64) -> bool {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        let Some((&start, &len)) = free.range(..=addr).next_back() else {
            return false;
        };
        let end = start + len;
        let Some(want_end) = addr.checked_add(size) else {
            return false;
        };
        if want_end > end {
            return false;
        }
        free.remove(&start);
        if addr > start {
            free.insert(start, addr - start);
        }
        if want_end < end {
            free.insert(want_end, end - want_end);
        }
        true
    }

    /// Whether `[addr, addr+size)` could be mapped: inside the arena,
    /// aligned to the granularity and free.
    pub fn is_free(&self, addr: u64, size: u64) -> bool {
        let free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        addr.is_multiple_of(self.granularity)
            && free
                .range(..=addr)
                .next_back()
                .is_some_and(|(&start, &len)| {
                    addr.checked_add(size).is_some_and(|e| e <= start + len)
                })
    }

    /// Maps `size` bytes of new physical memory at `addr` exactly: a
    /// restore gives the guest back the addresses it holds.
    pub fn allocate_at(self: &Arc<Self>, addr: u64, size: u64) -> Result<Allocation, Status> {
        if size == 0 || !addr.is_multiple_of(self.granularity) {
            return Err(Status(result::ERROR_INVALID_VALUE));
        }
        let mapped = size
            .checked_next_multiple_of(self.granularity)
            .ok_or(Status(result::ERROR_OUT_OF_MEMORY))?;
        if !self.contains(addr) || !self.take_at(addr, mapped) {
            return Err(Status(result::ERROR_INVALID_VALUE));
        }
        self.map_taken(addr, size, mapped)
    }

    /// Maps a range just taken off the free list (given back on failure).
    fn map_taken(
        self: &Arc<Self>,
        addr: u64,
        size: u64,
        mapped: u64,
    ) -> Result<Allocation, Status> {
        match self.map(addr, mapped) {
            Ok(handle) => Ok(Allocation {
                addr,
                size,
                mapped,
                handle,
                arena: self.clone(),
                written: Default::default(),
            }),
            Err(status) => {
                self.give_back(addr, mapped);
                Err(status)
            }
        }
    }

    fn map(&self, addr: u64, size: u64) -> Result<sys::CUmemGenericAllocationHandle, Status> {
        let prop = allocation_prop(self.device);
        let mut handle: sys::CUmemGenericAllocationHandle = 0;
        // SAFETY: `handle` and `prop` are valid; `size` is a multiple of
        // the granularity.
        check(unsafe { sys::cuMemCreate(&mut handle, size as usize, &prop, 0) })?;
        // SAFETY: [addr, addr+size) lies inside the reserved arena and is
        // not mapped (it was free); `handle` is a fresh allocation of `size`.
        if let Err(status) = check(unsafe { sys::cuMemMap(addr, size as usize, 0, handle, 0) }) {
            // SAFETY: `handle` is ours and unmapped.
            unsafe { sys::cuMemRelease(handle) };
            return Err(status);
        }
        let access = sys::CUmemAccessDesc {
            location: location(self.device),
            flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
        };
        // SAFETY: the range was just mapped; `access` is valid for the call.
        let granted = check(unsafe { sys::cuMemSetAccess(addr, size as usize, &access, 1) });
        // Physical memory may have belonged to another session: clear it.
        let cleared = granted.and_then(|()| clear(addr, size));
        if let Err(status) = cleared {
            // SAFETY: undo the mapping and the allocation made above.
            unsafe {
                sys::cuMemUnmap(addr, size as usize);
                sys::cuMemRelease(handle);
            }
            return Err(status);
        }
        Ok(handle)
    }
}

/// Zeroes `[addr, addr+size)` and waits for it. Not `cuMemsetD8`: that
/// only queues the fill on the legacy NULL stream, which a program's
/// non-blocking streams do not wait for, so a copy the program then made
/// on one could land first and be zeroed after it (`simpleAtomicIntrinsics`
/// read a lost initial value about one run in ten). A stream of its own
/// waits for nothing of the program's work.
fn clear(addr: u64, size: u64) -> Result<(), Status> {
    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: a context is current (the caller's); `stream` is valid for
    // writes.
    check(unsafe {
        sys::cuStreamCreateWithPriority(
            &mut stream,
            sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
            0,
        )
    })?;
    // SAFETY: the range is mapped read-write for this device; `stream` was
    // just created in the current context.
    let filled = check(unsafe { sys::cuMemsetD8Async(addr, 0, size as usize, stream) })
        // SAFETY: as above.
        .and_then(|()| check(unsafe { sys::cuStreamSynchronize(stream) }));
    // SAFETY: the stream is ours, and idle or broken.
    unsafe { sys::cuStreamDestroy_v2(stream) };
    filled
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: every allocation holds the arena, so none is mapped now.
        unsafe { sys::cuMemAddressFree(self.base, self.size as usize) };
    }
}

/// One guest allocation: what a snapshot records is `addr` and `size`
/// (plus the contents).
pub struct Allocation {
    pub addr: u64,
    /// Bytes the guest asked for.
    pub size: u64,
    /// Bytes mapped (`size` rounded up to the granularity).
    pub mapped: u64,
    handle: sys::CUmemGenericAllocationHandle,
    arena: Arc<Arena>,
    /// When a memcpy or memset last wrote it (kernels: the session's mark).
    pub written: crate::executor::written::WriteMark,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        // SAFETY: the range was mapped by `Arena::map` with this handle and
        // is unmapped once, here. Work still using it has been synchronized
        // by the owner (see `CudaSession::free`).
        unsafe {
            if sys::cuMemUnmap(self.addr, self.mapped as usize) as i32 != 0 {
                log::warn!("cuMemUnmap of {:#x} failed", self.addr);
            }
            sys::cuMemRelease(self.handle);
        }
        self.arena.give_back(self.addr, self.mapped);
    }
}

// SAFETY: the allocation handle and addresses are plain values usable from
// any thread; the arena's free list is behind a mutex.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

/// Device ranges a session may name: its allocations and its modules'
/// globals. Pointers a guest passes (copies, kernel parameters) are checked
/// against them.
#[derive(Debug, Default)]
pub struct Ranges {
    /// start → (length, extent): the bytes the guest asked for, and the
    /// bytes that are the range's own (an allocation's mapped granules).
    map: BTreeMap<u64, (u64, u64)>,
}

impl Ranges {
    /// A range whose own bytes are exactly its `len`.
    pub fn insert(&mut self, start: u64, len: u64) {
        self.insert_mapped(start, len, len);
    }

    /// A range of `len` bytes whose memory extends to `extent` bytes (an
    /// allocation rounded up to the granularity: nobody else's memory).
    pub fn insert_mapped(&mut self, start: u64, len: u64, extent: u64) {
        self.map.insert(start, (len, extent.max(len)));
    }

    pub fn remove(&mut self, start: u64) {
        self.map.remove(&start);
    }

    /// Whether `ptr` points into one range's own memory or just past its
    /// end, as a pointer a kernel is given may: an end iterator (`base +
    /// n`), or a library's workspace pointer computed past a small
    /// buffer's size (cuSPARSE's SpMV does) but inside its granule.
    pub fn bounds(&self, ptr: u64) -> bool {
        match self.map.range(..=ptr).next_back() {
            Some((&start, &(_, extent))) => ptr <= start.saturating_add(extent.max(1)),
            None => false,
        }
    }

    /// The range at or below `ptr`, as (start, length, extent): what a
    /// refusal's log line names.
    pub fn below(&self, ptr: u64) -> Option<(u64, u64, u64)> {
        let (&start, &(len, extent)) = self.map.range(..=ptr).next_back()?;
        Some((start, len, extent))
    }

    /// Whether `[ptr, ptr+len)` lies inside one range (`len` 0: `ptr`
    /// inside): copies and fills stay within the bytes asked for.
    pub fn covers(&self, ptr: u64, len: u64) -> bool {
        match self.map.range(..=ptr).next_back() {
            Some((&start, &(size, _))) => {
                let end = start.saturating_add(size.max(1));
                ptr < end && ptr.checked_add(len).is_some_and(|e| e <= end)
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_list(ranges: &[(u64, u64)]) -> Arena {
        Arena {
            base: 0x1000,
            size: 0x10000,
            granularity: 0x1000,
            device: 0,
            free: Mutex::new(ranges.iter().copied().collect()),
        }
    }

    #[test]
    fn exact_ranges_are_taken_from_the_free_list() {
        let arena = free_list(&[(0x1000, 0x10000)]);
        assert!(arena.is_free(0x3000, 0x2000));
        assert!(!arena.is_free(0x3800, 0x1000), "unaligned");
        assert!(arena.take_at(0x3000, 0x2000));
        assert!(!arena.is_free(0x4000, 0x1000));
        assert!(!arena.take_at(0x2000, 0x2000), "overlaps a taken range");
        assert!(arena.take_at(0x1000, 0x2000));
        assert!(arena.take_at(0x5000, 0xc000));
        assert!(arena.free.lock().unwrap().is_empty());
        arena.give_back(0x3000, 0x2000);
        assert!(arena.is_free(0x3000, 0x2000));
        assert!(!arena.take_at(0x3000, u64::MAX));
        // Nothing maps on drop: the arena was never reserved.
        std::mem::forget(arena);
    }

    #[test]
    fn ranges_cover_only_their_bytes() {
        let mut ranges = Ranges::default();
        ranges.insert(0x1000, 0x100);
        assert!(ranges.covers(0x1000, 0x100));
        assert!(ranges.covers(0x10ff, 1));
        assert!(!ranges.covers(0x10ff, 2));
        assert!(!ranges.covers(0xfff, 1));
        assert!(!ranges.covers(0x1100, 0));
        assert!(!ranges.covers(u64::MAX, 1));
        ranges.remove(0x1000);
        assert!(!ranges.covers(0x1000, 1));
    }

    #[test]
    fn pointers_may_reach_an_allocations_granule_but_copies_may_not() {
        let mut ranges = Ranges::default();
        ranges.insert_mapped(0x20_0000, 0x80, 0x20_0000);
        ranges.insert(0x80_0000, 0x100);
        assert!(ranges.bounds(0x20_0c80), "inside the granule");
        assert!(ranges.bounds(0x40_0000), "its end");
        assert!(!ranges.bounds(0x40_0001));
        assert!(
            !ranges.covers(0x20_0c80, 1),
            "copies keep to the bytes asked for"
        );
        assert!(ranges.bounds(0x80_0100));
        assert!(!ranges.bounds(0x80_0101));
        assert_eq!(ranges.below(0x20_0c80), Some((0x20_0000, 0x80, 0x20_0000)));
        assert_eq!(ranges.below(0x1f_ffff), None);
    }
}
