//! The loopback transport against the real `vgpu-backend` daemon on a
//! temporary socket: handshake, `Ping`, `SessionStats`, ring wrap-around,
//! a hand-made malformed chain, and a daemon that goes away.
//!
//! Needs the daemon built next to this test (`cargo build -p vgpu-backend`;
//! a workspace-wide `cargo test` builds it) or its path in `VGPU_BACKEND`,
//! and an OpenCL device (PoCL) for the daemon to open.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use vgpu_protocol::messages::{
    CreateBuffer, CreateContext, CreateQueue, EnqueueReadBuffer, EnqueueWriteBuffer, Finish, Ping,
    SessionStats, SessionStatsReply,
};
use vgpu_protocol::{DataRef, Status, Wire};
use vgpu_transport::loopback::{
    Loopback, LoopbackConfig, LoopbackDevice, DEFAULT_FEATURES, VHOST_USER_F_PROTOCOL_FEATURES,
    VIRTIO_F_VERSION_1, VIRTIO_RING_F_EVENT_IDX,
};
use vgpu_transport::vring::{Descriptor, VRING_DESC_F_NEXT};
use vgpu_transport::Client;
use vhost::vhost_user::VhostUserProtocolFeatures;

/// How long the daemon may take to open its OpenCL device and listen.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a test waits for an answer that must come.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(20);

/// A `vgpu-backend` process listening on a socket in its own temp folder;
/// stopped (SIGTERM, then SIGKILL) and cleaned up on drop.
struct Daemon {
    child: Child,
    dir: PathBuf,
    socket: PathBuf,
}

fn backend_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("VGPU_BACKEND") {
        return path.into();
    }
    // target/<profile>/deps/loopback_ping-<hash> → target/<profile>/vgpu-backend
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    profile_dir.join("vgpu-backend")
}

