//! Memory pools for stream-ordered allocation (`cuMemAllocAsync`,
//! `cuMemFreeAsync`), kept by the library: a pool's memory is ordinary
//! device allocations of the session, which a freed block goes back to
//! instead of to the backend. A block freed on a stream is handed out
//! again at once on that stream (its later work comes after the free, as
//! the driver's pools reuse), on another stream only once a
//! synchronization showed the free done. Blocks beyond the pool's release
//! threshold go back to the backend at the next synchronization, as the
//! driver releases them; `cuMemPoolTrimTo` releases them at once (the
//! backend's free waits for the device, so even a block whose free was
//! not reached yet is safe to release).
//!
//! This module holds the bookkeeping only; `api/mem_pool.rs` allocates and
//! frees.

use std::collections::HashMap;

/// `CUmemPool_attribute` values.
pub const REUSE_FOLLOW_EVENT_DEPENDENCIES: i32 = 1;
pub const REUSE_ALLOW_OPPORTUNISTIC: i32 = 2;
pub const REUSE_ALLOW_INTERNAL_DEPENDENCIES: i32 = 3;
pub const RELEASE_THRESHOLD: i32 = 4;
pub const RESERVED_MEM_CURRENT: i32 = 5;
pub const RESERVED_MEM_HIGH: i32 = 6;
pub const USED_MEM_CURRENT: i32 = 7;
pub const USED_MEM_HIGH: i32 = 8;

/// Blocks are sized in these steps, so a freed block fits later requests
/// of about its size.
pub const BLOCK_ALIGNMENT: u64 = 512;

/// A block may serve a request of at least half its size (or 2 MiB less).
fn fits(block: u64, asked: u64) -> bool {
    block >= asked && (block <= asked.saturating_mul(2) || block - asked <= 2 << 20)
}

/// A freed block, waiting in its pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FreeBlock {
    ptr: u64,
    size: u64,
    ctx: u64,
    stream: u64,
    /// A synchronization showed its free done: any stream may take it.
    reached: bool,
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
    free: Vec<FreeBlock>,
    /// Blocks handed out: start → (block size, bytes asked). The driver's
    /// used figure counts what was asked.
    in_use: HashMap<u64, (u64, u64)>,
}

impl Pool {
    pub fn new() -> Pool {
        Pool {
            reuse: [1, 1, 1],
            ..Pool::default()
        }
    }

