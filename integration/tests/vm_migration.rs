//! QEMU live migration of a VM whose guest is running an OpenCL program on
//! its vGPU. Two patched QEMUs on 127.0.0.1 (the destination waits with
//! `-incoming defer`), two back-ends on two different OpenCL devices (PoCL's
//! `basic` for the source, `pthread` for the destination), guest RAM in a
//! shared memfd on both sides. The guest runs `checkpoint_loop` over a few
//! hundred MiB of device buffers; mid-run QMP `migrate` moves the VM, the
//! vGPU's state travelling inside the migration stream (vhost-user
//! DEVICE_STATE), and the program finishes on the destination with the
//! checksum of a native run.
//!
//! Failure paths, one test each: the migration cancelled midway; the
//! destination back-end refusing the vGPU (its device profile is smaller
//! than the one the guest saw); the destination QEMU killed mid-stream. In
//! every case the source VM runs on with its vGPU and the program finishes
//! there with the native checksum.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use vgpu_integration::backend::Backend;
use vgpu_integration::paths;
use vgpu_integration::qmp::Qmp;
use vgpu_integration::suite::parse_results;
use vgpu_integration::vm::{self, RunningVm, VmConfig};

/// `checkpoint_loop`'s arguments: 256 MiB of buffers in 8 buffers, 60
/// iterations, a `PROGRESS i` line after each.
const ARGS: &[&str] = &["-m", "256", "-i", "60", "-p", "1"];
/// The console line after which the migration starts.
const MIGRATE_AT: &str = "PROGRESS 5\n";
/// PoCL offers both of its CPU drivers, as two devices.
const POCL_DEVICES: &str = "basic pthread";
const SOURCE_DEVICE: &str = "opencl:basic";
const DEST_DEVICE: &str = "opencl:pthread";
/// Generous: TCG, two cores, two guests and two back-ends at once.
const RUN_TIMEOUT: Duration = Duration::from_secs(540);
const QMP_TIMEOUT: Duration = Duration::from_secs(30);

/// The tests share two cores: one migration at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // Every back-end (and the native run) sees both PoCL devices. Set while
    // holding the lock, before any child process of this test starts.
    static ENV: OnceLock<()> = OnceLock::new();
    ENV.get_or_init(|| std::env::set_var("POCL_DEVICES", POCL_DEVICES));
    guard
}

/// The patched QEMU and the guest image, or why the test cannot run.
fn vm_parts() -> Option<(PathBuf, PathBuf)> {
    if std::env::var("VGPU_SKIP_VM").is_ok_and(|v| v == "1") {
        eprintln!("skipped: VGPU_SKIP_VM=1");
        return None;
    }
    let qemu =
        paths::qemu().expect("no patched QEMU recorded in target/qemu-path: run scripts/setup.sh");
    let image =
        paths::guest_image().expect("no guest image in target/guest-image: run scripts/setup.sh");
    Some((qemu, image))
}

/// The checksum of an undisturbed native run (no vGPU, no VM).
fn native_checksum() -> String {
    native_checksum_of(ARGS)
}

/// The checksum of an undisturbed native run of `checkpoint_loop ARGS`.
fn native_checksum_of(args: &'static [&'static str]) -> String {
    static NATIVE: Mutex<Vec<(&'static [&'static str], String)>> = Mutex::new(Vec::new());
    let mut known = NATIVE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, checksum)) = known.iter().find(|(a, _)| *a == args) {
        return checksum.clone();
    }
    let program = paths::cl_tests_dir().join("checkpoint_loop");
    let started = Instant::now();
    let out = Command::new(&program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", program.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results = parse_results(&stdout);
    let (checksum, passed) = results
        .get("checkpoint_loop")
        .unwrap_or_else(|| panic!("native checkpoint_loop printed no RESULT:\n{stdout}"));
    assert!(passed, "native checkpoint_loop failed:\n{stdout}");
    println!(
        "native checkpoint_loop {}: {checksum} in {:.1} s",
        args.join(" "),
        started.elapsed().as_secs_f32()
    );
    known.push((args, checksum.clone()));
    checksum.clone()
}

/// The guest's `RESULT checkpoint_loop` checksum, asserting it passed.
fn guest_checksum(console: &str, side: &str) -> String {
    let results = parse_results(console);
    let (checksum, passed) = results
        .get("checkpoint_loop")
        .unwrap_or_else(|| panic!("no RESULT on the {side}'s console:\n{console}"));
    assert!(passed, "checkpoint_loop failed on the {side}:\n{console}");
    checksum.clone()
}

