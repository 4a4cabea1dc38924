//! Faults around the daemon: a guest process killed mid-call or while
//! blocked on a user event nobody sets, a disk that fills up during a
//! checkpoint; and the reproducers of what fuzzing found (`fuzz/`,
//! `SECURITY.md`). Each time the daemon keeps serving, other sessions keep
//! their objects, and what the fault touched is released.
//!
//! Guest processes are this test binary run again as a child
//! (`VGPU_FAULT_CHILD`), a real loopback front-end in a process of its own
//! that the test kills with SIGKILL.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::frame::BatchBuilder;
use vgpu_protocol::messages::*;
use vgpu_protocol::{decode_reply, ArgKind, DataRef, ObjectKind, Request, Wire};
use vgpu_transport::loopback::Loopback;
use vgpu_transport::vring::DescSpec;
use vgpu_transport::Client;

/// Session id of the child front-ends (its worker thread is
/// `vgpu-session-42...`, truncated to 15 bytes by the kernel).
const CHILD_SESSION: u64 = 424_242;
const CHILD_THREAD: &str = "vgpu-session-42";
/// How long the daemon may take to notice a dead front-end.
const NOTICE: Duration = Duration::from_secs(5);

const BUMP: &str = "__kernel void bump(__global uint *a, uint v) { a[get_global_id(0)] += v; }\n\
                    __kernel void local_copy(__global uchar *a, __local uchar *s) {\n\
                      if (get_local_id(0) == 0) s[0] = 7;\n\
                      barrier(CLK_LOCAL_MEM_FENCE);\n\
                      if (get_global_id(0) == 0) a[0] = s[0];\n\
                    }\n";

/// A session on its own connection that owns a buffer with known contents.
struct Bystander {
    raw: RawFrontend,
}

impl Bystander {
    fn new(backend: &Backend) -> Bystander {
        let mut raw = backend.raw();
        raw.open_session(7);
        let reply = raw.batch(
            7,
            &[
                req::context(1),
                req::queue(2, 1),
                req::buffer(3, 1, 1, 256),
                EnqueueFillBuffer {
                    queue: 2,
                    mem: 3,
                    pattern: vec![0x5a],
                    offset: 0,
                    size: 256,
                    wait: vec![],
                    event: 0,
                }
                .into(),
                Finish { queue: 2 }.into(),
            ],
        );
        assert_all_succeed(&reply.records);
        Bystander { raw }
    }

    /// Its objects are all there and its buffer still holds its bytes.
    fn assert_intact(&mut self) {
        let (reply, data) = self.raw.batch_with_in(
            7,
            &[
                EnqueueReadBuffer {
                    queue: 2,
                    mem: 3,
                    offset: 0,
                    data: DataRef {
                        offset: 0,
                        len: 256,
                    },
                    wait: vec![],
                    event: 0,
                }
                .into(),
                SessionStats {}.into(),
            ],
            256,
        );
        assert_all_succeed(&reply.records);
        assert!(data.iter().all(|b| *b == 0x5a), "bystander's data changed");
        let counts = SessionStatsReply::from_bytes(&reply.records[1].payload)
            .expect("stats")
            .counts;
        assert_eq!(counts[ObjectKind::Context.index()], 1);
        assert_eq!(counts[ObjectKind::Queue.index()], 1);
        assert_eq!(counts[ObjectKind::Mem.index()], 1);
    }
}

fn assert_all_succeed(records: &[vgpu_protocol::frame::ReplyRecord]) {
    assert!(
        records.iter().all(|r| r.status.is_success()),
        "a call failed: {records:?}"
    );
}

