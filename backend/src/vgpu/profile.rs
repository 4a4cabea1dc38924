//! An optional per-session profile of where the backend's time goes:
//! `VGPU_BACKEND_PROFILE=1` makes each session count, per kind of call,
//! the calls and the time spent running them, and the batches with the
//! time spent on each outside its calls (decoding, answering, waiting for
//! work handed to other threads). The table goes to the log (info) when
//! the session's state goes (it closed, or its front-end left). The guest
//! library's `VGPU_CUDA_TRACE` is the other half: what the program waited
//! for.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Whether sessions keep a profile (read once).
pub fn enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("VGPU_BACKEND_PROFILE").is_ok_and(|v| v == "1"))
}

#[derive(Default)]
pub struct CallProfile {
    calls: BTreeMap<&'static str, (u64, Duration)>,
    batches: u64,
    batch_time: Duration,
    /// Named steps of a batch outside its calls (decoding, finishing).
    phases: BTreeMap<&'static str, Duration>,
}

impl CallProfile {
    /// A call of kind `name` took `took`.
    pub fn note_call(&mut self, name: &'static str, took: Duration) {
        let entry = self.calls.entry(name).or_default();
        entry.0 += 1;
        entry.1 += took;
    }

    /// A step `name` of a batch, outside its calls, took `took`.
    pub fn note_phase(&mut self, name: &'static str, took: Duration) {
        *self.phases.entry(name).or_default() += took;
    }

    /// A whole batch took `took` (its calls included).
    pub fn note_batch(&mut self, took: Duration) {
        self.batches += 1;
        self.batch_time += took;
    }

    /// The table, one line per kind of call, slowest total first.
    pub fn report(&self) -> String {
        let in_calls: Duration = self.calls.values().map(|(_, t)| *t).sum();
        let mut rows: Vec<_> = self.calls.iter().collect();
        rows.sort_by_key(|(_, (_, t))| std::cmp::Reverse(*t));
        let mut out = format!(
            "session profile: {} batches, {:.3} ms in batches, {:.3} ms of it outside calls ({:.3} µs a batch)\n",
            self.batches,
            ms(self.batch_time),
            ms(self.batch_time.saturating_sub(in_calls)),
            us(self.batch_time.saturating_sub(in_calls)) / self.batches.max(1) as f64,
        );
        for (name, total) in &self.phases {
            out += &format!(
                "  batch step {name:<29} {:>12.3} ms {:>10.3} µs/batch\n",
                ms(*total),
                us(*total) / self.batches.max(1) as f64
            );
        }
        out += &TRANSPORT.report();
        for (name, (count, total)) in rows {
            out += &format!(
                "  {name:<40} {count:>10} calls {:>12.3} ms {:>10.3} µs/call\n",
                ms(*total),
                us(*total) / (*count).max(1) as f64
            );
        }
        out
    }
}

/// What the vring thread did, for the whole worker (one VM): chains taken,
/// the time they took on that thread (resolving, running inline or handing
/// over, answering), and how each wait for the next one ended. Counted only
/// with `VGPU_BACKEND_PROFILE=1`.
pub struct TransportProfile {
    chains: AtomicU64,
    resolve_ns: AtomicU64,
    accept_ns: AtomicU64,
    /// Polls after a chain that found the next one.
    polled: AtomicU64,
    /// Times the thread went back to sleep on the kick.
    slept: AtomicU64,
}

/// The worker's transport profile (one VM per worker process).
pub static TRANSPORT: TransportProfile = TransportProfile {
    chains: AtomicU64::new(0),
    resolve_ns: AtomicU64::new(0),
    accept_ns: AtomicU64::new(0),
    polled: AtomicU64::new(0),
    slept: AtomicU64::new(0),
};

impl TransportProfile {
    /// One chain: `resolve` to turn it into a request, `accept` to run or
    /// hand it over and answer it if it ran here.
    pub fn note_chain(&self, resolve: Duration, accept: Duration) {
        self.chains.fetch_add(1, Ordering::Relaxed);
        self.resolve_ns
            .fetch_add(resolve.as_nanos() as u64, Ordering::Relaxed);
        self.accept_ns
            .fetch_add(accept.as_nanos() as u64, Ordering::Relaxed);
    }

    /// The poll after a chain found the next one.
    pub fn note_found_by_polling(&self) {
        if enabled() {
            self.polled.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The vring thread goes back to waiting for a kick.
    pub fn note_sleep(&self) {
        if enabled() {
            self.slept.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn report(&self) -> String {
        let chains = self.chains.load(Ordering::Relaxed);
        let per = |ns: &AtomicU64| ns.load(Ordering::Relaxed) as f64 / 1e3 / chains.max(1) as f64;
        format!(
            "  vring thread: {chains} chains, {:.3} µs resolving and {:.3} µs running or handing over a chain; next chain found by polling {} times, slept on the kick {} times\n",
            per(&self.resolve_ns),
            per(&self.accept_ns),
            self.polled.load(Ordering::Relaxed),
            self.slept.load(Ordering::Relaxed),
        )
    }
}

/// A running clock, when profiling.
pub fn start() -> Option<Instant> {
    enabled().then(Instant::now)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_report_counts_calls_and_time_outside_them() {
        let mut p = CallProfile::default();
        p.note_call("CuLaunchKernel", Duration::from_micros(3));
        p.note_call("CuLaunchKernel", Duration::from_micros(5));
        p.note_call("CuMemcpyDtoH", Duration::from_micros(20));
        p.note_batch(Duration::from_micros(30));
        let report = p.report();
        assert!(report.contains("1 batches"), "{report}");
        assert!(report.contains("0.002 ms of it outside calls"), "{report}");
        let launch = report
            .lines()
            .find(|l| l.contains("CuLaunchKernel"))
            .unwrap();
        assert!(
            launch.contains(" 2 calls") && launch.contains("4.000 µs/call"),
            "{report}"
        );
        // Slowest total first.
        assert!(report.find("CuMemcpyDtoH") < report.find("CuLaunchKernel"));
    }
}
