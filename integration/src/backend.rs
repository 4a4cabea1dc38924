//! `vgpu-backend` as a child process on a socket of its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Backend {
    child: Child,
    pub socket: PathBuf,
    pub control: PathBuf,
    pub log: PathBuf,
}

impl Backend {
    /// Starts the daemon in `dir` with extra arguments; waits for its socket.
    pub fn start(dir: &Path, extra: &[&str]) -> Backend {
        let socket = dir.join("vgpu.sock");
        let control = dir.join("vgpu.ctl");
        let log = dir.join("backend.log");
        let log_file = std::fs::File::create(&log).expect("backend log");
        let child = Command::new(crate::paths::backend_binary())
            .arg("--socket")
            .arg(&socket)
            .arg("--control")
            .arg(&control)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("start vgpu-backend (build the workspace first)");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !socket.exists() {
            assert!(
                Instant::now() < deadline,
                "vgpu-backend did not start:\n{}",
                read(&log)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Backend {
            child,
            socket,
            control,
            log,
        }
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log(&self) -> String {
        read(&self.log)
    }

    /// The control socket's `status` answer.
    pub fn status(&self) -> String {
        use std::io::{BufRead, BufReader, Write};
        let mut stream =
            std::os::unix::net::UnixStream::connect(&self.control).expect("control socket");
        writeln!(stream, "status").expect("send status");
        let mut line = String::new();
        BufReader::new(stream)
            .read_line(&mut line)
            .expect("read status");
        line
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

impl Drop for Backend {
    fn drop(&mut self) {
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
