//! Where staged transfers spend their time (`VGPU_BACKEND_PROFILE=1`):
//! copying between the program and the slots, waiting for the device to
//! free a slot (or to fill it), and starting device moves, per direction.
//! A line goes to the log (info) every `REPORT_EVERY` transfers (or 4 GiB)
//! of one direction.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Transfers of one direction between two log lines (or fewer, when
/// they moved `REPORT_BYTES`).
const REPORT_EVERY: u64 = 512;
const REPORT_BYTES: u64 = 1 << 32;

/// The steps of a staged transfer.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Copy,
    Wait,
    Start,
}

/// Which way a transfer goes.
#[derive(Debug, Clone, Copy)]
pub enum Way {
    ToDevice,
    ToHost,
}

#[derive(Default)]
struct Counters {
    transfers: AtomicU64,
    bytes: AtomicU64,
    total_ns: AtomicU64,
    step_ns: [AtomicU64; 3],
}

static COUNTERS: [Counters; 2] = [const { new_counters() }, const { new_counters() }];

const fn new_counters() -> Counters {
    Counters {
        transfers: AtomicU64::new(0),
        bytes: AtomicU64::new(0),
        total_ns: AtomicU64::new(0),
        step_ns: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
    }
}

/// Times `f` as `step` of a transfer going `way`, when profiling.
pub fn timed<R>(way: Way, step: Step, f: impl FnOnce() -> R) -> R {
    if !crate::vgpu::profile::enabled() {
        return f();
    }
    let start = Instant::now();
    let result = f();
    COUNTERS[way as usize].step_ns[step as usize]
        .fetch_add(nanos(start.elapsed()), Ordering::Relaxed);
    result
}

/// Notes a whole transfer of `bytes` going `way` that took `took`; logs
/// that direction's totals every `REPORT_EVERY` transfers.
pub fn note_transfer(way: Way, bytes: usize, took: Duration) {
    let c = &COUNTERS[way as usize];
    let before = c.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    c.total_ns.fetch_add(nanos(took), Ordering::Relaxed);
    let count = c.transfers.fetch_add(1, Ordering::Relaxed) + 1;
    let crossed = before / REPORT_BYTES != (before + bytes as u64) / REPORT_BYTES;
    if count.is_multiple_of(REPORT_EVERY) || crossed {
        let ms = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64 / 1e6;
        let total = c.total_ns.load(Ordering::Relaxed);
        let bytes = c.bytes.load(Ordering::Relaxed) as f64;
        log::info!(
            "staged transfers {way:?}: {count}, {:.1} MB in {:.2} ms ({:.2} GB/s); copying {:.2} ms, waiting for the device {:.2} ms, starting moves {:.2} ms; {} copy threads",
            bytes / 1e6,
            total as f64 / 1e6,
            bytes / total.max(1) as f64,
            ms(&c.step_ns[Step::Copy as usize]),
            ms(&c.step_ns[Step::Wait as usize]),
            ms(&c.step_ns[Step::Start as usize]),
            crate::peer_copy::threads(),
        );
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
