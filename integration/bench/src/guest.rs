//! The test guest in the patched QEMU (built by `scripts/setup.sh`), booted
//! to run one program on the vGPU and power off. TCG unless `VGPU_ACCEL`
//! says otherwise: these machines have no KVM that runs ordinary guests.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{io, Error, Result};

const MEMORY_MB: u32 = 1024;

#[derive(Debug, Clone)]
pub struct Guest {
    pub qemu: PathBuf,
    /// Holds `vmlinux` and `initramfs.gz`.
    pub image: PathBuf,
    pub accel: String,
}

impl Guest {
    /// The QEMU and image `scripts/setup.sh` recorded under `root/target`
    /// (or `VGPU_QEMU` / `VGPU_GUEST_IMAGE`).
    pub fn find(root: &Path) -> Result<Guest> {
        let qemu = match std::env::var_os("VGPU_QEMU") {
            Some(q) => PathBuf::from(q),
            None => {
                let recorded = root.join("target/qemu-path");
                let text = std::fs::read_to_string(&recorded).map_err(io("read", &recorded))?;
                PathBuf::from(text.trim())
            }
        };
        let image = std::env::var_os("VGPU_GUEST_IMAGE")
            .map_or_else(|| root.join("target/guest-image"), PathBuf::from);
        for needed in [
            qemu.clone(),
            image.join("vmlinux"),
            image.join("initramfs.gz"),
        ] {
            if !needed.exists() {
                return Err(Error::Build(format!(
                    "{} is missing: run scripts/bench.sh --vm (its setup builds the patched QEMU and the guest image)",
                    needed.display()
                )));
            }
        }
        let accel = std::env::var("VGPU_ACCEL").unwrap_or_else(|_| "tcg".into());
        Ok(Guest { qemu, image, accel })
    }

    /// Boots, runs `program args` in the guest with the vGPU on `socket`,
    /// and returns the serial console once the guest powered off.
    pub fn run(
        &self,
        socket: &Path,
        dir: &Path,
        program: &str,
        args: &[String],
        timeout: Duration,
    ) -> Result<String> {
        let console = dir.join("console.log");
        let _ = std::fs::remove_file(&console);
        let mut child = self
            .command(socket, &console, program, args)
            .stderr(Stdio::null())
            .spawn()
            .map_err(io("start", &self.qemu))?;
        let started = Instant::now();
        loop {
            if child
                .try_wait()
                .map_err(io("wait for", &self.qemu))?
                .is_some()
            {
                break;
            }
            if started.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout {
                    program: format!("guest running {program}"),
                    seconds: timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::read_to_string(&console).map_err(io("read", &console))
    }

    /// Boots a guest running `program args` in the background, with a QMP
    /// socket and `extra` QEMU arguments (`-incoming defer` for a
    /// migration's destination); console, QMP socket and QEMU's stderr go
    /// into `dir`.
    pub fn start(
        &self,
        socket: &Path,
        dir: &Path,
        program: &str,
        args: &[String],
        extra: &[&str],
    ) -> Result<RunningGuest> {
        let console = dir.join("console.log");
        let qmp = dir.join("qmp.sock");
        let stderr_path = dir.join("qemu.stderr");
        for stale in [&console, &qmp] {
            let _ = std::fs::remove_file(stale);
        }
        let stderr = std::fs::File::create(&stderr_path).map_err(io("create", &stderr_path))?;
        let child = self
            .command(socket, &console, program, args)
            .arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", qmp.display()))
            .args(extra)
            .stderr(stderr)
            .spawn()
            .map_err(io("start", &self.qemu))?;
        Ok(RunningGuest {
            child,
            console,
            qmp,
            stderr: stderr_path,
        })
    }

    /// The QEMU command line: every guest of the harness, both sides of a
    /// migration included, gets the same machine options.
    fn command(&self, socket: &Path, console: &Path, program: &str, args: &[String]) -> Command {
        let run = std::iter::once(program.to_string())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join(",");
        let cpu = if self.accel == "kvm" { "host" } else { "max" };
        let mut command = Command::new(&self.qemu);
        command
            .args([
                "-machine",
                &format!("q35,accel={}", self.accel),
                "-cpu",
                cpu,
            ])
            .args(["-m", &format!("{MEMORY_MB}M")])
            .args([
                "-display",
                "none",
                "-monitor",
                "none",
                "-no-reboot",
                "-nodefaults",
            ])
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .arg("-kernel")
            .arg(self.image.join("vmlinux"))
            .arg("-initrd")
            .arg(self.image.join("initramfs.gz"))
            .arg("-append")
            .arg(format!("console=ttyS0 quiet vgpu.run={run}"))
            .arg("-object")
            .arg(format!(
                "memory-backend-memfd,id=mem,size={MEMORY_MB}M,share=on"
            ))
            .args(["-numa", "node,memdev=mem"])
            .arg("-chardev")
            .arg(format!("socket,id=vgpu0,path={}", socket.display()))
            .args(["-device", "vhost-user-vgpu-pci,chardev=vgpu0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        command
    }
}

/// A guest booted in the background; QEMU is killed when this is dropped.
pub struct RunningGuest {
    child: Child,
    console: PathBuf,
    /// QEMU's QMP socket.
    pub qmp: PathBuf,
    stderr: PathBuf,
}

impl RunningGuest {
    /// The serial console so far (the guest's tty writes `\r\n`; read as
    /// `\n`), with QEMU's stderr after it when it has any.
    pub fn console(&self) -> String {
        let mut text = std::fs::read_to_string(&self.console)
            .unwrap_or_default()
            .replace('\r', "");
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        if !stderr.trim().is_empty() {
            text.push_str("\n--- qemu stderr ---\n");
            text.push_str(&stderr);
        }
        text
    }

    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits until the console holds `needle`; false at the timeout or when
    /// QEMU exits first.
    pub fn wait_for_console(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.console().contains(needle) {
                return true;
            }
            if Instant::now() > deadline || !self.is_running() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RunningGuest {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
