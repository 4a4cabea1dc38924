//! Coarse-grained SVM: the backend's allocation addresses, mapped at the
//! same addresses in this process, so pointers stored inside SVM mean the
//! same on both sides. The device copy is the truth; this process's copy
//! is filled by maps and sent back by unmaps (coarse-grained semantics
//! allow exactly that), and `clEnqueueSVMMemcpy`/`MemFill` move data
//! directly.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::core::context::Context;
use crate::core::object::Cl;

/// Page granularity of the backend's allocations and of our mappings.
pub const PAGE: usize = 4096;

/// One live allocation.
pub struct Region {
    pub start: usize,
    pub size: usize,
    /// Bytes mapped here (whole pages).
    pub mapped: usize,
    pub context: Arc<Cl<Context>>,
    /// Maps not yet unmapped: (pointer, size, whether the host may write).
    pub maps: Vec<(usize, usize, bool)>,
}

static REGIONS: Mutex<BTreeMap<usize, Region>> = Mutex::new(BTreeMap::new());

pub fn regions() -> MutexGuard<'static, BTreeMap<usize, Region>> {
    // Regions are inserted and removed whole.
    REGIONS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Where `[ptr, ptr + len)` lies relative to the allocations.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Inside the allocation that starts at this address, of this context.
    Inside(usize, usize),
    /// Starts inside an allocation but runs past its end.
    Straddles,
    /// Not SVM.
    Outside,
}

/// Looks `[ptr, ptr + len)` up (`len` 0 counts as 1).
pub fn lookup(ptr: usize, len: usize) -> Lookup {
    let regions = regions();
    let Some((_, region)) = regions.range(..=ptr).next_back() else {
        return Lookup::Outside;
    };
    let end = region.start + region.size;
    if ptr >= end {
        return Lookup::Outside;
    }
    match ptr.checked_add(len.max(1)) {
        Some(e) if e <= end => Lookup::Inside(region.start, region.context.as_ptr() as usize),
        _ => Lookup::Straddles,
    }
}

/// Drops every allocation of a destroyed context (its mappings go too).
pub fn context_destroyed(context: usize) {
    let mut regions = regions();
    let gone: Vec<usize> = regions
        .iter()
        .filter(|(_, r)| r.context.as_ptr() as usize == context)
        .map(|(start, _)| *start)
        .collect();
    for start in gone {
        if let Some(region) = regions.remove(&start) {
            unmap(region.start, region.mapped);
        }
    }
}

/// Removes our mapping of a region.
pub fn unmap(start: usize, len: usize) {
    // SAFETY: `[start, start + len)` is a mapping this module made with
    // mmap and no longer hands out.
    unsafe {
        libc::munmap(start as *mut libc::c_void, len);
    }
}