/// Writes the destination device's own profile, shrunk so that it cannot
/// honour what the guest saw on the source: at most 1 work-item per group.
fn small_profile(dir: &Path) -> PathBuf {
    let own = dir.join("own.profile");
    let out = Command::new(paths::backend_binary())
        .args(["--device", DEST_DEVICE, "--write-profile"])
        .arg(&own)
        .output()
        .expect("run vgpu-backend --write-profile");
    assert!(
        out.status.success(),
        "vgpu-backend --write-profile: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&own).expect("read the written profile");
    let mut profile =
        vgpu_migration::Profile::from_bytes(&bytes).expect("decode the written profile");
    assert!(profile.max_work_group_size > 1, "{profile:?}");
    profile.max_work_group_size = 1;
    let small = dir.join("small.profile");
    std::fs::write(&small, profile.to_bytes()).expect("write the small profile");
    small
}

/// A source VM running the program and a destination waiting for it.
/// Fields drop in order: the QEMUs go before their back-ends (a vhost-user
/// back-end that goes away under a live QEMU makes it abort).
struct Pair {
    dir: PathBuf,
    source_qmp: Qmp,
    source: RunningVm,
    dest: RunningVm,
    source_backend: Backend,
    dest_backend: Backend,
    /// The destination's listening port.
    port: u16,
    /// The guest program's arguments.
    args: &'static [&'static str],
}

impl Pair {
    /// Starts both back-ends and both QEMUs. `capabilities` are set on both
    /// sides; `dest_backend_args` go to the destination's back-end.
    fn start(name: &str, capabilities: &[&str], dest_backend_args: &[&str]) -> Option<Pair> {
        Pair::start_with(name, capabilities, dest_backend_args, ARGS, false)
    }

