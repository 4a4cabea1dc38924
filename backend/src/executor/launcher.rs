//! A session's launch thread: driver calls of a run of kernel launches
//! (CUDA's `cuLaunchKernel`; OpenCL's `clSetKernelArg` and
//! `clEnqueueNDRangeKernel`), handed over by the thread running the
//! session's batch and issued to the driver in order.
//!
//! A driver's launch call takes about as long as a native program's
//! launch, so a backend that decodes, checks and issues every launch on one
//! thread can never keep up with a program that only launches. With this
//! thread the batch's thread decodes and checks launch `n + 1` while launch
//! `n` is in the driver: the two overlap, as the program's own encoding
//! overlaps the backend's work.
//!
//! Order is kept by draining: any call other than a launch first waits for
//! every launch handed over before it (`drain`), so the driver sees the
//! session's calls in the guest's order; so do saves, copies taken while
//! the guest runs and the session's end, so nothing is in flight while the
//! session is quiesced (checkpoints, re-homes, migrations). A batch of
//! launches is answered without waiting for them: the program sends the
//! next batch while this thread still issues the last one, and never waits
//! for the hand-over between two batches. A launch the driver refuses
//! answers its own call if its batch is still running, else it is reported
//! with the next batch's answer as an earlier call's failure, which the
//! guest library returns from the next synchronizing call, as CUDA and
//! OpenCL return asynchronous errors. A job holds copies of its parameters
//! and handles, never the batch's memory.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use vgpu_protocol::pacing::LookPacer;
use vgpu_protocol::Status;

use super::LateOutcomes;

/// Launches in a row, within one batch, before the thread takes over: a
/// batch of one launch and a synchronization is served faster on one
/// thread than with a hand-over.
pub const STREAK: u32 = 4;

/// How long the launch thread keeps looking for the next launch before it
/// sleeps, and the batch's thread for the last one before it sleeps: both
/// only while launches come back to back.
const SPIN: Duration = Duration::from_micros(50);

/// A driver call handed to the launch thread.
pub trait Job: Send + 'static {
    /// Makes the call on the calling thread.
    fn issue(&self) -> Result<(), Status>;
    /// The batch (the session's count of batches) and the call's number in
    /// it, so that a failure answers that call, or, once that batch was
    /// answered, the next.
    fn origin(&self) -> (u64, usize);
    /// Bytes of parameters the job holds.
    fn held_bytes(&self) -> u64;
}

/// A session's side of its launch thread: the thread once started, the
/// run of launches so far, where in the batches a call stands, and what
/// became of the calls the thread's driver refused. CUDA and OpenCL
/// sessions each hold one.
pub struct LaunchState<J: Job> {
    /// The thread, once a run of launches started one.
    launcher: Option<Launcher<J>>,
    /// Launches in a row since the last other call, in this batch.
    streak: u32,
    /// Calls run in this batch, and batches ended (the number of the
    /// running one).
    calls_in_batch: usize,
    batches: u64,
    /// What became of calls the launch thread's driver refused, so far.
    late: LateOutcomes,
}

impl<J: Job> Default for LaunchState<J> {
    fn default() -> Self {
        LaunchState {
            launcher: None,
            streak: 0,
            calls_in_batch: 0,
            batches: 0,
            late: LateOutcomes::default(),
        }
    }
}

impl<J: Job> LaunchState<J> {
    /// The number of the call about to run in this batch.
    pub fn next_call(&mut self) -> usize {
        let call = self.calls_in_batch;
        self.calls_in_batch += 1;
        call
    }

    /// Where call `call` of the running batch is answered.
    pub fn origin(&self, call: usize) -> (u64, usize) {
        (self.batches, call)
    }

    /// Counts a launch in the run; whether it goes to the launch thread:
    /// in a run of launches (`enabled` says whether sessions may have the
    /// thread), or while the thread still has calls (issuing it here would
    /// pass them).
    pub fn takes_launch(&mut self, enabled: bool) -> bool {
        self.streak = self.streak.saturating_add(1);
        self.busy() || (self.streak >= STREAK && enabled)
    }

    /// Whether calls handed to the launch thread are still to be issued.
    pub fn busy(&self) -> bool {
        self.launcher.as_ref().is_some_and(Launcher::busy)
    }

    /// Gives a call to the launch thread, started on first use (a session
    /// that cannot have one issues its calls itself).
    pub fn hand_over(&mut self, job: J, session: &str) {
        if self.launcher.is_none() {
            match Launcher::start(session) {
                Ok(started) => self.launcher = Some(started),
                Err(e) => log::warn!("cannot start a launch thread, launching inline: {e}"),
            }
        }
        match &self.launcher {
            Some(launcher) => launcher.hand_over(job),
            None => {
                if let Err(status) = job.issue() {
                    self.late.failed.push((job.origin().1, status));
                }
            }
        }
    }