    /// A free block for `size` bytes on `stream` of `ctx`, taken from the
    /// pool, if one may be reused there.
    pub fn take(&mut self, size: u64, ctx: u64, stream: u64) -> Option<u64> {
        let index = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, b)| b.ctx == ctx && (b.reached || b.stream == stream))
            .filter(|(_, b)| fits(b.size, size))
            .min_by_key(|(_, b)| b.size)
            .map(|(i, _)| i)?;
        let block = self.free.swap_remove(index);
        self.hand_out(block.ptr, block.size, size);
        Some(block.ptr)
    }

    /// A fresh block of `size` bytes at `ptr`, handed out.
    pub fn grew(&mut self, ptr: u64, size: u64) {
        self.reserved += size;
        self.reserved_high = self.reserved_high.max(self.reserved);
        self.hand_out(ptr, size, size);
    }

    fn hand_out(&mut self, ptr: u64, size: u64, asked: u64) {
        self.in_use.insert(ptr, (size, asked));
        self.used += asked;
        self.used_high = self.used_high.max(self.used);
    }

    /// Whether the block at `ptr` is handed out by this pool.
    pub fn owns(&self, ptr: u64) -> bool {
        self.in_use.contains_key(&ptr)
    }

    /// The block at `ptr` comes back, freed on `stream` of `ctx`.
    pub fn give_back(&mut self, ptr: u64, ctx: u64, stream: u64) -> bool {
        let Some((size, asked)) = self.in_use.remove(&ptr) else {
            return false;
        };
        self.used -= asked;
        self.free.push(FreeBlock {
            ptr,
            size,
            ctx,
            stream,
            reached: false,
        });
        true
    }

    /// The block at `ptr` was freed with `cuMemFree`: it leaves the pool.
    pub fn forget(&mut self, ptr: u64) -> bool {
        let Some((size, asked)) = self.in_use.remove(&ptr) else {
            return false;
        };
        self.used -= asked;
        self.reserved -= size;
        true
    }

    /// A synchronization of `ctx` (of its `stream` only, if given) showed
    /// the frees before it done.
    pub fn reached(&mut self, ctx: u64, stream: Option<u64>) {
        for block in &mut self.free {
            if block.ctx == ctx && stream.is_none_or(|s| s == block.stream) {
                block.reached = true;
            }
        }
    }

    /// Free blocks to give back to the backend so that at most `keep`
    /// bytes stay reserved (smallest first kept, largest released first).
    pub fn release_above(&mut self, keep: u64) -> Vec<u64> {
        self.free.sort_by_key(|b| b.size);
        let mut released = Vec::new();
        while self.reserved > keep {
            let Some(block) = self.free.pop() else { break };
            self.reserved -= block.size;
            released.push(block.ptr);
        }
        released
    }

    /// Blocks over the release threshold, given back at a synchronization.
    pub fn release_over_threshold(&mut self) -> Vec<u64> {
        self.release_above(self.release_threshold)
    }

    /// Every free block (the pool goes away).
    pub fn drain(&mut self) -> Vec<u64> {
        self.release_above(0)
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
    /// The pool that owns the block at `ptr`.
    pub fn owner(&mut self, ptr: u64) -> Option<&mut Pool> {
        self.pools.values_mut().find(|p| p.owns(ptr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn a_block_is_reused_on_its_stream_at_once_elsewhere_after_a_sync() {
        let mut pool = Pool::new();
        pool.grew(0x1000_0000, 4 * MB);
        assert!(pool.give_back(0x1000_0000, 1, 7));
        assert_eq!(pool.take(4 * MB, 1, 8), None, "another stream: not yet");
        assert_eq!(pool.take(4 * MB, 2, 7), None, "another context");
        assert_eq!(pool.take(3 * MB, 1, 7), Some(0x1000_0000));
        assert_eq!(
            pool.attribute(USED_MEM_CURRENT),
            Some(3 * MB),
            "what was asked"
        );
        assert!(pool.give_back(0x1000_0000, 1, 7));
        pool.reached(1, Some(7));
        assert_eq!(pool.take(4 * MB, 1, 8), Some(0x1000_0000));
    }

    #[test]
    fn blocks_serve_requests_of_about_their_size() {
        assert!(fits(4 * MB, 3 * MB));
        assert!(!fits(4 * MB, 5 * MB));
        assert!(
            !fits(64 * MB, MB),
            "a large block is kept for large requests"
        );
        assert!(fits(MB + 512, 1024), "small blocks within 2 MiB");
    }

    #[test]
    fn figures_follow_use_and_release() {
        let mut pool = Pool::new();
        pool.grew(0x1000, 2 * MB);
        pool.grew(0x2000, 6 * MB);
        assert_eq!(pool.attribute(USED_MEM_CURRENT), Some(8 * MB));
        pool.give_back(0x2000, 1, 0);
        assert_eq!(pool.attribute(USED_MEM_CURRENT), Some(2 * MB));
        assert_eq!(pool.attribute(USED_MEM_HIGH), Some(8 * MB));
        assert_eq!(pool.attribute(RESERVED_MEM_CURRENT), Some(8 * MB));
        assert!(pool.set_attribute(RELEASE_THRESHOLD, 4 * MB));
        assert_eq!(pool.release_over_threshold(), vec![0x2000]);
        assert_eq!(pool.attribute(RESERVED_MEM_CURRENT), Some(2 * MB));
        assert!(pool.set_attribute(USED_MEM_HIGH, 0));
        assert_eq!(pool.attribute(USED_MEM_HIGH), Some(2 * MB));
        assert!(!pool.set_attribute(USED_MEM_HIGH, 5));
        assert!(!pool.set_attribute(USED_MEM_CURRENT, 0));
        assert_eq!(pool.attribute(REUSE_ALLOW_OPPORTUNISTIC), Some(1));
        assert!(pool.forget(0x1000));
        assert_eq!(pool.attribute(RESERVED_MEM_CURRENT), Some(0));
        assert_eq!(pool.attribute(99), None);
    }

    #[test]
    fn trimming_releases_largest_first_down_to_what_is_kept() {
        let mut pool = Pool::new();
        for (i, size) in [MB, 8 * MB, 2 * MB].into_iter().enumerate() {
            pool.grew(i as u64, size);
            pool.give_back(i as u64, 1, 0);
        }
        assert_eq!(pool.release_above(3 * MB), vec![1]);
        assert_eq!(pool.drain(), vec![2, 0]);
        assert_eq!(pool.attribute(RESERVED_MEM_CURRENT), Some(0));
    }
}
