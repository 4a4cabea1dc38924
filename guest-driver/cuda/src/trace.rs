//! A profile of what the library does, for finding what makes a program
//! slower than native: with `VGPU_CUDA_TRACE` set (to a file path, or to
//! `1` or `stderr` for standard error) the library counts, per driver-API
//! entry point, its calls and the time spent in them, and per protocol
//! message how often it went synchronously (a round trip) or in a batch,
//! with the round trips' time. The table is written when the process
//! exits; `VGPU_CUDA_TRACE_RESET=N` clears it after the Nth call of
//! `cuCtxSynchronize` (a program's warm-up), so the table shows the steady
//! state. Off (one atomic load per call) when the variable is unset.

use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How an entry or message was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A driver-API entry point (time: the whole call).
    Entry,
    /// A message sent and waited for (time: the round trip).
    RoundTrip,
    /// A message queued in a batch (time: the encoding).
    Batched,
    /// A message queued in a full batch, which first waited for the device
    /// to finish the batch before it (time: the wait and the encoding).
    FullBatch,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Entry => "entry",
            Kind::RoundTrip => "round-trip",
            Kind::Batched => "batched",
            Kind::FullBatch => "full-batch",
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub calls: u64,
    pub total: Duration,
    pub max: Duration,
}

/// The counters, by (kind, name).
#[derive(Debug, Default)]
pub struct Profile {
    counts: HashMap<(Kind, &'static str), Counts>,
}

impl Profile {
    pub fn record(&mut self, kind: Kind, name: &'static str, took: Duration) {
        let c = self.counts.entry((kind, name)).or_default();
        c.calls += 1;
        c.total += took;
        c.max = c.max.max(took);
    }

    pub fn get(&self, kind: Kind, name: &'static str) -> Option<Counts> {
        self.counts.get(&(kind, name)).copied()
    }

    pub fn clear(&mut self) {
        self.counts.clear();
    }

    /// The table: one line per (kind, name), the costliest first within
    /// each kind.
    pub fn table(&self) -> String {
        let mut rows: Vec<_> = self.counts.iter().collect();
        rows.sort_by(|a, b| a.0 .0.cmp(&b.0 .0).then(b.1.total.cmp(&a.1.total)));
        let mut out = format!(
            "{:<11} {:<40} {:>10} {:>12} {:>10} {:>10}\n",
            "kind", "name", "calls", "total_us", "mean_us", "max_us"
        );
        for ((kind, name), c) in rows {
            let total = c.total.as_secs_f64() * 1e6;
            out.push_str(&format!(
                "{:<11} {:<40} {:>10} {:>12.1} {:>10.3} {:>10.1}\n",
                kind.label(),
                name,
                c.calls,
                total,
                total / c.calls.max(1) as f64,
                c.max.as_secs_f64() * 1e6,
            ));
        }
        out
    }
}

struct Tracer {
    /// Where the table goes: `None` for standard error.
    path: Option<String>,
    profile: Mutex<Profile>,
    /// `cuCtxSynchronize` calls left before the counters are cleared.
    reset_after: AtomicU64,
}

fn tracer() -> Option<&'static Tracer> {
    static TRACER: OnceLock<Option<Tracer>> = OnceLock::new();
    TRACER
        .get_or_init(|| {
            let setting = std::env::var("VGPU_CUDA_TRACE").ok()?;
            let path = match setting.as_str() {
                "" | "0" => return None,
                "1" | "stderr" => None,
                path => Some(path.to_owned()),
            };
            let reset_after = std::env::var("VGPU_CUDA_TRACE_RESET")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            // SAFETY: `write_at_exit` is an `extern "C" fn()` that catches
            // every panic; registering it has no other precondition.
            if unsafe { libc::atexit(write_at_exit) } != 0 {
                log::warn!("VGPU_CUDA_TRACE: cannot register the exit handler");
            }
            Some(Tracer {
                path,
                profile: Mutex::new(Profile::default()),
                reset_after: AtomicU64::new(reset_after),
            })
        })
        .as_ref()
}

/// The start of something to time, if tracing is on.
pub fn start() -> Option<Instant> {
    tracer().map(|_| Instant::now())
}

