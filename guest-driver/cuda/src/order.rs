//! What the library knows of the order and progress of stream work, so it
//! can answer queries of idle streams and completed events without asking
//! the device, and knows which device-to-host copies have landed once a
//! synchronization returns.
//!
//! Every operation put on a stream gets a sequence number. Each stream
//! keeps a vector clock: for each stream, the last operation that must be
//! complete before the stream's own last operation is (its own work, and
//! what it waited for through events and the legacy default stream). An
//! event takes the clock of the stream it is recorded on. A
//! synchronization that returned folds the clock it waited for into
//! `done`, what is known complete.

use std::collections::HashMap;

/// Per stream: the last operation known to precede.
type Clock = HashMap<u64, u64>;

fn merge(into: &mut Clock, from: &Clock) {
    for (&stream, &seq) in from {
        let at = into.entry(stream).or_insert(0);
        *at = (*at).max(seq);
    }
}

/// Key of the legacy NULL stream of context `ctx` (guest stream handles
/// are small counters; contexts never name streams).
fn null_key(ctx: u64) -> u64 {
    ctx | 1 << 63
}

/// What one synchronization waits for.
#[derive(Debug, Default, Clone)]
pub struct Horizon(Clock);

/// One stream's state.
#[derive(Debug)]
struct Lane {
    ctx: u64,
    /// Created without `CU_STREAM_NON_BLOCKING`: ordered with the legacy
    /// NULL stream.
    blocking: bool,
    /// What the stream was created with, for `cuStreamGetFlags` and
    /// `cuStreamGetPriority`.
    flags: u32,
    priority: i32,
    clock: Clock,
}

/// `CU_STREAM_NON_BLOCKING`.
const NON_BLOCKING: u32 = 0x1;

/// A device-to-host copy that returned before its bytes arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingCopy {
    /// The backend's handle for the copy.
    pub copy: u64,
    /// Where the bytes go in the program's memory.
    pub dst: usize,
    pub len: usize,
    ctx: u64,
    stream: u64,
    seq: u64,
}

/// The session's stream order (see the module comment).
#[derive(Debug, Default)]
pub struct Order {
    next: u64,
    lanes: HashMap<u64, Lane>,
    /// Events created, with the clock of their last record (empty: never
    /// recorded, so complete).
    events: HashMap<u64, Clock>,
    done: Clock,
    copies: Vec<PendingCopy>,
    /// Streams destroyed whose work is not known done: context and last
    /// operation. Once it is, the stream is forgotten everywhere, so the
    /// clocks stay as small as the set of live streams.
    retired: HashMap<u64, (u64, u64)>,
}

impl Order {
    fn key(ctx: u64, stream: u64) -> u64 {
        if stream == 0 {
            null_key(ctx)
        } else {
            stream
        }
    }

    fn lane(&mut self, ctx: u64, key: u64) -> &mut Lane {
        self.lanes.entry(key).or_insert_with(|| Lane {
            ctx,
            blocking: true,
            flags: 0,
            priority: 0,
            clock: Clock::new(),
        })
    }

    /// A stream created in `ctx` with `flags` and `priority`.
    pub fn create_stream(&mut self, ctx: u64, stream: u64, flags: u32, priority: i32) {
        self.lanes.insert(
            stream,
            Lane {
                ctx,
                blocking: flags & NON_BLOCKING == 0,
                flags,
                priority,
                clock: Clock::new(),
            },
        );
    }

    /// A stream's context, flags and priority as created; `None` for a
    /// stream the library did not create (the NULL stream: flags 0,
    /// priority 0, the current context).
    pub fn stream_info(&self, stream: u64) -> Option<(u64, u32, i32)> {
        let lane = self.lanes.get(&stream)?;
        Some((lane.ctx, lane.flags, lane.priority))
    }