    /// As `start`, with the guest program's `args`, and with `precopy`
    /// both back-ends serve a pre-copy socket which both QEMUs name.
    fn start_with(
        name: &str,
        capabilities: &[&str],
        dest_backend_args: &[&str],
        args: &'static [&'static str],
        precopy: bool,
    ) -> Option<Pair> {
        let (qemu, image) = vm_parts()?;
        // The reference first: it needs the machine to itself.
        native_checksum_of(args);
        let dir = paths::scratch(name);
        let (src_dir, dst_dir) = (dir.join("source"), dir.join("dest"));
        std::fs::create_dir_all(&src_dir).expect("source dir");
        std::fs::create_dir_all(&dst_dir).expect("dest dir");
        let precopy_socket = |d: &Path| d.join("precopy.sock").to_string_lossy().into_owned();
        let (src_precopy, dst_precopy) = (precopy_socket(&src_dir), precopy_socket(&dst_dir));
        let mut source_args = vec!["--device", SOURCE_DEVICE];
        let mut dest_args = vec!["--device", DEST_DEVICE];
        if precopy {
            source_args.extend(["--precopy-socket", &src_precopy]);
            dest_args.extend(["--precopy-socket", &dst_precopy]);
        }
        let source_backend = Backend::start(&src_dir, &source_args);
        dest_args.extend_from_slice(dest_backend_args);
        let dest_backend = Backend::start(&dst_dir, &dest_args);

        let run = format!("/opt/vgpu/bin/checkpoint_loop,{}", args.join(","));
        let mut config = VmConfig::new(&qemu, &image, &run);
        config.vgpu_socket = Some(source_backend.socket.clone());
        let global = |socket: &str| format!("vhost-user-vgpu.precopy-socket={socket}");
        let (src_global, dst_global) = (global(&src_precopy), global(&dst_precopy));
        let mut source_extra = vec![];
        let mut dest_extra = vec!["-incoming", "defer"];
        if precopy {
            source_extra.extend(["-global", &src_global]);
            dest_extra.extend(["-global", &dst_global]);
        }
        let source = vm::start(&config, &src_dir, &source_extra);
        // Identical machine options; only the back-end sockets differ.
        config.vgpu_socket = Some(dest_backend.socket.clone());
        let dest = vm::start(&config, &dst_dir, &dest_extra);

        let caps: Vec<Value> = capabilities
            .iter()
            .map(|c| json!({"capability": c, "state": true}))
            .collect();
        let mut dest_qmp = Qmp::connect(&dest.qmp_path, QMP_TIMEOUT)
            .unwrap_or_else(|e| panic!("destination QMP: {e}\n{}", dest.console()));
        let mut source_qmp = Qmp::connect(&source.qmp_path, QMP_TIMEOUT)
            .unwrap_or_else(|e| panic!("source QMP: {e}\n{}", source.console()));
        if !caps.is_empty() {
            for qmp in [&mut dest_qmp, &mut source_qmp] {
                qmp.run(
                    "migrate-set-capabilities",
                    json!({ "capabilities": caps.clone() }),
                );
            }
        }
        dest_qmp.run("migrate-incoming", json!({"uri": "tcp:127.0.0.1:0"}));
        let incoming = dest_qmp.query_migrate().expect("destination query-migrate");
        let port = incoming["socket-address"][0]["port"]
            .as_str()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no listening port in {incoming}"));
        println!(
            "source ({SOURCE_DEVICE}) and destination ({DEST_DEVICE}, port {port}) started under {}",
            source.accel
        );
        Some(Pair {
            dir,
            source_backend,
            dest_backend,
            source,
            dest,
            source_qmp,
            port,
            args,
        })
    }

    /// Waits until the guest program on the source is well under way.
    fn wait_for_program(&mut self) {
        let found = self.source.wait_for_console(MIGRATE_AT, RUN_TIMEOUT);
        assert!(
            found,
            "the source never printed {MIGRATE_AT:?}:\n{}\nsource back-end:\n{}",
            self.source.console(),
            self.source_backend.log()
        );
    }

    fn migrate(&mut self) -> Instant {
        let uri = format!("tcp:127.0.0.1:{}", self.port);
        let started = Instant::now();
        self.source_qmp.run("migrate", json!({ "uri": uri }));
        started
    }

    /// Polls the source's `query-migrate` until its status is one of
    /// `until`; returns the last answer.
    fn poll_source(&mut self, until: &[&str], timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let info = self
                .source_qmp
                .query_migrate()
                .unwrap_or_else(|e| panic!("source query-migrate: {e}"));
            let status = info["status"].as_str().unwrap_or_default();
            if until.contains(&status) {
                return info;
            }
            assert!(
                Instant::now() < deadline,
                "migration still {status} after {timeout:?}: {info}\nsource:\n{}",
                self.source.console()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The failure paths' end: the source VM is running, and its program
    /// finishes there with the native checksum.
    fn source_finishes(&mut self, what: &str) {
        let state = self.source_qmp.run_state().expect("source query-status");
        assert_eq!(
            state,
            "running",
            "after {what} the source VM is {state}, not running\nsource:\n{}\nsource back-end:\n{}",
            self.source.console(),
            self.source_backend.log()
        );
        let exited = self.source.wait_exit(RUN_TIMEOUT);
        let console = self.source.console();
        assert!(exited, "the source did not finish after {what}:\n{console}");
        assert_eq!(
            self.source.exit_status(),
            Some(0),
            "the program failed on the source after {what}:\n{console}\nsource back-end:\n{}",
            self.source_backend.log()
        );
        let checksum = guest_checksum(&console, "source");
        assert_eq!(
            checksum,
            native_checksum_of(self.args),
            "after {what} the source's result differs from a native run"
        );
        println!(
            "{what}: the source ran on and finished with the native checksum {checksum} ({}, {:.1} s after boot)",
            self.dir.display(),
            self.source.started.elapsed().as_secs_f32()
        );
    }
}

/// `device state: sent N session(s), B bytes (...)` of a back-end's log.
fn device_state_line<'a>(log: &'a str, verb: &str) -> Option<&'a str> {
    log.lines()
        .find(|l| l.contains(&format!("device state: {verb} ")))
}

fn state_bytes(line: &str) -> Option<u64> {
    let after = &line[line.find("session(s), ")? + "session(s), ".len()..];
    after.split_whitespace().next()?.parse().ok()
}

