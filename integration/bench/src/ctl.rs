//! `vgpu-ctl`, run as a user would: one command against a backend's control
//! socket, its JSON answer parsed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::backend::Backend;
use crate::error::{io, Error, Result};

pub struct Ctl {
    binary: PathBuf,
    control: PathBuf,
}

/// A command's answer and how long it took, from start to exit.
#[derive(Debug)]
pub struct Answer {
    pub json: Value,
    pub elapsed: Duration,
}

impl Ctl {
    /// `binary` talking to `backend`, which must have a control socket.
    pub fn of(binary: &Path, backend: &Backend) -> Result<Ctl> {
        let control = backend.control().ok_or_else(|| Error::Control {
            command: "(any)".into(),
            message: format!(
                "the backend on {} has no control socket",
                backend.socket().display()
            ),
        })?;
        Ok(Ctl {
            binary: binary.to_path_buf(),
            control: control.to_path_buf(),
        })
    }

    /// Runs `vgpu-ctl --control CTL args...`; its answer is the JSON line it
    /// prints on stdout (progress goes to stderr).
    pub fn run(&self, args: &[&str]) -> Result<Answer> {
        let command = args.join(" ");
        let started = Instant::now();
        let output = Command::new(&self.binary)
            .arg("--control")
            .arg(&self.control)
            .arg("--json")
            .args(args)
            .output()
            .map_err(io("run", &self.binary))?;
        let elapsed = started.elapsed();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let json = stdout
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str::<Value>(l).ok());
        match json {
            Some(json) if output.status.success() && json.get("error").is_none() => {
                Ok(Answer { json, elapsed })
            }
            _ => Err(Error::Control {
                command,
                message: format!(
                    "{} {}{}",
                    output.status,
                    stdout.trim(),
                    String::from_utf8_lossy(&output.stderr).trim()
                ),
            }),
        }
    }
}

/// A number field of a JSON answer, or an error naming it.
pub fn number(json: &Value, field: &str) -> Result<f64> {
    json.get(field)
        .and_then(Value::as_f64)
        .ok_or_else(|| Error::Control {
            command: "answer".into(),
            message: format!("no number {field:?} in {json}"),
        })
}
