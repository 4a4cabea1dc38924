//! Returning a chain on the used ring straight through the mapped ring.
//! `QueueT::add_used` and `needs_notification` each loaded the vring's
//! memory and wrote through `vm_memory`'s generic accessors, which find
//! the region and clone its dirty-bitmap handle on every access: about a
//! seventh of the vring thread's work for a synchronous call. Here the
//! element and the index are stored through their host addresses and
//! marked dirty in the front-end's log, as a write through `vm_memory`
//! marks them; a ring that is not mapped and aligned takes the queue's own
//! path.

use std::sync::atomic::{fence, AtomicU16, AtomicU32, Ordering};

use virtio_queue::{Queue, QueueT};

use crate::chain::GuestRam;
use crate::guest_ranges::{host_address, mark_dirty};

/// Puts `(head, len)` on `queue`'s used ring and says whether the driver
/// asked to be notified of it (with `VIRTIO_RING_F_EVENT_IDX`, when its
/// `used_event` is the entry's index; always without). One chain at a
/// time, as `add_used` then `needs_notification` would answer.
pub fn add_used(
    queue: &mut Queue,
    mem: &GuestRam,
    head: u16,
    len: u32,
) -> Result<bool, virtio_queue::Error> {
    if head >= queue.size() {
        return Err(virtio_queue::Error::InvalidDescriptorIndex);
    }
    let Some(ring) = MappedUsedRing::of(queue, mem) else {
        queue.add_used(mem, head, len)?;
        // An unreadable `used_event` cannot say "no": notify.
        return Ok(queue.needs_notification(mem).unwrap_or(true));
    };
    let index = queue.next_used();
    let slot = usize::from(index % queue.size());
    ring.elements[2 * slot].store(u32::from(head).to_le(), Ordering::Relaxed);
    ring.elements[2 * slot + 1].store(len.to_le(), Ordering::Relaxed);
    let next = index.wrapping_add(1);
    // The element must be visible before the index that covers it.
    ring.index.store(next.to_le(), Ordering::Release);
    // One mark from the index to the element (the ring's header and the
    // slots before it: a page more at most, never a page less).
    mark_dirty(mem, ring.index_gpa, 2 + 8 * (slot + 1));
    queue.set_next_used(next);
    if !queue.event_idx_enabled() {
        return Ok(true);
    }
    // The index store must be visible before `used_event` is read, or a
    // driver that armed it just now could sleep through this entry.
    fence(Ordering::SeqCst);
    Ok(u16::from_le(ring.used_event.load(Ordering::Relaxed)) == index)
}

/// The used ring's fields at their host addresses.
struct MappedUsedRing<'a> {
    index: &'a AtomicU16,
    index_gpa: u64,
    /// `(id, len)` pairs, one per ring slot, right after the index.
    elements: &'a [AtomicU32],
    /// The driver's `used_event`, after its available ring.
    used_event: &'a AtomicU16,
}

impl<'a> MappedUsedRing<'a> {
    fn of(queue: &Queue, mem: &'a GuestRam) -> Option<MappedUsedRing<'a>> {
        let size = usize::from(queue.size());
        let used = queue.used_ring();
        let index_gpa = used.checked_add(2)?;
        let used_event_gpa = queue.avail_ring().checked_add(4 + 2 * size as u64)?;
        // The index and the slots in one region, so one mark covers both.
        let index_and_slots = host_address(mem, index_gpa, 2 + 8 * size)?;
        let index = index_and_slots.cast::<u16>();
        let elements = index_and_slots.wrapping_add(2).cast::<u32>();
        let used_event = host_address(mem, used_event_gpa, 2)?.cast::<u16>();
        if !index.is_aligned() || !elements.is_aligned() || !used_event.is_aligned() {
            return None;
        }
        // SAFETY: each range lies in one region of `mem`, mapped while `'a`
        // borrows it, and is aligned for its atomic type (checked above).
        // The driver reads the used ring and writes `used_event`
        // concurrently, which atomics allow; this process touches these
        // fields only through atomics (the queue's own path is not taken
        // while they are mapped).
        unsafe {
            Some(MappedUsedRing {
                index: AtomicU16::from_ptr(index),
                index_gpa,
                elements: std::slice::from_raw_parts(elements.cast::<AtomicU32>(), 2 * size),
                used_event: AtomicU16::from_ptr(used_event),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtio_queue::mock::MockSplitQueue;
    use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

    const RING_AT: u64 = 0x1000;
    const SIZE: u16 = 16;

    /// Guest memory of one region at 0x1000 (so 0 is unmapped).
    fn ram() -> GuestRam {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0x1000), 0x10000)]).expect("guest memory")
    }

    fn queue(mem: &GuestRam, event_idx: bool) -> Queue {
        let mock = MockSplitQueue::create(mem, GuestAddress(RING_AT), SIZE);
        let mut queue: Queue = mock.create_queue().expect("a valid queue");
        queue.set_event_idx(event_idx);
        queue
    }

    fn used_ring_bytes(mem: &GuestRam, queue: &Queue) -> Vec<u8> {
        let mut bytes = vec![0u8; 4 + 8 * usize::from(SIZE)];
        mem.read_slice(&mut bytes, GuestAddress(queue.used_ring()))
            .expect("a mapped ring");
        bytes
    }

    /// The queue's own `add_used` then `needs_notification`.
    fn reference(queue: &mut Queue, mem: &GuestRam, head: u16, len: u32) -> bool {
        queue.add_used(mem, head, len).expect("a valid head");
        queue.needs_notification(mem).expect("a mapped ring")
    }

    #[test]
    fn writes_and_notifies_as_the_queue_does() {
        for event_idx in [false, true] {
            let (mem, expected_mem) = (ram(), ram());
            let mut fast = queue(&mem, event_idx);
            let mut slow = queue(&expected_mem, event_idx);
            // Around the ring twice, with the driver's `used_event` on,
            // before and after the entry being returned.
            for step in 0..(2 * SIZE + 3) {
                let used_event = step.wrapping_add(step % 3).wrapping_sub(1);
                let at = GuestAddress(fast.avail_ring() + 4 + 2 * u64::from(SIZE));
                mem.write_obj(used_event, at).expect("mapped");
                expected_mem.write_obj(used_event, at).expect("mapped");
                let (head, len) = (step % SIZE, 100 + u32::from(step));
                let notify = add_used(&mut fast, &mem, head, len).expect("a valid head");
                assert_eq!(notify, reference(&mut slow, &expected_mem, head, len));
                assert_eq!(fast.next_used(), slow.next_used());
                assert_eq!(
                    used_ring_bytes(&mem, &fast),
                    used_ring_bytes(&expected_mem, &slow)
                );
            }
        }
    }

    #[test]
    fn refuses_a_head_outside_the_ring() {
        let mem = ram();
        let mut queue = queue(&mem, true);
        assert!(add_used(&mut queue, &mem, SIZE, 0).is_err());
        assert_eq!(queue.next_used(), 0);
    }

    #[test]
    fn a_ring_outside_guest_memory_fails_as_the_queue_does() {
        let mem = ram();
        let mut queue = queue(&mem, false);
        queue
            .try_set_used_ring_address(GuestAddress(0x20000))
            .expect("an aligned address");
        assert!(add_used(&mut queue, &mem, 0, 0).is_err());
    }
}
