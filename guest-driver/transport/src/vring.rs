//! Driver side of a virtio split ring (virtio 1.2, section 2.7): the
//! descriptor table, the available ring and the used ring, laid out in a
//! shared memory area the device also maps.
//!
//! The ring is written through a host pointer and described to the device by
//! guest-physical addresses. Bookkeeping (the free list, which descriptors
//! belong to which chain) is kept in this process only, so a device that
//! scribbles over the descriptor table cannot corrupt it.
//!
//! Two levels of API:
//! - [`SplitRing::add_chain`] + [`SplitRing::publish`] + [`SplitRing::pop_used`]:
//!   what a well-behaved driver does;
//! - the raw part ([`SplitRing::alloc_descriptors`],
//!   [`SplitRing::write_descriptor`], [`SplitRing::publish`] with any head,
//!   [`SplitRing::set_avail_idx_raw`]): for tests that feed a device
//!   malformed chains (loops, out-of-range addresses, a readable descriptor
//!   after a writable one, bogus heads).

use std::sync::atomic::{fence, AtomicU16, Ordering};

/// Descriptor flag: the chain continues at `next`.
pub const VRING_DESC_F_NEXT: u16 = 1;
/// Descriptor flag: the device writes this buffer (otherwise it reads it).
pub const VRING_DESC_F_WRITE: u16 = 2;
/// Descriptor flag: the buffer is a table of indirect descriptors.
pub const VRING_DESC_F_INDIRECT: u16 = 4;

/// Bytes of one descriptor in the table.
pub const DESCRIPTOR_LEN: usize = 16;
/// Largest queue size a split ring may have.
pub const MAX_QUEUE_SIZE: u16 = 32768;
/// Alignment this module gives the used ring (and asks of the base).
pub const RING_ALIGN: usize = 4096;

/// Why a ring operation was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("queue size {0} is not a power of two between 1 and 32768")]
    BadQueueSize(u16),
    #[error("ring base is not aligned to {RING_ALIGN} bytes")]
    Misaligned,
    #[error("a chain needs at least one descriptor")]
    EmptyChain,
    #[error("chain of {needed} descriptors, {free} free")]
    NoFreeDescriptors { needed: usize, free: usize },
    #[error("descriptor index {index} is outside a table of {size}")]
    IndexOutOfRange { index: u16, size: u16 },
}

/// One descriptor of a chain built by [`SplitRing::add_chain`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DescSpec {
    /// Guest-physical address of the buffer.
    pub addr: u64,
    pub len: u32,
    /// The device writes this buffer.
    pub writable: bool,
}

/// A descriptor exactly as it sits in the table, for the raw API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Descriptor {
    pub addr: u64,
    pub len: u32,
    /// `VRING_DESC_F_*` bits, any combination.
    pub flags: u16,
    pub next: u16,
}

/// One used-ring element as the device wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsedElem {
    /// The head the device returned (a hostile device may return anything).
    pub id: u32,
    /// Bytes the device says it wrote into the writable part of the chain.
    pub len: u32,
}

/// Byte offsets of the three parts of a ring from its base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingLayout {
    pub size: u16,
    pub desc: usize,
    pub avail: usize,
    pub used: usize,
    /// Bytes the whole ring occupies, rounded up to `RING_ALIGN`.
    pub total: usize,
}

/// Set by the device in the used ring's flags: "do not kick me".
const VRING_USED_F_NO_NOTIFY: u16 = 1;

impl RingLayout {
    /// The legacy-style layout: descriptor table, available ring right after
    /// it, used ring at the next `RING_ALIGN` boundary.
    pub fn new(size: u16) -> Result<RingLayout, RingError> {
        if size == 0 || !size.is_power_of_two() || size > MAX_QUEUE_SIZE {
            return Err(RingError::BadQueueSize(size));
        }
        let n = usize::from(size);
        let desc = 0;
        let avail = desc + DESCRIPTOR_LEN * n;
        // flags, idx, ring[n], used_event
        let avail_end = avail + 4 + 2 * n + 2;
        let used = avail_end.next_multiple_of(RING_ALIGN);
        // flags, idx, ring[n] of {id: u32, len: u32}, avail_event
        let used_end = used + 4 + 8 * n + 2;
        Ok(RingLayout {
            size,
            desc,
            avail,
            used,
            total: used_end.next_multiple_of(RING_ALIGN),
        })
    }
}