/// The number after `"key": ` in the top level of a status line.
fn status_number(status: &serde_json::Value, key: &str) -> u64 {
    status[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no top-level number {key} in {status}"))
}

/// Front-ends (VMs) listed by `status`.
fn front_ends(status: &serde_json::Value) -> usize {
    status["vms"]
        .as_array()
        .unwrap_or_else(|| panic!("no vms in {status}"))
        .len()
}

/// Polls `vgpu-ctl status` until `done` holds; the last status.
fn wait_status(
    backend: &Backend,
    limit: Duration,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + limit;
    loop {
        let status = backend.status();
        if done(&status) || Instant::now() >= deadline {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The daemon's processes (the supervisor and its workers, one per
/// front-end), found by the socket on their command lines.
fn backend_pids(backend: &Backend) -> Vec<u32> {
    let socket = backend.socket.to_string_lossy().into_owned();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_backend = words.first().is_some_and(|w| w.ends_with(b"vgpu-backend"));
        if is_backend && words.contains(&socket.as_bytes()) {
            pids.push(pid);
        }
    }
    assert!(!pids.is_empty(), "no vgpu-backend process serves {socket}");
    pids
}

/// The names of every thread of the daemon's processes.
fn thread_names(backend: &Backend) -> Vec<String> {
    backend_pids(backend)
        .into_iter()
        .flat_map(|pid| {
            let tasks = std::fs::read_dir(format!("/proc/{pid}/task"));
            tasks
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|name| name.trim().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Waits until no thread of the daemon serves the child's session.
fn wait_child_thread_gone(backend: &Backend) -> bool {
    let deadline = Instant::now() + NOTICE;
    while Instant::now() < deadline {
        if !thread_names(backend).iter().any(|n| n == CHILD_THREAD) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

// ---- child front-ends ---------------------------------------------------

/// This test binary as a child front-end running `scenario` against
/// `socket`; returns once it printed `READY`.
fn spawn_child(scenario: &str, socket: &Path) -> Child {
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "child_front_end",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("VGPU_FAULT_CHILD", scenario)
        .env("VGPU_FAULT_SOCKET", socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the child front-end");
    let stdout = child.stdout.take().expect("child stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // (The harness prints "test child_front_end ... " before it.)
            if line.trim_end().ends_with("READY") {
                let _ = tx.send(());
            }
        }
    });
    if rx.recv_timeout(Duration::from_secs(60)).is_err() {
        let _ = child.kill();
        panic!("child front-end {scenario} never got ready");
    }
    child
}

fn kill(child: &mut Child) {
    // SAFETY: SIGKILL to our own child process, which is not reaped yet.
    let rc = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill the child");
    child.wait().expect("reap the child");
}

/// Context, queue, a 1 MiB buffer and the `bump` kernel on it.
fn child_setup(client: &Client) {
    let requests: Vec<Request> = vec![
        req::context(1),
        req::queue(2, 1),
        req::buffer(3, 1, 1, 1 << 20),
        req::program(4, 1, BUMP.as_bytes()),
    ];
    for request in requests {
        client.defer(request).expect("defer a create");
    }
    client.call(req::build(4)).expect("build");
    for request in [
        Request::from(CreateKernel {
            kernel: 5,
            program: 4,
            name: b"bump".to_vec(),
        }),
        SetKernelArg {
            kernel: 5,
            index: 0,
            arg_kind: ArgKind::Mem as u32,
            size: 8,
            value: vec![],
            handle: 3,
        }
        .into(),
        SetKernelArg {
            kernel: 5,
            index: 1,
            arg_kind: ArgKind::Value as u32,
            size: 4,
            value: 1u32.to_le_bytes().to_vec(),
            handle: 0,
        }
        .into(),
    ] {
        client.defer(request).expect("defer a kernel call");
    }
}

/// The child's side: runs only when `VGPU_FAULT_CHILD` names a scenario.
#[test]
fn child_front_end() {
    let Ok(scenario) = std::env::var("VGPU_FAULT_CHILD") else {
        return;
    };
    let socket = PathBuf::from(std::env::var_os("VGPU_FAULT_SOCKET").expect("socket"));
    let transport = Loopback::connect(&socket).expect("connect");
    let client = Client::open(Box::new(transport), CHILD_SESSION, false).expect("open");
    child_setup(&client);
    match scenario.as_str() {
        // Kernels and transfers back to back until killed.
        "busy" => {
            let mut iteration = 0u64;
            loop {
                for _ in 0..8 {
                    client
                        .defer(
                            EnqueueNdRange {
                                queue: 2,
                                kernel: 5,
                                work_dim: 1,
                                offset: [0; 3],
                                global: [(1 << 20) / 4, 1, 1],
                                local: [0; 3],
                                wait: vec![],
                                event: 0,
                            }
                            .into(),
                        )
                        .expect("launch");
                }
                client.call(Finish { queue: 2 }.into()).expect("finish");
                iteration += 1;
                if iteration == 2 {
                    println!("READY");
                }
            }
        }
        // A wait on a user event nobody will ever set.
        "blocked" => {
            client
                .defer(
                    CreateUserEvent {
                        event: 6,
                        context: 1,
                    }
                    .into(),
                )
                .expect("user event");
            client
                .call(SessionStats {}.into())
                .expect("objects are created");
            println!("READY");
            let result = client.call(WaitForEvents { events: vec![6] }.into());
            println!("WAIT RETURNED {result:?}");
            std::process::exit(3);
        }
        other => panic!("unknown child scenario {other}"),
    }
}

// ---- a guest process killed -------------------------------------------

#[test]
fn guest_process_killed_mid_call_frees_its_session() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut child = spawn_child("busy", &backend.socket);
    let status = backend.status();
    assert_eq!(status_number(&status, "sessions"), 2, "{status}");
    assert_eq!(front_ends(&status), 2, "{status}");
    // Let it get well into its next batches, then kill it mid-call.
    std::thread::sleep(Duration::from_millis(300));
    kill(&mut child);
    let status = wait_status(&backend, NOTICE, |s| front_ends(s) == 1);
    assert_eq!(front_ends(&status), 1, "the dead front-end stays: {status}");
    assert_eq!(status_number(&status, "sessions"), 1, "{status}");
    assert!(
        wait_child_thread_gone(&backend),
        "the killed process's session thread still runs: {:?}",
        thread_names(&backend)
    );
    assert!(backend.is_running());
    bystander.assert_intact();
    // The daemon serves the next process as usual.
    let client = backend.client();
    client
        .call(Ping {}.into())
        .expect("a new process is served");
}

#[test]
fn guest_blocked_on_an_unset_user_event_is_freed_when_killed() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut child = spawn_child("blocked", &backend.socket);
    // The child is now inside clWaitForEvents on the backend's side.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().expect("child").is_none(),
        "the wait returned by itself"
    );
    assert!(
        thread_names(&backend).iter().any(|n| n == CHILD_THREAD),
        "no session thread for the child: {:?}",
        thread_names(&backend)
    );
    kill(&mut child);
    let status = wait_status(&backend, NOTICE, |s| front_ends(s) == 1);
    assert_eq!(front_ends(&status), 1, "{status}");
    assert_eq!(status_number(&status, "sessions"), 1, "{status}");
    assert!(
        wait_child_thread_gone(&backend),
        "the session blocked in clWaitForEvents never ended: {:?}",
        thread_names(&backend)
    );
    assert!(backend.is_running());
    bystander.assert_intact();
}

/// Writes `bytes` and a reply area at `slot` (1 MiB each) of the data
/// area and makes it available without waiting for it.
fn send_async(raw: &mut RawFrontend, slot: u64, bytes: &[u8]) -> u64 {
    let (req_at, reply_at) = (
        raw.scratch(slot << 21),
        raw.scratch((slot << 21) + (1 << 20)),
    );
    raw.dev.write_guest(req_at, bytes).expect("write request");
    raw.dev
        .write_guest(reply_at, &vec![0u8; 4096])
        .expect("clear reply");
    raw.dev
        .send_chain(&[
            DescSpec {
                addr: req_at,
                len: bytes.len() as u32,
                writable: false,
            },
            DescSpec {
                addr: reply_at,
                len: 4096,
                writable: true,
            },
        ])
        .expect("send chain");
    reply_at
}

fn batch_bytes(session: u64, requests: &[Request]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0);
    for (seq, request) in requests.iter().enumerate() {
        builder.push(seq as u64 + 1, request);
    }
    builder.finish(session, 4096)
}

/// In a VM the guest kernel driver sends `CLOSE_SESSION` when a process
/// dies; the close must get through a wait of that session that would
/// never end on its own.
#[test]
fn close_session_ends_a_wait_on_an_unset_user_event() {
    let mut backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    raw.open_session(2);
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            CreateUserEvent {
                event: 2,
                context: 1,
            }
            .into(),
        ],
    );
    assert_all_succeed(&reply.records);
    let wait = batch_bytes(1, &[WaitForEvents { events: vec![2] }.into()]);
    let wait_reply = send_async(&mut raw, 1, &wait);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        raw.dev
            .wait_used(Some(Duration::from_millis(10)))
            .expect("poll")
            .is_none(),
        "the wait returned by itself"
    );
    let status = backend.status();
    assert_eq!(status_number(&status, "sessions"), 2, "{status}");
    // Session 2 of the same VM is not held up by session 1's wait.
    let reply = raw.batch(2, &[Ping {}.into()]);
    assert_all_succeed(&reply.records);
    let close = batch_bytes(1, &[CloseSession {}.into()]);
    let close_reply = send_async(&mut raw, 2, &close);
    let started = Instant::now();
    let mut returned = 0;
    while returned < 2 {
        let used = raw.dev.wait_used(Some(NOTICE)).expect("wait");
        assert!(
            used.is_some(),
            "the close did not get through the wait within {NOTICE:?}"
        );
        returned += 1;
    }
    println!("wait and close returned after {:?}", started.elapsed());
    let mut reply = vec![0u8; 4096];
    raw.dev.read_guest(wait_reply, &mut reply).expect("read");
    let reply = decode_reply(&reply).expect("wait reply");
    assert!(
        !reply.records[0].status.is_success(),
        "the aborted wait reports an error: {reply:?}"
    );
    let mut reply = vec![0u8; 4096];
    raw.dev.read_guest(close_reply, &mut reply).expect("read");
    assert_all_succeed(&decode_reply(&reply).expect("close reply").records);
    let status = wait_status(&backend, NOTICE, |s| status_number(s, "sessions") == 1);
    assert_eq!(status_number(&status, "sessions"), 1, "{status}");
    let reply = raw.batch(2, &[Ping {}.into()]);
    assert_all_succeed(&reply.records);
    assert!(backend.is_running());
}

