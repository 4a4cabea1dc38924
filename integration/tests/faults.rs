//! Faults end to end: an unmodified OpenCL program (through the ICD on the
//! loopback) killed mid-run, and QEMU killed while its guest runs OpenCL.
//! Each time the backend notices the dead front-end, releases its vGPU,
//! leaves other VMs alone and serves the next front-end.
//!
//! Covered elsewhere: the backend killed and restarted from a checkpoint
//! while a loopback program runs (`checkpoint_restart.rs`); guest processes
//! killed while blocked, disk full during a checkpoint
//! (`backend/tests/faults.rs`). The backend killed under a running QEMU
//! cannot be recovered today: see the ignored test at the end.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vgpu_integration::backend::Backend;
use vgpu_integration::paths;
use vgpu_integration::vm::{self, VmConfig};
use vgpu_protocol::messages::{CreateBuffer, CreateContext, SessionStats, SessionStatsReply};
use vgpu_protocol::{DataRef, ObjectKind, Wire};
use vgpu_transport::loopback::Loopback;
use vgpu_transport::Client;

/// How long the backend may take to notice a dead front-end.
const NOTICE: Duration = Duration::from_secs(10);
const BOOT_TIMEOUT: Duration = Duration::from_secs(600);

fn icd_vendors(dir: &Path) -> PathBuf {
    let icd = dir.join("vgpu.icd");
    std::fs::write(&icd, format!("{}\n", paths::icd_library().display())).expect("write vgpu.icd");
    icd
}

fn cl_program(name: &str) -> PathBuf {
    let program = paths::cl_tests_dir().join(name);
    assert!(
        program.exists(),
        "{} is missing: build the C suite first (scripts/setup.sh)",
        program.display()
    );
    program
}

fn parse_status(status: &str) -> serde_json::Value {
    serde_json::from_str(status).unwrap_or_else(|e| panic!("status is not JSON ({e}): {status}"))
}

/// A number of a status line: `sessions` of the whole backend, or a kind
/// of object (`buffers`, ...) summed over its VMs.
fn status_number(status: &str, key: &str) -> u64 {
    let status = parse_status(status);
    let value = if key == "sessions" {
        &status[key]
    } else {
        &status["objects"][key]
    };
    value
        .as_u64()
        .unwrap_or_else(|| panic!("no top-level {key} in {status}"))
}

/// Front-ends (VMs) the status lists.
fn front_ends(status: &str) -> usize {
    parse_status(status)["vms"]
        .as_array()
        .unwrap_or_else(|| panic!("no vms in {status}"))
        .len()
}

/// The backend processes serving `socket`, the supervisor and its workers
/// (from /proc).
fn backend_pids(socket: &Path) -> Vec<libc::pid_t> {
    let socket = socket.as_os_str().as_encoded_bytes();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<libc::pid_t>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_backend = words.first().is_some_and(|w| w.ends_with(b"vgpu-backend"));
        if is_backend && words.contains(&socket) {
            pids.push(pid);
        }
    }
    assert!(
        !pids.is_empty(),
        "no vgpu-backend serves {}",
        String::from_utf8_lossy(socket)
    );
    pids
}