#[test]
fn guest_program_migrates_to_a_backend_on_another_device() {
    let _serial = serial();
    let Some(mut pair) = Pair::start("vm-migrate", &[], &[]) else {
        return;
    };
    let native = native_checksum();
    pair.wait_for_program();
    let started = pair.migrate();
    let info = pair.poll_source(&["completed", "failed", "cancelled"], RUN_TIMEOUT);
    let wall = started.elapsed();
    assert_eq!(
        info["status"], "completed",
        "migration did not complete: {info}\nsource:\n{}\nsource back-end:\n{}\ndestination:\n{}\ndestination back-end:\n{}",
        pair.source.console(),
        pair.source_backend.log(),
        pair.dest.console(),
        pair.dest_backend.log()
    );
    let source_state = pair.source_qmp.run_state().expect("source query-status");
    assert_eq!(source_state, "postmigrate");

    // The program finishes on the destination.
    let exited = pair.dest.wait_exit(RUN_TIMEOUT);
    let dest_console = pair.dest.console();
    let dest_log = pair.dest_backend.log();
    assert!(
        exited,
        "the destination did not finish:\n{dest_console}\ndestination back-end:\n{dest_log}"
    );
    assert_eq!(
        pair.dest.exit_status(),
        Some(0),
        "the program failed on the destination:\n{dest_console}\ndestination back-end:\n{dest_log}"
    );
    let checksum = guest_checksum(&dest_console, "destination");
    assert_eq!(
        checksum, native,
        "the migrated run differs from a native run"
    );
    let source_console = pair.source.console();
    assert!(
        !source_console.contains("RESULT"),
        "the source finished the program too:\n{source_console}"
    );
    let last_on_source = source_console
        .lines()
        .filter_map(|l| l.trim().strip_prefix("PROGRESS "))
        .next_back()
        .unwrap_or("-")
        .to_string();
    let first_on_dest = dest_console
        .lines()
        .find_map(|l| l.trim().strip_prefix("PROGRESS "))
        .unwrap_or("-")
        .to_string();

    let source_log = pair.source_backend.log();
    let sent = device_state_line(&source_log, "sent").unwrap_or_else(|| {
        panic!("the source back-end logged no device-state save:\n{source_log}")
    });
    let received = device_state_line(&dest_log, "received").unwrap_or_else(|| {
        panic!("the destination back-end logged no device-state load:\n{dest_log}")
    });
    let bytes = state_bytes(sent).expect("bytes in the device-state line");
    assert!(
        bytes >= 256 << 20,
        "the vGPU state ({bytes} bytes) cannot hold 256 MiB of buffers: {sent}"
    );
    let ms = |k: &str| info[k].as_u64().unwrap_or(0);
    println!("migration {}: {info}", pair.dir.display());
    println!(
        "MIGRATION total {} ms (wall {:.2} s), downtime {} ms, setup {} ms; \
         RAM {} bytes transferred; vGPU state {} bytes ({:.1} MiB)",
        ms("total-time"),
        wall.as_secs_f32(),
        ms("downtime"),
        ms("setup-time"),
        info["ram"]["transferred"],
        bytes,
        bytes as f64 / (1 << 20) as f64
    );
    println!("source back-end: {sent}");
    println!("destination back-end: {received}");
    println!(
        "program: last PROGRESS on the source {last_on_source}, first on the destination {first_on_dest}; \
         checksum {checksum} = native"
    );
    let _ = pair.source_qmp.execute("quit", None);
}

#[test]
fn cancelled_migration_leaves_the_source_running() {
    let _serial = serial();
    let Some(mut pair) = Pair::start("vm-migrate-cancel", &[], &[]) else {
        return;
    };
    pair.wait_for_program();
    // Slow enough that the pre-copy is still running when it is cancelled.
    pair.source_qmp.run(
        "migrate-set-parameters",
        json!({"max-bandwidth": 1u64 << 20}),
    );
    pair.migrate();
    let info = pair.poll_source(&["active", "completed", "failed"], QMP_TIMEOUT);
    assert_eq!(info["status"], "active", "{info}");
    std::thread::sleep(Duration::from_secs(2));
    let info = pair.source_qmp.query_migrate().expect("query-migrate");
    assert_eq!(info["status"], "active", "not active before cancel: {info}");
    println!(
        "cancelling with {} bytes of RAM sent",
        info["ram"]["transferred"]
    );
    pair.source_qmp.run("migrate_cancel", Value::Null);
    let info = pair.poll_source(&["cancelled", "failed", "completed"], QMP_TIMEOUT);
    assert_eq!(info["status"], "cancelled", "{info}");
    pair.source_finishes("migrate_cancel");
    assert!(
        device_state_line(&pair.source_backend.log(), "sent").is_none(),
        "the source back-end saved its state although the migration was cancelled during pre-copy"
    );
    // The destination never got the VM.
    pair.dest.kill();
}