// ---- disk full during a checkpoint ------------------------------------

/// A 1 MiB tmpfs, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
}

impl SmallDisk {
    fn mount(dir: PathBuf) -> Option<SmallDisk> {
        std::fs::create_dir_all(&dir).expect("mount point");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallDisk { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// A front-end holding 4 MiB of buffer contents (more than the disk).
fn big_session(backend: &Backend) -> RawFrontend {
    let mut raw = backend.raw();
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            req::buffer(3, 1, 1, 4 << 20),
            EnqueueFillBuffer {
                queue: 2,
                mem: 3,
                pattern: vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16],
                offset: 0,
                size: 4 << 20,
                wait: vec![],
                event: 0,
            }
            .into(),
            Finish { queue: 2 }.into(),
        ],
    );
    assert_all_succeed(&reply.records);
    raw
}

#[test]
fn disk_full_during_a_checkpoint_leaves_no_file_and_the_vgpu_runs() {
    let backend = Backend::start();
    let Some(disk) = SmallDisk::mount(backend.dir().join("small-disk")) else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let mut raw = big_session(&backend);
    // An earlier, small checkpoint already sits at the path.
    let file = disk.dir.join("vm.ckpt");
    let earlier = b"an earlier checkpoint".to_vec();
    std::fs::write(&file, &earlier).expect("earlier checkpoint");
    let (ok, answer) = backend.ctl(&["checkpoint", file.to_str().expect("utf-8")]);
    assert!(!ok, "a checkpoint onto a full disk succeeded: {answer}");
    assert!(
        answer.contains("error") && answer.contains("No space left on device"),
        "unclear error: {answer}"
    );
    println!("vgpu-ctl answered: {answer}");
    assert_eq!(
        std::fs::read(&file).expect("earlier file"),
        earlier,
        "the earlier file was touched"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&disk.dir)
        .expect("list")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "vm.ckpt")
        .collect();
    assert!(leftovers.is_empty(), "partial files remain: {leftovers:?}");
    // The vGPU runs on, its objects and data intact.
    let (reply, data) = raw.batch_with_in(
        1,
        &[EnqueueReadBuffer {
            queue: 2,
            mem: 3,
            offset: (4 << 20) - 16,
            data: DataRef { offset: 0, len: 16 },
            wait: vec![],
            event: 0,
        }
        .into()],
        16,
    );
    assert_all_succeed(&reply.records);
    assert_eq!(data, (1..=16).collect::<Vec<u8>>());
    let status = backend.status();
    assert_eq!(status["vms"][0]["paused"], false, "{status}");
    // And a checkpoint where there is room works.
    let roomy = backend.dir().join("vm.ckpt");
    let (ok, answer) = backend.ctl(&["checkpoint", roomy.to_str().expect("utf-8")]);
    assert!(ok, "{answer}");
    assert!(std::fs::metadata(&roomy).expect("checkpoint").len() > 4 << 20);
}

