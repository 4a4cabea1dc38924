//! Write tracking: which device objects may have changed since a moment.
//!
//! Checkpoints and migrations copy buffer contents while the guest keeps
//! computing, then re-copy only what was written since. Every command that
//! may write an object (a transfer to the device, a fill, a copy, a kernel
//! with a writable argument, a CUDA memcpy, memset or launch) stamps the
//! object's [`WriteMark`] with the current epoch, at the time the command is
//! issued. A copier drains the session's issued work, advances the epoch
//! ([`advance`]) and reads the object, all under the session's lock: any
//! write issued after the copy carries an epoch at least the one the copy
//! was taken at, any write before it a smaller one. So "written since the
//! copy" is `mark >= copied_at`, and it costs one atomic load and one
//! atomic max per writing command, which is why it is always on.
//!
//! The tracking is conservative: a kernel is taken to write every buffer it
//! may write (OpenCL: each argument not created read-only; CUDA: every
//! allocation of the session, since a kernel writes through raw pointers).

use std::sync::atomic::{AtomicU64, Ordering};

/// The current epoch. One counter for the process (a worker serves one VM;
/// in-process tests share it harmlessly: epochs are only compared).
static EPOCH: AtomicU64 = AtomicU64::new(1);

/// The current epoch.
pub fn now() -> u64 {
    EPOCH.load(Ordering::SeqCst)
}

/// Starts a new epoch and returns it: writes issued from now on carry it
/// or a later one.
pub fn advance() -> u64 {
    EPOCH.fetch_add(1, Ordering::SeqCst) + 1
}

/// Serial numbers of marks, so a copy can name an object it no longer
/// holds (a freed buffer's number is never reused).
static SERIAL: AtomicU64 = AtomicU64::new(1);

/// The latest epoch at which an object may have been written.
#[derive(Debug)]
pub struct WriteMark {
    serial: u64,
    epoch: AtomicU64,
}

impl Default for WriteMark {
    /// A new object counts as written now: nothing has copied it yet.
    fn default() -> Self {
        WriteMark {
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            epoch: AtomicU64::new(now()),
        }
    }
}

impl WriteMark {
    /// A number naming this mark's object for the process's lifetime.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// Records a write issued now.
    pub fn mark(&self) {
        self.epoch.fetch_max(now(), Ordering::SeqCst);
    }

    /// The latest epoch of a write.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// Whether a write may have been issued at or after `epoch`.
    pub fn written_since(&self, epoch: u64) -> bool {
        self.epoch() >= epoch
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_after_a_copy_is_seen_and_one_before_is_not() {
        let mark = WriteMark::default();
        mark.mark();
        let copied_at = advance();
        assert!(!mark.written_since(copied_at), "written before the copy");
        mark.mark();
        assert!(mark.written_since(copied_at), "written after the copy");
    }

    #[test]
    fn a_new_object_counts_as_written_since_any_earlier_copy() {
        let copied_at = advance();
        let mark = WriteMark::default();
        assert!(mark.written_since(copied_at));
    }
}
