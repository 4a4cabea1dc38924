//! Holes a hostile guest could use against every VM of a daemon (issue
//! 15), each driven through the real daemon with crafted messages: the
//! call is refused or made harmless, the daemon stays small and alive, and
//! other sessions keep computing.

mod common;

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::frame::{decode_reply, BatchBuilder, Reply};
use vgpu_protocol::messages::*;
use vgpu_protocol::{DataRef, InfoTarget, Request, Status};
use vgpu_transport::loopback::{LoopbackConfig, LoopbackDevice};
use vgpu_transport::vring::DescSpec;

const SOURCE: &[u8] = b"kernel void inc(global int* p) { p[get_global_id(0)] += 1; }";

/// Sets up context 1, queue 2, program 3, kernel 4 (`inc`) and a buffer 5
/// of `n` ints holding 0..n, with the kernel's argument set.
fn set_up(raw: &mut RawFrontend, session: u64, n: usize) {
    let reply = raw.batch(
        session,
        &[
            req::context(1),
            req::queue(2, 1),
            req::program(3, 1, SOURCE),
            req::build(3),
            req::kernel(4, 3, b"inc"),
        ],
    );
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    let data: Vec<u8> = (0..n as i32).flat_map(|v| v.to_le_bytes()).collect();
    let at = raw.scratch(2 << 20);
    raw.dev.write_guest(at, &data).expect("write data");
    let batch = batch_of(
        raw,
        session,
        &[
            CreateBuffer {
                mem: 5,
                context: 1,
                flags: 1,
                size: data.len() as u64,
                init: DataRef {
                    offset: 0,
                    len: data.len() as u64,
                },
            }
            .into(),
            SetKernelArg {
                kernel: 4,
                index: 0,
                arg_kind: vgpu_protocol::ArgKind::Mem as u32,
                size: 8,
                value: vec![],
                handle: 5,
            }
            .into(),
        ],
    );
    let reply = send(raw, batch, &[(at, data.len() as u32)], &[]);
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
}

/// Runs `inc` over the `n` ints and reads them back.
fn compute(raw: &mut RawFrontend, session: u64, n: usize) -> Vec<i32> {
    let (reply, data) = raw.batch_with_in(
        session,
        &[
            launch(1, [n as u64, 1, 1], [0; 3]),
            EnqueueReadBuffer {
                queue: 2,
                mem: 5,
                offset: 0,
                data: DataRef {
                    offset: 0,
                    len: 4 * n as u64,
                },
                wait: vec![],
                event: 0,
            }
            .into(),
        ],
        4 * n as u32,
    );
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    data.chunks(4)
        .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
        .collect()
}

fn launch(work_dim: u32, global: [u64; 3], local: [u64; 3]) -> Request {
    EnqueueNdRange {
        queue: 2,
        kernel: 4,
        work_dim,
        offset: [0; 3],
        global,
        local,
        wait: vec![],
        event: 0,
    }
    .into()
}

/// Room for replies: up to 1 MiB (a program binary), between the request
/// and the data areas.
const REPLY_LEN: u32 = 1 << 20;

/// Sends one batch whose out-data and in-data descriptors are the guest
/// ranges `out` and `in_` (address, length), which may alias each other.
fn send(raw: &mut RawFrontend, batch: Vec<u8>, out: &[(u64, u32)], in_: &[(u64, u32)]) -> Reply {
    let reply_len = REPLY_LEN;
    let (req_at, reply_at) = (raw.scratch(0), raw.scratch(1 << 20));
    raw.dev.write_guest(req_at, &batch).expect("write request");
    raw.dev
        .write_guest(reply_at, &vec![0u8; reply_len as usize])
        .expect("clear reply");
    let spec = |writable| {
        move |&(addr, len): &(u64, u32)| DescSpec {
            addr,
            len,
            writable,
        }
    };
    let mut chain = vec![DescSpec {
        addr: req_at,
        len: batch.len() as u32,
        writable: false,
    }];
    chain.extend(out.iter().map(spec(false)));
    chain.push(DescSpec {
        addr: reply_at,
        len: reply_len,
        writable: true,
    });
    chain.extend(in_.iter().map(spec(true)));
    raw.send_chain(&chain);
    let mut reply = vec![0u8; reply_len as usize];
    raw.dev
        .read_guest(reply_at, &mut reply)
        .expect("read reply");
    decode_reply(&reply).expect("well-formed reply")
}

