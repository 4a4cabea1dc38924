//! A `vgpu-backend` child process of our own, on a socket of its own.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{io, Error, Result};

const START_TIMEOUT: Duration = Duration::from_secs(30);

/// How to start a backend beyond its socket.
#[derive(Debug, Clone)]
pub struct Launch {
    pub args: Vec<String>,
    /// Extra environment, e.g. `POCL_DEVICES` to offer two PoCL devices.
    pub env: Vec<(OsString, OsString)>,
    /// `warn` keeps the log small; the state benchmarks read `info` lines.
    pub log_level: &'static str,
    /// Also listen on `<name>.ctl` for vgpu-ctl.
    pub control: bool,
    /// Return once spawned, without waiting for the socket (a restore
    /// times the start-up itself).
    pub wait_for_socket: bool,
}

impl Launch {
    pub fn new(args: &[String]) -> Launch {
        Launch {
            args: args.to_vec(),
            env: Vec::new(),
            log_level: "warn",
            control: false,
            wait_for_socket: true,
        }
    }
}

/// Whether backends make sockets anyone may connect to (`--program-user`).
static OPEN_SOCKETS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes every backend started from now on create sockets that the
/// programs' user may connect to.
pub fn open_sockets_to_all() {
    OPEN_SOCKETS.store(true, std::sync::atomic::Ordering::Relaxed);
}

pub struct Backend {
    child: Child,
    socket: PathBuf,
    control: Option<PathBuf>,
    log: PathBuf,
    started: Instant,
}

impl Backend {
    /// Starts `binary` in `dir` as `<name>.sock` with extra arguments and
    /// waits until its socket exists.
    pub fn start(binary: &Path, dir: &Path, name: &str, extra: &[String]) -> Result<Backend> {
        Backend::launch(binary, dir, name, &Launch::new(extra))
    }

    pub fn launch(binary: &Path, dir: &Path, name: &str, launch: &Launch) -> Result<Backend> {
        let socket = dir.join(format!("{name}.sock"));
        let log = dir.join(format!("{name}.log"));
        let control = launch.control.then(|| dir.join(format!("{name}.ctl")));
        let _ = std::fs::remove_file(&socket);
        let log_file = std::fs::File::create(&log).map_err(io("create", &log))?;
        let mut command = Command::new(binary);
        command
            .arg("--socket")
            .arg(&socket)
            .arg("--log-level")
            .arg(launch.log_level);
        if let Some(control) = &control {
            command.arg("--control").arg(control);
        }
        if OPEN_SOCKETS.load(std::sync::atomic::Ordering::Relaxed) {
            crate::program_user::ProgramUser::open_sockets(&mut command);
        }
        let started = Instant::now();
        let child = command
            .args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(io("start", binary))?;
        let mut backend = Backend {
            child,
            socket,
            control,
            log,
            started,
        };
        if launch.wait_for_socket {
            backend.wait_until("its socket exists", START_TIMEOUT, |b| b.socket.exists())?;
        }
        Ok(backend)
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The control socket, if it was started with one.
    pub fn control(&self) -> Option<&Path> {
        self.control.as_deref()
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log has a line containing `needle`; the time from
    /// the spawn until it was seen.
    pub fn wait_for_log(&mut self, needle: &str, timeout: Duration) -> Result<Duration> {
        let what = format!("its log says {needle:?}");
        self.wait_until(&what, timeout, |b| b.log().contains(needle))?;
        Ok(self.started.elapsed())
    }

    fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        done: impl Fn(&Backend) -> bool,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while !done(self) {
            if Instant::now() > deadline || !self.is_running() {
                return Err(Error::BackendStart {
                    socket: self.socket.clone(),
                    what: what.to_string(),
                    log: self.log(),
                });
            }
            // Short: a restore's start-up is timed by this loop.
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// `/proc/<pid>/status`'s `field` (`VmRSS`, `VmHWM`) in KiB.
    pub fn memory_kib(&self, field: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        status.lines().find_map(|line| {
            let value = line.strip_prefix(field)?.strip_prefix(':')?;
            value.split_whitespace().next()?.parse().ok()
        })
    }

    /// Resets the peak RSS (`VmHWM`) to the current RSS, so that a later
    /// reading is the peak of what happened in between.
    pub fn reset_peak_memory(&self) -> Result<()> {
        let path = format!("/proc/{}/clear_refs", self.child.id());
        std::fs::write(&path, "5").map_err(io("write", path))
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
        if let Some(control) = &self.control {
            let _ = std::fs::remove_file(control);
        }
    }
}
