//! `vgpu-ctl`: talks to a running `vgpu-backend` through its control socket.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Control a running vgpu-backend (started with --control PATH).
#[derive(Debug, Parser)]
#[command(name = "vgpu-ctl", version, about)]
struct Args {
    /// The backend's control socket.
    #[arg(long, value_name = "PATH")]
    control: PathBuf,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Connected front-ends, sessions and live objects, as JSON.
    Status,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let line = match args.command {
        Command::Status => "status",
    };
    let result = (|| -> std::io::Result<String> {
        let mut stream = UnixStream::connect(&args.control)?;
        writeln!(stream, "{line}")?;
        let mut answer = String::new();
        BufReader::new(stream).read_line(&mut answer)?;
        Ok(answer)
    })();
    match result {
        Ok(answer) => {
            print!("{answer}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("vgpu-ctl: cannot talk to {}: {e}", args.control.display());
            ExitCode::FAILURE
        }
    }
}