#[test]
fn destination_backend_refusing_the_vgpu_fails_the_migration() {
    let _serial = serial();
    if vm_parts().is_none() {
        return;
    }
    let profile_dir = paths::scratch("vm-migrate-refuse-profile");
    let small = small_profile(&profile_dir);
    // The return path lets the destination tell the source that loading
    // failed: the source then fails the migration and resumes the VM
    // (without it the source reports `completed` and stays paused, and a
    // manager must `cont` it, as libvirt does).
    let Some(mut pair) = Pair::start(
        "vm-migrate-refuse",
        &["return-path"],
        &["--profile", small.to_str().expect("utf-8 path")],
    ) else {
        return;
    };
    pair.wait_for_program();
    pair.migrate();
    let info = pair.poll_source(&["completed", "failed", "cancelled"], RUN_TIMEOUT);
    let dest_log = pair.dest_backend.log();
    assert_eq!(
        info["status"],
        "failed",
        "{info}\ndestination:\n{}\ndestination back-end:\n{dest_log}",
        pair.dest.console()
    );
    println!("source: {}", info["error-desc"]);
    // The refusal's reason. The back-end logs it when QEMU asks
    // CHECK_DEVICE_STATE; an early refusal closes the pipe, QEMU's write
    // fails (EPIPE) and it never asks, so the reason may be missing.
    let dest_log = pair.dest_backend.log();
    match dest_log.lines().find(|l| l.contains("cannot honour")) {
        Some(reason) => println!("destination back-end: {reason}"),
        None => println!(
            "NOTE: the destination back-end did not log why it refused the vGPU:\n{dest_log}"
        ),
    }
    // The destination QEMU gives up on the incoming VM.
    let exited = pair.dest.wait_exit(Duration::from_secs(30));
    let dest_console = pair.dest.console();
    assert!(exited, "the destination QEMU kept running:\n{dest_console}");
    let dest_err = dest_console
        .split("--- qemu stderr ---")
        .nth(1)
        .unwrap_or_default();
    println!("destination QEMU: {}", dest_err.trim());
    assert!(
        dest_err.contains("vhost-user-vgpu: loading back-end state"),
        "the destination did not fail in loading the vGPU:\n{dest_console}\n{dest_log}"
    );
    // The source resumes once it has heard of the failure.
    let deadline = Instant::now() + QMP_TIMEOUT;
    while pair.source_qmp.run_state().expect("query-status") != "running"
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    pair.source_finishes("a refused migration");
}

#[test]
fn destination_qemu_killed_mid_stream_leaves_the_source_running() {
    let _serial = serial();
    let Some(mut pair) = Pair::start("vm-migrate-kill", &[], &[]) else {
        return;
    };
    pair.wait_for_program();
    pair.source_qmp.run(
        "migrate-set-parameters",
        json!({"max-bandwidth": 1u64 << 20}),
    );
    pair.migrate();
    let info = pair.poll_source(&["active", "completed", "failed"], QMP_TIMEOUT);
    assert_eq!(info["status"], "active", "{info}");
    std::thread::sleep(Duration::from_secs(1));
    let info = pair.source_qmp.query_migrate().expect("query-migrate");
    assert_eq!(info["status"], "active", "{info}");
    println!(
        "killing the destination QEMU (pid {}) with {} bytes of RAM sent",
        pair.dest.pid(),
        info["ram"]["transferred"]
    );
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(pair.dest.pid() as i32, libc::SIGKILL) };
    let info = pair.poll_source(&["failed", "cancelled", "completed"], QMP_TIMEOUT);
    assert_eq!(info["status"], "failed", "{info}");
    println!("source: {}", info["error-desc"]);
    pair.source_finishes("the destination QEMU's death");
}

#[test]
fn refused_migration_without_return_path_resumes_with_cont() {
    let _serial = serial();
    if vm_parts().is_none() {
        return;
    }
    let profile_dir = paths::scratch("vm-migrate-refuse-cont-profile");
    let small = small_profile(&profile_dir);
    // No return path: the source cannot hear of the destination's failure.
    // It reports `completed` and stays paused (`postmigrate`); a manager
    // that learns of the failure from the destination resumes it with
    // `cont` (libvirt's Confirm phase does exactly that).
    let Some(mut pair) = Pair::start(
        "vm-migrate-refuse-cont",
        &[],
        &["--profile", small.to_str().expect("utf-8 path")],
    ) else {
        return;
    };
    pair.wait_for_program();
    pair.migrate();
    let info = pair.poll_source(&["completed", "failed", "cancelled"], RUN_TIMEOUT);
    println!("source, without a return path: {info}");
    let exited = pair.dest.wait_exit(Duration::from_secs(60));
    let dest_console = pair.dest.console();
    assert!(exited, "the destination QEMU kept running:\n{dest_console}");
    assert!(
        dest_console.contains("vhost-user-vgpu: loading back-end state"),
        "the destination did not fail in loading the vGPU:\n{dest_console}\n{}",
        pair.dest_backend.log()
    );
    let state = pair.source_qmp.run_state().expect("query-status");
    if info["status"] == "completed" {
        // All of the stream fitted in the socket before the destination
        // failed: the source believes the VM left.
        assert_eq!(state, "postmigrate", "{info}");
        println!("source VM {state}; cont");
        pair.source_qmp.run("cont", Value::Null);
    } else {
        // The destination closed the connection while the source was still
        // sending (the vGPU's buffers): the source failed by itself.
        assert_eq!(info["status"], "failed", "{info}");
        println!("source VM {state} after the broken stream; no cont needed");
    }
    pair.source_finishes("a refused migration and cont");
}