/// What a descriptor is used for, as far as this driver knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Free,
    /// Part of a chain made by `add_chain`; freed when its head is used.
    Chain,
    /// Handed out by `alloc_descriptors`; freed by `release_descriptors`.
    Raw,
}

/// A driver-side split ring over shared memory.
pub struct SplitRing {
    base: *mut u8,
    gpa: u64,
    layout: RingLayout,
    owner: Vec<Owner>,
    free: Vec<u16>,
    /// Descriptors of each in-flight chain, indexed by head.
    chains: Vec<Vec<u16>>,
    /// The list of the last chain returned, emptied, for the next one: a
    /// chain costs no allocation.
    spare: Vec<u16>,
    /// Next available-ring index to publish.
    avail_idx: u16,
    /// Next used-ring index to consume.
    last_used_idx: u16,
}

impl std::fmt::Debug for SplitRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SplitRing")
            .field("gpa", &format_args!("{:#x}", self.gpa))
            .field("size", &self.layout.size)
            .field("free", &self.free.len())
            .field("avail_idx", &self.avail_idx)
            .field("last_used_idx", &self.last_used_idx)
            .finish()
    }
}

// SAFETY: the ring owns its view of the shared area (the constructor's
// contract); the raw pointer is only dereferenced through `&self`/`&mut self`
// methods, so moving the ring to another thread is as safe as moving a `Vec`.
unsafe impl Send for SplitRing {}

impl SplitRing {
    /// Sets up a ring of `size` entries at `base` (host pointer), which the
    /// device knows as guest-physical address `gpa`. Zeroes the whole layout.
    ///
    /// # Safety
    ///
    /// `base` must be valid for reads and writes of `RingLayout::new(size)?.total`
    /// bytes for as long as the ring lives, and nothing but this ring and the
    /// device may access that memory meanwhile.
    pub unsafe fn new(base: *mut u8, gpa: u64, size: u16) -> Result<SplitRing, RingError> {
        let layout = RingLayout::new(size)?;
        if base.align_offset(RING_ALIGN) != 0 {
            return Err(RingError::Misaligned);
        }
        // SAFETY: the caller guarantees `layout.total` writable bytes at `base`.
        unsafe { std::ptr::write_bytes(base, 0, layout.total) };
        let n = usize::from(size);
        Ok(SplitRing {
            base,
            gpa,
            layout,
            owner: vec![Owner::Free; n],
            // Popped from the end: hand out 0, 1, 2, ... first.
            free: (0..size).rev().collect(),
            chains: vec![Vec::new(); n],
            spare: Vec::new(),
            avail_idx: 0,
            last_used_idx: 0,
        })
    }

    pub fn size(&self) -> u16 {
        self.layout.size
    }

    pub fn layout(&self) -> RingLayout {
        self.layout
    }

    /// Guest-physical address of the descriptor table.
    pub fn desc_table_gpa(&self) -> u64 {
        self.gpa + self.layout.desc as u64
    }

    /// Guest-physical address of the available ring.
    pub fn avail_ring_gpa(&self) -> u64 {
        self.gpa + self.layout.avail as u64
    }

    /// Guest-physical address of the used ring.
    pub fn used_ring_gpa(&self) -> u64 {
        self.gpa + self.layout.used as u64
    }

    /// Descriptors neither in a chain nor handed out raw.
    pub fn num_free(&self) -> usize {
        self.free.len()
    }

    /// The available-ring index the next `publish` uses.
    pub fn avail_idx(&self) -> u16 {
        self.avail_idx
    }

    /// The used-ring index the next `pop_used` reads.
    pub fn last_used_idx(&self) -> u16 {
        self.last_used_idx
    }

