//! Walks a split-ring descriptor chain, following exactly the rules of
//! `virtio_queue::DescriptorChain` (a chain ends after its queue size of
//! descriptors, at an index outside its table, at an unreadable
//! descriptor, at a nested or malformed indirect table, or once it would
//! name more than 2^32 bytes), but reading each descriptor straight from
//! the mapped table ([`crate::guest_ranges`]) instead of through
//! `GuestMemory::read_obj`, whose bitmap clone cost more than the read.
//! `chain::resolve` turns what it yields into streams and judges a chain
//! that ends while its last descriptor still says NEXT as broken.

use virtio_queue::desc::split::Descriptor;
use virtio_queue::QueueT;
use vm_memory::{Bytes, GuestAddress};

use crate::chain::GuestRam;

/// Size of one descriptor in a table (`VRING_DESC_ALIGN_SIZE`).
const DESC_LEN: u32 = 16;

/// Where a chain starts: its head and the descriptor table it lives in,
/// as the queue had them when the head was popped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainStart {
    pub head: u16,
    /// Guest address of the queue's descriptor table.
    pub table: u64,
    /// The queue's size: entries of the table, and the longest chain.
    pub queue_size: u16,
}

impl ChainStart {
    /// The chain `head` of `queue`.
    pub fn of(queue: &impl QueueT, head: u16) -> ChainStart {
        ChainStart {
            head,
            table: queue.desc_table(),
            queue_size: queue.size(),
        }
    }
}

/// The descriptors of one chain, in order (see the module comment).
pub struct DescWalk<'a> {
    mem: &'a GuestRam,
    table: u64,
    table_len: u16,
    next_index: u16,
    ttl: u16,
    indirect: bool,
    yielded_bytes: u32,
}

impl<'a> DescWalk<'a> {
    pub fn new(mem: &'a GuestRam, start: ChainStart) -> DescWalk<'a> {
        DescWalk {
            mem,
            table: start.table,
            table_len: start.queue_size,
            next_index: start.head,
            ttl: start.queue_size,
            indirect: false,
            yielded_bytes: 0,
        }
    }

    /// Goes on in the indirect table `desc` names; `None` for a nested
    /// one or a table whose length is not a whole number of entries, or
    /// has more than a `u16` can index.
    fn enter_indirect(&mut self, desc: &Descriptor) -> Option<()> {
        if self.indirect || !desc.len().is_multiple_of(DESC_LEN) {
            return None;
        }
        let entries = u16::try_from(desc.len() / DESC_LEN).ok()?;
        self.table = desc.addr().0;
        self.table_len = entries;
        self.next_index = 0;
        self.ttl = entries;
        self.indirect = true;
        Some(())
    }
}

/// Reads the descriptor at guest address `addr`.
fn read_descriptor(mem: &GuestRam, addr: u64) -> Option<Descriptor> {
    let Some(ptr) = crate::guest_ranges::host_address(mem, addr, DESC_LEN as usize) else {
        // Not inside one region: `read_obj` may still find it across two.
        return mem.read_obj::<Descriptor>(GuestAddress(addr)).ok();
    };
    // SAFETY: `host_address` checked that these 16 bytes lie in one mapped
    // region of `mem`, which the caller holds. A byte array has no
    // alignment to keep; the read is volatile because the guest may write
    // the table meanwhile (then the chain is simply what was read).
    let raw = unsafe { std::ptr::read_volatile(ptr.cast::<[u8; DESC_LEN as usize]>()) };
    let word = |range: std::ops::Range<usize>| &raw[range];
    Some(Descriptor::new(
        u64::from_le_bytes(word(0..8).try_into().expect("8 bytes")),
        u32::from_le_bytes(word(8..12).try_into().expect("4 bytes")),
        u16::from_le_bytes(word(12..14).try_into().expect("2 bytes")),
        u16::from_le_bytes(word(14..16).try_into().expect("2 bytes")),
    ))
}

impl Iterator for DescWalk<'_> {
    type Item = Descriptor;

