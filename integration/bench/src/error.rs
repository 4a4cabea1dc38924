//! What can stop a benchmark run.

use std::path::PathBuf;

/// A benchmark run failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot {what} {path}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} failed ({status}); last output:\n{tail}")]
    ProgramFailed {
        program: String,
        status: String,
        tail: String,
    },
    #[error("{program} ran longer than {seconds} s and was stopped")]
    Timeout { program: String, seconds: u64 },
    #[error("{program} printed no {what}; last output:\n{tail}")]
    MissingOutput {
        program: String,
        what: String,
        tail: String,
    },
    #[error("vgpu-backend on {socket} exited or timed out before {what}; its log:\n{log}")]
    BackendStart {
        socket: PathBuf,
        what: String,
        log: String,
    },
    #[error("vgpu-ctl {command} failed: {message}")]
    Control { command: String, message: String },
    #[error("live migration: {0}")]
    Migration(String),
    #[error("cannot be measured here: {0}")]
    Unavailable(String),
    #[error("building the benchmark programs failed:\n{0}")]
    Build(String),
    #[error("cannot write JSON")]
    Json(#[source] serde_json::Error),
    #[error("cannot draw {0}: {1}")]
    Plot(String, String),
}

pub type Result<T> = std::result::Result<T, Error>;

/// `map_err` helper for I/O on a path.
pub fn io(what: &'static str, path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |source| Error::Io { what, path, source }
}