// ---- reproducers of fuzzing findings ----------------------------------

/// Fuzzing finding (backend_dispatch): PoCL 3.1 does not implement
/// device-side queues and calls `exit()` ("Device side queue is
/// unimplemented") when `CL_QUEUE_ON_DEVICE` is asked for, so one
/// `CreateQueue` from any guest ended the daemon and every VM it served.
#[test]
fn queue_on_device_is_refused_and_the_daemon_lives() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            // CL_QUEUE_PROPERTIES: OUT_OF_ORDER | ON_DEVICE; CL_QUEUE_SIZE.
            CreateQueue {
                queue: 2,
                context: 1,
                properties: vec![0x1093, 0b101, 0x1094, 16, 0],
            }
            .into(),
            CreateQueue {
                queue: 3,
                context: 1,
                properties: vec![0x1093, 0b1101, 0],
            }
            .into(),
            CreateQueue {
                queue: 4,
                context: 1,
                properties: vec![0x1094, 16, 0],
            }
            .into(),
        ],
    );
    assert!(reply.records[0].status.is_success());
    for record in &reply.records[1..] {
        assert!(
            !record.status.is_success(),
            "a device-side queue was created: {reply:?}"
        );
    }
    assert!(backend.is_running(), "the daemon died");
    bystander.assert_intact();
}

