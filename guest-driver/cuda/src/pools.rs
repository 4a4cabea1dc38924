//! Memory pools for stream-ordered allocation (`cuMemAllocAsync`,
//! `cuMemFreeAsync`), kept by the library. A pool reserves chunks (device
//! allocations of the session, at least `CHUNK` bytes) and carves blocks
//! out of them, so most allocations and frees make no round trip, and its
//! figures behave as the driver's: the reserved bytes grow by chunks, the
//! used bytes by what was asked.
//!
//! A freed stretch is handed out again at once on the stream that freed it
//! (its later work comes after the free, as the driver's pools reuse), on
//! other streams of its context only once a synchronization showed the
//! free done. Chunks no block holds go back to the backend: those beyond
//! the release threshold at the next synchronization, as the driver
//! releases them, all of them at `cuMemPoolTrimTo` or when the backend is
//! out of memory (its free waits for the device, so a stretch whose free
//! was not reached yet is safe to release).
//!
//! This module holds the bookkeeping only; `api/mem_pool.rs` allocates and
//! frees.

use std::collections::{BTreeMap, HashMap};

/// `CUmemPool_attribute` values.
pub const REUSE_FOLLOW_EVENT_DEPENDENCIES: i32 = 1;
pub const REUSE_ALLOW_OPPORTUNISTIC: i32 = 2;
pub const REUSE_ALLOW_INTERNAL_DEPENDENCIES: i32 = 3;
pub const RELEASE_THRESHOLD: i32 = 4;
pub const RESERVED_MEM_CURRENT: i32 = 5;
pub const RESERVED_MEM_HIGH: i32 = 6;
pub const USED_MEM_CURRENT: i32 = 7;
pub const USED_MEM_HIGH: i32 = 8;

/// Blocks start and end on these steps.
pub const BLOCK_ALIGNMENT: u64 = 512;
/// The smallest chunk, and the step chunks grow by: the backend maps
/// device memory in 2 MiB granules anyway.
pub const CHUNK: u64 = 2 << 20;

/// Who may take a free stretch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    /// Fresh, or its free was reached: any stream of the chunk's context.
    Anyone,
    /// Freed on this stream, not known done: that stream only.
    Stream(u64),
}

/// A chunk: one device allocation of `size` bytes made in `ctx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Chunk {
    size: u64,
    ctx: u64,
}

/// A stretch of a chunk that no block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Free {
    size: u64,
    /// The chunk's start.
    chunk: u64,
    tag: Tag,
}

/// One pool.
#[derive(Debug, Default)]
pub struct Pool {
    /// `[REUSE_FOLLOW_EVENT_DEPENDENCIES, OPPORTUNISTIC, INTERNAL]`: kept
    /// as set (all 1 by default, as the driver's).
    reuse: [i32; 3],
    release_threshold: u64,
    reserved: u64,
    reserved_high: u64,
    used: u64,
    used_high: u64,
    chunks: BTreeMap<u64, Chunk>,
    /// Free stretches by start; they never overlap or span chunks.
    free: BTreeMap<u64, Free>,
    /// Blocks handed out: start → (size, its chunk's start).
    in_use: HashMap<u64, (u64, u64)>,
    /// `cuMemPoolDestroy` was called: chunks go as their last block does.
    pub destroyed: bool,
}

impl Pool {
    pub fn new() -> Pool {
        Pool {
            reuse: [1, 1, 1],
            ..Pool::default()
        }
    }

    /// The chunk size for a request of `size` bytes none of the pool's
    /// stretches can serve.
    pub fn chunk_for(size: u64) -> Option<u64> {
        size.checked_next_multiple_of(CHUNK).map(|s| s.max(CHUNK))
    }

