//! The driver's available index, read straight from the mapped ring. The
//! vring thread reads it on every look while it polls for the next
//! request; through `QueueT::avail_idx` each read found the region and
//! cloned its dirty-bitmap handle, which made a look several times
//! dearer than the load itself and so slowed how soon a request is seen.

use std::num::Wrapping;
use std::sync::atomic::{AtomicU16, Ordering};

use virtio_queue::QueueT;

use crate::chain::GuestRam;

/// Reads one queue's available index through `mem`, keeping the host
/// address of the field while the queue's ring stays where it was.
pub struct AvailIndex<'a> {
    mem: &'a GuestRam,
    /// The field's guest address, and its host address when it lies
    /// aligned in one mapped region.
    field: Option<(u64, Option<&'a AtomicU16>)>,
}

impl<'a> AvailIndex<'a> {
    /// `mem` is the memory the queue's rings are read through; holding it
    /// keeps the mapping, and so the kept address, alive.
    pub fn new(mem: &'a GuestRam) -> AvailIndex<'a> {
        AvailIndex { mem, field: None }
    }

    /// The queue's available index, as `queue.avail_idx(mem, Acquire)`.
    pub fn read(&mut self, queue: &impl QueueT) -> Result<Wrapping<u16>, virtio_queue::Error> {
        // `idx` follows the ring's 16-bit `flags`; a ring near the end of
        // the address space has no such field, as `avail_idx` finds.
        let Some(gpa) = queue.avail_ring().checked_add(2) else {
            return queue.avail_idx(self.mem, Ordering::Acquire);
        };
        // The ring can move (SET_VRING_ADDR) between two reads: the kept
        // address is only used while the queue names the same place.
        let atomic = match self.field {
            Some((at, atomic)) if at == gpa => atomic,
            _ => {
                let atomic = self.field_at(gpa);
                self.field = Some((gpa, atomic));
                atomic
            }
        };
        match atomic {
            Some(atomic) => Ok(Wrapping(u16::from_le(atomic.load(Ordering::Acquire)))),
            // Unmapped, straddling or misaligned: the queue's own read
            // answers (an error, or what a slow path finds).
            None => queue.avail_idx(self.mem, Ordering::Acquire),
        }
    }

    /// The mapped, aligned field at `gpa`, if it is one.
    fn field_at(&self, gpa: u64) -> Option<&'a AtomicU16> {
        let ptr = crate::guest_ranges::host_address(self.mem, gpa, 2)?;
        if !ptr.cast::<AtomicU16>().is_aligned() {
            return None;
        }
        // SAFETY: the two bytes at `ptr` lie in a region of `self.mem`,
        // mapped for as long as `'a` borrows it, and are aligned for an
        // `AtomicU16`. The driver writes them concurrently, which is what
        // an atomic is for; nothing in this process writes them non-
        // atomically (the backend only reads the available ring).
        Some(unsafe { AtomicU16::from_ptr(ptr.cast::<u16>()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtio_queue::mock::MockSplitQueue;
    use virtio_queue::Queue;
    use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

    /// Guest memory of one region at 0x1000 (so 0 is unmapped).
    fn ram() -> GuestRam {
        GuestMemoryMmap::from_ranges(&[(GuestAddress(0x1000), 0x10000)]).expect("guest memory")
    }

    fn answers_as_the_queue(avail: &mut AvailIndex<'_>, queue: &Queue, mem: &GuestRam) {
        let expected = queue.avail_idx(mem, Ordering::Acquire).ok();
        assert_eq!(avail.read(queue).ok(), expected);
    }

    #[test]
    fn reads_the_index_the_driver_writes_wherever_the_ring_moves() {
        let mem = ram();
        let mock = MockSplitQueue::create(&mem, GuestAddress(0x1000), 16);
        let mut queue: Queue = mock.create_queue().expect("a valid queue");
        let mut avail = AvailIndex::new(&mem);
        for index in [0u16, 1, 7, 0xffff] {
            mock.avail().idx().store(index);
            assert_eq!(avail.read(&queue).expect("readable").0, index);
        }
        // Moved: to another aligned place, to one straddling the end of
        // memory, to unmapped memory; each read follows the queue.
        for (ring, index) in [(0x8000u64, 42u16), (0x10ffe, 0), (0x20000, 0)] {
            queue
                .try_set_avail_ring_address(GuestAddress(ring))
                .expect("an aligned address");
            if let Ok(()) = mem.write_obj(index, GuestAddress(ring + 2)) {
                assert_eq!(avail.read(&queue).expect("readable").0, index);
            }
            answers_as_the_queue(&mut avail, &queue, &mem);
        }
        assert!(avail.read(&queue).is_err(), "unmapped ring read");
    }
}