/// Fuzzing finding (backend_dispatch): PoCL 3.1's pthread device counts
/// work-groups in 32 bits. A launch of 2^32 work-groups (`global` 2^32,
/// `local` 1) crashes a PoCL worker thread with SIGSEGV; 2^33 fails its
/// assertion `get_wg_index_range: max_wgs > 0` (SIGABRT). Either ends the
/// daemon and every VM it serves
/// (`fuzz/regressions/backend_dispatch/nd-range-2-pow-3*-work-groups`).
#[test]
fn launches_of_2_pow_32_work_groups_are_refused_and_the_daemon_lives() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let setup = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            CreateProgramWithSource {
                program: 3,
                context: 1,
                source: b"__kernel void nop(void) {}".to_vec(),
            }
            .into(),
            req::build(3),
            req::kernel(4, 3, b"nop"),
        ],
    );
    assert_all_succeed(&setup.records);
    for (work_dim, global) in [
        (1, [1u64 << 32, 1, 1]),
        (2, [1 << 16, 1 << 16, 1]),
        (1, [1 << 33, 1, 1]),
    ] {
        let reply = raw.batch(
            1,
            &[
                EnqueueNdRange {
                    queue: 2,
                    kernel: 4,
                    work_dim,
                    offset: [0; 3],
                    global,
                    local: [1, 1, 1],
                    wait: vec![],
                    event: 0,
                }
                .into(),
                Finish { queue: 2 }.into(),
            ],
        );
        assert!(
            !reply.records[0].status.is_success(),
            "a launch of {global:?} work-groups was accepted"
        );
        assert!(backend.is_running(), "the daemon died");
    }
    bystander.assert_intact();
}

/// Fuzzing finding (stable sweep of backend_dispatch): an empty program
/// source reaches `clCreateProgramWithSource` as a length of 0 with a
/// dangling pointer; a length of 0 means "NUL-terminated" to OpenCL, and
/// PoCL's `strlen` reads address 0x1 (SIGSEGV), ending the daemon. Any
/// guest program can send it: `clCreateProgramWithSource(ctx, 1, &"", 0)`
/// (`fuzz/regressions/backend_dispatch/empty-program-source`).
#[test]
fn an_empty_program_source_is_an_error_and_the_daemon_lives() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[req::context(1), req::program(2, 1, &[]), req::build(2)],
    );
    assert!(reply.records[0].status.is_success());
    assert!(backend.is_running(), "the daemon died");
    bystander.assert_intact();
}

/// Session 1 with context 1 and the `BUMP` program 2 built; its binary,
/// when it is a PoCL binary.
fn pocl_binary(raw: &mut RawFrontend) -> Option<Vec<u8>> {
    raw.open_session(1);
    let requests: Vec<Request> = vec![
        req::context(1),
        req::program(2, 1, BUMP.as_bytes()),
        req::build(2),
        GetInfo {
            target: vgpu_protocol::InfoTarget::Program as u32,
            handle: 2,
            index: 0,
            param: 0x1166, // CL_PROGRAM_BINARIES
        }
        .into(),
    ];
    let mut builder = BatchBuilder::new(0);
    for (seq, request) in requests.iter().enumerate() {
        builder.push(seq as u64 + 1, request);
    }
    let room = 4 << 20;
    let (_, reply) = raw.send_bytes(&builder.finish(1, room), room);
    let reply = decode_reply(&reply).expect("reply");
    assert_all_succeed(&reply.records);
    let binary = reply.records[3].payload.clone();
    binary[SEAL_LEN..].starts_with(b"poclbin").then_some(binary)
}

/// Bytes the backend's seal puts before the driver's binary (magic and
/// HMAC tag): an edited binary no longer matches its tag.
const SEAL_LEN: usize = 40;

