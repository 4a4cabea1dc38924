//! The test guest in the patched QEMU: boots `vmlinux` + `initramfs.gz`,
//! runs one command (`vgpu.run=`), collects the serial console, powers off.
//! TCG by default; KVM when a real one answers.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One guest boot.
#[derive(Debug, Clone)]
pub struct VmConfig {
    pub qemu: PathBuf,
    pub image: PathBuf,
    /// The `vgpu.run=` value: a path, arguments separated by commas.
    pub run: String,
    /// The backend socket; `None` boots without the vGPU device.
    pub vgpu_socket: Option<PathBuf>,
    pub memory_mb: u32,
    pub timeout: Duration,
    /// Extra kernel command line.
    pub append: String,
    /// `tcg` or `kvm`; `None` picks with [`accel`].
    pub accel: Option<String>,
}

impl VmConfig {
    pub fn new(qemu: &Path, image: &Path, run: &str) -> VmConfig {
        VmConfig {
            qemu: qemu.to_path_buf(),
            image: image.to_path_buf(),
            run: run.to_string(),
            vgpu_socket: None,
            memory_mb: 1024,
            timeout: Duration::from_secs(600),
            append: String::new(),
            accel: None,
        }
    }
}

/// What a boot produced.
#[derive(Debug)]
pub struct VmRun {
    pub console: String,
    /// The command's exit status (`VGPU-GUEST-EXIT n`), if it got that far.
    pub exit_status: Option<i32>,
    pub accel: String,
    pub elapsed: Duration,
}

impl VmRun {
    /// Panics with the whole guest log unless the command exited 0.
    pub fn assert_success(&self) {
        assert_eq!(
            self.exit_status,
            Some(0),
            "guest command failed ({} s under {}); guest log:\n{}",
            self.elapsed.as_secs_f32(),
            self.accel,
            self.console
        );
    }
}

fn exit_status(console: &str) -> Option<i32> {
    console.lines().find_map(|l| {
        let at = l.find("VGPU-GUEST-EXIT ")?;
        l[at + "VGPU-GUEST-EXIT ".len()..].trim().parse().ok()
    })
}

/// `kvm` when `/dev/kvm` runs the test guest to completion, else `tcg`
/// (nested and paravirtualized KVMs often cannot). `VGPU_ACCEL` overrides.
pub fn accel(qemu: &Path, image: &Path) -> String {
    static CHOICE: OnceLock<String> = OnceLock::new();
    CHOICE
        .get_or_init(|| {
            if let Ok(forced) = std::env::var("VGPU_ACCEL") {
                return forced;
            }
            if std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/kvm")
                .is_err()
            {
                return "tcg".into();
            }
            let mut probe = VmConfig::new(qemu, image, "none");
            probe.accel = Some("kvm".into());
            probe.timeout = Duration::from_secs(30);
            probe.memory_mb = 256;
            let run = boot(&probe, &crate::paths::scratch("kvm-probe"));
            if run.exit_status == Some(0) {
                "kvm".into()
            } else {
                "tcg".into()
            }
        })
        .clone()
}

/// The QEMU command line of `config`, console to `console_path`. Every VM
/// of the harness (and both sides of a migration) uses it, so machine
/// options are identical wherever the configuration is.
fn qemu_command(config: &VmConfig, accel: &str, console_path: &Path) -> Command {
    let mut cmd = Command::new(&config.qemu);
    let cpu = if accel == "kvm" { "host" } else { "max" };
    cmd.args(["-machine", &format!("q35,accel={accel}"), "-cpu", cpu])
        .args(["-m", &format!("{}M", config.memory_mb)])
        .args([
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
            "-nodefaults",
        ])
        .arg("-serial")
        .arg(format!("file:{}", console_path.display()))
        .arg("-kernel")
        .arg(config.image.join("vmlinux"))
        .arg("-initrd")
        .arg(config.image.join("initramfs.gz"))
        .arg("-append")
        .arg(format!(
            "console=ttyS0 quiet vgpu.run={} {}",
            config.run, config.append
        ));
    if let Some(socket) = &config.vgpu_socket {
        cmd.args([
            "-object",
            &format!(
                "memory-backend-memfd,id=mem,size={}M,share=on",
                config.memory_mb
            ),
            "-numa",
            "node,memdev=mem",
        ])
        .arg("-chardev")
        .arg(format!("socket,id=vgpu0,path={}", socket.display()))
        .args(["-device", "vhost-user-vgpu-pci,chardev=vgpu0"]);
    }
    cmd
}

