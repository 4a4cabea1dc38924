//! `vgpu-ctl`: talks to a running `vgpu-backend` through its control socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

/// Control a running vgpu-backend (started with --control PATH).
///
/// Long operations print progress on stderr; every command prints its
/// result as one JSON line on stdout and exits non-zero on an error.
#[derive(Debug, Parser)]
#[command(name = "vgpu-ctl", version, about, long_about)]
struct Args {
    /// The backend's control socket (every command but common-profile).
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Then {
    /// Let the vGPU run on.
    Resume,
    /// Keep it paused (see `resume`): for a checkpoint the guest must not
    /// outrun, e.g. before stopping the backend.
    Pause,
    /// Stop the backend right after (the guest's pending calls wait for a
    /// backend restarted with --restore FILE).
    Exit,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Connected front-ends, sessions and live objects.
    Status,
    /// Write the vGPU (objects and buffer contents) to FILE, atomically.
    Checkpoint {
        file: PathBuf,
        /// Front-end id (from `status`); needed when several are connected.
        #[arg(long)]
        vm: Option<u64>,
        #[arg(long, value_enum, default_value = "resume")]
        then: Then,
    },
    /// Replace the vGPU with the one in FILE (all or nothing).
    Restore {
        file: PathBuf,
        #[arg(long)]
        vm: Option<u64>,
    },
    /// Move every vGPU, running, to another OpenCL device of this host.
    Rehome {
        /// As for `vgpu-backend --device`: opencl:<platform>:<device> or opencl:<name>.
        #[arg(long)]
        device: String,
    },
    /// Write the device profile a VM's guests saw to FILE (to check a
    /// migration destination with `accepts` before the source stops).
    Profile {
        file: PathBuf,
        #[arg(long)]
        vm: Option<u64>,
    },
    /// Check that this backend's device honours the profile in FILE; lists
    /// every shortfall otherwise (exit status 1).
    Accepts { file: PathBuf },
    /// Hold the vGPU's calls until `resume`.
    Pause {
        #[arg(long)]
        vm: Option<u64>,
    },
    Resume {
        #[arg(long)]
        vm: Option<u64>,
    },
    /// Write the profile every device of a pool can honour (from files of
    /// `vgpu-backend --write-profile`), for `vgpu-backend --profile`.
    CommonProfile {
        #[arg(required = true)]
        profiles: Vec<PathBuf>,
        #[arg(long, short)]
        output: PathBuf,
    },
}

fn common_profile(inputs: &[PathBuf], output: &std::path::Path) -> Result<(), String> {
    let mut pool = Vec::new();
    for path in inputs {
        let bytes =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        pool.push(
            vgpu_migration::Profile::from_bytes(&bytes)
                .map_err(|e| format!("{} is not a device profile: {e}", path.display()))?,
        );
    }
    let common = vgpu_migration::Profile::common_subset(&pool).map_err(|e| e.to_string())?;
    std::fs::write(output, common.to_bytes())
        .map_err(|e| format!("cannot write {}: {e}", output.display()))
}

fn vm_word(vm: Option<u64>) -> String {
    vm.map_or("-".to_string(), |v| v.to_string())
}

fn path_word(path: &std::path::Path) -> Result<String, String> {
    let absolute =
        std::path::absolute(path).map_err(|e| format!("invalid path {}: {e}", path.display()))?;
    let text = absolute
        .to_str()
        .ok_or(format!("path {} is not UTF-8", path.display()))?;
    if text.contains(['\t', '\n']) {
        return Err(format!("path {text:?} contains a tab or newline"));
    }
    Ok(text.to_string())
}

fn command_line(command: &Command) -> Result<String, String> {
    Ok(match command {
        Command::Status => "status".into(),
        Command::Checkpoint { file, vm, then } => {
            let then = format!("{then:?}").to_lowercase();
            format!("checkpoint\t{}\t{}\t{then}", path_word(file)?, vm_word(*vm))
        }
        Command::Restore { file, vm } => format!("restore\t{}\t{}", path_word(file)?, vm_word(*vm)),
        Command::Rehome { device } => format!("rehome\t{device}"),
        Command::Profile { file, vm } => format!("profile\t{}\t{}", path_word(file)?, vm_word(*vm)),
        Command::Accepts { file } => format!("accepts\t{}", path_word(file)?),
        Command::Pause { vm } => format!("pause\t{}", vm_word(*vm)),
        Command::Resume { vm } => format!("resume\t{}", vm_word(*vm)),
        Command::CommonProfile { .. } => unreachable!("handled without a backend"),
    })
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Command::CommonProfile { profiles, output } = &args.command {
        return match common_profile(profiles, output) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vgpu-ctl: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(control) = args.control.clone() else {
        eprintln!("vgpu-ctl: --control PATH is required for this command");
        return ExitCode::from(2);
    };
    let line = match command_line(&args.command) {
        Ok(line) => line,
        Err(e) => {
            eprintln!("vgpu-ctl: {e}");
            return ExitCode::from(2);
        }
    };
    let result = (|| -> std::io::Result<String> {
        let mut stream = UnixStream::connect(&control)?;
        writeln!(stream, "{line}")?;
        for answer in BufReader::new(stream).lines() {
            let answer = answer?;
            if answer.starts_with('{') {
                return Ok(answer);
            }
            eprintln!("{answer}");
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "the backend closed the connection",
        ))
    })();
    match result {
        Ok(answer) => {
            println!("{answer}");
            if answer.starts_with(r#"{"error""#) {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("vgpu-ctl: cannot talk to {}: {e}", control.display());
            ExitCode::FAILURE
        }
    }
}