/// Requests as one batch of their own.
fn batch_of(raw: &mut RawFrontend, session: u64, requests: &[Request]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0);
    for request in requests {
        builder.push(raw.next_seq, request);
        raw.next_seq += 1;
    }
    builder.finish(session, REPLY_LEN)
}

/// The daemon's peak resident memory (`VmHWM`), in bytes: the supervisor's
/// and each connected front-end's worker's, added up.
fn peak_rss(backend: &Backend) -> u64 {
    let status = backend.status();
    let workers = status["vms"].as_array().expect("vms").iter();
    let pids = workers.map(|vm| vm["worker_pid"].as_u64().expect("worker_pid") as u32);
    std::iter::once(backend.pid())
        .chain(pids)
        .map(peak_rss_of)
        .sum()
}

fn peak_rss_of(pid: u32) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmHWM value");
    kib << 10
}

#[test]
fn absurd_launch_sizes_are_refused_and_every_session_keeps_computing() {
    let mut backend = Backend::start();
    let mut other = backend.raw();
    other.open_session(1);
    set_up(&mut other, 1, 64);
    let mut raw = backend.raw();
    raw.open_session(2);
    set_up(&mut raw, 2, 64);
    // 2^31 x 2^31 with no local size aborted PoCL 3.1 (`max_wgs > 0`).
    for (dims, global, local) in [
        (2, [1 << 31, 1 << 31, 1], [0; 3]),
        (3, [1 << 22, 1 << 22, 1 << 22], [0; 3]),
        (2, [65_537, 65_539, 1], [0; 3]),
        (2, [1 << 31, 1 << 31, 1], [1, 1, 1]),
        (1, [1 << 32, 1, 1], [0; 3]),
    ] {
        let reply = raw.batch(2, &[launch(dims, global, local)]);
        assert_eq!(
            reply.records[0].status,
            Status::INVALID_GLOBAL_WORK_SIZE,
            "{global:?} / {local:?}"
        );
    }
    assert!(backend.is_running(), "the daemon survived the launches");
    let expected: Vec<i32> = (1..=64).collect();
    assert_eq!(
        compute(&mut raw, 2, 64),
        expected,
        "the guest itself goes on"
    );
    assert_eq!(compute(&mut other, 1, 64), expected, "so does another VM");
}

/// `CL_DEVICE_MAX_MEM_ALLOC_SIZE` as session `session` of `raw` sees it.
fn max_mem_alloc_size(raw: &mut RawFrontend, session: u64) -> u64 {
    let query = GetInfo {
        target: InfoTarget::Device as u32,
        handle: 0,
        index: 0,
        param: 0x1010,
    };
    let reply = raw.batch(session, &[query.into()]);
    req::assert_all_ok(&reply);
    u64::from_le_bytes(reply.records[0].payload[..8].try_into().unwrap())
}

/// A front-end whose data area holds one 240 MiB window (sparse: only the
/// bytes written are ever touched) that many descriptors alias. A chain
/// carries less than 2^32 bytes in all (virtio; `virtio-queue` ends the
/// chain there), so 16 windows are about the most one call can name.
const WINDOW: u32 = 240 << 20;

fn big_frontend(backend: &Backend) -> RawFrontend {
    let config = LoopbackConfig {
        data_len: 256 << 20,
        ..Default::default()
    };
    RawFrontend {
        dev: LoopbackDevice::connect(&backend.socket, &config).expect("connect"),
        next_seq: 1,
    }
}

