//! Large copies between this worker and its loopback peer, split over a
//! few threads.
//!
//! One `process_vm_readv` moves about what one core's memory copy does
//! (4-13 GB/s measured on the H100 host, where the NVIDIA driver's own
//! pageable path moves 7-13 GB/s with its staging pipelined behind the
//! DMA). The kernel pins and copies each stripe of a range on its own, so
//! stripes of one range copied by several threads at once add up until
//! memory bandwidth is reached, provided they lie in different 2 MiB
//! regions of the peer: the pages of one region share a page-table lock,
//! and two threads pinning pages under it spun on that lock (measured:
//! a 1 MiB copy split in two took 35% longer than one thread's). The threads are a small pool kept for the
//! worker's life (a spawn per copy would cost more than it saves); after a
//! stripe each looks for the next one for a bounded time before it sleeps,
//! since waking a sleeping thread cost tens of microseconds on the H100
//! host, as much as a 1 MiB stripe's copy. A range shorter than two
//! stripes is copied by the calling thread alone.
//!
//! `VGPU_PEER_COPY_THREADS` (read once): threads a copy may use, the
//! calling one included (1: no pool). The default is a quarter of the
//! CPUs, at most 4, so that on a 2-CPU machine no thread is added.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use crate::peer::PeerMemory;

/// Environment variable: threads one peer copy may use.
pub const THREADS_ENV: &str = "VGPU_PEER_COPY_THREADS";
/// Most threads a copy may use, whatever the environment says.
const MAX_THREADS: usize = 16;
/// Span of the peer's memory one page-table page maps, whose lock the
/// pinning of its pages takes: stripes split on these boundaries.
const REGION: u64 = 2 << 20;
/// A part of a range shorter than this next to a boundary stays with its
/// neighbour rather than take a thread.
const MIN_PART: u64 = 64 << 10;
/// How long a pool thread looks for its next stripe before it sleeps:
/// longer than the gap between the chunks of one transfer and between
/// back-to-back transfers.
const LOOK_BUDGET: std::time::Duration = std::time::Duration::from_micros(200);

/// Threads one copy may use, the calling one included.
pub fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        parse_threads(std::env::var(THREADS_ENV).ok().as_deref(), cpus)
    })
}

/// The thread count `VGPU_PEER_COPY_THREADS` asks for (a bad value is
/// named in a warning and the default used).
fn parse_threads(value: Option<&str>, cpus: usize) -> usize {
    let default = (cpus / 4).clamp(1, 4);
    match value.map(str::trim) {
        None | Some("") => default,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if (1..=MAX_THREADS).contains(&n) => n,
            _ => {
                log::warn!(
                    "{THREADS_ENV}={text:?} is not a thread count from 1 to {MAX_THREADS}; using {default}"
                );
                default
            }
        },
    }
}

/// Fills `len` bytes at `dst` from the peer's address `remote`.
///
/// # Safety
/// `dst` must be valid for writes of `len` bytes, and nothing else may
/// access them until this returns.
pub unsafe fn read(peer: &PeerMemory, remote: u64, dst: *mut u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract.
    unsafe { striped(threads(), peer, remote, dst, len, Way::FromPeer) }
}

/// Copies `len` bytes at `src` to the peer's address `remote`.
///
/// # Safety
/// `src` must be valid for reads of `len` bytes until this returns.
pub unsafe fn write(peer: &PeerMemory, remote: u64, src: *const u8, len: usize) -> io::Result<()> {
    // SAFETY: the caller's contract; nothing writes through the pointer.
    unsafe { striped(threads(), peer, remote, src.cast_mut(), len, Way::ToPeer) }
}

#[derive(Debug, Clone, Copy)]
enum Way {
    FromPeer,
    ToPeer,
}

/// How `[remote, remote + len)` splits: at most `threads` stripes, as
/// (offset, length), each a run of whole 2 MiB regions of the peer's
/// memory (the first and last may be partial).
fn stripes_for(remote: u64, len: usize, threads: usize) -> Vec<(usize, usize)> {
    let end = remote.saturating_add(len as u64);
    // Region boundaries inside the range, not too near its ends.
    let first = (remote / REGION + 1).saturating_mul(REGION);
    let cuts: Vec<u64> = (0..)
        .map(|i: u64| first.saturating_add(i.saturating_mul(REGION)))
        .take_while(|&b| b < end)
        .filter(|&b| b - remote >= MIN_PART && end - b >= MIN_PART)
        .collect();
    let parts = cuts.len() + 1;
    let count = parts.min(threads.max(1));
    // `count` stripes of about equal numbers of parts.
    let mut stripes = Vec::with_capacity(count);
    let mut start = remote;
    for i in 1..=count {
        let stop = if i == count {
            end
        } else {
            cuts[i * parts / count - 1]
        };
        stripes.push(((start - remote) as usize, (stop - start) as usize));
        start = stop;
    }
    stripes
}

