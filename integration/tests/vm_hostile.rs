//! Bad input from a guest: a deliberately broken guest program
//! (`guest-driver/kernel/vgpu-raw-ring-test.c`, through the driver's
//! test-only `raw_ring_test` hook) writes hostile descriptor chains straight
//! into the submit ring. The back-end must drop them with rate-limited
//! warnings and keep running; another front-end on the same back-end (a
//! host-side bystander on the loopback transport, i.e. another VM) keeps its
//! objects and answers; a fresh boot against the same back-end works.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use vgpu_integration::backend::Backend;
use vgpu_integration::paths;
use vgpu_integration::vm::{boot, VmConfig, VmRun};
use vgpu_protocol::messages::{
    CreateBuffer, CreateContext, CreateQueue, EnqueueReadBuffer, Finish, Ping, SessionStats,
    SessionStatsReply,
};
use vgpu_protocol::{ObjectKind, Wire};
use vgpu_transport::loopback::Loopback;
use vgpu_transport::Client;

/// The bystander's session id; the guest program aims at the same id.
const BYSTANDER_SESSION: u64 = 7;
const RAW_TEST: &str = "/opt/vgpu/bin/vgpu-raw-ring-test";
const IOCTL_TEST: &str = "/opt/vgpu/bin/vgpu-ioctl-test";
const BOOT_TIMEOUT: Duration = Duration::from_secs(600);

/// The patched QEMU, or `None` (with a message) when VM tests are skipped.
fn vm_qemu() -> Option<PathBuf> {
    if std::env::var("VGPU_SKIP_VM").is_ok_and(|v| v == "1") {
        eprintln!("skipped: VGPU_SKIP_VM=1");
        return None;
    }
    let qemu = paths::qemu().or_else(cached_qemu).expect(
        "no patched QEMU: none recorded in target/qemu-path and none under ~/.cache/vgpu: \
         run scripts/setup.sh",
    );
    Some(qemu)
}

/// The newest QEMU that `qemu-configs/build-qemu.sh` left in its cache.
fn cached_qemu() -> Option<PathBuf> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?
        .join("vgpu");
    std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("qemu-"))
        .map(|e| e.path().join("bin/qemu-system-x86_64"))
        .filter(|p| p.exists())
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
}

/// The repository, found through `integration/` itself (the workspace may
/// be a copy made of symbolic links).
fn repo() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .canonicalize()
        .unwrap_or_else(|_| manifest.to_path_buf())
        .parent()
        .expect("integration/ has a parent")
        .to_path_buf()
}

/// The test guest plus `vgpu-raw-ring-test` (built here: the staged guest
/// files do not carry it), built once per test process.
fn hostile_image() -> PathBuf {
    static IMAGE: OnceLock<PathBuf> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            let dir = paths::scratch("vm-hostile-image");
            let bin = dir.join("extra/opt/vgpu/bin");
            std::fs::create_dir_all(&bin).expect("extra dir");
            let src = repo().join("guest-driver/kernel/vgpu-raw-ring-test.c");
            let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
            let status = Command::new(&cc)
                .args(["-O2", "-Wall", "-Wextra", "-static", "-o"])
                .arg(bin.join("vgpu-raw-ring-test"))
                .arg(&src)
                .status()
                .unwrap_or_else(|e| panic!("run {cc}: {e}"));
            assert!(
                status.success(),
                "cannot build {} (needs a C compiler and a static libc)",
                src.display()
            );
            let out = Command::new(repo().join("integration/guest-image/build-guest-image.sh"))
                .arg(dir.join("image"))
                .arg(dir.join("extra"))
                .stderr(Stdio::inherit())
                .output()
                .expect("run build-guest-image.sh");
            assert!(out.status.success(), "build-guest-image.sh failed");
            dir.join("image")
        })
        .clone()
}

/// One test at a time boots: two TCG guests at once on a 2-core host only
/// make both slow.
fn vm_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn boot_guest(qemu: &Path, backend: &Backend, dir: &Path, run: &str) -> VmRun {
    std::fs::create_dir_all(dir).expect("boot dir");
    let mut config = VmConfig::new(qemu, &hostile_image(), run);
    config.vgpu_socket = Some(backend.socket.clone());
    config.timeout = BOOT_TIMEOUT;
    let run = boot(&config, dir);
    println!(
        "{} ran in {:.1} s under {}",
        config.run,
        run.elapsed.as_secs_f32(),
        run.accel
    );
    run
}