/// Asserts an edited binary was refused before the driver saw it.
fn assert_refused_as_invalid(records: &[vgpu_protocol::frame::ReplyRecord]) {
    assert_eq!(
        records[0].status,
        vgpu_protocol::Status::INVALID_BINARY,
        "an edited binary reached the driver: {records:?}"
    );
}

/// Finding (review while fuzzing): PoCL checks a program binary's inner
/// sizes with assertions, so a binary whose file tree does not add up
/// (here: one file name made longer) aborts the daemon at build time
/// ("pocl_binary.c:500: recursively_deserialize_path: Assertion
/// `done == bytes' failed").
#[test]
fn a_malformed_program_binary_is_an_error_and_the_daemon_lives() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    let Some(mut binary) = pocl_binary(&mut raw) else {
        eprintln!("skipped: not a PoCL binary");
        return;
    };
    let slash = SEAL_LEN
        + binary[SEAL_LEN..SEAL_LEN + 128]
            .iter()
            .position(|b| *b == b'/')
            .expect("the program hash");
    binary[slash + 1] = if binary[slash + 1] == b'Z' {
        b'X'
    } else {
        b'Z'
    };
    let name_at = binary
        .windows(11)
        .position(|w| w == b"/program.bc")
        .expect("a program.bc entry");
    binary.splice(name_at - 4..name_at + 11, {
        let mut entry = 12u32.to_le_bytes().to_vec();
        entry.extend_from_slice(b"/program.bcc");
        entry
    });
    let reply = raw.batch(
        1,
        &[
            CreateProgramWithBinary {
                program: 3,
                context: 1,
                binary,
            }
            .into(),
            req::build(3),
        ],
    );
    println!("create and build: {:?}", reply.records);
    assert_refused_as_invalid(&reply.records);
    assert!(backend.is_running(), "the daemon died");
    bystander.assert_intact();
}

/// Finding (review while fuzzing): a PoCL program binary is a file tree
/// (`poclbin` header, then `u32` name length, name, `u32` length, bytes,
/// per file) that PoCL writes under its kernel cache when the program is
/// built, names and all. A guest that edits a binary it got from
/// `CL_PROGRAM_BINARIES` chooses both: `/../../..{path}` writes any file
/// the daemon can write (root by default), and a kernel's `.so` in the
/// tree is `dlopen`ed when the kernel runs.
#[test]
fn guest_program_binaries_cannot_write_host_files() {
    // PoCL's kernel cache at CACHE/a/b: program directories are
    // CACHE/a/b/XX/YYYY..., so "/../../../x" lands in CACHE/a, outside.
    let dir = std::env::temp_dir().join(format!("vgpu-binary-traversal-{}", std::process::id()));
    let cache = dir.join("a").join("b");
    std::fs::create_dir_all(&cache).expect("cache dir");
    // Writable by the worker whatever user it drops to, so that only the
    // backend's own guard can keep the file from being written.
    for d in [&dir, &dir.join("a"), &cache] {
        std::fs::set_permissions(d, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .expect("chmod");
    }
    let target = dir.join("a").join("x");
    let cache_env = cache.to_str().expect("utf-8").to_string();
    let backend = Backend::start_with(&[], &[("POCL_CACHE_DIR", &cache_env)]);
    let mut raw = backend.raw();
    let Some(mut binary) = pocl_binary(&mut raw) else {
        eprintln!("skipped: not a PoCL binary");
        return;
    };
    // A new program hash (so a new cache directory), then the name and the
    // bytes of its first file replaced, every length kept.
    let slash = SEAL_LEN
        + binary[SEAL_LEN..SEAL_LEN + 128]
            .iter()
            .position(|b| *b == b'/')
            .expect("the program hash");
    binary[slash + 1] = if binary[slash + 1] == b'Z' {
        b'Y'
    } else {
        b'Z'
    };
    let name_at = binary
        .windows(11)
        .position(|w| w == b"/program.bc")
        .expect("a program.bc entry");
    binary[name_at..name_at + 11].copy_from_slice(b"/../../../x");
    let content_len = u32::from_le_bytes(
        binary[name_at + 11..name_at + 15]
            .try_into()
            .expect("4 bytes"),
    ) as usize;
    binary[name_at + 15..name_at + 15 + content_len].fill(b'#');
    let reply = raw.batch(
        1,
        &[
            CreateProgramWithBinary {
                program: 3,
                context: 1,
                binary,
            }
            .into(),
            req::build(3),
        ],
    );
    println!("create and build: {:?}", reply.records);
    assert_refused_as_invalid(&reply.records);
    let written = target.exists();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        !written,
        "a guest wrote {} outside the kernel cache",
        target.display()
    );
}

