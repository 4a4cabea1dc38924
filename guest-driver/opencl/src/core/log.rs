//! Diagnostics on stderr, only when `VGPU_LOG` is set (`error`, `warn`,
//! `info`, `debug`, `trace`; any other value means `info`). A library loaded
//! into arbitrary applications stays silent otherwise.

use std::error::Error;
use std::io::Write;

use log::{LevelFilter, Log, Metadata, Record};

struct StderrLogger;

impl Log for StderrLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            let _ = writeln!(
                std::io::stderr(),
                "vgpu-opencl {}: {}",
                record.level(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

static LOGGER: StderrLogger = StderrLogger;

fn level() -> Option<LevelFilter> {
    let value = std::env::var("VGPU_LOG").ok()?;
    Some(value.parse().unwrap_or(LevelFilter::Info))
}

/// Installs the stderr logger when `VGPU_LOG` asks for it and the
/// application has no logger of its own.
pub fn init() {
    if let Some(level) = level() {
        if log::set_logger(&LOGGER).is_ok() {
            log::set_max_level(level);
        }
    }
}

/// Says once why there is no platform (called once, from the connection).
pub fn unavailable(error: &dyn Error) {
    if level().is_none() {
        return;
    }
    let mut message = format!("vgpu-opencl: no platform: {error}");
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    let _ = writeln!(std::io::stderr(), "{message}");
}
