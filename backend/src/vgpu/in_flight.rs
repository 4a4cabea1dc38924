//! Chains a vGPU took from the vring and has not returned yet, and a wait
//! for none. A chain counts from before it is popped (`Ticket`), not from
//! when its session gets it: a vring stop (`GET_VRING_BASE`) that came
//! between the pop and the hand-over saw none in flight, reported the
//! popped chain as consumed, and its answer landed after QEMU had read
//! the used ring (after a migration, a guest waiting for it forever).
//! The count changes twice per chain on the vring's hot path, so it is an
//! atomic, and leaving takes the lock and wakes a waiter only when there
//! is one: a condition variable's notify is a system call (a futex wake)
//! even with nobody waiting, and a mutex per change was two more atomic
//! round trips per chain.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

#[derive(Default)]
pub struct InFlight {
    chains: AtomicUsize,
    /// Threads in `wait_idle`; changed only under `lock`.
    waiters: AtomicUsize,
    lock: Mutex<()>,
    idle: Condvar,
}

/// One chain being taken or in flight: counted from its making until it
/// is dropped (after the chain's answer is in the used ring).
pub struct Ticket(std::sync::Arc<InFlight>);

impl Drop for Ticket {
    fn drop(&mut self) {
        self.0.leave();
    }
}

impl InFlight {
    /// Counts a chain about to be popped: make it before taking the vring
    /// lock for the pop, so that a stop, which takes that lock after
    /// marking the queue not ready, finds it counted.
    pub fn ticket(self: &std::sync::Arc<Self>) -> Ticket {
        self.enter();
        Ticket(self.clone())
    }

    /// A chain was accepted.
    pub fn enter(&self) {
        self.chains.fetch_add(1, Ordering::SeqCst);
    }

    /// A chain was returned to the guest.
    pub fn leave(&self) {
        let left = self
            .chains
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_sub(1))
            })
            .map_or(0, |before| before.saturating_sub(1));
        // Both sides use SeqCst: either the waiter counted itself before
        // this load (and is woken below, under the lock it holds until it
        // sleeps), or it reads the count after the decrement and does not
        // sleep at all.
        if left == 0 && self.waiters.load(Ordering::SeqCst) > 0 {
            let _guard = self.lock();
            self.idle.notify_all();
        }
    }

    /// Waits until no chain is in flight, for at most `limit`; whether none is.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let guard = self.lock();
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let (guard, _) = self
            .idle
            .wait_timeout_while(guard, limit, |_| self.chains.load(Ordering::SeqCst) > 0)
            .unwrap_or_else(|e| e.into_inner());
        self.waiters.fetch_sub(1, Ordering::SeqCst);
        drop(guard);
        self.chains.load(Ordering::SeqCst) == 0
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
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
    fn a_ticket_counts_until_dropped() {
        let in_flight = Arc::new(InFlight::default());
        let ticket = in_flight.ticket();
        assert!(!in_flight.wait_idle(Duration::ZERO));
        drop(ticket);
        assert!(in_flight.wait_idle(Duration::ZERO));
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