/// Finding (review while fuzzing): the OpenCL C compiler runs in the
/// daemon and sees the host's files, so a guest's `#include "/any/path"`
/// reads any file the daemon can read, and the build log it may query
/// quotes the file's tokens ("use of undeclared identifier 'root'" for
/// `/etc/passwd`). A guest must not read host files.
#[test]
fn guest_kernel_sources_cannot_read_host_files() {
    let leaks = host_file_leaks(&["#include \"PATH\"\n"]);
    assert!(leaks.is_empty(), "a host file reached the guest: {leaks:?}");
}

/// Finding (review of the fix above): a directive is recognised in more
/// places than at the start of a `\n`-separated line after spaces and
/// tabs: after a block comment that spans lines, after a bare `\r`, after
/// a form feed or vertical tab, after a byte-order mark. Each spelling
/// below still reads the host file.
#[test]
fn guest_kernel_sources_cannot_read_host_files_in_any_spelling() {
    let leaks = host_file_leaks(&[
        "/* a comment\n */ #include \"PATH\"\n",
        "1;\r#include \"PATH\"\r",
        "\x0c#include \"PATH\"\n",
        "\x0b#include \"PATH\"\n",
    ]);
    assert!(leaks.is_empty(), "a host file reached the guest: {leaks:?}");
}

/// Finding (review of the second fix): PoCL's compiler reads trigraphs in
/// OpenCL C, and `??/` before a newline splices lines like a backslash, so
/// `#inc??/` + newline + `lude "PATH"` is an `#include` the check did not
/// see; so did a backslash followed by spaces before the newline (clang
/// only warns), and a comment opener inside a string literal that hid the
/// directive from the comment-stripping check.
#[test]
fn guest_kernel_sources_cannot_read_host_files_through_splices_and_literals() {
    let leaks = host_file_leaks(&[
        "#inc??/\nlude \"PATH\"\n",
        "#??/\ninclude \"PATH\"\n",
        "#inc\\  \nlude \"PATH\"\n",
        "#inc??/\t\r\nlude \"PATH\"\n",
        "\"/*\"\n#include \"PATH\"\n\"*/\"",
    ]);
    assert!(leaks.is_empty(), "a host file reached the guest: {leaks:?}");
}

/// Finding (review while fuzzing): the compiler runs in the daemon, and
/// clang's debug pragmas do what they say: `#pragma clang __debug crash`
/// (SIGILL), `llvm_fatal_error` (abort), also in the operator form
/// `_Pragma("clang __debug crash")`, and assembled by token pasting where
/// no text check can see it. One `clBuildProgram` ended the daemon and
/// every VM it serves.
#[test]
fn compiler_debug_pragmas_cannot_end_the_daemon() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let kernel = "__kernel void k(__global int *o) { o[0] = 1; }\n";
    for (i, pragma) in [
        "#pragma clang __debug crash\n",
        "#pragma clang __debug llvm_fatal_error\n",
        "_Pragma(\"clang __debug crash\")\n",
        "#define CAT(a, b) a##b\n#define STR(x) #x\n#define XSTR(x) STR(x)\n\
         CAT(_Pra, gma)(XSTR(clang CAT(__de, bug) crash))\n",
    ]
    .iter()
    .enumerate()
    {
        let program = 2 * i as u64 + 2;
        raw.batch(
            1,
            &[
                req::context(program + 1),
                CreateProgramWithSource {
                    program,
                    context: program + 1,
                    source: format!("{kernel}{pragma}").into_bytes(),
                }
                .into(),
                req::build(program),
            ],
        );
        assert!(backend.is_running(), "{pragma:?} ended the daemon");
    }
    bystander.assert_intact();
}