    /// Writes a chain into free descriptors, linked in order; returns its
    /// head. The chain is not visible to the device until `publish(head)`.
    pub fn add_chain(&mut self, chain: &[DescSpec]) -> Result<u16, RingError> {
        if chain.is_empty() {
            return Err(RingError::EmptyChain);
        }
        let indices = self.take_free(chain.len(), Owner::Chain)?;
        for (i, (spec, &index)) in chain.iter().zip(&indices).enumerate() {
            let next = indices.get(i + 1).copied();
            let mut flags = if spec.writable { VRING_DESC_F_WRITE } else { 0 };
            if next.is_some() {
                flags |= VRING_DESC_F_NEXT;
            }
            let desc = Descriptor {
                addr: spec.addr,
                len: spec.len,
                flags,
                next: next.unwrap_or(0),
            };
            self.store_descriptor(index, desc);
        }
        let head = indices[0];
        self.chains[usize::from(head)] = indices;
        Ok(head)
    }

    /// Makes `head` available to the device: writes the available-ring entry,
    /// then (after a release barrier) the new available index. Any `head` is
    /// accepted, including one out of range or not written (raw use).
    pub fn publish(&mut self, head: u16) {
        let slot = usize::from(self.avail_idx % self.layout.size);
        let entry = self.layout.avail + 4 + 2 * slot;
        // SAFETY: `entry` is inside the available ring of this layout.
        unsafe { self.update_u16(entry, head) };
        self.avail_idx = self.avail_idx.wrapping_add(1);
        // The entry must be visible before the index that covers it.
        fence(Ordering::Release);
        self.avail_idx_atomic()
            .store(self.avail_idx.to_le(), Ordering::Release);
        // The device may read its notification-suppression fields next; the
        // index store must be visible before the driver decides to kick.
        fence(Ordering::SeqCst);
    }

    /// Whether the device asked to be notified of what was published since
    /// `old_avail` (call after [`SplitRing::publish`], which fences): with
    /// `VIRTIO_RING_F_EVENT_IDX`, when the new entries pass its
    /// `avail_event`; without, unless it set `VRING_USED_F_NO_NOTIFY`. A
    /// device that is polling the ring asks for nothing.
    pub fn device_wants_kick(&self, old_avail: u16, event_idx: bool) -> bool {
        if event_idx {
            let at = self.layout.used + 4 + 8 * usize::from(self.layout.size);
            // SAFETY: `at` is the avail_event field of this layout's used ring.
            let event = unsafe { self.read_u16(at) };
            // virtio's vring_need_event: did the index step over `event`?
            self.avail_idx.wrapping_sub(event).wrapping_sub(1)
                < self.avail_idx.wrapping_sub(old_avail)
        } else {
            // SAFETY: `used` is the used ring's flags field.
            let flags = unsafe { self.read_u16(self.layout.used) };
            flags & VRING_USED_F_NO_NOTIFY == 0
        }
    }

    /// Writes `used_event` (meaningful with `VIRTIO_RING_F_EVENT_IDX`) so the
    /// device notifies as soon as it returns the next used element. Harmless
    /// without that feature.
    pub fn arm_used_event(&mut self) {
        let at = self.layout.avail + 4 + 2 * usize::from(self.layout.size);
        // SAFETY: `at` is the used_event field of this layout's available ring.
        unsafe { self.write_u16(at, self.last_used_idx) };
        fence(Ordering::SeqCst);
    }

    /// Whether the device returned an element not popped yet.
    pub fn has_used(&self) -> bool {
        u16::from_le(self.used_idx_atomic().load(Ordering::Acquire)) != self.last_used_idx
    }