#[test]
fn rect_transfers_over_aliasing_descriptors_stage_a_bounded_amount() {
    let backend = Backend::start();
    let mut raw = big_frontend(&backend);
    raw.open_session(1);
    set_up(&mut raw, 1, 1 << 19); // a 2 MiB buffer holding 0..2^19
    let window = raw.scratch(4 << 20);
    let windows = 16u64; // 3.75 GiB of in-data, all over the same pages
    let in_: Vec<(u64, u32)> = (0..windows).map(|_| (window, WINDOW)).collect();
    let before = peak_rss(&backend);

    // A region that claims 200 GiB of the 2 MiB buffer: refused first.
    let region = [1 << 20, 1 << 10, 200];
    let request = EnqueueReadBufferRect {
        queue: 2,
        mem: 5,
        buffer_origin: [0; 3],
        host_origin: [0; 3],
        region,
        buffer_row_pitch: 0,
        buffer_slice_pitch: 0,
        host_row_pitch: 0,
        host_slice_pitch: 0,
        data: DataRef {
            offset: 0,
            len: windows * u64::from(WINDOW),
        },
        wait: vec![],
        event: 0,
    };
    let batch = batch_of(&mut raw, 1, &[request.clone().into()]);
    let reply = send(&mut raw, batch, &[], &in_);
    assert_eq!(reply.records[0].status, Status::INVALID_VALUE, "{reply:?}");

    // A legal rect whose rows lie 1 GiB apart in the guest's 3.75 GiB:
    // moved row by row, each row landing where the geometry says.
    let pitch = 1u64 << 30;
    let rows = 4u64;
    let request = EnqueueReadBufferRect {
        region: [64, rows, 1],
        buffer_origin: [128, 2, 0],
        buffer_row_pitch: 4096,
        host_row_pitch: pitch,
        ..request
    };
    let batch = batch_of(&mut raw, 1, &[request.into()]);
    let reply = send(&mut raw, batch, &[], &in_);
    assert_eq!(reply.records[0].status, Status::SUCCESS, "{reply:?}");
    let mut seen = Vec::new();
    for y in 0..rows {
        let at = (y * pitch) % u64::from(WINDOW);
        assert!(
            seen.iter().all(|&s: &u64| s.abs_diff(at) >= 64),
            "rows overlap"
        );
        seen.push(at);
        let mut row = [0u8; 64];
        raw.dev.read_guest(window + at, &mut row).expect("read row");
        let first = ((2 + y) * 4096 + 128) / 4;
        let want: Vec<u8> = (first..first + 16)
            .flat_map(|v| (v as i32).to_le_bytes())
            .collect();
        assert_eq!(row.to_vec(), want, "row {y}");
    }

    // A 3-D rect over two descriptors (whole slices in one piece), each
    // byte where a CPU model of the spec puts it, the rest untouched.
    let area = raw.scratch(40 << 20);
    raw.dev.write_guest(area, &[0xee; 4000]).expect("fill");
    let request = EnqueueReadBufferRect {
        queue: 2,
        mem: 5,
        buffer_origin: [10, 6, 1],
        host_origin: [1, 1, 1],
        region: [12, 5, 3],
        buffer_row_pitch: 4096,
        buffer_slice_pitch: 4096 * 64,
        host_row_pitch: 40,
        host_slice_pitch: 40 * 20,
        data: DataRef {
            offset: 0,
            len: 4000,
        },
        wait: vec![],
        event: 0,
    };
    let batch = batch_of(&mut raw, 1, &[request.into()]);
    let reply = send(&mut raw, batch, &[], &[(area, 2000), (area + 2000, 2000)]);
    assert_eq!(reply.records[0].status, Status::SUCCESS, "{reply:?}");
    let mut got = vec![0u8; 4000];
    raw.dev.read_guest(area, &mut got).expect("read");
    let mut want = vec![0xeeu8; 4000];
    for z in 0..3 {
        for y in 0..5 {
            for x in 0..12 {
                let b = (1 + z) * 4096 * 64 + (6 + y) * 4096 + 10 + x;
                want[(1 + z) * 800 + (1 + y) * 40 + 1 + x] = ((b / 4) >> (8 * (b % 4))) as u8;
            }
        }
    }
    assert!(got == want, "the 3-D rect landed where the spec says");

    // The same over out-data: a rect write of 2 MiB (two pieces) from two
    // descriptors over the same 240 MiB, its 4 KiB rows 256 KiB apart.
    for y in 0..512u64 {
        raw.dev
            .write_guest(window + (y << 18), &[(y % 251) as u8; 4096])
            .expect("write pattern");
    }
    let request = EnqueueWriteBufferRect {
        queue: 2,
        mem: 5,
        buffer_origin: [0; 3],
        host_origin: [0; 3],
        region: [4096, 512, 1],
        buffer_row_pitch: 0,
        buffer_slice_pitch: 0,
        host_row_pitch: 1 << 18,
        host_slice_pitch: 0,
        data: DataRef {
            offset: 0,
            len: 2 * u64::from(WINDOW),
        },
        wait: vec![],
        event: 0,
    };
    let batch = batch_of(&mut raw, 1, &[request.into()]);
    let reply = send(&mut raw, batch, &[(window, WINDOW); 2], &[]);
    assert_eq!(reply.records[0].status, Status::SUCCESS, "{reply:?}");
    let (reply, data) = raw.batch_with_in(
        1,
        &[EnqueueReadBuffer {
            queue: 2,
            mem: 5,
            offset: 0,
            data: DataRef {
                offset: 0,
                len: 2 << 20,
            },
            wait: vec![],
            event: 0,
        }
        .into()],
        2 << 20,
    );
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    for (y, row) in data.chunks(4096).enumerate() {
        assert!(
            row.iter().all(|&b| b == (y % 251) as u8),
            "row {y} of the rect write"
        );
    }

    // Contiguous guest memory still goes to the driver in place, and the
    // bytes the rect skips keep the guest's values.
    let in_at = raw.scratch(2 << 20);
    raw.dev.write_guest(in_at, &[1; 96]).expect("write in-data");
    let (reply, data) = raw.batch_with_in(
        1,
        &[EnqueueReadBufferRect {
            queue: 2,
            mem: 5,
            buffer_origin: [8, 1, 0],
            host_origin: [4, 1, 0],
            region: [8, 2, 1],
            buffer_row_pitch: 16,
            buffer_slice_pitch: 0,
            host_row_pitch: 32,
            host_slice_pitch: 0,
            data: DataRef { offset: 0, len: 96 },
            wait: vec![],
            event: 0,
        }
        .into()],
        96,
    );
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    assert_eq!(&data[36..44], &[0; 8], "bytes of the write's row 0");
    assert_eq!(&data[68..76], &[0; 8]);
    assert!(data[..36].iter().chain(&data[44..68]).all(|&b| b == 1));

    let grown = peak_rss(&backend).saturating_sub(before);
    assert!(
        grown < 96 << 20,
        "the daemon's peak RSS grew by {} MiB",
        grown >> 20
    );
}