impl Daemon {
    fn start() -> Daemon {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let binary = backend_binary();
        assert!(
            binary.exists(),
            "{} does not exist: run `cargo build -p vgpu-backend` or set VGPU_BACKEND",
            binary.display()
        );
        let dir = std::env::temp_dir().join(format!(
            "vgpu-loopback-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).expect("temp folder");
        let socket = dir.join("vgpu.sock");
        let child = Command::new(&binary)
            .arg("--socket")
            .arg(&socket)
            .arg("--log-level")
            .arg("warn")
            .stdin(Stdio::null())
            .spawn()
            .expect("start vgpu-backend");
        let mut daemon = Daemon { child, dir, socket };
        daemon.wait_for_socket();
        daemon
    }

    fn wait_for_socket(&mut self) {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        while !self.socket.exists() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("vgpu-backend exited before listening: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "vgpu-backend did not listen in time"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn loopback(&self) -> Loopback {
        Loopback::connect_with(&self.socket, &small_config()).expect("loopback handshake")
    }

    fn device(&self) -> LoopbackDevice {
        LoopbackDevice::connect(&self.socket, &small_config()).expect("loopback handshake")
    }

    /// SIGKILL to the daemon and its worker processes (one per front-end).
    fn kill(&mut self) {
        let pid = self.child.id();
        let children =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let _ = self.child.kill();
        for worker in children
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
        {
            // SAFETY: SIGKILL to a worker of the daemon this test started.
            unsafe { libc::kill(worker, libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // SAFETY: signals only our own child, which we have not reaped yet.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A small data area keeps the memfds of parallel tests small.
fn small_config() -> LoopbackConfig {
    LoopbackConfig {
        data_len: 4 << 20,
        ..LoopbackConfig::default()
    }
}

#[test]
fn ping_and_session_stats_through_a_client() {
    let daemon = Daemon::start();
    let client = Client::open(Box::new(daemon.loopback()), 1, false).expect("session opens");
    assert_eq!(client.call(Ping {}.into()), Ok(Vec::new()));
    let payload = client.call(SessionStats {}.into()).expect("stats");
    let stats = SessionStatsReply::from_bytes(&payload).expect("stats decode");
    assert!(
        stats.counts.iter().all(|&n| n == 0),
        "a fresh session holds nothing: {stats:?}"
    );
}

#[test]
fn handshake_acks_version_1_and_the_protocol_features_we_need() {
    let daemon = Daemon::start();
    let device = daemon.device();
    let needed = VIRTIO_F_VERSION_1 | VHOST_USER_F_PROTOCOL_FEATURES;
    assert_eq!(device.acked_features() & needed, needed);
    assert_ne!(device.acked_features() & VIRTIO_RING_F_EVENT_IDX, 0);
    assert!(device
        .acked_protocol_features()
        .contains(VhostUserProtocolFeatures::REPLY_ACK));
    assert!(device
        .acked_protocol_features()
        .contains(VhostUserProtocolFeatures::MQ));
    assert!(
        device.guest_memory().start > 0,
        "address 0 must be outside guest memory"
    );
    assert!(device.guest_memory().contains(&device.data_area().start));
}

#[test]
fn thousands_of_batches_wrap_the_rings() {
    let daemon = Daemon::start();
    let client = Client::open(Box::new(daemon.loopback()), 1, true).expect("session opens");
    for i in 0..3000 {
        assert_eq!(client.call(Ping {}.into()), Ok(Vec::new()), "ping {i}");
    }
}

#[test]
fn batches_work_without_event_idx() {
    let daemon = Daemon::start();
    let config = LoopbackConfig {
        features: DEFAULT_FEATURES & !VIRTIO_RING_F_EVENT_IDX,
        ..small_config()
    };
    let loopback = Loopback::connect_with(&daemon.socket, &config).expect("loopback handshake");
    let client = Client::open(Box::new(loopback), 1, true).expect("session opens");
    for i in 0..100 {
        assert_eq!(client.call(Ping {}.into()), Ok(Vec::new()), "ping {i}");
    }
}

#[test]
fn bulk_data_larger_than_the_data_area_round_trips_in_chunks() {
    let daemon = Daemon::start();
    let loopback = Loopback::connect_with(
        &daemon.socket,
        &LoopbackConfig {
            data_len: 1 << 20,
            ..LoopbackConfig::default()
        },
    )
    .expect("loopback handshake");
    let client = Client::open(Box::new(loopback), 1, false).expect("session opens");
    let (context, queue, mem) = (
        client.new_handle(),
        client.new_handle(),
        client.new_handle(),
    );
    let size = 3 << 20;
    client
        .defer(
            CreateContext {
                context,
                properties: vec![],
            }
            .into(),
        )
        .expect("context");
    client
        .defer(
            CreateQueue {
                queue,
                context,
                properties: vec![],
            }
            .into(),
        )
        .expect("queue");
    let create = CreateBuffer {
        mem,
        context,
        flags: 1,
        size: size as u64,
        init: DataRef::default(),
    };
    client.defer(create.into()).expect("buffer");
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + i / 4096) as u8).collect();
    client
        .call_with_out(&data, |data, start| {
            EnqueueWriteBuffer {
                queue,
                mem,
                offset: start,
                data,
                wait: vec![],
                event: 0,
            }
            .into()
        })
        .expect("write");
    let mut back = vec![0u8; size];
    client
        .call_with_in(&mut back, |data, start| {
            EnqueueReadBuffer {
                queue,
                mem,
                offset: start,
                data,
                wait: vec![],
                event: 0,
            }
            .into()
        })
        .expect("read");
    client.call(Finish { queue }.into()).expect("finish");
    assert_eq!(client.flush(), Ok(()));
    assert!(
        back == data,
        "the buffer read back differs from what was written"
    );
}

#[test]
fn heap_segments_travel_in_place_beyond_the_data_area() {
    let daemon = Daemon::start();
    let loopback = Loopback::connect_with(
        &daemon.socket,
        &LoopbackConfig {
            data_len: 1 << 20,
            heap_len: 8 << 20,
            ..LoopbackConfig::default()
        },
    )
    .expect("loopback handshake");
    let client = Client::open(Box::new(loopback), 1, false).expect("session opens");
    let heap = client.shared_heap().expect("a heap was asked for");
    assert_eq!(heap.len(), 8 << 20);
    let size = 3 << 20;
    // SAFETY: the heap is this process's shared mapping of `heap.len()`
    // bytes, alive with the client; the two halves do not overlap.
    let (data, back) = unsafe {
        (
            std::slice::from_raw_parts_mut(heap.start as *mut u8, size),
            std::slice::from_raw_parts_mut((heap.start + (4 << 20)) as *mut u8, size),
        )
    };
    for (i, byte) in data.iter_mut().enumerate() {
        *byte = (i * 13 + i / 4096) as u8;
    }
    let (context, queue, mem) = (
        client.new_handle(),
        client.new_handle(),
        client.new_handle(),
    );
    client
        .defer(
            CreateContext {
                context,
                properties: vec![],
            }
            .into(),
        )
        .expect("context");
    client
        .defer(
            CreateQueue {
                queue,
                context,
                properties: vec![],
            }
            .into(),
        )
        .expect("queue");
    let create = CreateBuffer {
        mem,
        context,
        flags: 1,
        size: size as u64,
        init: DataRef::default(),
    };
    client.defer(create.into()).expect("buffer");
    // One call each way: 3 MiB is more than a 1 MiB data area carries, so
    // they only succeed if the bytes are named in place.
    let calls = std::cell::Cell::new(0);
    client
        .call_with_out(data, |data, start| {
            calls.set(calls.get() + 1);
            EnqueueWriteBuffer {
                queue,
                mem,
                offset: start,
                data,
                wait: vec![],
                event: 0,
            }
            .into()
        })
        .expect("write");
    client
        .call_with_in(back, |data, start| {
            calls.set(calls.get() + 1);
            EnqueueReadBuffer {
                queue,
                mem,
                offset: start,
                data,
                wait: vec![],
                event: 0,
            }
            .into()
        })
        .expect("read");
    client.call(Finish { queue }.into()).expect("finish");
    assert_eq!(client.flush(), Ok(()));
    assert_eq!(calls.get(), 2, "one call each way");
    assert!(
        back == data,
        "the buffer read back differs from what was written"
    );
}

#[test]
fn a_looping_chain_is_dropped_and_the_device_keeps_working() {
    let daemon = Daemon::start();
    let mut loopback = daemon.loopback();
    let device = loopback.device();
    let scratch = device.data_area().start;
    device
        .write_guest(scratch, &[0u8; 64])
        .expect("inside guest memory");
    let ring = device.submit_ring();
    let d = ring.alloc_descriptors(2).expect("free descriptors");
    let looping = |next| Descriptor {
        addr: scratch,
        len: 64,
        flags: VRING_DESC_F_NEXT,
        next,
    };
    ring.write_descriptor(d[0], looping(d[1]))
        .expect("in the table");
    ring.write_descriptor(d[1], looping(d[0]))
        .expect("in the table");
    ring.arm_used_event();
    ring.publish(d[0]);
    device.kick().expect("kick");
    let used = device
        .wait_used(Some(ANSWER_TIMEOUT))
        .expect("connection alive");
    let used = used.expect("the backend returns a dropped chain");
    assert_eq!((used.id, used.len), (u32::from(d[0]), 0));
    device.submit_ring().release_descriptors(&d);

    let client = Client::open(Box::new(loopback), 1, false).expect("session opens");
    assert_eq!(client.call(Ping {}.into()), Ok(Vec::new()));
}

#[test]
fn two_connections_are_independent() {
    let daemon = Daemon::start();
    let a = Client::open(Box::new(daemon.loopback()), 1, false).expect("session opens");
    let b = Client::open(Box::new(daemon.loopback()), 1, false).expect("session opens");
    assert_eq!(a.call(Ping {}.into()), Ok(Vec::new()));
    drop(a);
    assert_eq!(b.call(Ping {}.into()), Ok(Vec::new()));
}

#[test]
fn a_dead_daemon_fails_the_call_instead_of_hanging() {
    let mut daemon = Daemon::start();
    // Without a reconnect window, a lost backend fails the call at once.
    let config = LoopbackConfig {
        reconnect_for: Duration::ZERO,
        ..small_config()
    };
    let loopback = Loopback::connect_with(&daemon.socket, &config).expect("loopback handshake");
    let client = Client::open(Box::new(loopback), 1, false).expect("session opens");
    daemon.kill();
    let started = Instant::now();
    assert_eq!(
        client.call(Ping {}.into()),
        Err(Status::DEVICE_NOT_AVAILABLE)
    );
    assert!(started.elapsed() < ANSWER_TIMEOUT);
}

#[test]
fn errors_of_a_posted_batch_surface_at_the_next_synchronization_point() {
    let daemon = Daemon::start();
    let client = Client::open(Box::new(daemon.loopback()), 1, false).expect("session opens");
    // More than a batch's worth of deferred calls: the first full batch is
    // posted and runs while the rest are queued; its first call fails.
    client
        .defer(Finish { queue: 4242 }.into())
        .expect("deferred");
    for _ in 0..1500 {
        client.defer(Ping {}.into()).expect("deferred");
    }
    assert_eq!(client.call(Ping {}.into()), Ok(Vec::new()));
    assert_eq!(
        client.take_deferred_error(),
        Some(Status::INVALID_COMMAND_QUEUE)
    );
    assert_eq!(client.take_deferred_error(), None);
    // And through flush, for a batch still running when it is asked.
    client
        .defer(Finish { queue: 4243 }.into())
        .expect("deferred");
    for _ in 0..1100 {
        client.defer(Ping {}.into()).expect("deferred");
    }
    assert_eq!(client.flush(), Err(Status::INVALID_COMMAND_QUEUE));
    assert_eq!(client.flush(), Ok(()));
}

#[test]
fn batches_grown_while_one_runs_stay_within_the_protocol_limit() {
    let daemon = Daemon::start();
    let client = Client::open(Box::new(daemon.loopback()), 1, false).expect("session opens");
    // Far more deferred calls than one batch holds, queued faster than the
    // backend answers them: full batches grow while the one before runs,
    // and a batch over the protocol's message count would be refused.
    for _ in 0..20_000 {
        client.defer(Ping {}.into()).expect("deferred");
    }
    assert_eq!(client.call(Ping {}.into()), Ok(Vec::new()));
    assert_eq!(client.take_deferred_error(), None);
}