/// Records what began at `started` (from [`start`]).
pub fn done(started: Option<Instant>, kind: Kind, name: &'static str) {
    let (Some(t), Some(started)) = (tracer(), started) else {
        return;
    };
    let took = started.elapsed();
    let mut profile = crate::runtime::lock(&t.profile);
    profile.record(kind, name, took);
    if kind == Kind::Entry && name.starts_with("cuCtxSynchronize") {
        // Counts down to 1, clears there, then stays at 0.
        let left = t.reset_after.load(Ordering::Relaxed);
        if left == 1 {
            profile.clear();
        }
        if left > 0 {
            t.reset_after.store(left - 1, Ordering::Relaxed);
        }
    }
}

/// Runs `f`, a round trip, and records its time under `name`.
pub fn round_trip<T>(name: &'static str, f: impl FnOnce() -> T) -> T {
    let started = start();
    let out = f();
    done(started, Kind::RoundTrip, name);
    out
}

/// Records a message queued in a batch since `started`: its time is the
/// encoding, unless the batch was full and the queueing waited for the
/// device to finish the batch before (counted apart, as `Kind::FullBatch`).
pub fn queued(started: Option<Instant>, name: &'static str) {
    let Some(at) = started else { return };
    let kind = if at.elapsed() >= FULL_BATCH_WAIT {
        Kind::FullBatch
    } else {
        Kind::Batched
    };
    done(started, kind, name);
}

/// A queueing that took this long waited for the device (encoding a
/// message takes well under a microsecond).
const FULL_BATCH_WAIT: Duration = Duration::from_micros(5);

/// Counts a message queued in a batch.
pub fn batched(name: &'static str) {
    if tracer().is_some() {
        done(Some(Instant::now()), Kind::Batched, name);
    }
}

extern "C" fn write_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let Some(t) = tracer() else { return };
        let mut table = crate::runtime::lock(&t.profile).table();
        let waits = &vgpu_transport::loopback::WAIT_COUNTS;
        table.push_str(&format!(
            "waits: {} kicks sent, {} answers found while looking, {} sleeps on the call eventfd (since start)\n",
            waits.kicks.load(Ordering::Relaxed),
            waits.found_looking.load(Ordering::Relaxed),
            waits.slept.load(Ordering::Relaxed),
        ));
        let written = match &t.path {
            Some(path) => std::fs::write(path, &table),
            None => std::io::stderr().write_all(table.as_bytes()),
        };
        if let Err(e) = written {
            log::warn!("VGPU_CUDA_TRACE: cannot write the table: {e}");
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_sums_per_kind_and_name() {
        let mut p = Profile::default();
        p.record(Kind::RoundTrip, "CuMemcpyDtoH", Duration::from_micros(5));
        p.record(Kind::RoundTrip, "CuMemcpyDtoH", Duration::from_micros(7));
        p.record(Kind::Batched, "CuMemcpyDtoH", Duration::ZERO);
        let rt = p.get(Kind::RoundTrip, "CuMemcpyDtoH").expect("recorded");
        assert_eq!(rt.calls, 2);
        assert_eq!(rt.total, Duration::from_micros(12));
        assert_eq!(rt.max, Duration::from_micros(7));
        assert_eq!(
            p.get(Kind::Batched, "CuMemcpyDtoH").map(|c| c.calls),
            Some(1)
        );
        assert_eq!(p.get(Kind::Entry, "CuMemcpyDtoH"), None);
    }

    #[test]
    fn table_lists_the_costliest_first_within_a_kind() {
        let mut p = Profile::default();
        p.record(Kind::Entry, "cuMemcpyHtoD_v2", Duration::from_micros(1));
        p.record(Kind::Entry, "cuCtxSynchronize", Duration::from_micros(9));
        p.record(
            Kind::RoundTrip,
            "CuStreamSynchronize",
            Duration::from_micros(3),
        );
        let table = p.table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].contains("cuCtxSynchronize"));
        assert!(lines[2].contains("cuMemcpyHtoD_v2"));
        assert!(lines[3].starts_with("round-trip"));
        p.clear();
        assert_eq!(p.table().lines().count(), 1);
    }
}