    /// The next used element, if the device returned one. Frees the chain's
    /// descriptors when the id is the head of a chain made by `add_chain`.
    pub fn pop_used(&mut self) -> Option<UsedElem> {
        let used_idx = u16::from_le(self.used_idx_atomic().load(Ordering::Acquire));
        if used_idx == self.last_used_idx {
            return None;
        }
        // The element must be read after the index that covers it.
        fence(Ordering::Acquire);
        let slot = usize::from(self.last_used_idx % self.layout.size);
        let at = self.layout.used + 4 + 8 * slot;
        // SAFETY: `at..at + 8` is inside the used ring of this layout.
        let (id, len) = unsafe { (self.read_u32(at), self.read_u32(at + 4)) };
        self.last_used_idx = self.last_used_idx.wrapping_add(1);
        if let Ok(head) = u16::try_from(id) {
            if usize::from(head) < self.chains.len() {
                let mut chain = std::mem::take(&mut self.chains[usize::from(head)]);
                for &index in &chain {
                    self.owner[usize::from(index)] = Owner::Free;
                    self.free.push(index);
                }
                chain.clear();
                self.spare = chain;
            }
        }
        Some(UsedElem { id, len })
    }

    // ---- raw API, for tests that misbehave on purpose ---------------------

    /// Takes `n` free descriptors for the caller to fill with
    /// `write_descriptor`; they stay taken until `release_descriptors`.
    pub fn alloc_descriptors(&mut self, n: usize) -> Result<Vec<u16>, RingError> {
        if n == 0 {
            return Err(RingError::EmptyChain);
        }
        self.take_free(n, Owner::Raw)
    }

    /// Returns descriptors taken by `alloc_descriptors`; other indices are
    /// ignored (so a double release is harmless).
    pub fn release_descriptors(&mut self, indices: &[u16]) {
        for &index in indices {
            if let Some(owner) = self.owner.get_mut(usize::from(index)) {
                if *owner == Owner::Raw {
                    *owner = Owner::Free;
                    self.free.push(index);
                }
            }
        }
    }

    /// Writes any descriptor value at any index of the table (arbitrary
    /// address, length, flags, next), even one in use.
    pub fn write_descriptor(&mut self, index: u16, desc: Descriptor) -> Result<(), RingError> {
        self.check_index(index)?;
        self.store_descriptor(index, desc);
        Ok(())
    }

    /// Reads a descriptor back from the table.
    pub fn read_descriptor(&self, index: u16) -> Result<Descriptor, RingError> {
        self.check_index(index)?;
        let at = self.layout.desc + DESCRIPTOR_LEN * usize::from(index);
        // SAFETY: `index < size`, so the 16 bytes at `at` are in the table.
        unsafe {
            Ok(Descriptor {
                addr: self.read_u64(at),
                len: self.read_u32(at + 8),
                flags: self.read_u16(at + 12),
                next: self.read_u16(at + 14),
            })
        }
    }

    /// Stores `idx` as the available index without writing ring entries
    /// (e.g. to claim more entries than the queue has). Later `publish`
    /// calls continue from `idx`.
    pub fn set_avail_idx_raw(&mut self, idx: u16) {
        self.avail_idx = idx;
        fence(Ordering::Release);
        self.avail_idx_atomic()
            .store(idx.to_le(), Ordering::Release);
        fence(Ordering::SeqCst);
    }

    // ---- internals ---------------------------------------------------------

    fn take_free(&mut self, n: usize, owner: Owner) -> Result<Vec<u16>, RingError> {
        if n > self.free.len() {
            return Err(RingError::NoFreeDescriptors {
                needed: n,
                free: self.free.len(),
            });
        }
        let mut indices = std::mem::take(&mut self.spare);
        let start = self.free.len() - n;
        indices.extend(self.free.drain(start..).rev());
        for &index in &indices {
            self.owner[usize::from(index)] = owner;
        }
        Ok(indices)
    }

    fn check_index(&self, index: u16) -> Result<(), RingError> {
        if index >= self.layout.size {
            return Err(RingError::IndexOutOfRange {
                index,
                size: self.layout.size,
            });
        }
        Ok(())
    }

