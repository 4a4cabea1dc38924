//! `vgpu-ctl`: talks to a running `vgpu-backend` through its control socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use vgpu_backend::control_schema::{Line, MetricsReply};

#[path = "vgpu-ctl/human.rs"]
mod human;

/// Control a running vgpu-backend (started with --control PATH).
///
/// Long operations print progress on stderr; every command prints its
/// result on stdout, readable text by default or the backend's JSON reply
/// with --json (schema: backend/CONTROL.md), and exits non-zero on an error.
#[derive(Debug, Parser)]
#[command(name = "vgpu-ctl", version, about, long_about)]
struct Args {
    /// The backend's control socket (every command but common-profile).
    #[arg(long, value_name = "PATH", global = true)]
    control: Option<PathBuf>,

    /// Print the backend's JSON reply as is (one line; progress lines go to
    /// stderr as JSON too).
    #[arg(long, global = true)]
    json: bool,

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
    /// Per-VM and per-device counters (calls, kernels, bytes, memory).
    Metrics,
    /// A live table of the per-VM counters, refreshed every --interval.
    Top {
        /// Print the table once and exit (for scripts).
        #[arg(long)]
        once: bool,
        /// Seconds between refreshes.
        #[arg(long, default_value_t = 2.0)]
        interval: f64,
    },
    /// Write the vGPU (objects and buffer contents) to FILE, atomically.
    Checkpoint {
        file: PathBuf,
        /// Front-end id (from `status`); needed when several are connected.
        #[arg(long)]
        vm: Option<u64>,
        #[arg(long, value_enum, default_value = "resume")]
        then: Then,
        /// Copy buffers in at most this many rounds while the guest keeps
        /// computing, then pause it only to capture the objects: buffers
        /// written since their copy are owed to the checkpoint and read
        /// after it resumes, the guest's first write to one preserving
        /// it first (copy-on-write, OpenCL; CUDA allocations are copied
        /// on the device in the pause and read after it); 0 copies
        /// everything while it waits (stop-and-copy).
        #[arg(long, default_value_t = 5)]
        rounds: u32,
        /// Copy nothing in rounds: pause the guest only to capture the
        /// objects and owe every buffer to the checkpoint, read after it
        /// resumes (OpenCL; CUDA allocations are copied on the device in
        /// the pause).
        #[arg(long, conflicts_with = "rounds")]
        copy_on_write: bool,
        /// Write only the buffers changed since BASE, the vGPU's last
        /// whole checkpoint, and refer to BASE for the rest (restore with
        /// `restore FILE --base BASE`).
        #[arg(long, value_name = "BASE")]
        incremental: Option<PathBuf>,
    },
    /// Replace the vGPU with the one in FILE (all or nothing).
    Restore {
        file: PathBuf,
        #[arg(long)]
        vm: Option<u64>,
        /// The whole checkpoint an incremental FILE was taken against.
        #[arg(long)]
        base: Option<PathBuf>,
    },
    /// Name FILE, a whole checkpoint of the vGPU copied to both hosts, on
    /// the source and on the destination back-end: the migration's device
    /// state then carries only the objects and what changed since FILE.
    MigrationBase {
        file: PathBuf,
        #[arg(long)]
        vm: Option<u64>,
    },
    /// Move every vGPU, running, to another OpenCL device of this host.
    Rehome {
        /// As for `vgpu-backend --device`: opencl:PLATFORM:DEVICE or opencl:NAME.
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

/// An absolute path as a word (any character but NUL travels in JSON).
fn path_word(path: &std::path::Path) -> Result<String, String> {
    let absolute =
        std::path::absolute(path).map_err(|e| format!("invalid path {}: {e}", path.display()))?;
    let text = absolute
        .to_str()
        .ok_or(format!("path {} is not UTF-8", path.display()))?;
    Ok(text.to_string())
}

/// The round-count word of a checkpoint taken with `--copy-on-write`.
const COPY_ON_WRITE: &str = "cow";

/// The request line: the command's words as a JSON array.
fn command_line(command: &Command) -> Result<String, String> {
    let words: Vec<String> = match command {
        Command::Status => vec!["status".into()],
        Command::Metrics | Command::Top { .. } => vec!["metrics".into()],
        Command::Checkpoint {
            file,
            vm,
            then,
            rounds,
            copy_on_write,
            incremental,
        } => {
            let mut words = vec![
                "checkpoint".into(),
                path_word(file)?,
                vm_word(*vm),
                format!("{then:?}").to_lowercase(),
                match copy_on_write {
                    true => COPY_ON_WRITE.into(),
                    false => rounds.to_string(),
                },
            ];
            if let Some(base) = incremental {
                words.push(path_word(base)?);
            }
            words
        }
        Command::Restore { file, vm, base } => {
            let mut words = vec!["restore".into(), path_word(file)?, vm_word(*vm)];
            if let Some(base) = base {
                words.push(path_word(base)?);
            }
            words
        }
        Command::Rehome { device } => vec!["rehome".into(), device.clone()],
        Command::MigrationBase { file, vm } => {
            vec!["migration-base".into(), path_word(file)?, vm_word(*vm)]
        }
        Command::Profile { file, vm } => vec!["profile".into(), path_word(file)?, vm_word(*vm)],
        Command::Accepts { file } => vec!["accepts".into(), path_word(file)?],
        Command::Pause { vm } => vec!["pause".into(), vm_word(*vm)],
        Command::Resume { vm } => vec!["resume".into(), vm_word(*vm)],
        Command::CommonProfile { .. } => unreachable!("handled without a backend"),
    };
    Ok(serde_json::to_string(&words).expect("strings serialize"))
}

/// Sends one command; returns the final line (progress lines go to stderr).
fn ask(control: &std::path::Path, line: &str, json: bool) -> std::io::Result<String> {
    let mut stream = UnixStream::connect(control)?;
    writeln!(stream, "{line}")?;
    for answer in BufReader::new(stream).lines() {
        let answer = answer?;
        match Line::parse(&answer) {
            Ok(Line::Progress { progress }) => {
                if json {
                    eprintln!("{answer}");
                } else if let Some(round) = progress.round {
                    eprintln!(
                        "round {round}: copied {} of {} buffer bytes while the guest runs",
                        progress.bytes, progress.buffer_total
                    );
                } else {
                    eprintln!(
                        "progress: {} bytes written, {} of {} buffer bytes, {:.1} MB/s",
                        progress.bytes,
                        progress.buffer_bytes,
                        progress.buffer_total,
                        progress.rate_mb_s
                    );
                }
            }
            Ok(_) => return Ok(answer),
            Err(e) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the backend answered something not JSON ({e}): {answer}"),
                ))
            }
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::UnexpectedEof,
        "the backend closed the connection",
    ))
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
    if let Command::Top { once, interval } = args.command {
        return top(&control, once, interval, args.json);
    }
    match ask(&control, &line, args.json) {
        Ok(answer) => {
            let failed = matches!(Line::parse(&answer), Ok(Line::Error { .. }));
            if args.json {
                println!("{answer}");
            } else {
                match human::render(&args.command, &answer) {
                    Ok(text) if failed => eprint!("{text}"),
                    Ok(text) => print!("{text}"),
                    // A reply this vgpu-ctl does not know the shape of
                    // (a newer backend): show it as it came.
                    Err(_) => println!("{answer}"),
                }
            }
            if failed {
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

/// `vgpu-ctl top`: the metrics as a table, redrawn until interrupted.
fn top(control: &std::path::Path, once: bool, interval: f64, json: bool) -> ExitCode {
    let interval = std::time::Duration::from_secs_f64(interval.clamp(0.1, 3600.0));
    let mut previous: Option<(std::time::Instant, MetricsReply)> = None;
    loop {
        let answer = match ask(control, r#"["metrics"]"#, json) {
            Ok(answer) => answer,
            Err(e) => {
                eprintln!("vgpu-ctl: cannot talk to {}: {e}", control.display());
                return ExitCode::FAILURE;
            }
        };
        let figures: MetricsReply = match serde_json::from_str(&answer) {
            Ok(figures) => figures,
            Err(_) => {
                eprintln!("vgpu-ctl: {answer}");
                return ExitCode::FAILURE;
            }
        };
        let now = std::time::Instant::now();
        let table = if json {
            answer
        } else {
            human::top_table(&figures, previous.as_ref().map(|(t, p)| (now - *t, p)))
        };
        if once {
            print!("{table}");
            if json {
                println!();
            }
            return ExitCode::SUCCESS;
        }
        // Clear the screen and home the cursor, then draw.
        println!("\x1b[2J\x1b[H{table}");
        let _ = std::io::stdout().flush();
        previous = Some((now, figures));
        std::thread::sleep(interval);
    }
}
