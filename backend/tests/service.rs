//! Running the backend as a service: the control socket's JSON replies (as
//! `vgpu-ctl --json` prints them, parsed by serde_json and by `jq`) in every
//! state, and the `--metrics` endpoint's counters against a workload whose
//! own counts are known.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::Command;

use common::req;
use common::{Backend, RawFrontend};
use serde_json::Value;
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, Request};

const SOURCE: &[u8] = b"kernel void inc(global uint* a) { a[get_global_id(0)] += 1u; }";
/// Elements of the buffer.
const N: u64 = 1024;

/// `vgpu-ctl --json ARGS`: (success, stdout, stderr).
fn ctl_json(backend: &Backend, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vgpu-ctl"))
        .arg("--control")
        .arg(&backend.control)
        .arg("--json")
        .args(args)
        .output()
        .expect("run vgpu-ctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The one line vgpu-ctl printed, parsed.
fn parse_one_line(out: &str) -> Value {
    assert_eq!(out.lines().count(), 1, "not one line: {out:?}");
    serde_json::from_str(out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// `jq -r FILTER` over `input`.
fn jq(input: &str, filter: &str) -> String {
    let mut child = Command::new("jq")
        .args(["-r", filter])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("jq must be installed (scripts/setup.sh)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("feed jq");
    let out = child.wait_with_output().expect("jq");
    assert!(out.status.success(), "jq {filter} failed on {input}");
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .trim()
        .to_string()
}

/// A failing command's error object: its code (checked by jq as well).
fn error_code(backend: &Backend, args: &[&str]) -> (String, String) {
    let (ok, out, _) = ctl_json(backend, args);
    assert!(!ok, "vgpu-ctl {args:?} succeeded: {out}");
    let reply = parse_one_line(&out);
    let code = reply["error"]["code"].as_str().expect("code").to_string();
    let message = reply["error"]["message"]
        .as_str()
        .expect("message")
        .to_string();
    assert_eq!(jq(&out, ".error.code"), code);
    (code, message)
}

/// Sends raw lines to the control socket; the answer to each.
fn raw_control(backend: &Backend, lines: &[&str]) -> Vec<Value> {
    let stream = std::os::unix::net::UnixStream::connect(&backend.control).expect("connect");
    let mut writer = stream.try_clone().expect("clone");
    let mut reader = BufReader::new(stream);
    lines
        .iter()
        .map(|line| {
            writeln!(writer, "{line}").expect("send");
            let mut answer = String::new();
            reader.read_line(&mut answer).expect("read");
            serde_json::from_str(&answer).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"))
        })
        .collect()
}

/// Counts of what a workload sent, to hold the metrics to.
#[derive(Default)]
struct Sent {
    calls: u64,
    errors: u64,
    kernels: u64,
    from_guest: u64,
    to_guest: u64,
}

impl Sent {
    fn batch(&mut self, raw: &mut RawFrontend, requests: &[Request]) {
        let reply = raw.batch(1, requests);
        self.count(&reply);
    }

    fn count(&mut self, reply: &vgpu_protocol::Reply) {
        assert!(reply.status.is_success(), "{reply:?}");
        for record in &reply.records {
            self.calls += 1;
            if !record.status.is_success() {
                self.errors += 1;
            } else if record.opcode == vgpu_protocol::opcode::EnqueueNdRange {
                self.kernels += 1;
            }
        }
    }
}

/// Session 1 with context 1, queue 2, program 3, kernel 4 on buffer 5.
fn setup(raw: &mut RawFrontend, sent: &mut Sent) {
    raw.open_session(1);
    sent.calls += 1;
    sent.batch(
        raw,
        &[
            req::context(1),
            req::queue(2, 1),
            req::program(3, 1, SOURCE),
            req::build(3),
            req::kernel(4, 3, b"inc"),
            req::buffer(5, 1, 1, N * 4),
            SetKernelArg {
                kernel: 4,
                index: 0,
                arg_kind: ArgKind::Mem as u32,
                size: 8,
                value: vec![],
                handle: 5,
            }
            .into(),
        ],
    );
}

/// Writes `data` into buffer 5 through an out-data descriptor.
fn write_buffer(raw: &mut RawFrontend, sent: &mut Sent, data: &[u8]) {
    let write = EnqueueWriteBuffer {
        queue: 2,
        mem: 5,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: data.len() as u64,
        },
        wait: vec![],
        event: 0,
    };
    let reply = raw.batch_with_out(1, &[write.into(), Finish { queue: 2 }.into()], data);
    sent.count(&reply);
    sent.from_guest += data.len() as u64;
}

fn launches(raw: &mut RawFrontend, sent: &mut Sent, kernel: u64, count: usize) {
    let launch = EnqueueNdRange {
        queue: 2,
        kernel,
        work_dim: 1,
        offset: [0; 3],
        global: [N, 1, 1],
        local: [0; 3],
        wait: vec![],
        event: 0,
    };
    let mut requests: Vec<Request> = vec![launch.into(); count];
    requests.push(Finish { queue: 2 }.into());
    sent.batch(raw, &requests);
}

fn read_buffer(raw: &mut RawFrontend, sent: &mut Sent, len: u64) -> Vec<u8> {
    let read = EnqueueReadBuffer {
        queue: 2,
        mem: 5,
        offset: 0,
        data: DataRef { offset: 0, len },
        wait: vec![],
        event: 0,
    };
    let (reply, data) = raw.batch_with_in(1, &[read.into()], len as u32);
    sent.count(&reply);
    sent.to_guest += len;
    data
}

#[test]
fn json_replies_parse_in_every_state_and_errors_carry_a_code() {
    let backend = Backend::start();
    // No front-end yet.
    let (ok, out, _) = ctl_json(&backend, &["status"]);
    assert!(ok, "{out}");
    let status = parse_one_line(&out);
    assert_eq!(status["vms"], Value::Array(vec![]), "{status}");
    assert_eq!(jq(&out, ".sessions"), "0");
    assert_eq!(error_code(&backend, &["pause"]).0, "no_vm");
    assert_eq!(error_code(&backend, &["resume", "--vm", "42"]).0, "no_vm");
    let answers = raw_control(
        &backend,
        &["frobnicate", "[1, 2]", "[\"pause\", \"x\"]", "[\"status\"]"],
    );
    assert_eq!(
        answers[0]["error"]["code"], "unknown_command",
        "{answers:?}"
    );
    assert_eq!(answers[1]["error"]["code"], "bad_argument", "{answers:?}");
    assert_eq!(answers[2]["error"]["code"], "bad_argument", "{answers:?}");
    assert_eq!(answers[3]["sessions"], 0, "{answers:?}");

    // One front-end with objects.
    let mut sent = Sent::default();
    let mut raw = backend.raw();
    setup(&mut raw, &mut sent);
    let (ok, out, _) = ctl_json(&backend, &["status"]);
    assert!(ok, "{out}");
    let status = parse_one_line(&out);
    assert_eq!(status["vms"][0]["objects"]["buffers"], 1, "{status}");
    assert_eq!(status["vms"][0]["memory_used_bytes"], N * 4, "{status}");
    assert_eq!(jq(&out, ".vms[0].objects.kernels"), "1");

    // Paused, and back.
    let (ok, out, _) = ctl_json(&backend, &["pause"]);
    assert!(ok && parse_one_line(&out)["paused"] == true, "{out}");
    assert_eq!(backend.status()["vms"][0]["paused"], true);
    let (ok, out, _) = ctl_json(&backend, &["resume"]);
    assert!(ok && parse_one_line(&out)["paused"] == false, "{out}");

    // A checkpoint whose path holds a quote, a backslash and a newline: the
    // JSON request line carries it, and it works where the directory exists.
    let odd_dir = backend.dir().join("odd \"dir\"\\\nname");
    std::fs::create_dir_all(&odd_dir).expect("odd dir");
    let file = odd_dir.join("vm.ckpt");
    let (ok, out, err) = ctl_json(&backend, &["checkpoint", file.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    assert!(parse_one_line(&out)["stream_bytes"].as_u64().unwrap() > 0);
    assert!(file.is_file(), "no checkpoint at {file:?}");
    for line in err.lines() {
        let progress: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("progress line is not JSON ({e}): {line}"));
        assert!(progress["progress"]["bytes"].is_u64(), "{line}");
    }
    // And fails, with that text in a well-formed message, where it does not.
    let missing = backend.dir().join("no \"such\"\ndir").join("vm.ckpt");
    let (code, message) = error_code(&backend, &["checkpoint", missing.to_str().unwrap()]);
    assert_eq!(code, "checkpoint_failed");
    assert!(
        message.contains("no \"such\"\ndir"),
        "the path is not in the message: {message:?}"
    );
    let (ok, out, _) = ctl_json(&backend, &["checkpoint", missing.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        jq(&out, ".error.message").contains("\"such\"\ndir"),
        "jq reads another message: {out}"
    );
    assert_eq!(
        error_code(&backend, &["restore", missing.to_str().unwrap()]).0,
        "file"
    );
    assert_eq!(
        error_code(&backend, &["rehome", "--device", "bogus"]).0,
        "bad_argument"
    );

    // Readable output by default; errors on stderr with their code.
    let human = Command::new(env!("CARGO_BIN_EXE_vgpu-ctl"))
        .arg("--control")
        .arg(&backend.control)
        .arg("status")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(
        human.status.success() && text.contains("1 front-end(s)"),
        "{text}"
    );
    assert!(text.contains("1 buffers"), "{text}");

    // Two front-ends: a command that names none is ambiguous.
    let mut second = backend.raw();
    second.open_session(1);
    assert_eq!(backend.status()["vms"].as_array().unwrap().len(), 2);
    assert_eq!(error_code(&backend, &["pause"]).0, "ambiguous_vm");
    let human = Command::new(env!("CARGO_BIN_EXE_vgpu-ctl"))
        .arg("--control")
        .arg(&backend.control)
        .arg("pause")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&human.stderr);
    assert!(
        !human.status.success() && text.contains("[ambiguous_vm]"),
        "{text}"
    );
}

/// `GET /metrics` over a Unix socket.
fn scrape_unix(path: &std::path::Path) -> String {
    let mut stream = std::os::unix::net::UnixStream::connect(path).expect("metrics socket");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: vgpu\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// `GET /metrics` over TCP with curl, as a scraper would.
fn scrape_tcp(address: &str) -> String {
    let out = Command::new("curl")
        .args(["-sS", "--fail", "--max-time", "10"])
        .arg(format!("http://{address}/metrics"))
        .output()
        .expect("curl must be installed");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The value of the sample `name{labels}`.
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap_or_else(|e| panic!("{series}: {e}"))
}

#[test]
fn scraped_counters_equal_what_the_workload_did() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("vgpu-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let unix = dir.join("metrics.sock");
    let tcp = format!("127.0.0.1:{port}");
    let backend = Backend::start_with(
        &[
            "--metrics",
            &format!("unix:{}", unix.display()),
            "--metrics",
            &format!("tcp:{tcp}"),
        ],
        &[],
    );
    let mut sent = Sent::default();
    let mut raw = backend.raw();
    setup(&mut raw, &mut sent);
    let data: Vec<u8> = (0..N as u32).flat_map(|x| x.to_le_bytes()).collect();
    write_buffer(&mut raw, &mut sent, &data);
    launches(&mut raw, &mut sent, 4, 7);
    launches(&mut raw, &mut sent, 4, 3);
    // A launch of a kernel that does not exist: an error, not a launch.
    launches(&mut raw, &mut sent, 99, 1);
    let out = read_buffer(&mut raw, &mut sent, N * 4);
    let expect: Vec<u8> = (0..N as u32).flat_map(|x| (x + 10).to_le_bytes()).collect();
    assert_eq!(out, expect, "the kernels did not run 10 times");
    assert_eq!((sent.kernels, sent.errors), (10, 1));
    let (ok, _, err) = ctl_json(
        &backend,
        &["checkpoint", dir.join("ckpt").to_str().unwrap()],
    );
    assert!(ok, "{err}");

    let http = scrape_unix(&unix);
    assert!(http.starts_with("HTTP/1.1 200 OK\r\n"), "{http}");
    assert!(
        http.contains("Content-Type: text/plain; version=0.0.4"),
        "{http}"
    );
    let text = scrape_tcp(&tcp);
    let vm = "{vm=\"1\"}";
    for (name, want) in [
        ("vgpu_calls_total", sent.calls),
        ("vgpu_call_errors_total", sent.errors),
        ("vgpu_kernels_launched_total", sent.kernels),
        ("vgpu_guest_read_bytes_total", sent.from_guest),
        ("vgpu_guest_written_bytes_total", sent.to_guest),
        ("vgpu_memory_used_bytes", N * 4),
        ("vgpu_checkpoint_duration_seconds_count", 1),
        ("vgpu_migration_save_duration_seconds_count", 0),
        ("vgpu_sessions", 1),
    ] {
        assert_eq!(
            sample(&text, &format!("{name}{vm}")),
            want,
            "{name}\n{text}"
        );
    }
    assert_eq!(sample(&text, "vgpu_objects{vm=\"1\",kind=\"kernels\"}"), 1);
    let device_kernels = text
        .lines()
        .find(|l| l.starts_with("vgpu_device_kernels_launched_total{api=\"opencl\""))
        .unwrap_or_else(|| panic!("no device series in\n{text}"));
    assert!(device_kernels.ends_with(" 10"), "{device_kernels}");
    // A 404 for other paths.
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://{tcp}/"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");

    // The same figures through the control socket and `vgpu-ctl top`.
    let (ok, out, _) = ctl_json(&backend, &["metrics"]);
    assert!(ok, "{out}");
    let figures = parse_one_line(&out);
    assert_eq!(figures["vms"][0]["kernels_launched"], sent.kernels);
    assert_eq!(figures["vms"][0]["calls"], sent.calls);
    let top = Command::new(env!("CARGO_BIN_EXE_vgpu-ctl"))
        .arg("--control")
        .arg(&backend.control)
        .args(["top", "--once"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&top.stdout);
    assert!(top.status.success(), "{table}");
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("no row in {table}"))
        .split_whitespace()
        .collect();
    // VM, sessions, calls, calls/s, errors, kernels.
    assert_eq!(
        row[..6],
        ["1", "1", &sent.calls.to_string(), "-", "1", "10"],
        "{table}"
    );
    drop(backend);
    assert!(!unix.exists(), "the metrics socket stays after exit");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A pipe's two ends as files (reader, writer).
fn pipe() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe writes.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both descriptors are fresh and owned by nothing else.
    unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}

#[test]
fn live_migration_transfers_are_timed_on_both_sides() {
    use std::sync::Arc;
    use vgpu_backend::executor::opencl::{DeviceSelector, OpenClExecutor};
    use vgpu_backend::executor::Executor;
    use vgpu_backend::vgpu::Vgpu;
    use vgpu_backend::vhost::device_state::{finish_transfer, start_transfer, Transfer};
    use vhost::vhost_user::message::VhostTransferStateDirection as Direction;

    let Ok(opencl) = OpenClExecutor::open(&DeviceSelector::First) else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    let executors: Vec<Arc<dyn Executor>> = vec![Arc::new(opencl)];
    let (source, dest) = (Vgpu::new(executors.clone()), Vgpu::new(executors));
    // Source: the state goes into a pipe QEMU would read.
    let (mut reader, writer) = pipe();
    let transfer = Transfer::default();
    start_transfer(&source, &transfer, Direction::SAVE, writer).expect("save starts");
    let mut stream = Vec::new();
    reader.read_to_end(&mut stream).expect("read the state");
    finish_transfer(&transfer).expect("save succeeds");
    let out = source.metrics().migrations_out.figures();
    assert_eq!(out.count, 1, "{out:?}");
    assert!(out.seconds_total > 0.0, "{out:?}");
    assert_eq!(source.metrics().migrations_in.figures().count, 0);
    // Destination: the same bytes come in.
    let (reader, mut writer) = pipe();
    let transfer = Transfer::default();
    start_transfer(&dest, &transfer, Direction::LOAD, reader).expect("load starts");
    writer.write_all(&stream).expect("send the state");
    drop(writer);
    finish_transfer(&transfer).expect("load succeeds");
    assert_eq!(dest.metrics().migrations_in.figures().count, 1);
    assert_eq!(dest.metrics().migrations_out.figures().count, 0);
}