    /// A stream destroyed: its work still completes, and its copies land at
    /// the next synchronization that covers them.
    pub fn destroy_stream(&mut self, stream: u64) {
        if let Some(lane) = self.lanes.remove(&stream) {
            let last = lane.clock.get(&stream).copied().unwrap_or(0);
            self.retired.insert(stream, (lane.ctx, last));
            self.forget_finished();
        }
    }

    /// Forgets destroyed streams whose work is known done and whose copies
    /// landed: handles are never reused, so no clock needs them again.
    fn forget_finished(&mut self) {
        let finished: Vec<u64> = self
            .retired
            .iter()
            .filter(|(stream, (_, last))| {
                self.done.get(stream).copied().unwrap_or(0) >= *last
                    && !self.copies.iter().any(|c| c.stream == **stream)
            })
            .map(|(&stream, _)| stream)
            .collect();
        for stream in finished {
            self.retired.remove(&stream);
            self.done.remove(&stream);
            for lane in self.lanes.values_mut() {
                lane.clock.remove(&stream);
            }
            for clock in self.events.values_mut() {
                clock.remove(&stream);
            }
        }
    }

    /// Puts an operation on `stream` (0: the legacy NULL stream of `ctx`)
    /// and returns its sequence number. The NULL stream waits for the
    /// blocking streams of its context, and they for it.
    pub fn enqueue(&mut self, ctx: u64, stream: u64) -> u64 {
        let key = Self::key(ctx, stream);
        let (lane_ctx, blocking) = {
            let lane = self.lane(ctx, key);
            (lane.ctx, lane.blocking)
        };
        // What this operation waits for besides its own stream; nothing (and
        // no allocation) in the common cases of a launch loop on the NULL
        // stream alone or on a non-blocking stream.
        let mut before = Clock::new();
        if stream == 0 {
            for (_, lane) in self
                .lanes
                .iter()
                .filter(|(&k, l)| k != key && l.blocking && l.ctx == lane_ctx)
            {
                merge(&mut before, &lane.clock);
            }
        } else if blocking {
            if let Some(null) = self.lanes.get(&null_key(lane_ctx)) {
                before = null.clock.clone();
            }
        }
        self.next += 1;
        let seq = self.next;
        let lane = self.lane(ctx, key);
        if !before.is_empty() {
            merge(&mut lane.clock, &before);
        }
        lane.clock.insert(key, seq);
        seq
    }

    /// `cuEventRecord`: the event completes with what precedes it.
    pub fn record(&mut self, event: u64, ctx: u64, stream: u64) {
        self.enqueue(ctx, stream);
        let clock = self.lanes[&Self::key(ctx, stream)].clock.clone();
        self.events.insert(event, clock);
    }

    /// `cuStreamWaitEvent`: later work on `stream` follows the event.
    pub fn wait(&mut self, ctx: u64, stream: u64, event: u64) {
        let clock = self.events.get(&event).cloned().unwrap_or_default();
        let key = Self::key(ctx, stream);
        merge(&mut self.lane(ctx, key).clock, &clock);
        self.enqueue(ctx, stream);
    }

    pub fn create_event(&mut self, event: u64) {
        self.events.insert(event, Clock::new());
    }

    pub fn destroy_event(&mut self, event: u64) {
        self.events.remove(&event);
    }

    /// What a synchronization with `stream` waits for, taken before it is
    /// sent: work put on the stream while it runs is not covered.
    pub fn stream_horizon(&self, ctx: u64, stream: u64) -> Horizon {
        Horizon(
            self.lanes
                .get(&Self::key(ctx, stream))
                .map(|l| l.clock.clone())
                .unwrap_or_default(),
        )
    }

    /// What a synchronization with `event` waits for.
    pub fn event_horizon(&self, event: u64) -> Horizon {
        Horizon(self.events.get(&event).cloned().unwrap_or_default())
    }

    /// A synchronization (or a query that found the work complete)
    /// returned: what it waited for is done.
    pub fn reached(&mut self, horizon: &Horizon) {
        merge(&mut self.done, &horizon.0);
        if !self.retired.is_empty() {
            self.forget_finished();
        }
    }

