//! A `vgpu-backend` child process of our own, on a socket of its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{io, Error, Result};

const START_TIMEOUT: Duration = Duration::from_secs(30);

pub struct Backend {
    child: Child,
    socket: PathBuf,
    log: PathBuf,
}

impl Backend {
    /// Starts `binary` in `dir` as `<name>.sock` with extra arguments and
    /// waits until its socket exists.
    pub fn start(binary: &Path, dir: &Path, name: &str, extra: &[String]) -> Result<Backend> {
        let socket = dir.join(format!("{name}.sock"));
        let log = dir.join(format!("{name}.log"));
        let _ = std::fs::remove_file(&socket);
        let log_file = std::fs::File::create(&log).map_err(io("create", &log))?;
        let child = Command::new(binary)
            .arg("--socket")
            .arg(&socket)
            .arg("--log-level")
            .arg("warn")
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(io("start", binary))?;
        let mut backend = Backend { child, socket, log };
        let deadline = Instant::now() + START_TIMEOUT;
        while !backend.socket.exists() {
            if Instant::now() > deadline || !backend.is_running() {
                return Err(Error::BackendStart {
                    socket: backend.socket.clone(),
                    log: backend.log(),
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(backend)
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: signalling our own child process, which we have not
            // reaped yet, so the pid cannot have been reused.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}