#[test]
fn initial_data_over_aliasing_descriptors_is_streamed_or_refused_first() {
    let backend = Backend::start_with(&["--max-memory", "64M"], &[]);
    let mut raw = big_frontend(&backend);
    raw.open_session(1);
    set_up(&mut raw, 1, 16);
    let window = raw.scratch(4 << 20);
    let pattern: Vec<u8> = (0..64u32 << 10).map(|i| (i % 251) as u8).collect();
    raw.dev
        .write_guest(window, &pattern)
        .expect("write pattern");
    let before = peak_rss(&backend);

    // 1 MiB of initial data from 16 descriptors over the same 64 KiB.
    let create = |mem, flags, size| -> Request {
        CreateBuffer {
            mem,
            context: 1,
            flags,
            size,
            init: DataRef {
                offset: 0,
                len: size,
            },
        }
        .into()
    };
    let batch = batch_of(&mut raw, 1, &[create(6, 1, 1 << 20)]);
    let reply = send(&mut raw, batch, &[(window, 64 << 10); 16], &[]);
    assert_eq!(reply.records[0].status, Status::SUCCESS, "{reply:?}");
    let (reply, data) = raw.batch_with_in(
        1,
        &[EnqueueReadBuffer {
            queue: 2,
            mem: 6,
            offset: 0,
            data: DataRef {
                offset: 0,
                len: 1 << 20,
            },
            wait: vec![],
            event: 0,
        }
        .into()],
        1 << 20,
    );
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    assert!(data.chunks(64 << 10).all(|c| c == pattern.as_slice()));

    // 3.5 GiB for a buffer the host may not write (CL_MEM_HOST_NO_ACCESS)
    // is over the 64 MiB quota, and where the vGPU's largest allocation
    // (derived from the host's memory) is smaller, over that too, which
    // OpenCL says to report first: refused before anything is staged.
    let huge = 15 * u64::from(WINDOW);
    let largest = max_mem_alloc_size(&mut raw, 1);
    let batch = batch_of(&mut raw, 1, &[create(7, 1 | (1 << 9), huge)]);
    let reply = send(&mut raw, batch, &[(window, WINDOW); 15], &[]);
    let expected = if huge > largest {
        Status::INVALID_BUFFER_SIZE
    } else {
        Status::OUT_OF_RESOURCES
    };
    assert_eq!(reply.records[0].status, expected, "{reply:?}");
    let grown = peak_rss(&backend).saturating_sub(before);
    assert!(
        grown < 96 << 20,
        "the daemon's peak RSS grew by {} MiB",
        grown >> 20
    );
}