    /// A block of `size` bytes (a multiple of `BLOCK_ALIGNMENT`) for
    /// `stream` of `ctx`, carved from the smallest free stretch that may be
    /// used there.
    pub fn take(&mut self, size: u64, ctx: u64, stream: u64) -> Option<u64> {
        let (&start, &free) = self
            .free
            .iter()
            .filter(|(_, f)| f.size >= size)
            .filter(|(_, f)| f.tag == Tag::Anyone || f.tag == Tag::Stream(stream))
            .filter(|(_, f)| self.chunks.get(&f.chunk).is_some_and(|c| c.ctx == ctx))
            .min_by_key(|(&start, f)| (f.size, start))?;
        self.free.remove(&start);
        if free.size > size {
            let rest = Free {
                size: free.size - size,
                ..free
            };
            self.free.insert(start + size, rest);
        }
        self.in_use.insert(start, (size, free.chunk));
        self.used += size;
        self.used_high = self.used_high.max(self.used);
        Some(start)
    }

    /// A fresh chunk of `size` bytes at `start`, made in `ctx`.
    pub fn grew(&mut self, start: u64, size: u64, ctx: u64) {
        self.chunks.insert(start, Chunk { size, ctx });
        self.free.insert(
            start,
            Free {
                size,
                chunk: start,
                tag: Tag::Anyone,
            },
        );
        self.reserved += size;
        self.reserved_high = self.reserved_high.max(self.reserved);
    }

    /// Whether a chunk of this pool starts at `ptr`.
    pub fn has_chunk(&self, ptr: u64) -> bool {
        self.chunks.contains_key(&ptr)
    }

    /// Whether the block at `ptr` is handed out by this pool.
    pub fn owns(&self, ptr: u64) -> bool {
        self.in_use.contains_key(&ptr)
    }

    /// The block at `ptr` comes back, freed on `stream`.
    pub fn give_back(&mut self, ptr: u64, stream: u64) -> bool {
        let Some((size, chunk)) = self.in_use.remove(&ptr) else {
            return false;
        };
        self.used -= size;
        self.free.insert(
            ptr,
            Free {
                size,
                chunk,
                tag: Tag::Stream(stream),
            },
        );
        self.merge_around(ptr);
        true
    }

    /// Joins the stretch at `start` with its neighbours in the same chunk
    /// and with the same tag, as far as they go.
    fn merge_around(&mut self, start: u64) {
        let mut start = start;
        while let Some((&before, &prev)) = self.free.range(..start).next_back() {
            let here = self.free[&start];
            if before + prev.size != start || prev.chunk != here.chunk || prev.tag != here.tag {
                break;
            }
            self.free.remove(&start);
            self.free.get_mut(&before).expect("just found").size += here.size;
            start = before;
        }
        loop {
            let here = self.free[&start];
            let after = start + here.size;
            match self.free.get(&after) {
                Some(&next) if next.chunk == here.chunk && next.tag == here.tag => {
                    self.free.remove(&after);
                    self.free.get_mut(&start).expect("present").size += next.size;
                }
                _ => break,
            }
        }
    }

    /// A synchronization of `ctx` (of its `stream` only, if given) showed
    /// the frees before it done: their stretches are anyone's.
    pub fn reached(&mut self, ctx: u64, stream: Option<u64>) {
        let starts: Vec<u64> = self
            .free
            .iter()
            .filter(|(_, f)| match f.tag {
                Tag::Stream(s) => stream.is_none_or(|only| only == s),
                Tag::Anyone => false,
            })
            .filter(|(_, f)| self.chunks.get(&f.chunk).is_some_and(|c| c.ctx == ctx))
            .map(|(&start, _)| start)
            .collect();
        for start in &starts {
            if let Some(free) = self.free.get_mut(start) {
                free.tag = Tag::Anyone;
            }
        }
        for start in starts {
            if self.free.contains_key(&start) {
                self.merge_around(start);
            }
        }
    }

    /// Whether no block holds any of the chunk at `start`.
    fn unheld(&self, start: u64, chunk: Chunk) -> bool {
        let free: u64 = self
            .free
            .range(start..start + chunk.size)
            .map(|(_, f)| f.size)
            .sum();
        free == chunk.size
    }

