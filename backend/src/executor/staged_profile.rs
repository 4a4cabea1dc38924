//! Where staged transfers spend their time (`VGPU_BACKEND_PROFILE=1`):
//! copying between the program and the slots, waiting for the device to
//! free a slot, and starting device moves. A line goes to the log (info)
//! every `REPORT_EVERY` transfers of the worker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Transfers between two log lines.
const REPORT_EVERY: u64 = 512;

/// The steps of a staged transfer.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Copy,
    Wait,
    Start,
}

static TRANSFERS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);
static TOTAL_NS: AtomicU64 = AtomicU64::new(0);
static STEP_NS: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

/// Times `f` as `step` when profiling.
pub fn timed<R>(step: Step, f: impl FnOnce() -> R) -> R {
    if !crate::vgpu::profile::enabled() {
        return f();
    }
    let start = Instant::now();
    let result = f();
    STEP_NS[step as usize].fetch_add(nanos(start.elapsed()), Ordering::Relaxed);
    result
}

/// Notes a whole transfer of `bytes` that took `took`; logs the totals
/// every `REPORT_EVERY` transfers.
pub fn note_transfer(bytes: usize, took: Duration) {
    BYTES.fetch_add(bytes as u64, Ordering::Relaxed);
    TOTAL_NS.fetch_add(nanos(took), Ordering::Relaxed);
    let count = TRANSFERS.fetch_add(1, Ordering::Relaxed) + 1;
    if count.is_multiple_of(REPORT_EVERY) {
        let ms = |ns: u64| ns as f64 / 1e6;
        let total = TOTAL_NS.load(Ordering::Relaxed);
        log::info!(
            "staged transfers: {count}, {:.1} MB in {:.2} ms ({:.2} GB/s); copying {:.2} ms, waiting for slots {:.2} ms, starting moves {:.2} ms; {} copy threads",
            BYTES.load(Ordering::Relaxed) as f64 / 1e6,
            ms(total),
            BYTES.load(Ordering::Relaxed) as f64 / total.max(1) as f64,
            ms(STEP_NS[Step::Copy as usize].load(Ordering::Relaxed)),
            ms(STEP_NS[Step::Wait as usize].load(Ordering::Relaxed)),
            ms(STEP_NS[Step::Start as usize].load(Ordering::Relaxed)),
            crate::peer_copy::threads(),
        );
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