/// The checkpoint at `from` with its state changed by `edit`, written
/// whole and well-formed (valid checksums) to `to`: what any front-end can
/// hand the daemon through `SET_DEVICE_STATE_FD`.
fn crafted(
    from: &std::path::Path,
    to: &std::path::Path,
    edit: impl Fn(&mut vgpu_migration::OpenClStateV1),
) {
    use vgpu_migration::{
        ExecutorState, Item, OpenClState, SessionState, StreamReader, StreamWriter, VgpuState,
    };
    let bytes = std::fs::read(from).expect("read checkpoint");
    let mut reader = StreamReader::new(bytes.as_slice()).expect("stream header");
    let mut writer = StreamWriter::new(Vec::new()).expect("writer");
    while let Some(item) = reader.next_item().expect("good stream") {
        match item {
            Item::State(mut state) => {
                let VgpuState::V1(vgpu) = state.as_mut();
                for session in &mut vgpu.sessions {
                    let SessionState::V6(s) = session else {
                        panic!("an old session version in a new checkpoint");
                    };
                    for part in &mut s.parts {
                        if let ExecutorState::OpenCl(OpenClState::V1(opencl)) = part {
                            edit(opencl);
                        }
                    }
                }
                writer.write_state(&state).expect("write state");
            }
            Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            } => writer
                .write_buffer_chunk(session, buffer, offset, data)
                .expect("write buffer"),
            Item::End(_) => break,
            Item::Base { .. } | Item::BaseRef { .. } => unreachable!("a whole checkpoint"),
        }
    }
    let (out, _) = writer.finish().expect("finish");
    std::fs::write(to, out).expect("write crafted stream");
}

fn mem_count(raw: &mut RawFrontend, session: u64) -> u64 {
    let reply = raw.batch(session, &[SessionStats {}.into()]);
    SessionStatsReply::from_bytes(&reply.records[0].payload)
        .expect("stats")
        .counts[vgpu_protocol::ObjectKind::Mem.index()]
}

