//! Shared fixtures: the real daemon on a real socket, and a raw front-end
//! that builds batches and descriptor chains by hand.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use vgpu_protocol::frame::{decode_reply, BatchBuilder, Reply};
use vgpu_protocol::messages::OpenSession;
use vgpu_protocol::Request;
use vgpu_transport::loopback::{Loopback, LoopbackConfig, LoopbackDevice};
use vgpu_transport::vring::DescSpec;
use vgpu_transport::Client;

pub mod calls;
pub mod precopy;
pub mod req;

/// `vgpu-backend` running on a socket in a temporary directory.
pub struct Backend {
    child: Child,
    pub socket: PathBuf,
    pub control: PathBuf,
    dir: PathBuf,
}

impl Backend {
    pub fn start() -> Backend {
        Backend::start_with(&[], &[])
    }

    /// Starts the daemon with extra arguments and environment.
    pub fn start_with(args: &[&str], env: &[(&str, &str)]) -> Backend {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "vgpu-backend-test-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        let socket = dir.join("vgpu.sock");
        let control = dir.join("vgpu.ctl");
        let child = Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
            .arg("--socket")
            .arg(&socket)
            .arg("--control")
            .arg(&control)
            .args(["--log-level", "debug"])
            .args(args)
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start vgpu-backend");
        let mut child = child;
        // A backend that failed exits; a slow one (a loaded machine) is
        // waited for, within a bound that only a hang reaches.
        let deadline = Instant::now() + Duration::from_secs(120);
        while !socket.exists() {
            if let Some(status) = child.try_wait().expect("poll vgpu-backend") {
                panic!("vgpu-backend exited before creating its socket: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "vgpu-backend did not create its socket in 120 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Backend {
            child,
            socket,
            control,
            dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the daemon process is still alive.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("wait").is_none()
    }

    pub fn client(&self) -> Client {
        let transport = Loopback::connect(&self.socket).expect("connect");
        Client::open(Box::new(transport), 1, false).expect("open session")
    }

    pub fn raw(&self) -> RawFrontend {
        RawFrontend::connect(&self.socket)
    }

    /// `vgpu-ctl --json status`, parsed.
    pub fn status(&self) -> serde_json::Value {
        let (ok, out) = self.ctl(&["status"]);
        assert!(ok, "vgpu-ctl failed: {out}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("status is not JSON ({e}): {out}"))
    }

    /// Runs `vgpu-ctl --json ARGS` against this daemon: (success, stdout:
    /// the backend's JSON reply).
    pub fn ctl(&self, args: &[&str]) -> (bool, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_vgpu-ctl"))
            .arg("--control")
            .arg(&self.control)
            .arg("--json")
            .args(args)
            .output()
            .expect("run vgpu-ctl");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Backend {
    /// Asks the daemon to stop (SIGTERM) and waits for it; killed when it
    /// is not gone in 5 s. Its directory stays until it is dropped.
    pub fn stop(&mut self) {
        // SAFETY: sending SIGTERM to our own child process.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.is_running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A front-end that writes chains by hand into its guest memory.
pub struct RawFrontend {
    pub dev: LoopbackDevice,
    /// The next message's sequence number: one count for every batch, as
    /// the guest library numbers a session's messages.
    pub next_seq: u64,
}

pub const TIMEOUT: Duration = Duration::from_secs(20);

impl RawFrontend {
    pub fn connect(socket: &Path) -> RawFrontend {
        RawFrontend {
            dev: LoopbackDevice::connect(socket, &LoopbackConfig::default()).expect("connect"),
            next_seq: 1,
        }
    }

    /// Guest address of scratch space `offset` bytes into the data area.
    pub fn scratch(&self, offset: u64) -> u64 {
        self.dev.data_area().start + offset
    }

    /// Sends `request` bytes and a writable reply buffer of `reply_len`;
    /// returns the used length and the reply bytes.
    pub fn send_bytes(&mut self, request: &[u8], reply_len: u32) -> (u32, Vec<u8>) {
        let req_at = self.scratch(0);
        let reply_at = self.scratch(1 << 20);
        self.dev
            .write_guest(req_at, request)
            .expect("write request");
        self.dev
            .write_guest(reply_at, &vec![0u8; reply_len as usize])
            .expect("clear reply");
        let chain = [
            DescSpec {
                addr: req_at,
                len: request.len() as u32,
                writable: false,
            },
            DescSpec {
                addr: reply_at,
                len: reply_len,
                writable: true,
            },
        ];
        let used = self.send_chain(&chain);
        let mut reply = vec![0u8; reply_len as usize];
        self.dev
            .read_guest(reply_at, &mut reply)
            .expect("read reply");
        (used, reply)
    }

    /// Sends a chain and waits for it to come back; returns the used length.
    pub fn send_chain(&mut self, chain: &[DescSpec]) -> u32 {
        self.dev.send_chain(chain).expect("send chain");
        self.dev
            .wait_used(Some(TIMEOUT))
            .expect("wait")
            .expect("chain came back")
            .len
    }

    /// Requests as one batch of `session` with the next sequence numbers.
    fn encode(&mut self, session: u64, requests: &[Request], reply_len: u32) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0);
        for r in requests {
            builder.push(self.next_seq, r);
            self.next_seq += 1;
        }
        builder.finish(session, reply_len)
    }

    /// Runs requests as one batch of `session` and decodes the reply.
    pub fn batch(&mut self, session: u64, requests: &[Request]) -> Reply {
        let reply_len = 64 << 10;
        let bytes = self.encode(session, requests, reply_len);
        let (_, reply) = self.send_bytes(&bytes, reply_len);
        decode_reply(&reply).expect("well-formed reply")
    }

    /// Runs requests as one batch with an in-data area of `in_len` bytes
    /// (destinations of reads); returns the reply and the in-data.
    pub fn batch_with_in(
        &mut self,
        session: u64,
        requests: &[Request],
        in_len: u32,
    ) -> (Reply, Vec<u8>) {
        let reply_len = 64 << 10;
        let bytes = self.encode(session, requests, reply_len);
        let (req_at, reply_at, in_at) = (
            self.scratch(0),
            self.scratch(1 << 20),
            self.scratch(2 << 20),
        );
        self.dev.write_guest(req_at, &bytes).expect("write request");
        let chain = [
            DescSpec {
                addr: req_at,
                len: bytes.len() as u32,
                writable: false,
            },
            DescSpec {
                addr: reply_at,
                len: reply_len,
                writable: true,
            },
            DescSpec {
                addr: in_at,
                len: in_len,
                writable: true,
            },
        ];
        self.send_chain(&chain);
        let mut reply = vec![0u8; reply_len as usize];
        self.dev
            .read_guest(reply_at, &mut reply)
            .expect("read reply");
        let mut data = vec![0u8; in_len as usize];
        self.dev.read_guest(in_at, &mut data).expect("read in-data");
        (decode_reply(&reply).expect("well-formed reply"), data)
    }

    /// Runs requests as one batch of `session` whose out-data (sources of
    /// writes) is `data`, placed at scratch offset 8 MiB; decodes the reply.
    pub fn batch_with_out(&mut self, session: u64, requests: &[Request], data: &[u8]) -> Reply {
        self.batch_with_out_at(session, requests, data, 8 << 20)
    }

    /// As `batch_with_out`, the out-data at scratch offset `data_offset`.
    pub fn batch_with_out_at(
        &mut self,
        session: u64,
        requests: &[Request],
        data: &[u8],
        data_offset: u64,
    ) -> Reply {
        let reply_len = 4096;
        let bytes = self.encode(session, requests, reply_len);
        let (req_at, reply_at, data_at) = (
            self.scratch(0),
            self.scratch(1 << 20),
            self.scratch(data_offset),
        );
        self.dev.write_guest(req_at, &bytes).expect("write request");
        self.dev.write_guest(data_at, data).expect("write out-data");
        let chain = [
            DescSpec {
                addr: req_at,
                len: bytes.len() as u32,
                writable: false,
            },
            DescSpec {
                addr: data_at,
                len: data.len() as u32,
                writable: false,
            },
            DescSpec {
                addr: reply_at,
                len: reply_len,
                writable: true,
            },
        ];
        self.send_chain(&chain);
        let mut reply = vec![0u8; reply_len as usize];
        self.dev
            .read_guest(reply_at, &mut reply)
            .expect("read reply");
        decode_reply(&reply).expect("well-formed reply")
    }

    pub fn open_session(&mut self, session: u64) {
        let reply = self.batch(
            session,
            &[OpenSession {
                min_version: 1,
                max_version: 1,
                flags: 0,
            }
            .into()],
        );
        assert!(
            reply.status.is_success() && reply.records[0].status.is_success(),
            "{reply:?}"
        );
    }
}