    /// Writes a descriptor's fields that differ from what the table holds.
    /// Synchronous calls reuse the same descriptors, mostly with the same
    /// contents; a store, even of the same value, takes the cache line
    /// from the device's core, which then waits for it on its next read.
    fn store_descriptor(&mut self, index: u16, desc: Descriptor) {
        debug_assert!(index < self.layout.size);
        let at = self.layout.desc + DESCRIPTOR_LEN * usize::from(index);
        // SAFETY: callers check `index < size`, so the 16 bytes are in the
        // table, each field aligned (the table is 16-aligned).
        unsafe {
            if self.read_u64(at) != desc.addr {
                self.write_u64(at, desc.addr);
            }
            if self.read_u32(at + 8) != desc.len {
                self.write_u32(at + 8, desc.len);
            }
            self.update_u16(at + 12, desc.flags);
            self.update_u16(at + 14, desc.next);
        }
    }

    /// `write_u16` unless the field already holds `value` (see
    /// `store_descriptor`).
    ///
    /// # Safety
    /// As for `write_u16`.
    unsafe fn update_u16(&self, at: usize, value: u16) {
        // SAFETY: per this function's contract.
        unsafe {
            if self.read_u16(at) != value {
                self.write_u16(at, value);
            }
        }
    }

    fn avail_idx_atomic(&self) -> &AtomicU16 {
        // SAFETY: offset avail + 2 is in the layout and 2-aligned (the base is
        // page-aligned and every offset is even); the device accesses it
        // atomically too, so an atomic view of shared memory is sound.
        unsafe { &*self.base.add(self.layout.avail + 2).cast::<AtomicU16>() }
    }

    fn used_idx_atomic(&self) -> &AtomicU16 {
        // SAFETY: as for `avail_idx_atomic`, at the used ring's index field.
        unsafe { &*self.base.add(self.layout.used + 2).cast::<AtomicU16>() }
    }

    /// # Safety
    /// `at + 2 <= layout.total` and `at` is 2-aligned.
    unsafe fn write_u16(&self, at: usize, value: u16) {
        // SAFETY: in bounds per the contract (every offset used is even, the
        // base page-aligned); volatile because the device reads concurrently.
        unsafe {
            self.base
                .add(at)
                .cast::<u16>()
                .write_volatile(value.to_le())
        }
    }

    /// # Safety
    /// `at + 4 <= layout.total` and `at` is 4-aligned.
    unsafe fn write_u32(&self, at: usize, value: u32) {
        // SAFETY: in bounds and aligned per the contract.
        unsafe {
            self.base
                .add(at)
                .cast::<u32>()
                .write_volatile(value.to_le())
        }
    }

    /// # Safety
    /// `at + 8 <= layout.total` and `at` is 8-aligned.
    unsafe fn write_u64(&self, at: usize, value: u64) {
        // SAFETY: in bounds and aligned per the contract.
        unsafe {
            self.base
                .add(at)
                .cast::<u64>()
                .write_volatile(value.to_le())
        }
    }

    /// # Safety
    /// `at + 2 <= layout.total` and `at` is 2-aligned.
    unsafe fn read_u16(&self, at: usize) -> u16 {
        // SAFETY: in bounds and aligned per the contract.
        u16::from_le(unsafe { self.base.add(at).cast::<u16>().read_volatile() })
    }

    /// # Safety
    /// `at + 4 <= layout.total` and `at` is 4-aligned.
    unsafe fn read_u32(&self, at: usize) -> u32 {
        // SAFETY: in bounds and aligned per the contract.
        u32::from_le(unsafe { self.base.add(at).cast::<u32>().read_volatile() })
    }