#[test]
fn restore_streams_pass_the_guards_of_a_guest_call() {
    use vgpu_migration::ProgramOrigin;
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    set_up(&mut raw, 1, 16);
    let binaries = GetInfo {
        target: vgpu_protocol::InfoTarget::Program as u32,
        handle: 3,
        index: 0,
        param: 0x1166, // CL_PROGRAM_BINARIES
    };
    let batch = batch_of(&mut raw, 1, &[binaries.into()]);
    let reply = send(&mut raw, batch, &[], &[]);
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    let binary = reply.records[0].payload.clone();
    let reply = raw.batch(
        1,
        &[
            CreateProgramWithBinary {
                program: 6,
                context: 1,
                binary,
            }
            .into(),
            req::build(6),
        ],
    );
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "a binary this daemon handed out comes back: {reply:?}"
    );
    let good = backend.dir().join("good.ckpt");
    let (ok, out) = backend.ctl(&["checkpoint", good.to_str().expect("utf-8")]);
    assert!(ok, "{out}");
    // A change after the checkpoint, which a refused restore must keep.
    let reply = raw.batch(1, &[req::buffer(9, 1, 1, 64)]);
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    assert_eq!(mem_count(&mut raw, 1), 2);

    let foreign = backend.dir().join("foreign-binary.ckpt");
    crafted(&good, &foreign, |s| {
        for p in &mut s.programs {
            if let ProgramOrigin::Binary(b) = &mut p.origin {
                let last = b.bytes.len() - 1;
                b.bytes[last] ^= 1;
            }
        }
    });
    let device_queue = backend.dir().join("device-queue.ckpt");
    crafted(&good, &device_queue, |s| {
        for q in &mut s.queues {
            q.properties = vec![0x1093, 0b111, 0x1094, 1 << 16];
        }
    });
    for (path, why) in [(&foreign, "did not hand out"), (&device_queue, "queue")] {
        let (ok, out) = backend.ctl(&["restore", path.to_str().expect("utf-8")]);
        assert!(!ok, "{} was restored: {out}", path.display());
        assert!(out.contains(why), "{}: {out}", path.display());
        assert_eq!(
            mem_count(&mut raw, 1),
            2,
            "the refused restore changed nothing"
        );
    }
    assert_eq!(compute(&mut raw, 1, 16), (1..=16).collect::<Vec<i32>>());

    // The checkpoint itself restores: its binary was handed out here.
    let (ok, out) = backend.ctl(&["restore", good.to_str().expect("utf-8")]);
    assert!(ok, "{out}");
    assert_eq!(mem_count(&mut raw, 1), 1);
}

#[test]
fn build_logs_name_no_host_paths() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            CreateProgramWithSource {
                program: 2,
                context: 1,
                source: b"kernel void k(global int* p) { p[0] = undeclared; }".to_vec(),
            }
            .into(),
            req::build(2),
            GetInfo {
                target: vgpu_protocol::InfoTarget::ProgramBuild as u32,
                handle: 2,
                index: 0,
                param: 0x1183, // CL_PROGRAM_BUILD_LOG
            }
            .into(),
        ],
    );
    assert_eq!(reply.records[2].status, Status::BUILD_PROGRAM_FAILURE);
    assert!(reply.records[3].status.is_success(), "{reply:?}");
    let log = String::from_utf8_lossy(&reply.records[3].payload).into_owned();
    println!("build log: {log}");
    assert!(log.contains("undeclared"), "the log still says what failed");
    let home = std::env::var("HOME").unwrap_or_default();
    for host in ["/tmp/", "/.cache/", "/root/", "/home/", "/var/", "/usr/"] {
        assert!(
            !log.contains(host),
            "the log names a host path ({host}): {log}"
        );
    }
    assert!(
        home.is_empty() || !log.contains(&home),
        "the log names $HOME: {log}"
    );
}

#[test]
fn context_properties_outside_the_allow_list_are_refused() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let create = |context, properties| -> Request {
        CreateContext {
            context,
            properties,
        }
        .into()
    };
    let reply = raw.batch(
        1,
        &[
            create(1, vec![0x2008, 0xdead_beef, 0]), // CL_GL_CONTEXT_KHR
            create(2, vec![0x1085, 1, 0x1085, 0, 0]),
            create(3, vec![0x1085, 1, 0]), // CL_CONTEXT_INTEROP_USER_SYNC
        ],
    );
    let statuses: Vec<Status> = reply.records.iter().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            Status::INVALID_PROPERTY,
            Status::INVALID_PROPERTY,
            Status::SUCCESS
        ]
    );
}