/// The `vgpu-backend` processes serving `socket` (the supervisor and its
/// workers, one per front-end), found through /proc.
fn backend_pids(socket: &Path) -> Vec<u32> {
    let Some(socket) = socket.to_str() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let ours =
                args.first()?.ends_with(b"vgpu-backend") && args.contains(&socket.as_bytes());
            ours.then_some(pid)
        })
        .collect()
}

/// Whether a back-end process of `socket` has its device-state transfer
/// thread (the worker serving the VM does).
fn transferring(socket: &Path) -> bool {
    backend_pids(socket).into_iter().any(|pid| {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks.flatten().any(|t| {
                    std::fs::read_to_string(t.path().join("comm"))
                        .is_ok_and(|c| c.starts_with("vgpu-device-sta"))
                })
            })
            .unwrap_or(false)
    })
}

#[test]
fn destination_killed_while_the_vgpu_state_streams_leaves_the_source_running() {
    let _serial = serial();
    // The source has stopped the VM and its back-end is writing the vGPU
    // (SET_DEVICE_STATE_FD, SAVE) into the pipe that QEMU copies into the
    // stream, when the destination QEMU dies. The source must fail the
    // migration and resume with its vGPU.
    let Some(mut pair) = Pair::start("vm-migrate-kill-state", &[], &[]) else {
        return;
    };
    let socket = pair.source_backend.socket.clone();
    assert!(
        !backend_pids(&socket).is_empty(),
        "no source back-end process found"
    );
    pair.wait_for_program();
    pair.migrate();
    // No QMP while waiting: QEMU holds its big lock while it saves devices,
    // so a query would only answer once the transfer is over.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !transferring(&socket) {
        assert!(
            Instant::now() < deadline,
            "the source back-end never started its state transfer"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(pair.dest.pid() as i32, libc::SIGKILL) };
    println!("destination QEMU killed while the source back-end streams the vGPU");
    pair.dest.kill();
    let info = pair.poll_source(&["failed", "cancelled", "completed"], QMP_TIMEOUT);
    assert_eq!(info["status"], "failed", "{info}");
    println!("source: {}", info["error-desc"]);
    let deadline = Instant::now() + QMP_TIMEOUT;
    while pair.source_qmp.run_state().expect("query-status") != "running"
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let source_log = pair.source_backend.log();
    let transfer = source_log
        .lines()
        .find(|l| l.contains("device state: sent") || l.contains("device-state transfer failed"))
        .unwrap_or("(no device-state line)");
    println!("source back-end: {transfer}");
    pair.source_finishes("the destination's death during the vGPU's transfer");
}

/// `vgpu-ctl --json ARGS` against a back-end's control socket.
fn ctl(backend: &Backend, args: &[&str]) -> Value {
    let out = Command::new(paths::target_dir().join("vgpu-ctl"))
        .arg("--control")
        .arg(&backend.control)
        .arg("--json")
        .args(args)
        .output()
        .expect("run vgpu-ctl");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "vgpu-ctl {args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn migration_leaning_on_a_checkpoint_both_hosts_hold_sends_only_the_changes() {
    let _serial = serial();
    let Some(mut pair) = Pair::start("vm-migrate-base", &[], &[]) else {
        return;
    };
    let native = native_checksum();
    pair.wait_for_program();
    // A whole checkpoint of the source, copied while the guest computes,
    // named on both back-ends (here both read the same file).
    let base = pair.dir.join("base.ckpt");
    let base_path = base.to_str().unwrap();
    let report = ctl(
        &pair.source_backend,
        &["checkpoint", base_path, "--rounds", "3"],
    );
    assert!(report["rounds"].as_u64().unwrap() >= 1, "{report}");
    let source = ctl(&pair.source_backend, &["migration-base", base_path]);
    assert_eq!(source["sends_changes_only"], true, "{source}");
    ctl(&pair.dest_backend, &["migration-base", base_path]);

    pair.migrate();
    let info = pair.poll_source(&["completed", "failed", "cancelled"], RUN_TIMEOUT);
    let dest_log = pair.dest_backend.log();
    assert_eq!(
        info["status"], "completed",
        "migration did not complete: {info}\nsource back-end:\n{}\ndestination back-end:\n{dest_log}",
        pair.source_backend.log()
    );
    let exited = pair.dest.wait_exit(RUN_TIMEOUT);
    let dest_console = pair.dest.console();
    assert!(
        exited && pair.dest.exit_status() == Some(0),
        "{dest_console}\n{dest_log}"
    );
    assert_eq!(guest_checksum(&dest_console, "destination"), native);
    let source_log = pair.source_backend.log();
    assert!(
        source_log.contains("sending only what changed since the migration base"),
        "{source_log}"
    );
    assert!(
        dest_log.contains("the incoming vGPU is incremental"),
        "{dest_log}"
    );
    let sent = device_state_line(&source_log, "sent").expect("a device-state line");
    println!(
        "migration leaning on a checkpoint: downtime {} ms, total {} ms; source back-end: {sent}",
        info["downtime"], info["total-time"]
    );
    let _ = pair.source_qmp.execute("quit", None);
}

