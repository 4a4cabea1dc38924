//! Chains a vGPU accepted and has not returned yet, and a wait for none.
//! The count changes twice per chain on the vring's hot path, so leaving
//! wakes a waiter only when there is one: a condition variable's notify
//! is a system call (a futex wake) even with nobody waiting.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

#[derive(Default)]
pub struct InFlight {
    counts: Mutex<Counts>,
    idle: Condvar,
}

#[derive(Default)]
struct Counts {
    chains: usize,
    waiters: usize,
}

impl InFlight {
    /// A chain was accepted.
    pub fn enter(&self) {
        self.lock().chains += 1;
    }

    /// A chain was returned to the guest.
    pub fn leave(&self) {
        let mut counts = self.lock();
        counts.chains = counts.chains.saturating_sub(1);
        if counts.chains == 0 && counts.waiters > 0 {
            self.idle.notify_all();
        }
    }

    /// Waits until no chain is in flight, for at most `limit`; whether none is.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let mut counts = self.lock();
        counts.waiters += 1;
        let (mut counts, _) = self
            .idle
            .wait_timeout_while(counts, limit, |c| c.chains > 0)
            .unwrap_or_else(|e| e.into_inner());
        counts.waiters -= 1;
        counts.chains == 0
    }

    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_wait_ends_when_the_last_chain_leaves() {
        let in_flight = Arc::new(InFlight::default());
        in_flight.enter();
        in_flight.enter();
        let leaver = in_flight.clone();
        let t = std::thread::spawn(move || {
            leaver.leave();
            std::thread::sleep(Duration::from_millis(20));
            leaver.leave();
        });
        assert!(in_flight.wait_idle(Duration::from_secs(10)));
        t.join().unwrap();
    }

    #[test]
    fn a_wait_gives_up_after_its_limit() {
        let in_flight = InFlight::default();
        in_flight.enter();
        assert!(!in_flight.wait_idle(Duration::from_millis(10)));
        in_flight.leave();
        assert!(in_flight.wait_idle(Duration::ZERO));
    }
}