/// # Safety
/// `local` is valid for `len` bytes in the direction `way` copies, and
/// untouched by others until this returns.
unsafe fn striped(
    threads: usize,
    peer: &PeerMemory,
    remote: u64,
    local: *mut u8,
    len: usize,
    way: Way,
) -> io::Result<()> {
    let stripes = if threads > 1 && len as u64 > MIN_PART {
        stripes_for(remote, len, threads)
    } else {
        vec![(0, len)]
    };
    let pool = if stripes.len() > 1 {
        pool(threads)
    } else {
        None
    };
    let Some(pool) = pool else {
        // SAFETY: the caller's contract.
        return unsafe { copy_one(peer, remote, local, len, way) };
    };
    let latch = Arc::new(Latch::new(stripes.len() - 1));
    let mut inline = Vec::new();
    for (i, &(at, stripe)) in stripes.iter().enumerate().skip(1) {
        let job = Job {
            peer: *peer,
            remote: remote.wrapping_add(at as u64),
            local: local as usize + at,
            len: stripe,
            way,
            latch: latch.clone(),
        };
        if let Err(job) = pool.send(i - 1, job) {
            inline.push(job.0);
        }
    }
    // SAFETY: the first stripe lies inside the caller's range.
    let mut result = unsafe { copy_one(peer, remote, local, stripes[0].1, way) };
    for job in inline {
        job.run();
    }
    // The other stripes still write into (or read from) the caller's
    // memory: wait for them whatever this thread's stripe gave.
    if let Some(e) = latch.wait() {
        result = result.and(Err(e));
    }
    result
}

/// # Safety
/// As [`striped`], for one range.
unsafe fn copy_one(
    peer: &PeerMemory,
    remote: u64,
    local: *mut u8,
    len: usize,
    way: Way,
) -> io::Result<()> {
    // SAFETY: the caller's contract.
    unsafe {
        match way {
            Way::FromPeer => peer.read_raw(remote, local, len),
            Way::ToPeer => peer.write_raw(remote, local, len),
        }
    }
}

/// One stripe for a pool thread.
struct Job {
    peer: PeerMemory,
    remote: u64,
    local: usize,
    len: usize,
    way: Way,
    latch: Arc<Latch>,
}

impl Job {
    fn run(self) {
        // SAFETY: `striped` made the job from a stripe of its caller's
        // range and waits on the latch before returning, so the memory is
        // valid and reserved for this stripe until `done` below.
        let result = unsafe {
            copy_one(
                &self.peer,
                self.remote,
                self.local as *mut u8,
                self.len,
                self.way,
            )
        };
        self.latch.done(result.err());
    }
}

/// Counts stripes down to zero; keeps the first error. The waiter looks
/// at the count for a bounded time before it sleeps: a stripe ends a few
/// microseconds after the waiter's own, and a futex wake-up costs more
/// than that on the GPU hosts.
struct Latch {
    left: AtomicUsize,
    error: Mutex<Option<io::Error>>,
    /// Whether the waiter sleeps (then the last stripe wakes it).
    sleeping: Mutex<bool>,
    zero: Condvar,
}

impl Latch {
    fn new(count: usize) -> Latch {
        Latch {
            left: AtomicUsize::new(count),
            error: Mutex::new(None),
            sleeping: Mutex::new(false),
            zero: Condvar::new(),
        }
    }

    fn done(&self, error: Option<io::Error>) {
        if let Some(e) = error {
            self.error
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get_or_insert(e);
        }
        if self.left.fetch_sub(1, Ordering::AcqRel) == 1 {
            // Under the lock, so a waiter deciding to sleep sees the count
            // or gets the wake-up.
            let sleeping = self.sleeping.lock().unwrap_or_else(|e| e.into_inner());
            if *sleeping {
                self.zero.notify_one();
            }
        }
    }

    fn wait(&self) -> Option<io::Error> {
        let mut pacer = vgpu_protocol::pacing::LookPacer::new(LOOK_BUDGET);
        while self.left.load(Ordering::Acquire) > 0 && pacer.pause() {}
        if self.left.load(Ordering::Acquire) > 0 {
            let mut sleeping = self.sleeping.lock().unwrap_or_else(|e| e.into_inner());
            *sleeping = true;
            while self.left.load(Ordering::Acquire) > 0 {
                sleeping = self.zero.wait(sleeping).unwrap_or_else(|e| e.into_inner());
            }
        }
        self.error.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// The worker's copy threads, one queue each.
struct Pool {
    queues: Vec<Mutex<Sender<Job>>>,
}

/// A job the pool could not take, handed back to run inline.
struct Refused(Job);

impl Pool {
    fn send(&self, thread: usize, job: Job) -> Result<(), Refused> {
        let Some(queue) = self.queues.get(thread) else {
            return Err(Refused(job));
        };
        let queue = queue.lock().unwrap_or_else(|e| e.into_inner());
        queue.send(job).map_err(|e| Refused(e.0))
    }
}

/// The pool of `threads - 1` threads (the calling thread is the other),
/// started on first use (after the sandbox, whose filter the threads
/// inherit); `None` when no thread could be started.
fn pool(threads: usize) -> Option<&'static Pool> {
    static POOL: OnceLock<Option<Pool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut queues = Vec::new();
        for i in 1..threads {
            let (tx, rx) = channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name(format!("peer_copy{i}"))
                .spawn(move || serve(rx));
            match spawned {
                Ok(_) => queues.push(Mutex::new(tx)),
                Err(e) => {
                    log::warn!("peer copies: thread {i} could not start ({e}); fewer threads");
                    break;
                }
            }
        }
        (!queues.is_empty()).then_some(Pool { queues })
    })
    .as_ref()
}