    /// Chunks to give back to the backend so that at most `keep` bytes
    /// stay reserved, if no block holds them (largest first).
    pub fn release_above(&mut self, keep: u64) -> Vec<u64> {
        let mut idle: Vec<(u64, Chunk)> = self
            .chunks
            .iter()
            .filter(|(&start, &chunk)| self.unheld(start, chunk))
            .map(|(&start, &chunk)| (start, chunk))
            .collect();
        idle.sort_by_key(|(start, chunk)| (std::cmp::Reverse(chunk.size), *start));
        let mut released = Vec::new();
        for (start, chunk) in idle {
            if self.reserved <= keep {
                break;
            }
            let stretches: Vec<u64> = self
                .free
                .range(start..start + chunk.size)
                .map(|(&s, _)| s)
                .collect();
            for s in stretches {
                self.free.remove(&s);
            }
            self.chunks.remove(&start);
            self.reserved -= chunk.size;
            released.push(start);
        }
        released
    }

    /// Chunks over the release threshold, given back at a synchronization
    /// (all idle ones once the pool was destroyed).
    pub fn release_over_threshold(&mut self) -> Vec<u64> {
        let keep = if self.destroyed {
            0
        } else {
            self.release_threshold
        };
        self.release_above(keep)
    }

    /// Whether a destroyed pool has nothing left and can be forgotten.
    pub fn is_gone(&self) -> bool {
        self.destroyed && self.chunks.is_empty()
    }

    pub fn attribute(&self, attribute: i32) -> Option<u64> {
        Some(match attribute {
            REUSE_FOLLOW_EVENT_DEPENDENCIES..=REUSE_ALLOW_INTERNAL_DEPENDENCIES => {
                self.reuse[(attribute - 1) as usize] as u64
            }
            RELEASE_THRESHOLD => self.release_threshold,
            RESERVED_MEM_CURRENT => self.reserved,
            RESERVED_MEM_HIGH => self.reserved_high,
            USED_MEM_CURRENT => self.used,
            USED_MEM_HIGH => self.used_high,
            _ => return None,
        })
    }

    /// Sets `attribute`; `false` for one that cannot be set to `value`
    /// (the high marks only reset to 0, the current figures not at all).
    pub fn set_attribute(&mut self, attribute: i32, value: u64) -> bool {
        match attribute {
            REUSE_FOLLOW_EVENT_DEPENDENCIES..=REUSE_ALLOW_INTERNAL_DEPENDENCIES => {
                self.reuse[(attribute - 1) as usize] = i32::from(value != 0);
            }
            RELEASE_THRESHOLD => self.release_threshold = value,
            RESERVED_MEM_HIGH if value == 0 => self.reserved_high = self.reserved,
            USED_MEM_HIGH if value == 0 => self.used_high = self.used,
            _ => return false,
        }
        true
    }
}

/// Every pool of the process, by handle, and the current pool of the
/// device (a vGPU has one).
#[derive(Debug, Default)]
pub struct Pools {
    pub pools: HashMap<u64, Pool>,
    pub default: Option<u64>,
    pub current: Option<u64>,
}

impl Pools {
    /// The pool that handed out the block at `ptr`.
    pub fn owner(&mut self, ptr: u64) -> Option<&mut Pool> {
        self.pools.values_mut().find(|p| p.owns(ptr))
    }

    /// Whether some pool's chunk starts at `ptr`: such an allocation is
    /// the pool's, never the program's to free.
    pub fn chunk_at(&self, ptr: u64) -> bool {
        self.pools.values().any(|p| p.has_chunk(ptr))
    }

    /// A pool the program may name (not destroyed).
    pub fn live(&mut self, handle: u64) -> Option<&mut Pool> {
        self.pools.get_mut(&handle).filter(|p| !p.destroyed)
    }

