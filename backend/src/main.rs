use std::process::ExitCode;

use clap::Parser;
use vgpu_backend::config::{parse_sandbox, parse_spec, parse_worker_uids, Args, Config};
use vgpu_backend::executor::opencl::OpenClExecutor;
use vgpu_backend::startup;

fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_capabilities {
        println!("{}", startup::capabilities_json());
        return ExitCode::SUCCESS;
    }
    if let Some(path) = &args.write_profile {
        return match startup::write_profile(&args.device, args.memory, path) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("vgpu-backend: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.list_devices {
        return match OpenClExecutor::list() {
            Ok(devices) => {
                devices.iter().for_each(|d| println!("{d}"));
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("vgpu-backend: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if args.probe_sandbox {
        return probe_sandbox(&args);
    }
    let config = match Config::try_from(args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("vgpu-backend: {e}");
            return ExitCode::from(2);
        }
    };
    env_logger::Builder::new()
        .filter_level(config.log_level)
        // virtio-queue logs every malformed chain a guest sends; the
        // backend reports those itself, rate-limited per VM.
        .filter_module("virtio_queue", log::LevelFilter::Off)
        .parse_env("RUST_LOG")
        .format_timestamp_micros()
        .init();
    let result = match config.worker.clone() {
        Some(role) => vgpu_backend::worker::run(config, role),
        None => vgpu_backend::supervisor::run(config),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vgpu-backend: {}", startup::error_chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// `--probe-sandbox`: prints the probe's JSON report; fails unless the
/// kernel ran right and every forbidden call was refused.
fn probe_sandbox(args: &Args) -> ExitCode {
    // With --worker-uids the probe runs as the range's first uid, as a
    // worker would.
    let parsed = parse_spec(&args.device).and_then(|device| {
        let own_uid = match &args.worker_uids {
            Some(text) => Some(*parse_worker_uids(text)?.start()),
            None => None,
        };
        Ok((
            device,
            parse_sandbox(&args.sandbox, args.user.clone(), own_uid)?,
        ))
    });
    let (device, sandbox) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("vgpu-backend: {e}");
            return ExitCode::from(2);
        }
    };
    env_logger::Builder::new()
        .filter_level(log::LevelFilter::Warn)
        .parse_env("RUST_LOG")
        .init();
    let (report, ok) =
        vgpu_backend::sandbox::probe::run(&device, &sandbox, args.control.as_deref());
    println!("{report}");
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