/// A pool thread: runs stripes until the pool goes.
fn serve(jobs: Receiver<Job>) {
    loop {
        let mut pacer = vgpu_protocol::pacing::LookPacer::new(LOOK_BUDGET);
        let job = loop {
            match jobs.try_recv() {
                Ok(job) => break Some(job),
                Err(TryRecvError::Disconnected) => return,
                Err(TryRecvError::Empty) if pacer.pause() => continue,
                Err(TryRecvError::Empty) => break None,
            }
        };
        match job.map_or_else(|| jobs.recv().ok(), Some) {
            Some(job) => job.run(),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_count_defaults_to_a_quarter_of_the_cpus_and_names_bad_values() {
        assert_eq!(parse_threads(None, 2), 1);
        assert_eq!(parse_threads(None, 16), 4);
        assert_eq!(parse_threads(None, 128), 4);
        assert_eq!(parse_threads(Some("3"), 2), 3);
        assert_eq!(parse_threads(Some("0"), 16), 4);
        assert_eq!(parse_threads(Some("many"), 16), 4);
        assert_eq!(parse_threads(Some("17"), 16), 4);
    }

    #[test]
    fn stripes_follow_the_peers_2_mib_regions() {
        const M: u64 = 1 << 20;
        // Inside one region: one stripe whatever the threads.
        assert_eq!(stripes_for(4 * M, M as usize, 4), vec![(0, M as usize)]);
        // Across one boundary: two, split on it.
        assert_eq!(
            stripes_for(3 * M, 2 * M as usize, 4),
            vec![(0, M as usize), (M as usize, M as usize)]
        );
        // A sliver past a boundary stays with its neighbour.
        assert_eq!(
            stripes_for(2 * M - 4096, M as usize, 4),
            vec![(0, M as usize)]
        );
        // Eight regions on four threads: two each, aligned.
        let stripes = stripes_for(16 * M, 16 * M as usize, 4);
        assert_eq!(stripes.len(), 4);
        assert!(stripes.iter().all(|&(_, len)| len == 4 * M as usize));
        // Unaligned: the stripes tile the range, inner edges on boundaries.
        let remote = 5 * M + 12345;
        let len = (13 * M) as usize;
        let stripes = stripes_for(remote, len, 3);
        assert_eq!(stripes.len(), 3);
        let mut at = 0;
        for &(offset, stripe) in &stripes {
            assert_eq!(offset, at);
            at += stripe;
        }
        assert_eq!(at, len);
        for &(offset, _) in &stripes[1..] {
            assert_eq!((remote + offset as u64) % REGION, 0);
        }
        assert_eq!(stripes_for(0, 8 * M as usize, 1), vec![(0, 8 * M as usize)]);
    }

    /// Striped reads and writes against this very process (a process may
    /// always attach to itself), with more threads than the default.
    #[test]
    fn striped_copies_move_every_byte_and_fail_on_unmapped_peer_memory() {
        let peer = PeerMemory::probe(std::process::id() as libc::pid_t).expect("self attach");
        let len = (6 << 20) + 12345;
        let source: Vec<u8> = (0..len).map(|i| (i * 7 + i / 4096) as u8).collect();
        let mut copy = vec![0u8; len];
        // SAFETY: `copy` is writable for `len` bytes.
        unsafe {
            striped(
                4,
                &peer,
                source.as_ptr() as u64,
                copy.as_mut_ptr(),
                len,
                Way::FromPeer,
            )
        }
        .expect("read");
        assert!(copy == source);
        let mut back = vec![0u8; len];
        // SAFETY: `copy` is readable for `len` bytes.
        unsafe {
            striped(
                4,
                &peer,
                back.as_mut_ptr() as u64,
                copy.as_mut_ptr(),
                len,
                Way::ToPeer,
            )
        }
        .expect("write");
        assert!(back == source);
        // SAFETY: as above; the remote address is never mapped.
        let bad = unsafe { striped(4, &peer, 8, copy.as_mut_ptr(), len, Way::FromPeer) };
        assert!(bad.is_err());
    }
}