    fn next(&mut self) -> Option<Descriptor> {
        loop {
            if self.ttl == 0 || self.next_index >= self.table_len {
                return None;
            }
            let addr = self
                .table
                .checked_add(u64::from(self.next_index) * u64::from(DESC_LEN))?;
            let desc = read_descriptor(self.mem, addr)?;
            if desc.refers_to_indirect_table() {
                self.enter_indirect(&desc)?;
                continue;
            }
            // A chain of more than 2^32 bytes is not allowed (VIRTIO 1.2,
            // 2.7.5.2): the walk ends there.
            self.yielded_bytes = self.yielded_bytes.checked_add(desc.len())?;
            if desc.has_next() {
                self.next_index = desc.next();
                self.ttl -= 1;
            } else {
                self.ttl = 0;
            }
            return Some(desc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtio_queue::desc::RawDescriptor;
    use virtio_queue::mock::MockSplitQueue;
    use virtio_queue::Queue;
    use vm_memory::GuestMemoryMmap;

    const QUEUE_SIZE: u16 = 16;
    /// Where indirect tables (and random descriptors) lie.
    const SCRATCH: u64 = 0x8000;
    /// The boundary between the two adjacent regions.
    const BOUNDARY: u64 = 0x10000;

    /// Two adjacent regions and one after a hole, so descriptors and
    /// tables can straddle a boundary or fall outside guest memory.
    fn ram() -> GuestRam {
        GuestMemoryMmap::from_ranges(&[
            (GuestAddress(0), BOUNDARY as usize),
            (GuestAddress(BOUNDARY), 0x10000),
            (GuestAddress(0x40000), 0x1000),
        ])
        .expect("guest memory")
    }

    /// xorshift64: a fixed sequence, so a failure can be replayed.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick<T: Copy>(&mut self, from: &[T]) -> T {
            from[(self.next() % from.len() as u64) as usize]
        }
    }

    fn random_descriptor(rng: &mut Rng) -> Descriptor {
        let entry = SCRATCH + 16 * (rng.next() % 8);
        let addr = rng.pick(&[
            SCRATCH,
            entry,
            BOUNDARY - 8,
            BOUNDARY - 16,
            0x20000,
            0x40ff8,
            u64::MAX - 8,
        ]);
        let len = rng.pick(&[0, 1, 16, 32, 48, 24, 0x1000, 0x8000_0000, u32::MAX]);
        let flags = (rng.next() % 8) as u16; // NEXT, WRITE, INDIRECT
        let next = (rng.next() % u64::from(QUEUE_SIZE + 2)) as u16;
        Descriptor::new(addr, len, flags, next)
    }

    fn fields(d: Descriptor) -> (u64, u32, u16, u16) {
        (d.addr().0, d.len(), d.flags(), d.next())
    }

    #[test]
    fn walks_every_chain_as_virtio_queue_does() {
        let mem = ram();
        let mock = MockSplitQueue::create(&mem, GuestAddress(0), QUEUE_SIZE);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut long_chains, mut indirect_chains) = (0, 0);
        for _ in 0..400 {
            let table: Vec<Descriptor> = (0..QUEUE_SIZE)
                .map(|_| random_descriptor(&mut rng))
                .collect();
            for (i, desc) in (0..QUEUE_SIZE).zip(&table) {
                let raw = RawDescriptor::from(*desc);
                mock.desc_table().store(i, raw).expect("in the table");
            }
            for at in (SCRATCH..SCRATCH + 0x100)
                .step_by(16)
                .chain([BOUNDARY - 16, BOUNDARY - 8])
            {
                mem.write_obj(random_descriptor(&mut rng), GuestAddress(at))
                    .expect("scratch is guest memory");
            }
            for i in 0..QUEUE_SIZE {
                mock.avail()
                    .ring()
                    .ref_at(i.into())
                    .expect("in the ring")
                    .store(i);
            }
            mock.avail().idx().store(QUEUE_SIZE);
            let mut queue: Queue = mock.create_queue().expect("a valid queue");
            while let Some(chain) = queue.pop_descriptor_chain(&mem) {
                let start = ChainStart::of(&queue, chain.head_index());
                let expected: Vec<_> = chain.map(fields).collect();
                let walked: Vec<_> = DescWalk::new(&mem, start).map(fields).collect();
                assert_eq!(walked, expected, "chain {start:?}");
                long_chains += usize::from(expected.len() >= 3);
                let head = &table[usize::from(start.head)];
                indirect_chains +=
                    usize::from(head.refers_to_indirect_table() && !expected.is_empty());
            }
        }
        // The random tables did produce the cases worth comparing.
        assert!(long_chains > 0 && indirect_chains > 0);
    }
}
