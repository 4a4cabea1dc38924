//! The signal the guest is waiting for, so the vring thread's poll covers
//! the wait. After a signalled copy (`executor/cuda/signalled.rs`) the
//! guest sends nothing until the device writes its signal word, a whole
//! DMA later; a poll budget counted from the answer ran out during a
//! 4 MiB copy, the thread slept, and the next request paid a kick and a
//! wake-up (22 us round trips instead of 9). The thread looks at the word
//! itself instead, and counts its budget from when it lands.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::chain::GuestRam;

/// Longest a poll follows one signal: a copy longer than this is waited
/// for asleep, as any request is.
const LONGEST_FOLLOWED: Duration = Duration::from_millis(10);

/// A guest word the device will set to `value`.
pub struct AwaitedSignal {
    /// Keeps the mapping behind `word` alive.
    _mem: Arc<GuestRam>,
    word: *const AtomicU32,
    value: u32,
    until: Instant,
}

// SAFETY: `word` points into the mapping `_mem` keeps alive, and is only
// read atomically, from whichever thread holds the signal.
unsafe impl Send for AwaitedSignal {}

/// This worker's (one front-end's) latest awaited signal.
static AWAITED: Mutex<Option<AwaitedSignal>> = Mutex::new(None);

impl AwaitedSignal {
    /// Notes that the guest waits for the 4-byte word at host address
    /// `word`, which lies in `mem`'s mapping and is 4-aligned, to become
    /// `value`.
    ///
    /// # Safety
    /// `word` must be a 4-aligned address of 4 bytes inside a region of
    /// `mem`.
    pub unsafe fn note(mem: Arc<GuestRam>, word: usize, value: u32) {
        let signal = AwaitedSignal {
            _mem: mem,
            word: word as *const AtomicU32,
            value,
            until: Instant::now() + LONGEST_FOLLOWED,
        };
        *AWAITED.lock().unwrap_or_else(|e| e.into_inner()) = Some(signal);
    }

    /// The awaited signal, if any (taken: one poll follows it).
    pub fn take() -> Option<AwaitedSignal> {
        AWAITED.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    /// Whether the guest still waits: the word is not set and the signal
    /// is not older than the longest followed.
    pub fn pending(&self) -> bool {
        // SAFETY: `note`'s contract: an aligned word in the mapping that
        // `_mem` keeps alive; the device and the guest write it
        // concurrently, which an atomic read allows.
        let word = unsafe { &*self.word };
        word.load(Ordering::Acquire) != self.value && Instant::now() < self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vm_memory::{GuestAddress, GuestMemoryMmap};

    #[test]
    fn a_signal_is_pending_until_its_word_holds_the_value() {
        let mem: Arc<GuestRam> = Arc::new(
            GuestMemoryMmap::from_ranges(&[(GuestAddress(0x1000), 0x1000)]).expect("guest memory"),
        );
        let host = crate::guest_ranges::host_address(&mem, 0x1040, 4).expect("mapped") as usize;
        assert!(crate::guest_ranges::maps_host_range(&mem, host, 4));
        assert!(!crate::guest_ranges::maps_host_range(
            &mem,
            host + 0x1000,
            4
        ));
        // SAFETY: a 4-aligned word inside the region (checked above).
        unsafe { AwaitedSignal::note(mem.clone(), host, 7) };
        let signal = AwaitedSignal::take().expect("noted");
        assert!(AwaitedSignal::take().is_none(), "taken once");
        // SAFETY: as above; the test plays the device.
        let word = unsafe { &*(host as *const AtomicU32) };
        word.store(6, Ordering::Release);
        assert!(signal.pending());
        word.store(7, Ordering::Release);
        assert!(!signal.pending());
        word.store(0, Ordering::Release);
        let expired = AwaitedSignal {
            until: Instant::now(),
            ..signal
        };
        assert!(!expired.pending(), "followed no longer than its bound");
    }
}