#[test]
fn incremental_device_state_without_its_base_fails_and_the_source_runs_on() {
    let _serial = serial();
    // Named on the source only: the destination cannot merge what arrives,
    // refuses it, and the source (told over the return path) resumes.
    let Some(mut pair) = Pair::start("vm-migrate-no-base", &["return-path"], &[]) else {
        return;
    };
    pair.wait_for_program();
    let base = pair.dir.join("base.ckpt");
    let base_path = base.to_str().unwrap();
    ctl(&pair.source_backend, &["checkpoint", base_path]);
    let source = ctl(&pair.source_backend, &["migration-base", base_path]);
    assert_eq!(source["sends_changes_only"], true, "{source}");
    pair.migrate();
    let info = pair.poll_source(&["completed", "failed", "cancelled"], RUN_TIMEOUT);
    let dest_log = pair.dest_backend.log();
    assert_eq!(
        info["status"], "failed",
        "{info}\ndestination back-end:\n{dest_log}"
    );
    println!("source: {}", info["error-desc"]);
    let deadline = Instant::now() + QMP_TIMEOUT;
    while pair.source_qmp.run_state().expect("query-status") != "running"
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    pair.source_finishes("a migration whose destination lacked the base");
}

/// Pre-copy through QEMU: 64 MiB of buffers of which the guest rewrites 2
/// of 8 (16 MiB) in every iteration, all through the migration.
const PRECOPY_ARGS: &[&str] = &["-m", "64", "-i", "1200", "-p", "1", "-a", "2"];

/// `N` of the source back-end's `pre-copy: whole checkpoint of N bytes`.
fn precopy_bytes(log: &str) -> Option<u64> {
    let line = log
        .lines()
        .find(|l| l.contains("pre-copy: whole checkpoint of "))?;
    let after = &line[line.find("checkpoint of ")? + "checkpoint of ".len()..];
    after.split_whitespace().next()?.parse().ok()
}

/// Pre-copy through QEMU of a guest that reads all of its 32 MiB of
/// buffers (created read-only) in every iteration and writes only a 4 KiB
/// result.
const PRECOPY_READ_MOSTLY_ARGS: &[&str] = &["-m", "32", "-i", "250", "-p", "1", "-r", "1"];

/// Migrates `pair` with QEMU's pre-copy once its program is under way,
/// and checks that the program ends on the destination with the checksum
/// of a native run. Answers QEMU's last `query-migrate` and both
/// back-ends' logs.
fn precopy_ends_with_native_checksum(pair: &mut Pair) -> (Value, String, String) {
    let native = native_checksum_of(pair.args);
    pair.wait_for_program();
    // Once the whole vGPU went, little flows but the rewritten buffers,
    // and QEMU's own bandwidth estimate (which sizes what its downtime
    // limit lets through) falls towards zero: state what the link moves.
    pair.source_qmp.run(
        "migrate-set-parameters",
        json!({"avail-switchover-bandwidth": 128u64 << 20}),
    );
    pair.migrate();
    let info = pair.poll_source(&["completed", "failed", "cancelled"], RUN_TIMEOUT);
    let (source_log, dest_log) = (pair.source_backend.log(), pair.dest_backend.log());
    assert_eq!(
        info["status"], "completed",
        "migration did not complete: {info}\nsource back-end:\n{source_log}\ndestination back-end:\n{dest_log}"
    );
    let exited = pair.dest.wait_exit(RUN_TIMEOUT);
    let dest_console = pair.dest.console();
    // A destination that never finishes: both sides' logs and the
    // source's console, to tell a guest stuck on the vGPU from one that
    // failed.
    assert!(
        exited && pair.dest.exit_status() == Some(0),
        "destination exited by itself: {exited}\ndestination console:\n{dest_console}\n\
         destination back-end:\n{}\nsource console:\n{}\nsource back-end:\n{}",
        pair.dest_backend.log(),
        pair.source.console(),
        pair.source_backend.log()
    );
    assert_eq!(guest_checksum(&dest_console, "destination"), native);
    // Read again: the destination logs its load after the source's QEMU
    // reported the migration completed.
    (info, pair.source_backend.log(), pair.dest_backend.log())
}

