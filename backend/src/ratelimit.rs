//! Per-VM rate limit on warnings, so a guest cannot flood the host log.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Warnings allowed per window; the rest are counted and summarised.
const BURST: u32 = 20;
const WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct WarnLimiter {
    state: Mutex<(Instant, u32)>,
}

impl Default for WarnLimiter {
    fn default() -> Self {
        WarnLimiter {
            state: Mutex::new((Instant::now(), 0)),
        }
    }
}

impl WarnLimiter {
    /// Whether a warning may be logged now; logs how many were suppressed
    /// when a new window opens.
    pub fn allow(&self) -> bool {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (start, count) = &mut *state;
        if start.elapsed() >= WINDOW {
            if *count > BURST {
                log::warn!(
                    "{} guest warnings suppressed in the last {:?}",
                    *count - BURST,
                    WINDOW
                );
            }
            *start = Instant::now();
            *count = 0;
        }
        *count = count.saturating_add(1);
        *count <= BURST
    }
}

/// `log::warn!` through a limiter.
#[macro_export]
macro_rules! guest_warn {
    ($limiter:expr, $($arg:tt)*) => {
        if $limiter.allow() {
            log::warn!($($arg)*);
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_is_allowed_then_suppressed() {
        let limiter = WarnLimiter::default();
        assert!((0..BURST).all(|_| limiter.allow()));
        assert!(!limiter.allow());
    }
}