/// Boots the guest, waits for its command to finish (or the timeout), and
/// returns the console. `dir` holds the console log.
pub fn boot(config: &VmConfig, dir: &Path) -> VmRun {
    let accel = config
        .accel
        .clone()
        .unwrap_or_else(|| accel(&config.qemu, &config.image));
    let console_path = dir.join("console.log");
    let mut cmd = qemu_command(config, &accel, &console_path);
    let stderr_path = dir.join("qemu.stderr");
    let stderr = std::fs::File::create(&stderr_path).expect("qemu stderr file");
    let started = Instant::now();
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", config.qemu.display()));
    let console = || std::fs::read_to_string(&console_path).unwrap_or_default();
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if started.elapsed() > config.timeout {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut console = console();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    if !stderr.trim().is_empty() {
        console.push_str("\n--- qemu stderr ---\n");
        console.push_str(&stderr);
    }
    VmRun {
        exit_status: exit_status(&console),
        console,
        accel,
        elapsed: started.elapsed(),
    }
}

/// A guest running in the background (a side of a migration): its QEMU
/// has a QMP socket and may wait for an incoming migration.
pub struct RunningVm {
    child: std::process::Child,
    /// The serial console's log file.
    pub console_path: PathBuf,
    /// QEMU's stderr.
    pub stderr_path: PathBuf,
    /// The QMP socket (`-qmp unix:...,server=on,wait=off`).
    pub qmp_path: PathBuf,
    pub accel: String,
    pub started: Instant,
}

/// Starts `config`'s guest in the background in `dir`, with a QMP socket and
/// `extra` QEMU arguments (e.g. `-incoming tcp:127.0.0.1:PORT`, `defer`).
pub fn start(config: &VmConfig, dir: &Path, extra: &[&str]) -> RunningVm {
    let accel = config
        .accel
        .clone()
        .unwrap_or_else(|| accel(&config.qemu, &config.image));
    let console_path = dir.join("console.log");
    let stderr_path = dir.join("qemu.stderr");
    let qmp_path = dir.join("qmp.sock");
    let mut cmd = qemu_command(config, &accel, &console_path);
    cmd.arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", qmp_path.display()))
        .args(extra);
    let stderr = std::fs::File::create(&stderr_path).expect("qemu stderr file");
    let started = Instant::now();
    let child = cmd
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", config.qemu.display()));
    RunningVm {
        child,
        console_path,
        stderr_path,
        qmp_path,
        accel,
        started,
    }
}

impl RunningVm {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The console so far, with QEMU's stderr appended when it has any.
    pub fn console(&self) -> String {
        let mut console = std::fs::read_to_string(&self.console_path).unwrap_or_default();
        let stderr = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        if !stderr.trim().is_empty() {
            console.push_str("\n--- qemu stderr ---\n");
            console.push_str(&stderr);
        }
        console
    }

    /// The command's exit status (`VGPU-GUEST-EXIT n`), once printed.
    pub fn exit_status(&self) -> Option<i32> {
        exit_status(&std::fs::read_to_string(&self.console_path).unwrap_or_default())
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits until the console contains `needle` (line ends read as `\n`:
    /// the guest's tty writes `\r\n`); false on timeout or if QEMU exits
    /// first.
    pub fn wait_for_console(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let console = std::fs::read_to_string(&self.console_path).unwrap_or_default();
            if console.replace('\r', "").contains(needle) {
                return true;
            }
            if Instant::now() >= deadline || !self.is_running() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for QEMU to exit (the guest powers off after its command);
    /// kills it at the timeout. Returns whether it exited by itself.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if !self.is_running() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill();
        false
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for RunningVm {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exit_marker_is_found() {
        assert_eq!(super::exit_status("x\nVGPU-GUEST-EXIT 3\n"), Some(3));
        assert_eq!(super::exit_status("[ 2.0] VGPU-GUEST-EXIT 0"), Some(0));
        assert_eq!(super::exit_status("no marker"), None);
    }
}
