//! An OpenCL program running in the background, watched through its
//! output: the state benchmarks act on a vGPU while a program uses it.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use crate::error::{io, Error, Result};
use crate::runner::{tail, Output};

pub struct Running {
    child: Child,
    /// The program's file name (its `RESULT` lines name it).
    name: String,
    label: String,
    log: PathBuf,
}

impl Running {
    pub(crate) fn new(child: Child, name: String, label: String, log: &Path) -> Running {
        Running {
            child,
            name,
            label,
            log: log.to_path_buf(),
        }
    }

    fn text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `PROGRESS n` it printed (checkpoint_loop prints one per
    /// `-p` iterations, after a clFinish).
    pub fn progress(&self) -> Option<u64> {
        last_progress(&self.text())
    }

    /// Waits until it has printed `PROGRESS n` or a later one.
    pub fn wait_for_progress(&mut self, n: u64, timeout: Duration) -> Result<u64> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(at) = self.progress().filter(|&p| p >= n) {
                return Ok(at);
            }
            if let Some(status) = self.child.try_wait().map_err(io("wait for", &self.log))? {
                return Err(self.failed(format!("exited ({status}) before PROGRESS {n}")));
            }
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    program: format!("{} waiting for PROGRESS {n}", self.label),
                    seconds: timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Waits for it to exit; its output if it exited 0 and printed a
    /// passing `RESULT` (the program checks its own results).
    pub fn finish(&mut self, timeout: Duration) -> Result<Output> {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().map_err(io("wait for", &self.log))? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return Err(Error::Timeout {
                    program: self.label.clone(),
                    seconds: timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let output = Output::new(self.label.clone(), self.text());
        if !status.success() || !output.passed(&self.name) {
            return Err(self.failed(status.to_string()));
        }
        Ok(output)
    }

    fn failed(&self, status: String) -> Error {
        Error::ProgramFailed {
            program: self.label.clone(),
            status,
            tail: tail(&self.text()),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        // Only a run that was not waited for is still there: it was left
        // running on purpose (a checkpoint's workload) or a step failed.
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn last_progress(text: &str) -> Option<u64> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("PROGRESS ")?.trim().parse().ok())
        .next_back()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_progress_line_counts() {
        assert_eq!(last_progress("x\nPROGRESS 1\nPROGRESS 12\nPROG"), Some(12));
        assert_eq!(last_progress("buffers 8\n"), None);
    }
}