    /// What `cuCtxSynchronize` waits for: all of the context's work, that
    /// of streams destroyed since too (their copies are kept).
    pub fn context_horizon(&self, ctx: u64) -> Horizon {
        let mut clock = Clock::new();
        for lane in self.lanes.values().filter(|l| l.ctx == ctx) {
            merge(&mut clock, &lane.clock);
        }
        for (&stream, &(stream_ctx, last)) in &self.retired {
            if stream_ctx == ctx {
                let at = clock.entry(stream).or_insert(0);
                *at = (*at).max(last);
            }
        }
        Horizon(clock)
    }

    /// Whether everything `horizon` covers is known complete.
    pub fn horizon_done(&self, horizon: &Horizon) -> bool {
        self.is_done(&horizon.0)
    }

    fn is_done(&self, clock: &Clock) -> bool {
        clock
            .iter()
            .all(|(stream, &seq)| self.done.get(stream).is_some_and(|&d| d >= seq))
    }

    /// Whether everything put on `stream` is known complete (without
    /// asking the device); a stream the library did not create is not
    /// known. The NULL stream also waits for its context's blocking
    /// streams.
    pub fn stream_idle(&self, ctx: u64, stream: u64) -> bool {
        let key = Self::key(ctx, stream);
        let own = match self.lanes.get(&key) {
            Some(lane) => self.is_done(&lane.clock),
            None => stream == 0,
        };
        own && (stream != 0
            || self
                .lanes
                .values()
                .filter(|l| l.blocking && l.ctx == ctx)
                .all(|l| self.is_done(&l.clock)))
    }

    /// Whether `event` is known complete (an event never recorded is); an
    /// event the library did not create is not known.
    pub fn event_done(&self, event: u64) -> bool {
        self.events.get(&event).is_some_and(|c| self.is_done(c))
    }

    /// A device-to-host copy put on `stream` as operation `seq`.
    pub fn add_copy(&mut self, ctx: u64, stream: u64, seq: u64, copy: u64, dst: usize, len: usize) {
        self.copies.push(PendingCopy {
            copy,
            dst,
            len,
            ctx,
            stream: Self::key(ctx, stream),
            seq,
        });
    }

    /// Removes and returns the copies known to have landed, oldest first.
    pub fn take_landed(&mut self) -> Vec<PendingCopy> {
        let done = &self.done;
        let (landed, pending) = self
            .copies
            .drain(..)
            .partition(|c| done.get(&c.stream).is_some_and(|&d| d >= c.seq));
        self.copies = pending;
        landed
    }

    /// Whether a copy not yet landed writes into `[dst, dst + len)`.
    pub fn pending_overlaps(&self, dst: usize, len: usize) -> bool {
        let end = dst.saturating_add(len);
        self.copies
            .iter()
            .any(|c| c.dst < end && dst < c.dst.saturating_add(c.len))
    }

    /// Bytes of copies not yet landed.
    pub fn pending_bytes(&self) -> usize {
        self.copies.iter().map(|c| c.len).sum()
    }

    /// Copies not yet landed.
    pub fn pending_copies(&self) -> usize {
        self.copies.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CTX: u64 = 7;

    fn copy_on(order: &mut Order, stream: u64, copy: u64) -> u64 {
        let seq = order.enqueue(CTX, stream);
        order.add_copy(CTX, stream, seq, copy, 0x1000 * copy as usize, 16);
        seq
    }

    fn sync_stream(order: &mut Order, stream: u64) {
        let horizon = order.stream_horizon(CTX, stream);
        order.reached(&horizon);
    }

    fn landed(order: &mut Order) -> Vec<u64> {
        order.take_landed().iter().map(|c| c.copy).collect()
    }

    #[test]
    fn a_context_is_done_only_once_a_synchronization_covered_all_its_work() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        assert!(
            order.horizon_done(&order.context_horizon(CTX)),
            "nothing put yet"
        );
        order.enqueue(CTX, 10);
        order.enqueue(CTX, 0);
        // The stream's synchronization covers its own work only.
        sync_stream(&mut order, 10);
        assert!(!order.horizon_done(&order.context_horizon(CTX)));
        let horizon = order.context_horizon(CTX);
        order.reached(&horizon);
        assert!(order.horizon_done(&order.context_horizon(CTX)));
        // Work put after it is not covered; another context's is not its.
        order.enqueue(CTX + 1, 0);
        assert!(order.horizon_done(&order.context_horizon(CTX)));
        order.enqueue(CTX, 10);
        assert!(!order.horizon_done(&order.context_horizon(CTX)));
    }

