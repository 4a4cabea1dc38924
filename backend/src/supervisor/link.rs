//! One worker process as the supervisor sees it: started by fork+exec of
//! this same binary, its channel, and the control requests relayed to it.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;

use crate::channel::{Channel, SupervisorRequest, WorkerEvent};
use crate::control_schema::{ErrorCode, ErrorReply, Line};

/// What a new worker is told.
pub struct Spawn<'a> {
    /// The supervisor's own arguments, passed on unchanged: the worker
    /// reads the same configuration.
    pub args: &'a [OsString],
    pub listener: RawFd,
    pub vm_id: u64,
    pub restore: bool,
    /// The OpenCL device after a re-home, instead of --device's.
    pub device: Option<&'a str>,
    /// Its own uid (`--worker-uids`).
    pub uid: Option<u32>,
    /// The driver cache shared by all workers, if any
    /// (`sandbox::shared_loopback_cache`).
    pub cache: Option<&'a std::path::Path>,
}

pub struct WorkerLink {
    pub vm_id: u64,
    pub pid: u32,
    /// The uid it runs as, when it has one of its own.
    pub uid: Option<u32>,
    /// Whether a front-end is connected to it (control commands for a VM
    /// go to the worker serving it, not to the standby or one ending).
    serving: std::sync::atomic::AtomicBool,
    /// The pid of the front-end it serves, once connected and known.
    pub front_end: Mutex<Option<u32>>,
    /// The worker's private driver cache, once it said where.
    pub cache: Mutex<Option<std::path::PathBuf>>,
    channel: Channel,
    child: Mutex<Child>,
}