/// Builds, for each spelling (`PATH` standing for a host file holding a
/// secret token), a kernel that includes it mid-expression; returns the
/// spellings whose token reached the guest.
fn host_file_leaks(spellings: &[&str]) -> Vec<String> {
    let backend = Backend::start();
    let secret = backend.dir().join("host-secret.txt");
    std::fs::write(&secret, "vgpu_host_secret_token_7f3a\n").expect("write the host file");
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut leaks = Vec::new();
    for (i, spelling) in spellings.iter().enumerate() {
        let include = spelling.replace("PATH", &secret.display().to_string());
        let source = format!("__kernel void k(__global int *o) {{ o[0] =\n{include}; }}\n");
        let program = 2 * i as u64 + 2;
        let reply = raw.batch(
            1,
            &[
                req::context(program + 1),
                req::program(program, program + 1, &source.into_bytes()),
                req::build(program),
                GetInfo {
                    target: vgpu_protocol::InfoTarget::ProgramBuild as u32,
                    handle: program,
                    index: 0,
                    param: 0x1183, // CL_PROGRAM_BUILD_LOG
                }
                .into(),
            ],
        );
        let leaked = reply
            .records
            .iter()
            .any(|r| String::from_utf8_lossy(&r.payload).contains("vgpu_host_secret_token_7f3a"));
        if leaked {
            leaks.push(format!("{spelling:?}"));
        }
    }
    leaks
}

/// Fuzzing finding (backend_dispatch, a CI smoke run): a `__local`
/// argument larger than the device's local memory (7 TB in the input) made
/// PoCL 3.1's CPU device fail `setup_kernel_arg_array_with_locals: Assertion
/// 'start - local_mem <= local_mem_size'` when the launch ran, aborting the
/// VM's worker (`fuzz/regressions/backend_dispatch/local-args-beyond-local-memory`).
/// The launch is refused with `CL_OUT_OF_RESOURCES`; the same kernel with a
/// small local argument then runs.
#[test]
fn local_arguments_beyond_local_memory_are_refused_and_the_daemon_lives() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let launch: Request = EnqueueNdRange {
        queue: 2,
        kernel: 5,
        work_dim: 1,
        offset: [0; 3],
        global: [4, 1, 1],
        local: [0; 3],
        wait: vec![],
        event: 0,
    }
    .into();
    let setup = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            req::buffer(3, 1, 1, 64),
            req::program(4, 1, BUMP.as_bytes()),
            req::build(4),
            req::kernel(5, 4, b"local_copy"),
            req::mem_arg(5, 0, 3),
        ],
    );
    assert_all_succeed(&setup.records);
    for size in [7_696_581_394_448u64, 1 << 40, u64::MAX / 2] {
        let reply = raw.batch(
            1,
            &[
                req::local_arg(5, 1, size),
                launch.clone(),
                Finish { queue: 2 }.into(),
            ],
        );
        assert_eq!(
            reply.records[1].status,
            vgpu_protocol::Status::OUT_OF_RESOURCES,
            "a launch with {size} bytes of __local arguments"
        );
        assert!(backend.is_running(), "the daemon died");
    }
    let reply = raw.batch(
        1,
        &[req::local_arg(5, 1, 64), launch, Finish { queue: 2 }.into()],
    );
    assert_all_succeed(&reply.records);
    bystander.assert_intact();
}

/// Fuzzing finding (backend_dispatch): a kernel cloned (clCloneKernel)
/// after a `__local` argument was set on its source makes PoCL 3.1's
/// clEnqueueNDRangeKernel copy the local size's worth of bytes from past
/// the end of a 16-byte heap block (AddressSanitizer: heap-buffer-overflow;
/// `fuzz/regressions/backend_dispatch/clone-kernel-after-local-arg`).
/// Without AddressSanitizer the over-read goes unseen: this test checks
/// that a clone keeps its source's arguments and runs right.
#[test]
fn a_kernel_cloned_after_a_local_argument_runs_right() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let (reply, data) = raw.batch_with_in(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            req::buffer(3, 1, 1, 64),
            req::program(4, 1, BUMP.as_bytes()),
            req::build(4),
            req::kernel(5, 4, b"local_copy"),
            req::mem_arg(5, 0, 3),
            req::local_arg(5, 1, 64 << 10),
            CloneKernel {
                kernel: 6,
                source: 5,
            }
            .into(),
            EnqueueNdRange {
                queue: 2,
                kernel: 6,
                work_dim: 1,
                offset: [0; 3],
                global: [4, 1, 1],
                local: [4, 1, 1],
                wait: vec![],
                event: 0,
            }
            .into(),
            EnqueueReadBuffer {
                queue: 2,
                mem: 3,
                offset: 0,
                data: DataRef { offset: 0, len: 4 },
                wait: vec![],
                event: 0,
            }
            .into(),
        ],
        4,
    );
    assert_all_succeed(&reply.records);
    assert_eq!(data[0], 7, "the clone did not run with its local argument");
}