    /// Forgets destroyed pools that hold nothing more.
    pub fn sweep(&mut self) {
        self.pools.retain(|_, p| !p.is_gone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;
    const C: u64 = 0x1000_0000;

    fn pool_with_chunk() -> Pool {
        let mut pool = Pool::new();
        pool.grew(C, CHUNK, 1);
        pool
    }

    #[test]
    fn blocks_are_carved_from_a_chunk_and_the_reservation_stays() {
        let mut pool = pool_with_chunk();
        assert_eq!(pool.take(1024, 1, 7), Some(C));
        assert_eq!(pool.take(2048, 1, 8), Some(C + 1024), "any stream: fresh");
        assert_eq!(pool.attribute(USED_MEM_CURRENT), Some(3072));
        assert_eq!(pool.attribute(RESERVED_MEM_CURRENT), Some(CHUNK));
        assert_eq!(pool.take(1024, 2, 7), None, "another context's chunk");
        assert_eq!(pool.take(CHUNK, 1, 7), None, "too large: a new chunk");
        assert_eq!(Pool::chunk_for(1), Some(CHUNK));
        assert_eq!(Pool::chunk_for(3 * MB), Some(4 * MB));
        assert_eq!(Pool::chunk_for(u64::MAX), None);
    }

    #[test]
    fn a_stretch_is_reused_on_its_stream_at_once_elsewhere_after_a_sync() {
        let mut pool = pool_with_chunk();
        let whole = pool.take(CHUNK, 1, 7).unwrap();
        assert!(pool.give_back(whole, 7));
        assert_eq!(pool.take(MB, 1, 8), None, "another stream: not yet");
        assert_eq!(pool.take(MB, 1, 7), Some(C));
        pool.reached(1, Some(9));
        assert_eq!(pool.take(MB, 1, 8), None, "another stream's sync");
        pool.reached(1, Some(7));
        assert_eq!(pool.take(MB, 1, 8), Some(C + MB));
    }

    #[test]
    fn freed_neighbours_merge_when_they_may_serve_the_same_streams() {
        let mut pool = pool_with_chunk();
        let a = pool.take(MB, 1, 7).unwrap();
        let b = pool.take(MB / 2, 1, 7).unwrap();
        assert!(pool.give_back(a, 7));
        assert!(pool.give_back(b, 8));
        assert_eq!(
            pool.take(MB + MB / 2, 1, 7),
            None,
            "tags differ: not merged"
        );
        pool.reached(1, None);
        assert_eq!(pool.take(CHUNK, 1, 5), Some(C), "all merged back");
    }

    #[test]
    fn only_chunks_no_block_holds_are_released() {
        let mut pool = pool_with_chunk();
        pool.grew(C + 0x100_0000, 2 * CHUNK, 1);
        let held = pool.take(1024, 1, 0).unwrap();
        assert_eq!(held, C);
        assert!(pool.has_chunk(C) && !pool.has_chunk(C + 1024));
        assert_eq!(pool.release_above(0), vec![C + 0x100_0000]);
        assert_eq!(pool.attribute(RESERVED_MEM_CURRENT), Some(CHUNK));
        assert!(pool.give_back(held, 3));
        // Not reached, and still released: the backend waits before freeing.
        assert!(pool.set_attribute(RELEASE_THRESHOLD, CHUNK));
        assert_eq!(pool.release_over_threshold(), Vec::<u64>::new());
        pool.destroyed = true;
        assert_eq!(pool.release_over_threshold(), vec![C]);
        assert!(pool.is_gone());
    }

    #[test]
    fn figures_follow_use_and_reset_as_the_driver_allows() {
        let mut pool = pool_with_chunk();
        let a = pool.take(4096, 1, 0).unwrap();
        pool.take(2048, 1, 0).unwrap();
        pool.give_back(a, 0);
        assert_eq!(pool.attribute(USED_MEM_CURRENT), Some(2048));
        assert_eq!(pool.attribute(USED_MEM_HIGH), Some(6144));
        assert!(pool.set_attribute(USED_MEM_HIGH, 0));
        assert_eq!(pool.attribute(USED_MEM_HIGH), Some(2048));
        assert!(!pool.set_attribute(USED_MEM_HIGH, 5));
        assert!(!pool.set_attribute(USED_MEM_CURRENT, 0));
        assert_eq!(pool.attribute(REUSE_ALLOW_OPPORTUNISTIC), Some(1));
        assert!(pool.set_attribute(REUSE_ALLOW_OPPORTUNISTIC, 0));
        assert_eq!(pool.attribute(REUSE_ALLOW_OPPORTUNISTIC), Some(0));
        assert_eq!(pool.attribute(RESERVED_MEM_HIGH), Some(CHUNK));
        assert_eq!(pool.attribute(99), None);
    }
}
