//! Allocations out of the transport's shared heap (see
//! `Transport::shared_heap`), memory the backend maps as well: the CUDA
//! library's page-locked host memory (registered with the driver once, so
//! copies run as DMA) and the OpenCL library's placed buffers. First fit
//! over page-aligned blocks, neighbours merged when freed.

use std::collections::BTreeMap;
use std::ops::Range;

const PAGE: usize = 4096;

#[derive(Debug)]
pub struct Heap {
    range: Range<usize>,
    /// Free blocks: start → length.
    free: BTreeMap<usize, usize>,
    /// Blocks handed out: start → length.
    used: BTreeMap<usize, usize>,
}

impl Heap {
    /// A heap over the page-aligned part of `range`.
    pub fn new(range: Range<usize>) -> Heap {
        let start = range.start.next_multiple_of(PAGE);
        let end = range.end - range.end % PAGE;
        let mut free = BTreeMap::new();
        if end > start {
            free.insert(start, end - start);
        }
        Heap {
            range: start..end.max(start),
            free,
            used: BTreeMap::new(),
        }
    }

    /// A block of at least `len` bytes (whole pages), if one is free.
    pub fn alloc(&mut self, len: usize) -> Option<(usize, usize)> {
        let len = len.max(1).checked_next_multiple_of(PAGE)?;
        let (&start, &size) = self.free.iter().find(|(_, &size)| size >= len)?;
        self.free.remove(&start);
        if size > len {
            self.free.insert(start + len, size - len);
        }
        self.used.insert(start, len);
        Some((start, len))
    }

    /// Frees the block at `start`; `None` when no block starts there.
    pub fn free(&mut self, start: usize) -> Option<usize> {
        let len = self.used.remove(&start)?;
        let (mut start_at, mut size) = (start, len);
        if let Some((&next, &next_len)) = self.free.range(start + len..).next() {
            if next == start + len {
                self.free.remove(&next);
                size += next_len;
            }
        }
        if let Some((&prev, &prev_len)) = self.free.range(..start).next_back() {
            if prev + prev_len == start {
                self.free.remove(&prev);
                start_at = prev;
                size += prev_len;
            }
        }
        self.free.insert(start_at, size);
        Some(len)
    }

    /// Whether `[ptr, ptr+len)` lies in one block handed out.
    pub fn holds(&self, ptr: usize, len: usize) -> bool {
        if !self.range.contains(&ptr) {
            return false;
        }
        self.used
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&s, &l)| ptr.checked_add(len).is_some_and(|end| end <= s + l))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: usize = 0x10_0000;

    #[test]
    fn blocks_are_whole_pages_and_first_fit() {
        let mut heap = Heap::new(BASE..BASE + 16 * PAGE);
        assert_eq!(heap.alloc(1), Some((BASE, PAGE)));
        assert_eq!(heap.alloc(PAGE + 1), Some((BASE + PAGE, 2 * PAGE)));
        assert!(heap.holds(BASE + PAGE, 2 * PAGE));
        assert!(!heap.holds(BASE + PAGE, 2 * PAGE + 1));
        assert_eq!(heap.alloc(14 * PAGE), None, "only 13 pages are left");
    }

    #[test]
    fn freed_neighbours_merge_into_one_block() {
        let mut heap = Heap::new(BASE..BASE + 4 * PAGE);
        let a = heap.alloc(PAGE).expect("room").0;
        let b = heap.alloc(PAGE).expect("room").0;
        let c = heap.alloc(2 * PAGE).expect("room").0;
        assert_eq!(heap.free(a), Some(PAGE));
        assert_eq!(heap.free(c), Some(2 * PAGE));
        assert_eq!(heap.free(b), Some(PAGE));
        assert_eq!(heap.free(b), None, "freed twice");
        assert_eq!(heap.alloc(4 * PAGE), Some((BASE, 4 * PAGE)));
    }

    #[test]
    fn an_unaligned_range_is_trimmed_to_pages() {
        let mut heap = Heap::new(BASE + 1..BASE + 3 * PAGE - 1);
        assert_eq!(heap.alloc(PAGE), Some((BASE + PAGE, PAGE)));
        assert_eq!(heap.alloc(PAGE), None);
        assert!(!heap.holds(BASE, 1));
    }
}