/// The last `n` lines of the back-end's log (it can be long).
fn log_tail(backend: &Backend, n: usize) -> String {
    let log = backend.log();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A front-end of its own (another VM, as far as the back-end knows) with a
/// context, a queue and a buffer of known contents.
struct Bystander {
    client: Client,
    queue: u64,
    mem: u64,
    contents: Vec<u8>,
}

impl Bystander {
    fn new(backend: &Backend) -> Bystander {
        let transport = Loopback::connect(&backend.socket).expect("bystander connects");
        let client = Client::open(Box::new(transport), BYSTANDER_SESSION, false)
            .expect("bystander opens its session");
        let context = client.new_handle();
        client
            .call(
                CreateContext {
                    context,
                    properties: vec![],
                }
                .into(),
            )
            .expect("context");
        let queue = client.new_handle();
        client
            .call(
                CreateQueue {
                    queue,
                    context,
                    properties: vec![],
                }
                .into(),
            )
            .expect("queue");
        let mem = client.new_handle();
        let contents: Vec<u8> = (0..4096u32).map(|i| (i * 13 + i / 256) as u8).collect();
        client
            .call_with_out(&contents, |init, _| {
                CreateBuffer {
                    mem,
                    context,
                    flags: 1,
                    size: contents.len() as u64,
                    init,
                }
                .into()
            })
            .expect("buffer");
        let bystander = Bystander {
            client,
            queue,
            mem,
            contents,
        };
        bystander.assert_intact("at the start");
        bystander
    }

    /// Its objects are all there, the buffer holds what it held, calls answer.
    fn assert_intact(&self, when: &str) {
        self.client
            .call(Ping {}.into())
            .unwrap_or_else(|s| panic!("bystander PING {when}: {s:?}"));
        let payload = self
            .client
            .call(SessionStats {}.into())
            .unwrap_or_else(|s| panic!("bystander SESSION_STATS {when}: {s:?}"));
        let counts = SessionStatsReply::from_bytes(&payload)
            .expect("stats reply")
            .counts;
        for kind in [ObjectKind::Context, ObjectKind::Queue, ObjectKind::Mem] {
            assert_eq!(
                counts[kind.index()],
                1,
                "bystander lost its {kind:?} {when}: {counts:?}"
            );
        }
        let mut back = vec![0u8; self.contents.len()];
        let (queue, mem) = (self.queue, self.mem);
        self.client
            .call_with_in(&mut back, |data, offset| {
                EnqueueReadBuffer {
                    queue,
                    mem,
                    offset,
                    data,
                    wait: vec![],
                    event: 0,
                }
                .into()
            })
            .unwrap_or_else(|s| panic!("bystander read {when}: {s:?}"));
        self.client.call(Finish { queue }.into()).expect("finish");
        assert!(back == self.contents, "bystander's buffer changed {when}");
    }
}

/// The back-end is alive and its log stands still: no worker spinning on a
/// ring the guest left broken.
fn assert_backend_healthy(backend: &mut Backend, when: &str) {
    assert!(
        backend.is_running(),
        "vgpu-backend died {when}:\n{}",
        log_tail(backend, 60)
    );
    let before = std::fs::metadata(&backend.log)
        .map(|m| m.len())
        .unwrap_or(0);
    std::thread::sleep(Duration::from_secs(3));
    let after = std::fs::metadata(&backend.log)
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(
        after - before < 4096,
        "vgpu-backend's log grew {} bytes in 3 s with no guest running {when}:\n{}",
        after - before,
        log_tail(backend, 20)
    );
    assert!(
        backend.is_running(),
        "vgpu-backend died {when}:\n{}",
        log_tail(backend, 60)
    );
    let log = backend.log();
    assert!(
        !log.contains("panicked"),
        "vgpu-backend panicked {when}:\n{}",
        log_tail(backend, 60)
    );
}

/// The guest ran its program to the end and its kernel did not oops.
fn assert_guest_clean(run: &VmRun) {
    run.assert_success();
    for bad in ["Call Trace", "BUG:", "Kernel panic", "general protection"] {
        assert!(
            !run.console.contains(bad),
            "guest kernel trouble ({bad}):\n{}",
            run.console
        );
    }
}

/// `RAW <case> -> <outcome>` lines of the guest program.
fn raw_lines(console: &str) -> Vec<&str> {
    console
        .lines()
        .filter_map(|l| l.find("RAW ").map(|at| &l[at + 4..]))
        .collect()
}

/// `key=value` of the `RAW-SUMMARY` line.
fn summary(console: &str, key: &str) -> String {
    let line = console
        .lines()
        .find(|l| l.contains("RAW-SUMMARY"))
        .unwrap_or_else(|| {
            panic!("no RAW-SUMMARY line:\n{console}");
        });
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .unwrap_or_else(|| panic!("no {key}= in {line}"))
        .to_string()
}

#[test]
fn hostile_chains_from_a_guest_hurt_neither_the_backend_nor_another_vm() {
    let Some(qemu) = vm_qemu() else { return };
    let _vm = vm_lock();
    let dir = paths::scratch("vm-hostile");
    hostile_image();
    let mut backend = Backend::start(&dir, &[]);
    let bystander = Bystander::new(&backend);

    let run = boot_guest(&qemu, &backend, &dir.join("hostile-boot"), RAW_TEST);
    if run.exit_status != Some(0) {
        println!("backend log (tail):\n{}", log_tail(&backend, 80));
    }
    assert_guest_clean(&run);
    let console = &run.console;
    assert!(console.contains("PASS normal session"), "{console}");
    assert_eq!(
        summary(console, "control"),
        "ok",
        "a well-formed raw chain went unanswered:\n{console}"
    );
    assert_eq!(summary(console, "errors"), "0", "{console}");

    // What the device did with each chain, as the guest saw it.
    let lines = raw_lines(console);
    assert!(lines.len() > 30, "too few cases ran:\n{console}");
    for line in &lines {
        let (case, outcome) = line.split_once(" -> ").unwrap_or((line, ""));
        let ok = if case.starts_with("flood") {
            true
        } else if case.starts_with("available entry") {
            // no descriptor of that index to put on the used ring
            outcome.starts_with("not returned") || outcome.starts_with("dropped")
        } else if case.starts_with("random request bytes")
            || case.starts_with("valid header")
            || case.starts_with("well-framed")
            || case.contains("bystander's session")
        {
            // well-formed chains of garbage: a refusal in the reply
            (outcome.starts_with("answered") && !outcome.contains("batch status 0,"))
                || case.contains("release its handles")
        } else if case.starts_with("control") {
            outcome.starts_with("answered")
        } else {
            outcome.starts_with("dropped")
        };
        assert!(
            ok,
            "unexpected outcome for a hostile chain: {line}\n{console}"
        );
    }
    // Sessions belong to their front-end: the guest's session 7 is its own,
    // and the bystander's handles are unknown there.
    let release = lines
        .iter()
        .find(|l| l.contains("release its handles"))
        .expect("the release case ran");
    assert!(
        release.contains("op 0x1021: -38") && !release.contains("op 0x1021: 0,"),
        "{release}"
    );

    // The back-end dropped the chains with warnings, and rate-limited them.
    assert_backend_healthy(&mut backend, "after the hostile guest");
    let log = backend.log();
    let sent: usize = summary(console, "sent").parse().expect("sent=");
    let warned = log
        .lines()
        .filter(|l| l.contains("dropping descriptor chain"))
        .count();
    assert!(warned > 0, "no dropped chain in the back-end's log:\n{log}");
    assert!(
        warned < sent && log.contains("guest warnings suppressed"),
        "{sent} hostile chains gave {warned} warnings, not rate-limited:\n{}",
        log_tail(&backend, 60)
    );
    // The cases came one a second, under the limit: each has its line.
    for reason in [
        "descriptor chain is cut short",
        "is outside guest memory",
        "a readable descriptor follows a writable one",
        "descriptor chain has more than 4096 descriptors",
        "request stream shorter than a batch header",
        "refusing batch: bad magic",
        "refusing batch: bad header",
        "batch for unknown session 7",
    ] {
        assert!(
            log.contains(reason),
            "no \"{reason}\" in the back-end's log:\n{log}"
        );
    }

    bystander.assert_intact("after the hostile guest");

    // The same back-end serves a fresh boot of the guest normally.
    let run = boot_guest(&qemu, &backend, &dir.join("clean-boot"), IOCTL_TEST);
    if run.exit_status != Some(0) {
        println!("backend log (tail):\n{}", log_tail(&backend, 80));
    }
    assert_guest_clean(&run);
    assert!(!run.console.contains("FAIL"), "{}", run.console);
    assert!(run.console.contains(" passed, 0 failed"), "{}", run.console);
    assert_backend_healthy(&mut backend, "after the second guest");
    bystander.assert_intact("after the second guest");
}

/// The available index jumps by more than the queue size. vgpu-backend
/// (virtio-queue's `pop_descriptor_chain` fails, `enable_notification` keeps
/// answering "more work") then spins in its vring worker logging
/// "Iterator error" without end, also after the VM is gone.
#[test]
fn a_jumped_available_index_does_not_make_the_backend_spin() {
    let Some(qemu) = vm_qemu() else { return };
    let _vm = vm_lock();
    let dir = paths::scratch("vm-hostile-jump");
    hostile_image();
    let mut backend = Backend::start(&dir, &[]);
    let bystander = Bystander::new(&backend);

    let run = boot_guest(
        &qemu,
        &backend,
        &dir.join("hostile-boot"),
        &format!("{RAW_TEST},--avail-jump"),
    );
    assert_guest_clean(&run);
    assert!(
        run.console.contains("RAW available index jumps"),
        "{}",
        run.console
    );
    assert_backend_healthy(&mut backend, "after the guest jumped its available index");
    bystander.assert_intact("after the guest jumped its available index");

    let run = boot_guest(&qemu, &backend, &dir.join("clean-boot"), IOCTL_TEST);
    assert_guest_clean(&run);
    assert!(!run.console.contains("FAIL"), "{}", run.console);
    assert_backend_healthy(&mut backend, "after the second guest");
    bystander.assert_intact("after the second guest");
}