    /// # Safety
    /// `at + 8 <= layout.total` and `at` is 8-aligned.
    unsafe fn read_u64(&self, at: usize) -> u64 {
        // SAFETY: in bounds and aligned per the contract.
        u64::from_le(unsafe { self.base.add(at).cast::<u64>().read_volatile() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GPA: u64 = 0x1_0000_0000;

    /// A page-aligned heap allocation standing in for shared memory. The
    /// test plays the device through the same raw pointer the ring uses.
    struct Area {
        ptr: *mut u8,
        layout: std::alloc::Layout,
    }

    impl Area {
        fn new(len: usize) -> Area {
            let layout = std::alloc::Layout::from_size_align(len, RING_ALIGN).expect("valid");
            // SAFETY: the layout has a nonzero size.
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!ptr.is_null(), "allocation failed");
            Area { ptr, layout }
        }

        fn ring(&self, size: u16) -> SplitRing {
            // SAFETY: the allocation is large enough for every ring the tests
            // make and outlives it (both live to the test's end).
            unsafe { SplitRing::new(self.ptr, GPA, size) }.expect("valid ring")
        }

        fn bytes(&self, at: usize, len: usize) -> Vec<u8> {
            assert!(at + len <= self.layout.size());
            // SAFETY: in bounds (checked above); no reference to the memory is
            // held across ring calls.
            unsafe { std::slice::from_raw_parts(self.ptr.add(at), len) }.to_vec()
        }

        fn put(&self, at: usize, bytes: &[u8]) {
            assert!(at + bytes.len() <= self.layout.size());
            // SAFETY: in bounds (checked above).
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.add(at), bytes.len()) }
        }

        fn u16_at(&self, at: usize) -> u16 {
            let b = self.bytes(at, 2);
            u16::from_le_bytes([b[0], b[1]])
        }

        fn desc(&self, layout: &RingLayout, index: u16) -> Descriptor {
            let b = self.bytes(layout.desc + 16 * usize::from(index), 16);
            Descriptor {
                addr: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
                len: u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
                flags: u16::from_le_bytes([b[12], b[13]]),
                next: u16::from_le_bytes([b[14], b[15]]),
            }
        }

        /// Plays the device: appends a used element and bumps the used index.
        fn push_used(&self, layout: &RingLayout, id: u32, len: u32) {
            let idx = self.u16_at(layout.used + 2);
            let at = layout.used + 4 + 8 * usize::from(idx % layout.size);
            self.put(at, &id.to_le_bytes());
            self.put(at + 4, &len.to_le_bytes());
            self.put(layout.used + 2, &idx.wrapping_add(1).to_le_bytes());
        }
    }

    impl Drop for Area {
        fn drop(&mut self) {
            // SAFETY: allocated in `new` with this layout.
            unsafe { std::alloc::dealloc(self.ptr, self.layout) };
        }
    }

    fn spec(addr: u64, len: u32, writable: bool) -> DescSpec {
        DescSpec {
            addr,
            len,
            writable,
        }
    }

    #[test]
    fn layout_of_submit_queue_puts_used_ring_on_a_page() {
        let layout = RingLayout::new(1024).expect("valid size");
        assert_eq!(layout.desc, 0);
        assert_eq!(layout.avail, 16 * 1024);
        assert_eq!(layout.used, 20480);
        assert_eq!(layout.total, 32768);
    }

    #[test]
    fn layout_rejects_sizes_that_are_not_powers_of_two() {
        assert_eq!(RingLayout::new(0), Err(RingError::BadQueueSize(0)));
        assert_eq!(RingLayout::new(1000), Err(RingError::BadQueueSize(1000)));
        assert!(RingLayout::new(MAX_QUEUE_SIZE).is_ok());
    }

    #[test]
    fn new_rejects_a_misaligned_base() {
        let area = Area::new(8192);
        // SAFETY: never dereferenced: the alignment check fails first.
        let ring = unsafe { SplitRing::new(area.ptr.wrapping_add(8), GPA, 16) };
        assert_eq!(ring.err(), Some(RingError::Misaligned));
    }

    #[test]
    fn add_chain_links_descriptors_and_marks_writable_ones() {
        let area = Area::new(8192);
        let mut ring = area.ring(16);
        let layout = ring.layout();
        let head = ring
            .add_chain(&[
                spec(0x1000, 32, false),
                spec(0x2000, 64, false),
                spec(0x3000, 128, true),
            ])
            .expect("room");
        assert_eq!(ring.num_free(), 13);
        let first = area.desc(&layout, head);
        assert_eq!(first.addr, 0x1000);
        assert_eq!(first.len, 32);
        assert_eq!(first.flags, VRING_DESC_F_NEXT);
        let second = area.desc(&layout, first.next);
        assert_eq!(second.addr, 0x2000);
        assert_eq!(second.flags, VRING_DESC_F_NEXT);
        let third = area.desc(&layout, second.next);
        assert_eq!(third.addr, 0x3000);
        assert_eq!(third.len, 128);
        assert_eq!(third.flags, VRING_DESC_F_WRITE);
    }