    /// Waits until every call handed to the launch thread was issued, so
    /// that the next call reaches the driver after them; ends the run.
    pub fn drain(&mut self) {
        self.streak = 0;
        if let Some(launcher) = &self.launcher {
            let failed = launcher.drain();
            self.note(failed);
        }
    }

    /// Ends a batch without waiting for the calls still with the launch
    /// thread: the refusals known so far.
    pub fn finish_batch(&mut self) -> LateOutcomes {
        if let Some(launcher) = &self.launcher {
            let failed = launcher.failures();
            self.note(failed);
        }
        self.streak = 0;
        self.calls_in_batch = 0;
        self.batches += 1;
        std::mem::take(&mut self.late)
    }

    /// Stops the launch thread after it issued what it holds.
    pub fn stop(&mut self) {
        self.launcher = None;
    }

    /// Files refused calls under this batch's calls or, for a batch already
    /// answered, as an earlier call's failure.
    fn note(&mut self, failed: Vec<LateFailure>) {
        for failure in failed {
            if failure.batch == self.batches {
                self.late.failed.push((failure.call, failure.status));
            } else {
                self.late.earlier = self.late.earlier.or(Some(failure.status));
            }
        }
    }
}

/// Launches handed over and not yet issued, at most: the batch's thread
/// waits for room beyond it. Twice the messages of a batch, so the launch
/// thread still has a batch's worth while the next batch is decoded and
/// the program gets its answer; and the memory it holds stays bounded.
const MAX_IN_FLIGHT: u64 = 2 * vgpu_protocol::limits::MAX_BATCH_COUNT as u64;

/// Parameter bytes of jobs not yet issued, at most: a guest whose
/// kernels take 32 KiB of parameters must not make the queue hold 256 MiB
/// of the host's memory. Ordinary launches (a few hundred bytes) never
/// reach it.
const MAX_BYTES_IN_FLIGHT: u64 = 16 << 20;

/// How many launches must be issued in all before one of `bytes` more
/// parameter bytes is handed over, given `handed` launches handed and
/// `issued` issued, holding `in_flight` parameter bytes; `None`: no wait.
fn room_needed(handed: u64, issued: u64, in_flight: u64, bytes: u64) -> Option<u64> {
    if in_flight.saturating_add(bytes) > MAX_BYTES_IN_FLIGHT && handed > issued {
        // Everything handed so far: the bytes then all come back.
        Some(handed)
    } else if handed - issued >= MAX_IN_FLIGHT {
        // Half of the queue: one sleep and one wake-up for thousands.
        Some(handed - MAX_IN_FLIGHT / 2)
    } else {
        None
    }
}

/// A launch the driver refused: the batch and the call it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LateFailure {
    pub batch: u64,
    pub call: usize,
    pub status: Status,
}

/// What both threads share.
struct Shared<J> {
    queue: Mutex<Queue<J>>,
    /// The launch thread sleeps on it when there is nothing to issue.
    work: Condvar,
    /// The batch's thread sleeps on it while it waits for launches to be
    /// issued (a drain, or room in the queue).
    progress: Condvar,
    /// Launches handed over, and launches issued (and dropped) so far.
    handed: AtomicU64,
    issued: AtomicU64,
    /// Parameter bytes of the launches handed over and not yet issued.
    bytes_in_flight: AtomicU64,
    /// The batch's thread sleeps on `progress` until `issued` reaches
    /// `wake_at` (the launch thread then wakes it, once).
    waiting: AtomicBool,
    wake_at: AtomicU64,
}

struct Queue<J> {
    launches: Vec<J>,
    failed: Vec<LateFailure>,
    asleep: bool,
    stop: bool,
}

/// The launch thread of one session, started at its first run of launches.
pub struct Launcher<J: Job> {
    shared: Arc<Shared<J>>,
    thread: Option<JoinHandle<()>>,
}