    #[test]
    fn a_fresh_stream_is_idle_and_busy_after_work_until_synced() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        assert!(order.stream_idle(CTX, 10));
        order.enqueue(CTX, 10);
        assert!(!order.stream_idle(CTX, 10));
        sync_stream(&mut order, 10);
        assert!(order.stream_idle(CTX, 10));
    }

    #[test]
    fn syncing_one_stream_lands_only_its_copies() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        order.create_stream(CTX, 11, NON_BLOCKING, 0);
        copy_on(&mut order, 10, 1);
        copy_on(&mut order, 11, 2);
        sync_stream(&mut order, 10);
        assert_eq!(landed(&mut order), vec![1]);
        assert_eq!(order.pending_copies(), 1);
        sync_stream(&mut order, 11);
        assert_eq!(landed(&mut order), vec![2]);
        assert_eq!(order.pending_bytes(), 0);
    }

    #[test]
    fn an_event_covers_work_before_its_record_not_after() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        copy_on(&mut order, 10, 1);
        order.record(100, CTX, 10);
        copy_on(&mut order, 10, 2);
        assert!(!order.event_done(100));
        let horizon = order.event_horizon(100);
        order.reached(&horizon);
        assert!(order.event_done(100));
        assert_eq!(landed(&mut order), vec![1]);
        assert!(!order.stream_idle(CTX, 10));
    }

    #[test]
    fn waiting_on_an_event_carries_its_copies_to_the_waiting_stream() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        order.create_stream(CTX, 11, NON_BLOCKING, 0);
        copy_on(&mut order, 10, 1);
        order.record(100, CTX, 10);
        order.wait(CTX, 11, 100);
        order.record(101, CTX, 11);
        let horizon = order.event_horizon(101);
        order.reached(&horizon);
        assert_eq!(landed(&mut order), vec![1]);
        assert!(order.event_done(100));
    }

    #[test]
    fn the_null_stream_orders_with_blocking_streams_only() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, 0, 0);
        order.create_stream(CTX, 11, NON_BLOCKING, 0);
        copy_on(&mut order, 10, 1);
        copy_on(&mut order, 11, 2);
        order.enqueue(CTX, 0);
        sync_stream(&mut order, 0);
        assert_eq!(landed(&mut order), vec![1]);
        // Later work on the blocking stream follows the NULL stream's.
        copy_on(&mut order, 0, 3);
        order.enqueue(CTX, 10);
        sync_stream(&mut order, 10);
        assert_eq!(landed(&mut order), vec![3]);
    }

    #[test]
    fn the_null_stream_is_busy_while_a_blocking_stream_is() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, 0, 0);
        order.enqueue(CTX, 10);
        assert!(!order.stream_idle(CTX, 0));
        sync_stream(&mut order, 10);
        assert!(order.stream_idle(CTX, 0));
    }

    #[test]
    fn a_context_sync_lands_copies_of_destroyed_streams() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        copy_on(&mut order, 10, 1);
        order.destroy_stream(10);
        let horizon = order.context_horizon(CTX);
        order.reached(&horizon);
        assert_eq!(landed(&mut order), vec![1]);
    }

    #[test]
    fn a_context_sync_leaves_other_contexts_busy() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        order.create_stream(CTX + 1, 11, NON_BLOCKING, 0);
        copy_on(&mut order, 10, 1);
        order.enqueue(CTX + 1, 11);
        let horizon = order.context_horizon(CTX);
        order.reached(&horizon);
        assert_eq!(landed(&mut order), vec![1]);
        assert!(!order.stream_idle(CTX + 1, 11));
    }

    #[test]
    fn work_put_on_a_stream_during_its_sync_is_not_covered() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        copy_on(&mut order, 10, 1);
        let horizon = order.stream_horizon(CTX, 10);
        copy_on(&mut order, 10, 2);
        order.reached(&horizon);
        assert_eq!(landed(&mut order), vec![1]);
        assert!(!order.stream_idle(CTX, 10));
    }

    #[test]
    fn an_event_never_recorded_is_done_and_an_unknown_one_is_not() {
        let mut order = Order::default();
        order.create_event(5);
        assert!(order.event_done(5));
        assert!(!order.event_done(6));
        order.destroy_event(5);
        assert!(!order.event_done(5));
    }

    #[test]
    fn a_destroyed_stream_is_forgotten_once_its_work_is_done() {
        let mut order = Order::default();
        order.create_stream(CTX, 10, NON_BLOCKING, 0);
        order.create_stream(CTX, 11, NON_BLOCKING, 0);
        copy_on(&mut order, 10, 1);
        order.record(100, CTX, 10);
        order.wait(CTX, 11, 100);
        order.destroy_stream(10);
        // Still needed: its copy has not landed, and stream 11 waits for it.
        assert!(order.retired.contains_key(&10));
        let horizon = order.stream_horizon(CTX, 11);
        order.reached(&horizon);
        assert_eq!(landed(&mut order), vec![1]);
        // The next synchronization forgets it everywhere.
        let horizon = order.event_horizon(100);
        order.reached(&horizon);
        assert!(order.retired.is_empty());
        assert!(!order.done.contains_key(&10));
        assert!(order.lanes.values().all(|l| !l.clock.contains_key(&10)));
        assert!(order.events.values().all(|c| !c.contains_key(&10)));
        assert!(order.event_done(100));
        assert!(order.stream_idle(CTX, 11));
    }

    #[test]
    fn many_streams_created_and_destroyed_leave_small_clocks() {
        let mut order = Order::default();
        order.create_stream(CTX, 5, 0, 0);
        for stream in 10..1010 {
            order.create_stream(CTX, stream, 0, 0);
            order.enqueue(CTX, stream);
            order.enqueue(CTX, 0);
            order.destroy_stream(stream);
            let horizon = order.context_horizon(CTX);
            order.reached(&horizon);
        }
        order.enqueue(CTX, 5);
        assert!(
            order.lanes[&5].clock.len() <= 2,
            "{:?}",
            order.lanes[&5].clock
        );
        assert!(order.done.len() <= 3, "{:?}", order.done);
        assert!(order.retired.is_empty());
    }

    #[test]
    fn an_unknown_stream_is_never_idle() {
        let order = Order::default();
        assert!(!order.stream_idle(CTX, 12));
        assert!(order.stream_idle(CTX, 0));
    }

    #[test]
    fn pending_copies_overlapping_a_range_are_found() {
        let mut order = Order::default();
        let seq = order.enqueue(CTX, 0);
        order.add_copy(CTX, 0, seq, 5, 0x1000, 0x100);
        assert!(order.pending_overlaps(0x1000, 1));
        assert!(order.pending_overlaps(0x10ff, 0x10));
        assert!(order.pending_overlaps(0xf00, 0x101));
        assert!(!order.pending_overlaps(0x1100, 0x10));
        assert!(!order.pending_overlaps(0xf00, 0x100));
        order.reached(&order.stream_horizon(CTX, 0));
        assert_eq!(order.take_landed().len(), 1);
        assert!(!order.pending_overlaps(0x1000, 0x100));
    }
}