#[test]
fn a_wait_nobody_ends_cannot_stall_a_checkpoint() {
    use std::time::{Duration, Instant};
    let backend = Backend::start();
    // VM A (front-end 1): session 1 waits on a user event nobody sets.
    let mut a = backend.raw();
    a.open_session(1);
    a.open_session(2);
    let reply = a.batch(
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
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    // Session 2 only issues a command behind a user event nobody sets.
    let reply = a.batch(
        2,
        &[
            req::context(1),
            req::queue(2, 1),
            CreateUserEvent {
                event: 3,
                context: 1,
            }
            .into(),
            EnqueueMarker {
                queue: 2,
                wait: vec![3],
                event: 4,
            }
            .into(),
        ],
    );
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    let wait = batch_of(&mut a, 1, &[WaitForEvents { events: vec![2] }.into()]);
    let (req_at, reply_at) = (a.scratch(8 << 20), a.scratch(9 << 20));
    a.dev.write_guest(req_at, &wait).expect("write request");
    a.dev
        .write_guest(reply_at, &vec![0u8; REPLY_LEN as usize])
        .expect("clear reply");
    a.dev
        .send_chain(&[
            DescSpec {
                addr: req_at,
                len: wait.len() as u32,
                writable: false,
            },
            DescSpec {
                addr: reply_at,
                len: REPLY_LEN,
                writable: true,
            },
        ])
        .expect("send the wait");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        a.dev
            .wait_used(Some(Duration::from_millis(10)))
            .expect("poll")
            .is_none(),
        "the wait returned by itself"
    );
    // VM B (front-end 2) computes.
    let mut b = backend.raw();
    b.open_session(1);
    set_up(&mut b, 1, 16);

    let file_a = backend.dir().join("a.ckpt");
    let mut checkpoint_a = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-ctl"))
        .arg("--control")
        .arg(&backend.control)
        .args(["checkpoint", file_a.to_str().expect("utf-8"), "--vm", "1"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run vgpu-ctl");
    // B's checkpoint goes through while A's waits for the stuck session.
    let file_b = backend.dir().join("b.ckpt");
    let (ok, out) = backend.ctl(&["checkpoint", file_b.to_str().expect("utf-8"), "--vm", "2"]);
    assert!(ok, "{out}");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = checkpoint_a.try_wait().expect("vgpu-ctl") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(40) {
            let _ = checkpoint_a.kill();
            panic!("the checkpoint of A stalled behind a wait nobody ends");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    println!("A's checkpoint ended after {:?}", started.elapsed());
    assert!(
        status.success(),
        "A's checkpoint went on without the stuck wait"
    );
    // Only the stuck wait failed, with an error its guest can see.
    assert!(
        a.dev
            .wait_used(Some(Duration::from_secs(5)))
            .expect("wait")
            .is_some(),
        "the stuck wait was answered"
    );
    let mut reply = vec![0u8; 4096];
    a.dev.read_guest(reply_at, &mut reply).expect("read reply");
    let reply = decode_reply(&reply).expect("wait reply");
    assert!(
        !reply.records[0].status.is_success(),
        "the failed wait reports an error: {reply:?}"
    );
    for session in [1, 2] {
        let reply = a.batch(session, &[Ping {}.into()]);
        assert!(reply.records[0].status.is_success(), "{reply:?}");
    }
    // Session 2's command behind the never-set event failed, not hung.
    let reply = a.batch(
        2,
        &[GetInfo {
            target: vgpu_protocol::InfoTarget::Event as u32,
            handle: 4,
            index: 0,
            param: 0x11D3, // CL_EVENT_COMMAND_EXECUTION_STATUS
        }
        .into()],
    );
    let status = i32::from_le_bytes(reply.records[0].payload[..4].try_into().expect("4 bytes"));
    assert!(status < 0, "the command behind the event failed: {status}");
    assert_eq!(compute(&mut b, 1, 16), (1..=16).collect::<Vec<i32>>());
}

/// The sealed `CL_PROGRAM_BINARIES` of program 3 of `session`.
fn binary_of(raw: &mut RawFrontend, session: u64) -> Vec<u8> {
    let binaries = GetInfo {
        target: vgpu_protocol::InfoTarget::Program as u32,
        handle: 3,
        index: 0,
        param: 0x1166, // CL_PROGRAM_BINARIES
    };
    let batch = batch_of(raw, session, &[binaries.into()]);
    let reply = send(raw, batch, &[], &[]);
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    reply.records[0].payload.clone()
}

/// Creates and builds program 6 of `session` from `binary`.
fn from_binary(raw: &mut RawFrontend, session: u64, binary: Vec<u8>) -> Reply {
    raw.batch(
        session,
        &[
            CreateProgramWithBinary {
                program: 6,
                context: 1,
                binary,
            }
            .into(),
            req::build(6),
        ],
    )
}

/// A binary one backend hands out comes back to another process sharing
/// its key (a program's binary cache outlives a backend restart), and so
/// does a checkpoint of a program created from it; a backend with another
/// key refuses both, as it refuses any binary it cannot vouch for.
#[test]
fn binaries_sealed_by_one_backend_are_accepted_by_another_sharing_the_key() {
    let dir = std::env::temp_dir().join(format!("vgpu-seal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let key = dir.join("shared.key");
    let other_key = dir.join("other.key");
    let key_arg = ["--binary-key", key.to_str().expect("utf-8")];
    let first = Backend::start_with(&key_arg, &[]);
    let mut raw = first.raw();
    raw.open_session(1);
    set_up(&mut raw, 1, 16);
    let binary = binary_of(&mut raw, 1);
    let reply = from_binary(&mut raw, 1, binary.clone());
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    let checkpoint = dir.join("binary.ckpt");
    let (ok, out) = first.ctl(&["checkpoint", checkpoint.to_str().expect("utf-8")]);
    assert!(ok, "{out}");
    drop(raw);
    drop(first);

    let second = Backend::start_with(&key_arg, &[]);
    let mut raw = second.raw();
    raw.open_session(1);
    set_up(&mut raw, 1, 16);
    let reply = from_binary(&mut raw, 1, binary.clone());
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "another process with the key refused the binary: {reply:?}"
    );
    let (ok, out) = second.ctl(&["restore", checkpoint.to_str().expect("utf-8")]);
    assert!(ok, "{out}");
    assert_eq!(compute(&mut raw, 1, 16), (1..=16).collect::<Vec<i32>>());

    let stranger = Backend::start_with(&["--binary-key", other_key.to_str().expect("utf-8")], &[]);
    let mut raw = stranger.raw();
    raw.open_session(1);
    set_up(&mut raw, 1, 16);
    let reply = from_binary(&mut raw, 1, binary);
    assert_eq!(reply.records[0].status, Status::INVALID_BINARY, "{reply:?}");
    let (ok, out) = stranger.ctl(&["restore", checkpoint.to_str().expect("utf-8")]);
    assert!(!ok && out.contains("did not hand out"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unusable_binary_key_is_refused_at_start() {
    let dir = std::env::temp_dir().join(format!("vgpu-badkey-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let key = dir.join("short.key");
    std::fs::write(&key, b"short").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
        .args(["--socket", dir.join("never.sock").to_str().expect("utf-8")])
        .args(["--binary-key", key.to_str().expect("utf-8")])
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("--binary-key") && stderr.contains("not a binary key"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_restore_is_held_to_the_quotas_of_the_vm() {
    // A checkpoint with a 2 MiB buffer, taken without a limit...
    let unlimited = Backend::start();
    let mut raw = unlimited.raw();
    raw.open_session(1);
    set_up(&mut raw, 1, 1 << 19);
    let file = std::env::temp_dir().join(format!("vgpu-quota-{}.ckpt", std::process::id()));
    let (ok, out) = unlimited.ctl(&["checkpoint", file.to_str().expect("utf-8")]);
    assert!(ok, "{out}");
    // ... into a VM allowed 1 MiB: refused before anything is built.
    let limited = Backend::start_with(&["--max-memory", "1M"], &[]);
    let mut raw = limited.raw();
    raw.open_session(1);
    set_up(&mut raw, 1, 16);
    let (ok, out) = limited.ctl(&["restore", file.to_str().expect("utf-8")]);
    assert!(!ok, "a restore over the quota went through: {out}");
    assert!(out.contains("--max-memory"), "{out}");
    assert_eq!(compute(&mut raw, 1, 16), (1..=16).collect::<Vec<i32>>());
    // Its five objects into a VM allowed three: refused too.
    let few = Backend::start_with(&["--max-objects", "3"], &[]);
    let mut raw = few.raw();
    raw.open_session(1);
    let (ok, out) = few.ctl(&["restore", file.to_str().expect("utf-8")]);
    let _ = std::fs::remove_file(&file);
    assert!(!ok, "a restore over the quota went through: {out}");
    assert!(out.contains("--max-objects"), "{out}");
    assert!(raw.batch(1, &[Ping {}.into()]).records[0]
        .status
        .is_success());
}