    #[test]
    fn publish_writes_entry_then_index() {
        let area = Area::new(8192);
        let mut ring = area.ring(16);
        let layout = ring.layout();
        let a = ring.add_chain(&[spec(0x1000, 8, false)]).expect("room");
        let b = ring.add_chain(&[spec(0x2000, 8, true)]).expect("room");
        ring.publish(a);
        ring.publish(b);
        assert_eq!(area.u16_at(layout.avail + 2), 2);
        assert_eq!(area.u16_at(layout.avail + 4), a);
        assert_eq!(area.u16_at(layout.avail + 6), b);
    }

    #[test]
    fn publish_wraps_around_the_available_ring() {
        let area = Area::new(8192);
        let mut ring = area.ring(4);
        let layout = ring.layout();
        for round in 0..6u16 {
            let head = ring.add_chain(&[spec(0x1000, 8, false)]).expect("room");
            ring.publish(head);
            area.push_used(&layout, u32::from(head), 0);
            assert_eq!(
                ring.pop_used(),
                Some(UsedElem {
                    id: u32::from(head),
                    len: 0
                })
            );
            assert_eq!(
                area.u16_at(layout.avail + 4 + 2 * usize::from(round % 4)),
                head
            );
        }
        assert_eq!(area.u16_at(layout.avail + 2), 6);
        assert_eq!(ring.num_free(), 4);
    }

    #[test]
    fn pop_used_returns_nothing_until_the_device_answers() {
        let area = Area::new(8192);
        let mut ring = area.ring(16);
        let head = ring.add_chain(&[spec(0x1000, 8, true)]).expect("room");
        ring.publish(head);
        assert_eq!(ring.pop_used(), None);
    }

    #[test]
    fn pop_used_frees_the_chain_of_the_returned_head() {
        let area = Area::new(8192);
        let mut ring = area.ring(8);
        let layout = ring.layout();
        let head = ring
            .add_chain(&[spec(1, 1, false), spec(2, 2, false), spec(3, 3, true)])
            .expect("room");
        ring.publish(head);
        assert_eq!(ring.num_free(), 5);
        area.push_used(&layout, u32::from(head), 3);
        assert_eq!(
            ring.pop_used(),
            Some(UsedElem {
                id: u32::from(head),
                len: 3
            })
        );
        assert_eq!(ring.num_free(), 8);
        assert_eq!(ring.pop_used(), None);
    }

    #[test]
    fn add_chain_fails_when_descriptors_run_out() {
        let area = Area::new(8192);
        let mut ring = area.ring(4);
        ring.add_chain(&[spec(1, 1, false); 3]).expect("room");
        assert_eq!(
            ring.add_chain(&[spec(1, 1, false); 2]),
            Err(RingError::NoFreeDescriptors { needed: 2, free: 1 })
        );
        assert_eq!(ring.add_chain(&[]), Err(RingError::EmptyChain));
    }

    #[test]
    fn a_bogus_used_id_frees_nothing() {
        let area = Area::new(8192);
        let mut ring = area.ring(8);
        let layout = ring.layout();
        let head = ring.add_chain(&[spec(1, 1, false)]).expect("room");
        ring.publish(head);
        area.push_used(&layout, 0xdead_beef, 7);
        area.push_used(&layout, 5, 0);
        assert_eq!(
            ring.pop_used(),
            Some(UsedElem {
                id: 0xdead_beef,
                len: 7
            })
        );
        assert_eq!(ring.pop_used(), Some(UsedElem { id: 5, len: 0 }));
        assert_eq!(ring.num_free(), 7);
    }