#[test]
fn guest_writing_during_precopy_ends_with_its_native_checksum() {
    let _serial = serial();
    let Some(mut pair) = Pair::start_with("vm-precopy", &[], &[], PRECOPY_ARGS, true) else {
        return;
    };
    let (info, source_log, dest_log) = precopy_ends_with_native_checksum(&mut pair);

    // The whole vGPU went before the stop; the device state at the stop
    // carried the objects and the buffers written since their copy.
    let streamed = precopy_bytes(&source_log)
        .unwrap_or_else(|| panic!("no pre-copy line in the source's log:\n{source_log}"));
    assert!(streamed >= 64 << 20, "pre-copy of {streamed} bytes");
    assert!(
        source_log.contains("sending only what changed since the migration base"),
        "{source_log}"
    );
    assert!(
        dest_log.contains("pre-copy: kept the incoming whole checkpoint"),
        "{dest_log}"
    );
    assert!(
        dest_log.contains("the incoming vGPU is incremental"),
        "{dest_log}"
    );
    let sent = device_state_line(&source_log, "sent").expect("a device-state line");
    let at_stop = state_bytes(sent).expect("bytes in the device-state line");
    // At most the two buffers the guest rewrites, and some framing.
    assert!(at_stop <= (16 << 20) + (1 << 20), "{sent}");
    println!(
        "pre-copy migration: downtime {} ms, total {} ms; {streamed} bytes before the stop, {at_stop} at it",
        info["downtime"], info["total-time"]
    );
    let _ = pair.source_qmp.execute("quit", None);
}

#[test]
fn read_mostly_guest_sends_only_its_result_at_the_stop() {
    let _serial = serial();
    let Some(mut pair) = Pair::start_with(
        "vm-precopy-read-mostly",
        &[],
        &[],
        PRECOPY_READ_MOSTLY_ARGS,
        true,
    ) else {
        return;
    };
    let (info, source_log, dest_log) = precopy_ends_with_native_checksum(&mut pair);

    // Every kernel read all 32 MiB, but only the result buffer was
    // writable: the device state at the stop carries the objects and that
    // result, and the destination adopts the buffers it restored ahead.
    let sent = device_state_line(&source_log, "sent").expect("a device-state line");
    let at_stop = state_bytes(sent).expect("bytes in the device-state line");
    assert!(at_stop < 1 << 20, "{sent}");
    let adopted = "incoming vGPU: 33554432 bytes of buffers adopted as restored ahead";
    assert!(dest_log.contains(adopted), "{dest_log}");
    println!(
        "read-mostly pre-copy migration: downtime {} ms, total {} ms; {at_stop} bytes at the stop",
        info["downtime"], info["total-time"]
    );
    let _ = pair.source_qmp.execute("quit", None);
}

#[test]
fn migration_cancelled_during_precopy_leaves_the_source_running() {
    let _serial = serial();
    let Some(mut pair) = Pair::start_with("vm-precopy-cancel", &[], &[], PRECOPY_ARGS, true) else {
        return;
    };
    pair.wait_for_program();
    // Slow enough that the vGPU's stream is still going when cancelled.
    pair.source_qmp.run(
        "migrate-set-parameters",
        json!({"max-bandwidth": 4u64 << 20}),
    );
    pair.migrate();
    let deadline = Instant::now() + QMP_TIMEOUT;
    while !pair
        .source_backend
        .log()
        .contains("pre-copy channel of front-end")
    {
        assert!(
            Instant::now() < deadline,
            "the pre-copy never began:\n{}",
            pair.source_backend.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    let info = pair.source_qmp.query_migrate().expect("query-migrate");
    assert_eq!(info["status"], "active", "not active before cancel: {info}");
    pair.source_qmp.run("migrate_cancel", Value::Null);
    let info = pair.poll_source(&["cancelled", "failed", "completed"], QMP_TIMEOUT);
    assert_eq!(info["status"], "cancelled", "{info}");
    pair.source_finishes("migrate_cancel during pre-copy");
    let source_log = pair.source_backend.log();
    assert!(
        source_log.contains("pre-copy cancelled after "),
        "the source back-end's pre-copy was not under way when cancelled:\n{source_log}"
    );
    assert!(
        device_state_line(&source_log, "sent").is_none(),
        "the source back-end saved its state although the migration was cancelled:\n{source_log}"
    );
    pair.dest.kill();
}