impl WorkerLink {
    pub fn spawn(spawn: &Spawn) -> std::io::Result<WorkerLink> {
        let (ours, theirs) = Channel::pair()?;
        let inherited = [theirs.fd(), spawn.listener];
        let supervisor = std::process::id() as libc::pid_t;
        // This binary (by its path, so the worker's process name is the
        // supervisor's; /proc/self/exe only if the path is unknown).
        let exe = std::env::current_exe()
            .ok()
            .filter(|p| p.is_file())
            .unwrap_or_else(|| "/proc/self/exe".into());
        let mut command = Command::new(exe);
        command
            .arg0(
                std::env::args_os()
                    .next()
                    .unwrap_or_else(|| "vgpu-backend".into()),
            )
            .args(spawn.args)
            .arg("--worker")
            .arg(format!(
                "{},{},{}",
                theirs.fd(),
                spawn.listener,
                spawn.vm_id
            ))
            .stdin(Stdio::null());
        if spawn.restore {
            command.arg("--worker-restore");
        }
        if let Some(device) = spawn.device {
            command.arg("--worker-device").arg(device);
        }
        if let Some(uid) = spawn.uid {
            command.arg("--worker-uid").arg(uid.to_string());
        }
        if let Some(cache) = spawn.cache {
            // The worker then makes no private cache (`prepare_worker`).
            command.envs(crate::sandbox::driver_cache_env(cache));
        }
        // SAFETY: between fork and exec the closure only makes
        // async-signal-safe calls (fcntl, prctl, getppid) on descriptors
        // this process owns.
        unsafe {
            command.pre_exec(move || {
                for fd in inherited {
                    if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                // A worker must not outlive the supervisor that accounts
                // for it; the check closes the race with a supervisor that
                // died before the prctl.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0
                    || libc::getppid() != supervisor
                {
                    return Err(std::io::Error::other("the supervisor is gone"));
                }
                Ok(())
            });
        }
        let child = command.spawn()?;
        drop(theirs);
        Ok(WorkerLink {
            vm_id: spawn.vm_id,
            pid: child.id(),
            uid: spawn.uid,
            serving: Default::default(),
            front_end: Mutex::new(None),
            cache: Mutex::new(None),
            channel: ours,
            child: Mutex::new(child),
        })
    }

    /// The worker's next event; `None` once it has closed its end (it
    /// exited, or is about to).
    pub fn next_event(&self) -> Option<WorkerEvent> {
        match self.channel.recv::<WorkerEvent>() {
            Ok(Some((event, _))) => {
                if let WorkerEvent::Ready { cache, .. } = &event {
                    *self.cache.lock().unwrap_or_else(|e| e.into_inner()) = cache.clone();
                }
                Some(event)
            }
            Ok(None) => None,
            Err(e) => {
                log::warn!("worker {}: {e}", self.pid);
                None
            }
        }
    }

    pub fn signal(&self, signal: libc::c_int) {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        if let Ok(None) = child.try_wait() {
            // SAFETY: signalling our own child, not yet reaped, so its pid
            // cannot have been reused.
            if unsafe { libc::kill(self.pid as libc::pid_t, signal) } != 0 {
                log::warn!(
                    "cannot signal worker {}: {} (it ends with the supervisor)",
                    self.pid,
                    std::io::Error::last_os_error()
                );
            }
        }
    }

    /// Waits for the worker to end and says how it ended.
    pub fn reap(&self) -> String {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        match child.wait() {
            Ok(status) => status.to_string(),
            Err(e) => format!("unknown ({e})"),
        }
    }

    pub fn is_serving(&self) -> bool {
        self.serving.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn set_serving(&self, serving: bool) {
        self.serving
            .store(serving, std::sync::atomic::Ordering::SeqCst);
    }

    /// Removes the worker's private driver cache (it has ended).
    pub fn remove_cache(&self) {
        if let Some(dir) = self.cache.lock().unwrap_or_else(|e| e.into_inner()).take() {
            crate::sandbox::remove_cache(&dir);
        }
    }

    /// Whether the worker has ended, without waiting.
    pub fn has_ended(&self) -> bool {
        let mut child = self.child.lock().unwrap_or_else(|e| e.into_inner());
        !matches!(child.try_wait(), Ok(None))
    }

    /// Passes a pre-copy connection to the worker.
    pub fn pass_precopy(&self, stream: UnixStream) -> std::io::Result<()> {
        self.channel
            .send(&SupervisorRequest::Precopy, &[stream.as_raw_fd()])
    }

    /// Runs one control command in the worker (with the file it names,
    /// open) and returns its reply line; progress lines go to `progress`
    /// as they come.
    pub fn request(
        &self,
        words: &[&str],
        file: Option<&File>,
        progress: &mut dyn FnMut(&str),
    ) -> Result<String, ErrorReply> {
        let gone = |why: String| {
            ErrorReply::new(
                ErrorCode::WorkerGone,
                format!(
                    "the worker of front-end {} (pid {}) did not answer: {why}",
                    self.vm_id, self.pid
                ),
            )
        };
        let (mut ours, theirs) = UnixStream::pair().map_err(|e| gone(e.to_string()))?;
        let mut fds: Vec<RawFd> = vec![theirs.as_raw_fd()];
        fds.extend(file.map(|f| f.as_raw_fd()));
        self.channel
            .send(&SupervisorRequest::Control, &fds)
            .map_err(|e| gone(e.to_string()))?;
        drop(OwnedFd::from(theirs));
        let request = serde_json::to_string(words).expect("strings serialize");
        writeln!(ours, "{request}").map_err(|e| gone(e.to_string()))?;
        let mut last = None;
        for line in BufReader::new(ours).lines() {
            let line = line.map_err(|e| gone(e.to_string()))?;
            match Line::parse(&line) {
                Ok(Line::Progress { .. }) => progress(&line),
                Ok(Line::Error { error }) => return Err(error),
                Ok(Line::Reply(_)) => last = Some(line),
                Err(e) => return Err(gone(format!("malformed reply ({e})"))),
            }
        }
        last.ok_or_else(|| gone("it ended before replying".into()))
    }
}
