//! Runs an OpenCL program natively or through vgpu and reads what it printed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::error::{io, Error, Result};
use crate::running::Running;

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
    /// Whom the programs run as; `None`: this process's user.
    user: Option<crate::program_user::ProgramUser>,
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
            user: None,
        })
    }

    /// Runs the programs as `user` (see `--program-user`).
    pub fn with_user(self, user: Option<crate::program_user::ProgramUser>) -> Runner {
        Runner { user, ..self }
    }

    /// The longest a single program run may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs `program args` on `side`; its output, if it exited 0 and passed.
    pub fn run(&self, side: Side<'_>, program: &Path, args: &[String]) -> Result<Output> {
        let mut running = self.spawn(side, program, args, &self.log)?;
        running.finish(self.timeout)
    }

    /// Starts `program args` on `side` in the background, its output going
    /// to `log`.
    pub fn spawn(
        &self,
        side: Side<'_>,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Running> {
        let name = program
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let label = format!("{} {} ({})", name, args.join(" "), side.name());
        if self.verbose {
            eprintln!("vgpu-bench: run {label}");
        }
        let out = std::fs::File::create(log).map_err(io("create", log))?;
        let err = out.try_clone().map_err(io("reopen", log))?;
        let mut command = Command::new(program);
        if let Some(user) = &self.user {
            user.apply(&mut command);
        }
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        command.env_remove("CLTEST_QUICK");
        match side {
            Side::Native => command
                .env_remove("OCL_ICD_VENDORS")
                .env_remove("VGPU_SOCKET"),
            // The vgpu ICD offers one platform with one device: a native
            // device choice (CLTEST_PLATFORM=1 for a second driver) must
            // not reach it. No reconnect wait: a backend that goes away
            // mid-run is a failure here.
            Side::Vgpu(socket) => command
                .env("OCL_ICD_VENDORS", &self.icd_file)
                .env("VGPU_SOCKET", socket)
                .env("VGPU_RECONNECT_SECS", "0")
                .env_remove("CLTEST_PLATFORM")
                .env_remove("CLTEST_DEVICE"),
        };
        let child = command.spawn().map_err(io("start", program))?;
        Ok(Running::new(child, name, label, log))
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
    pub(crate) fn new(program: String, text: String) -> Output {
        Output { program, text }
    }

    pub(crate) fn passed(&self, name: &str) -> bool {
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
        parse_samples(&self.text)
    }

    pub fn missing(&self, what: &str) -> Error {
        Error::MissingOutput {
            program: self.program.clone(),
            what: what.to_string(),
            tail: tail(&self.text),
        }
    }
}

/// The `SAMPLE <metric> <parameter> <value>` lines of `text` (a program's
/// output, or a guest console holding it).
pub fn parse_samples(text: &str) -> Samples {
    let mut samples = Samples::new();
    for line in text.lines() {
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

/// The last lines of a program's output, for error messages.
pub(crate) fn tail(text: &str) -> String {
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
