//! Runs an OpenCL program natively or through vgpu and reads what it printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{io, Error, Result};

/// Where an OpenCL program's calls go.
#[derive(Debug, Clone, Copy)]
pub enum Side<'a> {
    /// The host's own ICDs (PoCL here), as installed.
    Native,
    /// Only the vgpu ICD, through the loopback transport to this socket.
    Vgpu(&'a Path),
}

impl Side<'_> {
    pub fn name(&self) -> &'static str {
        match self {
            Side::Native => "native",
            Side::Vgpu(_) => "vgpu",
        }
    }
}

pub struct Runner {
    /// An ocl-icd vendors file naming only `libvgpu_opencl.so`.
    icd_file: PathBuf,
    log: PathBuf,
    timeout: Duration,
    verbose: bool,
}

impl Runner {
    /// Writes the vendors file for `icd_library` into `scratch`.
    pub fn new(
        icd_library: &Path,
        scratch: &Path,
        timeout: Duration,
        verbose: bool,
    ) -> Result<Runner> {
        let icd_file = scratch.join("vgpu.icd");
        let line = format!("{}\n", icd_library.display());
        std::fs::write(&icd_file, line).map_err(io("write", &icd_file))?;
        Ok(Runner {
            icd_file,
            log: scratch.join("program.log"),
            timeout,
            verbose,
        })
    }

    /// Runs `program args` on `side`; its output, if it exited 0 and passed.
    pub fn run(&self, side: Side<'_>, program: &Path, args: &[String]) -> Result<Output> {
        let name = program
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let label = format!("{} {} ({})", name, args.join(" "), side.name());
        if self.verbose {
            eprintln!("vgpu-bench: run {label}");
        }
        let log = std::fs::File::create(&self.log).map_err(io("create", &self.log))?;
        let err = log.try_clone().map_err(io("reopen", &self.log))?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        command.env_remove("CLTEST_QUICK");
        match side {
            Side::Native => command
                .env_remove("OCL_ICD_VENDORS")
                .env_remove("VGPU_SOCKET"),
            // The vgpu ICD offers one platform with one device: a native
            // device choice (CLTEST_PLATFORM=1 for a second driver) must
            // not reach it.
            Side::Vgpu(socket) => command
                .env("OCL_ICD_VENDORS", &self.icd_file)
                .env("VGPU_SOCKET", socket)
                .env_remove("CLTEST_PLATFORM")
                .env_remove("CLTEST_DEVICE"),
        };
        let mut child = command.spawn().map_err(io("start", program))?;
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            if let Some(status) = child.try_wait().map_err(io("wait for", program))? {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout {
                    program: label,
                    seconds: self.timeout.as_secs(),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let text = std::fs::read_to_string(&self.log).map_err(io("read", &self.log))?;
        let output = Output {
            program: label,
            text,
        };
        if !status.success() || !output.passed(&name) {
            return Err(Error::ProgramFailed {
                program: output.program,
                status: status.to_string(),
                tail: tail(&output.text),
            });
        }
        Ok(output)
    }
}

/// What a program printed.
#[derive(Debug)]
pub struct Output {
    program: String,
    text: String,
}

/// `(metric, parameter)` → the samples printed for it, in order.
pub type Samples = BTreeMap<(String, String), Vec<f64>>;

impl Output {
    fn passed(&self, name: &str) -> bool {
        self.text.lines().any(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some("RESULT") && w.next() == Some(name) && w.nth(1) == Some("PASS")
        })
    }

    /// The `device: <name>` line.
    pub fn device(&self) -> Option<String> {
        self.text
            .lines()
            .find_map(|l| l.strip_prefix("device: "))
            .map(|d| d.trim().to_string())
    }

    /// The seconds of the `TIME <name> <seconds>` line.
    pub fn time(&self) -> Result<f64> {
        self.text
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                (w.next() == Some("TIME")).then(|| w.nth(1)?.parse::<f64>().ok())?
            })
            .ok_or_else(|| self.missing("TIME line"))
    }

    /// Every `SAMPLE <metric> <parameter> <value>` line.
    pub fn samples(&self) -> Samples {
        let mut samples = Samples::new();
        for line in self.text.lines() {
            let w: Vec<&str> = line.split_whitespace().collect();
            if let ["SAMPLE", metric, param, value] = w[..] {
                if let Ok(v) = value.parse::<f64>() {
                    let key = (metric.to_string(), param.to_string());
                    samples.entry(key).or_default().push(v);
                }
            }
        }
        samples
    }

    pub fn missing(&self, what: &str) -> Error {
        Error::MissingOutput {
            program: self.program.clone(),
            what: what.to_string(),
            tail: tail(&self.text),
        }
    }
}

/// The last lines of a program's output, for error messages.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(text: &str) -> Output {
        Output {
            program: "p".into(),
            text: text.into(),
        }
    }

    #[test]
    fn samples_are_grouped_by_metric_and_parameter() {
        let out = output(
            "device: x\nSAMPLE read 4096 1.5\nSAMPLE read 4096 2\nSAMPLE write 4096 3\nnoise\n",
        );
        let s = out.samples();
        assert_eq!(s[&("read".into(), "4096".into())], vec![1.5, 2.0]);
        assert_eq!(s[&("write".into(), "4096".into())], vec![3.0]);
        assert_eq!(out.device().as_deref(), Some("x"));
    }

    #[test]
    fn time_and_result_lines_are_read() {
        let out = output("TIME matmul 0.25\nRESULT matmul 0123 PASS\n");
        assert_eq!(out.time().expect("time"), 0.25);
        assert!(out.passed("matmul"));
        assert!(!output("RESULT matmul - FAIL x\n").passed("matmul"));
        assert!(output("nothing").time().is_err());
    }
}