fn wait_status(backend: &Backend, limit: Duration, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + limit;
    loop {
        let status = backend.status();
        if done(&status) || Instant::now() >= deadline {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Another VM on the same backend: a session holding a context and a buffer.
struct Bystander {
    client: Client,
}

impl Bystander {
    fn new(backend: &Backend) -> Bystander {
        let transport = Loopback::connect(&backend.socket).expect("connect the bystander");
        let client = Client::open(Box::new(transport), 7, false).expect("open a session");
        client
            .defer(
                CreateContext {
                    context: 1,
                    properties: vec![],
                }
                .into(),
            )
            .expect("context");
        client
            .defer(
                CreateBuffer {
                    mem: 2,
                    context: 1,
                    flags: 1,
                    size: 4096,
                    init: DataRef::NONE,
                }
                .into(),
            )
            .expect("buffer");
        let bystander = Bystander { client };
        bystander.assert_intact();
        bystander
    }

    fn assert_intact(&self) {
        let stats = self
            .client
            .call(SessionStats {}.into())
            .expect("the bystander is served");
        let counts = SessionStatsReply::from_bytes(&stats).expect("stats").counts;
        assert_eq!(counts[ObjectKind::Context.index()], 1, "{counts:?}");
        assert_eq!(counts[ObjectKind::Mem.index()], 1, "{counts:?}");
    }
}

/// Starts `program ARGS` through the ICD on `socket`; returns once it
/// printed a line starting with `ready`.
fn start_program(program: &Path, args: &[&str], dir: &Path, socket: &Path, ready: &str) -> Child {
    let mut child = Command::new(program)
        .args(args)
        .env("OCL_ICD_VENDORS", icd_vendors(dir))
        .env("VGPU_SOCKET", socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the OpenCL program through vgpu");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for line in lines.by_ref() {
        if line.expect("read").starts_with(ready) {
            std::thread::spawn(move || lines.for_each(drop));
            return child;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{} ended before printing {ready:?}", program.display());
}

#[test]
fn opencl_program_killed_mid_run_frees_its_vgpu() {
    let dir = paths::scratch("fault-kill-program");
    let mut backend = Backend::start(&dir, &[]);
    let bystander = Bystander::new(&backend);
    let mut child = start_program(
        &cl_program("checkpoint_loop"),
        &["-m", "16", "-i", "100000", "-p", "1"],
        &dir,
        &backend.socket,
        "PROGRESS 3",
    );
    let status = backend.status();
    assert_eq!(front_ends(&status), 2, "{status}");
    assert!(status_number(&status, "buffers") >= 9, "{status}");
    // Mid-run: it has launches and a clFinish in flight most of the time.
    std::thread::sleep(Duration::from_millis(200));
    child.kill().expect("SIGKILL the program");
    child.wait().expect("reap");
    let status = wait_status(&backend, NOTICE, |s| front_ends(s) == 1);
    assert_eq!(
        front_ends(&status),
        1,
        "the dead program's vGPU stays:\n{status}"
    );
    assert_eq!(status_number(&status, "sessions"), 1, "{status}");
    assert_eq!(status_number(&status, "buffers"), 1, "{status}");
    assert!(backend.is_running(), "backend died:\n{}", backend.log());
    bystander.assert_intact();
    // The next program is served as usual.
    let out = Command::new(cl_program("vector_add"))
        .env("CLTEST_QUICK", "1")
        .env("OCL_ICD_VENDORS", icd_vendors(&dir))
        .env("VGPU_SOCKET", &backend.socket)
        .output()
        .expect("run vector_add");
    assert!(
        out.status.success(),
        "vector_add after the kill:\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// The patched QEMU and the guest image, or `None` (with a message) when
/// VM tests are skipped.
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

/// The guest program: a long OpenCL loop that prints progress.
const LONG_RUN: &str = "/opt/vgpu/bin/checkpoint_loop,-m,4,-i,1000000,-p,1";

#[test]
fn qemu_killed_while_its_guest_runs_opencl_frees_the_vgpu() {
    let Some((qemu, image)) = vm_parts() else {
        return;
    };
    let dir = paths::scratch("fault-kill-qemu");
    let mut backend = Backend::start(&dir, &[]);
    let bystander = Bystander::new(&backend);
    let mut config = VmConfig::new(&qemu, &image, LONG_RUN);
    config.vgpu_socket = Some(backend.socket.clone());
    let mut guest = vm::start(&config, &dir, &[]);
    // The guest's program holds its 8 buffers on the backend.
    let status = wait_status(&backend, BOOT_TIMEOUT, |s| {
        front_ends(s) == 2 && status_number(s, "buffers") >= 9
    });
    assert!(
        front_ends(&status) == 2 && status_number(&status, "buffers") >= 9,
        "the guest's program never got going:\n{status}\n{}",
        guest.console()
    );
    std::thread::sleep(Duration::from_secs(1));
    println!(
        "killing QEMU {} s after start ({})",
        guest.started.elapsed().as_secs(),
        guest.accel
    );
    guest.kill();
    let status = wait_status(&backend, NOTICE, |s| front_ends(s) == 1);
    assert_eq!(front_ends(&status), 1, "the VM's vGPU stays:\n{status}");
    assert_eq!(status_number(&status, "sessions"), 1, "{status}");
    assert_eq!(status_number(&status, "buffers"), 1, "{status}");
    assert!(backend.is_running(), "backend died:\n{}", backend.log());
    bystander.assert_intact();
    // The next QEMU is served.
    let mut config = VmConfig::new(&qemu, &image, "/opt/vgpu/bin/vector_add");
    config.vgpu_socket = Some(backend.socket.clone());
    config.append = "CLTEST_QUICK=1".into();
    let run = vm::boot(&config, &dir);
    run.assert_success();
    let status = wait_status(&backend, NOTICE, |s| front_ends(s) == 1);
    assert_eq!(front_ends(&status), 1, "{status}");
    bystander.assert_intact();
}

/// The backend is killed under a running VM and started again with
/// `--restore` from the checkpoint it took (paused, as a maintenance
/// procedure would); QEMU reconnects (`-chardev socket,...,reconnect-ms=`,
/// with the reconnection our QEMU patch adds to `vhost-user-base`), the
/// chains the dead backend had taken are handed out again, and the guest's
/// program goes on to a verified result.
#[test]
fn backend_killed_under_a_running_vm_comes_back_from_its_checkpoint() {
    let Some((dir, backend, mut guest)) = guest_well_into_its_loop("fault-kill-backend") else {
        return;
    };
    let checkpoint = dir.join("vgpu.ckpt");
    let out = Command::new(paths::target_dir().join("vgpu-ctl"))
        .arg("--control")
        .arg(&backend.control)
        .arg("--json")
        .args([
            "checkpoint",
            checkpoint.to_str().expect("utf-8"),
            "--then",
            "pause",
        ])
        .output()
        .expect("vgpu-ctl");
    assert!(
        out.status.success(),
        "checkpoint: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    kill_backend(backend);
    let backend = Backend::start(&dir, &["--restore", checkpoint.to_str().expect("utf-8")]);
    assert!(
        guest.wait_exit(BOOT_TIMEOUT),
        "the guest never finished:\n{}\nbackend:\n{}",
        guest.console(),
        backend.log()
    );
    assert_eq!(guest.exit_status(), Some(0), "{}", guest.console());
    assert!(
        backend.log().contains("restored 1 session(s)"),
        "{}",
        backend.log()
    );
}

/// The same without a checkpoint: the new backend does not know the
/// guest's session, so the guest's next call fails with an error the
/// program reports, instead of waiting forever.
#[test]
fn backend_restarted_without_its_state_fails_the_guests_calls_cleanly() {
    let Some((dir, backend, mut guest)) = guest_well_into_its_loop("fault-restart-backend") else {
        return;
    };
    kill_backend(backend);
    let mut backend = Backend::start(&dir, &[]);
    assert!(
        guest.wait_exit(BOOT_TIMEOUT),
        "the guest's program hangs:\n{}\nbackend:\n{}",
        guest.console(),
        backend.log()
    );
    let status = guest.exit_status();
    assert!(
        status.is_some_and(|s| s != 0),
        "the program should fail, got {status:?}:\n{}",
        guest.console()
    );
    assert!(backend.is_running(), "{}", backend.log());
}

/// A backend, and a guest whose vGPU chardev reconnects, ten iterations
/// into its OpenCL loop; `None` when VM tests are skipped.
fn guest_well_into_its_loop(name: &str) -> Option<(PathBuf, Backend, vm::RunningVm)> {
    let (qemu, image) = vm_parts()?;
    let dir = paths::scratch(name);
    let backend = Backend::start(&dir, &[]);
    let mut guest = start_reconnecting_guest(&qemu, &image, &dir, &backend.socket);
    assert!(
        guest.wait_for_console("PROGRESS 10", BOOT_TIMEOUT),
        "{}",
        guest.console()
    );
    Some((dir, backend, guest))
}

/// The guest's long OpenCL loop in a VM whose vGPU chardev reconnects.
fn start_reconnecting_guest(qemu: &Path, image: &Path, dir: &Path, socket: &Path) -> vm::RunningVm {
    let config = VmConfig::new(qemu, image, "/opt/vgpu/bin/checkpoint_loop,-m,4,-i,60,-p,2");
    let chardev = format!("socket,id=vgpu0,path={},reconnect-ms=500", socket.display());
    let memory = format!(
        "memory-backend-memfd,id=mem,size={}M,share=on",
        config.memory_mb
    );
    vm::start(
        &config,
        dir,
        &[
            "-object",
            &memory,
            "-numa",
            "node,memdev=mem",
            "-chardev",
            &chardev,
            "-device",
            "vhost-user-vgpu-pci,chardev=vgpu0",
        ],
    )
}

/// SIGKILL to the supervisor and every worker, not a clean exit.
fn kill_backend(mut backend: Backend) {
    for pid in backend_pids(&backend.socket) {
        // SAFETY: SIGKILL to the backend processes this test started.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    while backend.is_running() {
        std::thread::sleep(Duration::from_millis(20));
    }
}
