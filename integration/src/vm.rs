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
            if std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_err() {
                return "tcg".into();
            }
            let mut probe = VmConfig::new(qemu, image, "none");
            probe.accel = Some("kvm".into());
            probe.timeout = Duration::from_secs(30);
            probe.memory_mb = 256;
            let run = boot(&probe, &crate::paths::scratch("kvm-probe"));
            if run.exit_status == Some(0) { "kvm".into() } else { "tcg".into() }
        })
        .clone()
}

/// Boots the guest, waits for its command to finish (or the timeout), and
/// returns the console. `dir` holds the console log.
pub fn boot(config: &VmConfig, dir: &Path) -> VmRun {
    let accel = config.accel.clone().unwrap_or_else(|| accel(&config.qemu, &config.image));
    let console_path = dir.join("console.log");
    let mut cmd = Command::new(&config.qemu);
    let cpu = if accel == "kvm" { "host" } else { "max" };
    cmd.args(["-machine", &format!("q35,accel={accel}"), "-cpu", cpu])
        .args(["-m", &format!("{}M", config.memory_mb)])
        .args(["-display", "none", "-monitor", "none", "-no-reboot", "-nodefaults"])
        .arg("-serial")
        .arg(format!("file:{}", console_path.display()))
        .arg("-kernel")
        .arg(config.image.join("vmlinux"))
        .arg("-initrd")
        .arg(config.image.join("initramfs.gz"))
        .arg("-append")
        .arg(format!("console=ttyS0 quiet vgpu.run={} {}", config.run, config.append));
    if let Some(socket) = &config.vgpu_socket {
        cmd.args([
            "-object",
            &format!("memory-backend-memfd,id=mem,size={}M,share=on", config.memory_mb),
            "-numa",
            "node,memdev=mem",
        ])
        .arg("-chardev")
        .arg(format!("socket,id=vgpu0,path={}", socket.display()))
        .args(["-device", "vhost-user-vgpu-pci,chardev=vgpu0"]);
    }
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
    VmRun { exit_status: exit_status(&console), console, accel, elapsed: started.elapsed() }
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