    #[test]
    fn raw_descriptors_can_form_a_loop() {
        let area = Area::new(8192);
        let mut ring = area.ring(8);
        let layout = ring.layout();
        let indices = ring.alloc_descriptors(2).expect("room");
        let (a, b) = (indices[0], indices[1]);
        let looping = |next| Descriptor {
            addr: GPA,
            len: 16,
            flags: VRING_DESC_F_NEXT,
            next,
        };
        ring.write_descriptor(a, looping(b)).expect("in range");
        ring.write_descriptor(b, looping(a)).expect("in range");
        ring.publish(a);
        assert_eq!(area.desc(&layout, a).next, b);
        assert_eq!(area.desc(&layout, b).next, a);
        assert_eq!(ring.read_descriptor(b), Ok(looping(a)));
        assert_eq!(area.u16_at(layout.avail + 4), a);
        assert_eq!(ring.num_free(), 6);
        ring.release_descriptors(&indices);
        ring.release_descriptors(&indices);
        assert_eq!(ring.num_free(), 8);
    }

    #[test]
    fn raw_write_rejects_an_index_outside_the_table() {
        let area = Area::new(8192);
        let mut ring = area.ring(8);
        assert_eq!(
            ring.write_descriptor(8, Descriptor::default()),
            Err(RingError::IndexOutOfRange { index: 8, size: 8 })
        );
    }

    #[test]
    fn raw_publish_and_avail_idx_accept_anything() {
        let area = Area::new(8192);
        let mut ring = area.ring(8);
        let layout = ring.layout();
        ring.publish(4000);
        assert_eq!(area.u16_at(layout.avail + 4), 4000);
        ring.set_avail_idx_raw(100);
        assert_eq!(area.u16_at(layout.avail + 2), 100);
        assert_eq!(ring.avail_idx(), 100);
    }

    #[test]
    fn arm_used_event_writes_the_next_used_index() {
        let area = Area::new(8192);
        let mut ring = area.ring(8);
        let layout = ring.layout();
        let head = ring.add_chain(&[spec(1, 1, true)]).expect("room");
        ring.publish(head);
        area.push_used(&layout, u32::from(head), 1);
        ring.pop_used();
        ring.arm_used_event();
        assert_eq!(area.u16_at(layout.avail + 4 + 2 * 8), 1);
    }

    #[test]
    fn kicks_go_only_where_the_device_asked() {
        let area = Area::new(8192);
        let mut ring = area.ring(8);
        let layout = ring.layout();
        let avail_event = layout.used + 4 + 8 * 8;
        // The device waits for entry 0: publishing it needs a kick.
        area.put(avail_event, &0u16.to_le_bytes());
        let head = ring.add_chain(&[spec(1, 1, true)]).expect("room");
        ring.publish(head);
        assert!(ring.device_wants_kick(0, true));
        // A polling device left avail_event behind: no kick for entry 1.
        let head = ring.add_chain(&[spec(1, 1, true)]).expect("room");
        ring.publish(head);
        assert!(!ring.device_wants_kick(1, true));
        // It asks again for entry 2 once it goes to sleep.
        area.put(avail_event, &2u16.to_le_bytes());
        let head = ring.add_chain(&[spec(1, 1, true)]).expect("room");
        ring.publish(head);
        assert!(ring.device_wants_kick(2, true));
        // Across the index wrap too.
        ring.set_avail_idx_raw(u16::MAX);
        area.put(avail_event, &u16::MAX.to_le_bytes());
        ring.publish(0);
        assert!(ring.device_wants_kick(u16::MAX, true));
        // Without event indices, the used ring's NO_NOTIFY flag decides.
        assert!(ring.device_wants_kick(0, false));
        area.put(layout.used, &1u16.to_le_bytes());
        assert!(!ring.device_wants_kick(0, false));
    }

    #[test]
    fn raw_descriptors_are_not_freed_by_pop_used() {
        let area = Area::new(8192);
        let mut ring = area.ring(4);
        let layout = ring.layout();
        let indices = ring.alloc_descriptors(1).expect("room");
        ring.write_descriptor(
            indices[0],
            Descriptor {
                addr: 1,
                len: 1,
                flags: 0,
                next: 0,
            },
        )
        .expect("in range");
        ring.publish(indices[0]);
        area.push_used(&layout, u32::from(indices[0]), 0);
        assert!(ring.pop_used().is_some());
        assert_eq!(ring.num_free(), 3);
    }
}