impl<J: Job> Launcher<J> {
    pub fn start(session: &str) -> std::io::Result<Launcher<J>> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                launches: Vec::new(),
                failed: Vec::new(),
                asleep: false,
                stop: false,
            }),
            work: Condvar::new(),
            progress: Condvar::new(),
            handed: AtomicU64::new(0),
            issued: AtomicU64::new(0),
            bytes_in_flight: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            wake_at: AtomicU64::new(0),
        });
        let theirs = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("vgpu-launch-{session}"))
            .spawn(move || run(&theirs))?;
        Ok(Launcher {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands a launch over; it is issued after every launch handed before.
    /// Waits first while the queue holds too many launches or parameter
    /// bytes (`room_needed`).
    pub fn hand_over(&self, launch: J) {
        let shared = &*self.shared;
        let bytes = launch.held_bytes();
        if let Some(count) = room_needed(
            shared.handed.load(Ordering::SeqCst),
            shared.issued.load(Ordering::SeqCst),
            shared.bytes_in_flight.load(Ordering::SeqCst),
            bytes,
        ) {
            self.wait_until_issued(count);
        }
        shared.bytes_in_flight.fetch_add(bytes, Ordering::SeqCst);
        let mut queue = lock(&shared.queue);
        queue.launches.push(launch);
        let wake = queue.asleep;
        shared.handed.fetch_add(1, Ordering::SeqCst);
        drop(queue);
        if wake {
            shared.work.notify_one();
        }
    }

    /// Whether launches handed over are still to be issued.
    pub fn busy(&self) -> bool {
        self.shared.issued.load(Ordering::SeqCst) < self.shared.handed.load(Ordering::SeqCst)
    }

    /// Waits until every launch handed over was issued; returns the
    /// launches refused since the last look.
    pub fn drain(&self) -> Vec<LateFailure> {
        self.wait_until_issued(self.shared.handed.load(Ordering::SeqCst));
        self.failures()
    }

    /// The launches refused since the last look (never waits for the
    /// launch thread's work).
    pub fn failures(&self) -> Vec<LateFailure> {
        std::mem::take(&mut lock(&self.shared.queue).failed)
    }

    /// Waits until `count` launches were issued in all: a short look, then
    /// asleep until the launch thread reports progress.
    fn wait_until_issued(&self, count: u64) {
        let shared = &*self.shared;
        let mut pacer = LookPacer::new(SPIN);
        while shared.issued.load(Ordering::SeqCst) < count && pacer.pause() {}
        if shared.issued.load(Ordering::SeqCst) >= count {
            return;
        }
        let mut queue = lock(&shared.queue);
        shared.wake_at.store(count, Ordering::SeqCst);
        shared.waiting.store(true, Ordering::SeqCst);
        while shared.issued.load(Ordering::SeqCst) < count {
            queue = shared
                .progress
                .wait(queue)
                .unwrap_or_else(|e| e.into_inner());
        }
        shared.waiting.store(false, Ordering::SeqCst);
    }
}

impl<J: Job> Drop for Launcher<J> {
    fn drop(&mut self) {
        lock(&self.shared.queue).stop = true;
        self.shared.work.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The launch thread: issues what was handed over, in order, until stopped
/// (after issuing what is left).
fn run<J: Job>(shared: &Shared<J>) {
    let mut taken = 0u64;
    // With `VGPU_BACKEND_PROFILE=1`: time in the driver, and launches.
    let mut in_driver = crate::vgpu::profile::enabled().then_some(Duration::ZERO);
    loop {
        // Look for a while before sleeping: in a run of launches the next
        // one comes within a microsecond or two.
        let mut pacer = LookPacer::new(SPIN);
        while shared.handed.load(Ordering::SeqCst) == taken && pacer.pause() {}
        let launches = {
            let mut queue = lock(&shared.queue);
            while queue.launches.is_empty() && !queue.stop {
                queue.asleep = true;
                queue = shared.work.wait(queue).unwrap_or_else(|e| e.into_inner());
                queue.asleep = false;
            }
            if queue.launches.is_empty() {
                if let Some(total) = in_driver {
                    log::info!(
                        "launch thread profile: {taken} launches, {:.3} ms in the driver ({:.3} µs a launch)",
                        total.as_secs_f64() * 1e3,
                        total.as_secs_f64() * 1e6 / taken.max(1) as f64
                    );
                }
                return;
            }
            std::mem::take(&mut queue.launches)
        };
        taken += launches.len() as u64;
        for launch in launches {
            let started = in_driver.map(|_| Instant::now());
            let issued = launch.issue();
            if let (Some(total), Some(t)) = (in_driver.as_mut(), started) {
                *total += t.elapsed();
            }
            if let Err(status) = issued {
                log::debug!("deferred kernel launch failed: {status}");
                let (batch, call) = launch.origin();
                lock(&shared.queue).failed.push(LateFailure {
                    batch,
                    call,
                    status,
                });
            }
            // The objects are let go here, on this thread, before the
            // batch's thread may release its own holds (it drains first).
            shared
                .bytes_in_flight
                .fetch_sub(launch.held_bytes(), Ordering::SeqCst);
            drop(launch);
            let issued = shared.issued.fetch_add(1, Ordering::SeqCst) + 1;
            if shared.waiting.load(Ordering::SeqCst)
                && issued >= shared.wake_at.load(Ordering::SeqCst)
            {
                let _queue = lock(&shared.queue);
                shared.progress.notify_all();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_bounded_in_launches_and_in_parameter_bytes() {
        assert_eq!(room_needed(10, 5, 1000, 256), None);
        // Full: wait until half of it is issued.
        let full = MAX_IN_FLIGHT;
        assert_eq!(room_needed(full + 7, 7, 0, 8), Some(7 + MAX_IN_FLIGHT / 2));
        // Too many bytes: wait for everything handed so far.
        let big = 32 << 10;
        assert_eq!(
            room_needed(600, 100, MAX_BYTES_IN_FLIGHT - big + 1, big),
            Some(600)
        );
        // An empty queue takes any launch.
        assert_eq!(room_needed(600, 600, 0, MAX_BYTES_IN_FLIGHT + 1), None);
    }
}
