//! Checkpoint/restart and re-homing of a running vGPU, through the real
//! daemon, its control socket and `vgpu-ctl`.

mod common;

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, Request, Status};

const N: usize = 4096;
const SOURCE: &[u8] =
    b"kernel void advance(global uint* a, global const uint* b, uint k, local uint* s) {
    size_t i = get_global_id(0);
    s[get_local_id(0)] = b[i];
    barrier(CLK_LOCAL_MEM_FENCE);
    a[i] = a[i] * 3u + s[get_local_id(0)] + k;
}";

fn initial(seed: u32) -> Vec<u32> {
    (0..N as u32)
        .map(|i| i.wrapping_mul(2_654_435_761).wrapping_add(seed))
        .collect()
}

fn bytes(v: &[u32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// CPU reference of `iterations` steps.
fn reference(iterations: u32) -> Vec<u8> {
    let (mut a, b) = (initial(1), initial(2));
    for k in 0..iterations {
        for (x, y) in a.iter_mut().zip(&b) {
            *x = x.wrapping_mul(3).wrapping_add(*y).wrapping_add(k);
        }
    }
    bytes(&a)
}

/// Session 1: context, queue, program, kernel with arguments, buffers.
fn setup(raw: &mut RawFrontend) {
    raw.open_session(1);
    let (a, b) = (bytes(&initial(1)), bytes(&initial(2)));
    let (a_at, b_at) = (raw.scratch(8 << 20), raw.scratch(12 << 20));
    raw.dev.write_guest(a_at, &a).unwrap();
    raw.dev.write_guest(b_at, &b).unwrap();
    let size = (N * 4) as u64;
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            req::program(3, 1, SOURCE),
            BuildProgram {
                program: 3,
                options: b"-DUNUSED=1".to_vec(),
            }
            .into(),
            req::kernel(4, 3, b"advance"),
            req::buffer(5, 1, 1, size),
            req::buffer(6, 1, 1, size),
            SetKernelArg {
                kernel: 4,
                index: 0,
                arg_kind: ArgKind::Mem as u32,
                size: 8,
                value: vec![],
                handle: 5,
            }
            .into(),
            SetKernelArg {
                kernel: 4,
                index: 1,
                arg_kind: ArgKind::Mem as u32,
                size: 8,
                value: vec![],
                handle: 6,
            }
            .into(),
            SetKernelArg {
                kernel: 4,
                index: 3,
                arg_kind: ArgKind::Local as u32,
                size: 256,
                value: vec![],
                handle: 0,
            }
            .into(),
            CreateUserEvent {
                event: 9,
                context: 1,
            }
            .into(),
        ],
    );
    req::assert_all_ok(&reply);
    // Initial contents through the out-data stream of one chain each.
    for (mem, at) in [(5u64, a_at), (6u64, b_at)] {
        upload(raw, mem, at, size);
    }
}

fn upload(raw: &mut RawFrontend, mem: u64, at: u64, size: u64) {
    use vgpu_protocol::frame::BatchBuilder;
    use vgpu_transport::vring::DescSpec;
    let mut builder = BatchBuilder::new(0);
    let write = EnqueueWriteBuffer {
        queue: 2,
        mem,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: size,
        },
        wait: vec![],
        event: 0,
    };
    builder.push(1, &write.into());
    let request = builder.finish(1, 4096);
    let (req_at, reply_at) = (raw.scratch(0), raw.scratch(1 << 20));
    raw.dev.write_guest(req_at, &request).unwrap();
    let chain = [
        DescSpec {
            addr: req_at,
            len: request.len() as u32,
            writable: false,
        },
        DescSpec {
            addr: at,
            len: size as u32,
            writable: false,
        },
        DescSpec {
            addr: reply_at,
            len: 4096,
            writable: true,
        },
    ];
    raw.send_chain(&chain);
    let mut reply = vec![0u8; 4096];
    raw.dev.read_guest(reply_at, &mut reply).unwrap();
    req::assert_all_ok(&vgpu_protocol::decode_reply(&reply).unwrap());
}

/// Runs steps `from..to` (the step index is the kernel's `k`).
fn steps(raw: &mut RawFrontend, from: u32, to: u32) {
    let mut requests: Vec<Request> = Vec::new();
    for k in from..to {
        requests.push(
            SetKernelArg {
                kernel: 4,
                index: 2,
                arg_kind: ArgKind::Value as u32,
                size: 4,
                value: k.to_le_bytes().to_vec(),
                handle: 0,
            }
            .into(),
        );
        requests.push(
            EnqueueNdRange {
                queue: 2,
                kernel: 4,
                work_dim: 1,
                offset: [0; 3],
                global: [N as u64, 1, 1],
                local: [64, 1, 1],
                wait: vec![],
                event: 0,
            }
            .into(),
        );
    }
    requests.push(Finish { queue: 2 }.into());
    req::assert_all_ok(&raw.batch(1, &requests));
}

fn read_a(raw: &mut RawFrontend) -> Vec<u8> {
    let len = (N * 4) as u64;
    let read = EnqueueReadBuffer {
        queue: 2,
        mem: 5,
        offset: 0,
        data: DataRef { offset: 0, len },
        wait: vec![],
        event: 0,
    };
    let (reply, data) = raw.batch_with_in(1, &[read.into()], len as u32);
    req::assert_all_ok(&reply);
    data
}

fn assert_ctl_ok(backend: &Backend, args: &[&str]) -> String {
    let (ok, out) = backend.ctl(args);
    assert!(ok, "vgpu-ctl {args:?} failed: {out}");
    out
}

/// Ends the backend and starts another from `checkpoint`; the guest goes
/// on with its message numbers where they were.
fn restart_from(
    backend: Backend,
    raw: RawFrontend,
    checkpoint: &std::path::Path,
) -> (Backend, RawFrontend) {
    let next_seq = raw.next_seq;
    drop(raw);
    drop(backend);
    let restarted = Backend::start_with(&["--restore", checkpoint.to_str().unwrap()], &[]);
    let mut raw = restarted.raw();
    raw.next_seq = next_seq;
    (restarted, raw)
}

#[test]
fn checkpoint_then_restart_finishes_like_an_undisturbed_run() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    steps(&mut raw, 0, 5);
    // Outside the backend's directory, which goes with it.
    let file = std::env::temp_dir().join(format!("vgpu-restart-{}.ckpt", std::process::id()));
    let out = assert_ctl_ok(
        &backend,
        &["checkpoint", file.to_str().unwrap(), "--then", "pause"],
    );
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON report");
    assert_eq!(report["buffer_bytes"], 32768, "{out}");
    let saved = std::fs::read(&file).unwrap();
    let (restarted, mut raw) = restart_from(backend, raw, &file);
    // The session goes on where it was: same handles, same kernel arguments.
    steps(&mut raw, 5, 10);
    assert_eq!(
        read_a(&mut raw),
        reference(10),
        "restarted run differs from an undisturbed one"
    );
    assert_eq!(restarted.status()["objects"]["kernels"], 1);
    assert_eq!(saved, std::fs::read(&file).unwrap());
    let _ = std::fs::remove_file(&file);
}

/// A restart from a checkpoint older than the guest's last calls: the
/// guest's work since is not in it, so the session fails with an error
/// instead of computing on stale buffers.
#[test]
fn restart_from_a_checkpoint_the_guest_has_moved_past_fails_the_session() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    steps(&mut raw, 0, 5);
    let file = std::env::temp_dir().join(format!("vgpu-stale-{}.ckpt", std::process::id()));
    assert_ctl_ok(&backend, &["checkpoint", file.to_str().unwrap()]);
    steps(&mut raw, 5, 8); // not in the checkpoint
    let (_restarted, mut raw) = restart_from(backend, raw, &file);
    let reply = raw.batch(1, &[Finish { queue: 2 }.into()]);
    assert_eq!(
        reply.records[0].status,
        Status::DEVICE_NOT_AVAILABLE,
        "{reply:?}"
    );
    let reply = raw.batch(1, &[Finish { queue: 2 }.into()]);
    assert_eq!(
        reply.records[0].status,
        Status::DEVICE_NOT_AVAILABLE,
        "{reply:?}"
    );
    // The guest can still close the session.
    let reply = raw.batch(1, &[CloseSession {}.into()]);
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    let _ = std::fs::remove_file(&file);
}

#[test]
fn rehome_between_two_devices_mid_run_gives_identical_results() {
    // PoCL offers two devices when asked: "basic" and "pthread".
    let env = [("POCL_DEVICES", "basic pthread")];
    let backend = Backend::start_with(&["--device", "opencl:basic"], &env);
    let mut raw = backend.raw();
    setup(&mut raw);
    steps(&mut raw, 0, 4);
    let out = assert_ctl_ok(&backend, &["rehome", "--device", "opencl:pthread"]);
    assert!(out.contains("rehomed"), "{out}");
    let status = backend.status();
    assert!(
        status["device"].as_str().unwrap().contains("pthread")
            && status["devices"][0].as_str().unwrap().contains("pthread"),
        "{status}"
    );
    steps(&mut raw, 4, 8);
    let out = assert_ctl_ok(&backend, &["rehome", "--device", "opencl:basic"]);
    assert!(out.contains("drain_ms"), "{out}");
    steps(&mut raw, 8, 12);
    assert_eq!(read_a(&mut raw), reference(12));
}

#[test]
fn bad_checkpoints_are_refused_and_nothing_changes() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    steps(&mut raw, 0, 3);
    let file = backend.dir().join("good.ckpt");
    assert_ctl_ok(&backend, &["checkpoint", file.to_str().unwrap()]);
    let good = std::fs::read(&file).unwrap();
    steps(&mut raw, 3, 6);

    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated", good[..good.len() / 2].to_vec()),
        (
            "truncated before the end chunk",
            good[..good.len() - 8].to_vec(),
        ),
        ("empty", Vec::new()),
        ("foreign", b"not a checkpoint at all".to_vec()),
    ];
    let mut flipped = good.clone();
    let at = flipped.len() / 3;
    flipped[at] ^= 0x40;
    cases.push(("corrupted", flipped));
    let mut future = good.clone();
    future[8..12].copy_from_slice(&99u32.to_le_bytes());
    cases.push(("foreign version", future));
    for (what, bytes) in cases {
        let path = backend.dir().join("bad.ckpt");
        std::fs::write(&path, &bytes).unwrap();
        let (ok, out) = backend.ctl(&["restore", path.to_str().unwrap()]);
        assert!(!ok, "{what} checkpoint was accepted: {out}");
        assert!(out.contains("error"), "{what}: {out}");
    }
    // The vGPU kept its state: the run goes on as if nothing happened.
    steps(&mut raw, 6, 9);
    assert_eq!(read_a(&mut raw), reference(9));
    // A good checkpoint restores the state it holds.
    assert_ctl_ok(&backend, &["restore", file.to_str().unwrap()]);
    steps(&mut raw, 3, 9);
    assert_eq!(read_a(&mut raw), reference(9));
}

#[test]
fn restore_onto_a_device_that_cannot_honour_the_profile_is_refused() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    setup(&mut raw);
    steps(&mut raw, 0, 2);
    let file = backend.dir().join("vgpu.ckpt");
    assert_ctl_ok(&backend, &["checkpoint", file.to_str().unwrap()]);
    // Rewrite the checkpoint as if taken on a device with far larger limits.
    let input = std::fs::File::open(&file).unwrap();
    let mut reader = vgpu_migration::StreamReader::new(input).unwrap();
    let bigger = backend.dir().join("bigger.ckpt");
    let mut writer =
        vgpu_migration::StreamWriter::new(std::fs::File::create(&bigger).unwrap()).unwrap();
    while let Some(item) = reader.next_item().unwrap() {
        match item {
            vgpu_migration::Item::State(state) => {
                let vgpu_migration::VgpuState::V1(mut state) = *state;
                state.profile.max_work_group_size = 1 << 40;
                writer
                    .write_state(&vgpu_migration::VgpuState::V1(state))
                    .unwrap();
            }
            vgpu_migration::Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            } => {
                writer
                    .write_buffer_chunk(session, buffer, offset, data)
                    .unwrap();
            }
            vgpu_migration::Item::End(_) => break,
            vgpu_migration::Item::Base { .. } | vgpu_migration::Item::BaseRef { .. } => {
                unreachable!("a whole checkpoint")
            }
        }
    }
    writer.finish().unwrap();
    let (ok, out) = backend.ctl(&["restore", bigger.to_str().unwrap()]);
    assert!(!ok && out.contains("work-group"), "{out}");
    steps(&mut raw, 2, 4);
    assert_eq!(read_a(&mut raw), reference(4));
}

#[test]
fn an_advertised_profile_is_what_guests_see_and_what_restores_are_checked_against() {
    let dir = std::env::temp_dir().join(format!("vgpu-profile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let own = dir.join("own.prof");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
        .arg("--write-profile")
        .arg(&own)
        .status()
        .unwrap();
    assert!(status.success());
    let mut small = vgpu_migration::Profile::from_bytes(&std::fs::read(&own).unwrap()).unwrap();
    small.max_work_group_size = 16;
    let small_path = dir.join("small.prof");
    std::fs::write(&small_path, small.to_bytes()).unwrap();

    // A full-profile vGPU cannot be restored where only the small one is offered.
    let full = Backend::start();
    let mut raw = full.raw();
    setup(&mut raw);
    steps(&mut raw, 0, 2);
    let file = dir.join("full.ckpt");
    assert_ctl_ok(&full, &["checkpoint", file.to_str().unwrap()]);
    let limited = Backend::start_with(&["--profile", small_path.to_str().unwrap()], &[]);
    let mut guest = limited.raw();
    guest.open_session(3);
    let reply = guest.batch(
        3,
        &[GetInfo {
            target: 2,
            handle: 0,
            index: 0,
            param: 0x1004,
        }
        .into()],
    );
    assert_eq!(
        reply.records[0].payload,
        16u64.to_le_bytes(),
        "the advertised work-group limit"
    );
    let (ok, out) = limited.ctl(&["restore", file.to_str().unwrap()]);
    assert!(!ok && out.contains("work-group"), "{out}");
    // The same refusal, asked before anything stops (a migration pre-check).
    let seen = dir.join("seen.prof");
    assert_ctl_ok(&full, &["profile", seen.to_str().unwrap()]);
    let (ok, out) = limited.ctl(&["accepts", seen.to_str().unwrap()]);
    assert!(!ok && out.contains("work-group"), "{out}");
    assert_ctl_ok(&full, &["accepts", small_path.to_str().unwrap()]);
    // A profile the device cannot honour is refused at start.
    let mut huge = small.clone();
    huge.max_work_group_size = 1 << 40;
    let huge_path = dir.join("huge.prof");
    std::fs::write(&huge_path, huge.to_bytes()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
        .args([
            "--socket",
            dir.join("never.sock").to_str().unwrap(),
            "--profile",
            huge_path.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot honour"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `CL_DEVICE_GLOBAL_MEM_SIZE` and `CL_DEVICE_MAX_MEM_ALLOC_SIZE` as
/// session `session` of `raw` sees them.
fn memory_seen(raw: &mut RawFrontend, session: u64) -> (u64, u64) {
    let query = |param| -> Request {
        GetInfo {
            target: 2,
            handle: 0,
            index: 0,
            param,
        }
        .into()
    };
    let reply = raw.batch(session, &[query(0x101F), query(0x1010)]);
    req::assert_all_ok(&reply);
    let value = |i: usize| u64::from_le_bytes(reply.records[i].payload[..8].try_into().unwrap());
    (value(0), value(1))
}

/// The vGPU's memory size is fixed when it starts and travels with it: a
/// restart onto a backend that would give new VMs another size restores
/// the guest with the size it saw, and new VMs there get their own.
#[test]
fn the_vgpu_memory_size_is_what_guests_see_and_travels_with_a_checkpoint() {
    let backend = Backend::start_with(&["--memory", "1G"], &[]);
    let mut raw = backend.raw();
    setup(&mut raw);
    assert_eq!(memory_seen(&mut raw, 1), (1 << 30, 1 << 30));
    steps(&mut raw, 0, 2);
    let file = std::env::temp_dir().join(format!("vgpu-memory-{}.ckpt", std::process::id()));
    assert_ctl_ok(
        &backend,
        &["checkpoint", file.to_str().unwrap(), "--then", "pause"],
    );
    let next_seq = raw.next_seq;
    drop(raw);
    drop(backend);
    let restarted = Backend::start_with(
        &["--memory", "512M", "--restore", file.to_str().unwrap()],
        &[],
    );
    let mut raw = restarted.raw();
    raw.next_seq = next_seq;
    assert_eq!(memory_seen(&mut raw, 1), (1 << 30, 1 << 30));
    steps(&mut raw, 2, 4);
    assert_eq!(read_a(&mut raw), reference(4));
    let mut other = restarted.raw();
    other.open_session(7);
    assert_eq!(memory_seen(&mut other, 7), (512 << 20, 512 << 20));
    let _ = std::fs::remove_file(&file);
}

/// Without `--max-memory`, a VM may allocate its vGPU memory size and no
/// more.
#[test]
fn the_vgpu_memory_size_is_the_default_memory_quota() {
    let backend = Backend::start_with(&["--memory", "64M"], &[]);
    let mut raw = backend.raw();
    raw.open_session(1);
    let buffer = |mem: u64, size: u64| -> Request { req::buffer(mem, 1, 1, size) };
    let context: Request = req::context(1);
    let reply = raw.batch(1, &[context, buffer(2, 48 << 20), buffer(3, 32 << 20)]);
    assert!(reply.records[1].status.is_success(), "{reply:?}");
    assert_eq!(
        reply.records[2].status,
        Status::OUT_OF_RESOURCES,
        "{reply:?}"
    );
}

#[test]
fn a_memory_size_beyond_the_device_is_refused_at_start() {
    let dir = std::env::temp_dir().join(format!("vgpu-memory-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
        .args(["--socket", dir.join("never.sock").to_str().unwrap()])
        .args(["--memory", "1000T"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--memory") && stderr.contains("exceeds"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Buffer `mem` of `flags` in context 1, created with `data` as its whole
/// initial contents (the only way to fill a buffer the host may not write).
fn create_filled(raw: &mut RawFrontend, mem: u64, flags: u64, data: &[u8]) {
    use vgpu_protocol::frame::BatchBuilder;
    use vgpu_transport::vring::DescSpec;
    let size = data.len() as u64;
    let mut builder = BatchBuilder::new(0);
    let create = CreateBuffer {
        mem,
        context: 1,
        flags,
        size,
        init: DataRef {
            offset: 0,
            len: size,
        },
    };
    builder.push(raw.next_seq, &create.into());
    raw.next_seq += 1;
    let request = builder.finish(1, 4096);
    let (req_at, data_at, reply_at) = (raw.scratch(0), raw.scratch(8 << 20), raw.scratch(1 << 20));
    raw.dev.write_guest(req_at, &request).unwrap();
    raw.dev.write_guest(data_at, data).unwrap();
    let chain = [
        DescSpec {
            addr: req_at,
            len: request.len() as u32,
            writable: false,
        },
        DescSpec {
            addr: data_at,
            len: size as u32,
            writable: false,
        },
        DescSpec {
            addr: reply_at,
            len: 4096,
            writable: true,
        },
    ];
    raw.send_chain(&chain);
    let mut reply = vec![0u8; 4096];
    raw.dev.read_guest(reply_at, &mut reply).unwrap();
    req::assert_all_ok(&vgpu_protocol::decode_reply(&reply).unwrap());
}

/// Found by `backend_chains` (`fuzz/regressions/backend_chains/`): a
/// checkpoint holding a buffer the guest created host-read-only was
/// refused on restore with `CL_INVALID_OPERATION`, so a guest could make
/// its own VM impossible to restore or migrate.
#[test]
fn buffers_the_host_may_not_read_or_write_survive_a_checkpoint_and_restore() {
    const HOST_WRITE_ONLY: u64 = 1 << 7;
    const HOST_READ_ONLY: u64 = 1 << 8;
    const HOST_NO_ACCESS: u64 = 1 << 9;
    const SIZE: usize = 4096;
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            req::buffer(20, 1, 1, SIZE as u64),
        ],
    );
    req::assert_all_ok(&reply);
    let buffers = [
        (10, HOST_READ_ONLY),
        (11, HOST_WRITE_ONLY),
        (12, HOST_NO_ACCESS),
    ];
    let contents = |mem: u64| -> Vec<u8> { (0..SIZE).map(|i| (i as u64 * mem) as u8).collect() };
    for (mem, host) in buffers {
        create_filled(&mut raw, mem, 1 | host, &contents(mem));
    }
    let file = backend.dir().join("host-flags.ckpt");
    assert_ctl_ok(&backend, &["checkpoint", file.to_str().unwrap()]);
    assert_ctl_ok(&backend, &["restore", file.to_str().unwrap()]);
    // Each buffer's contents, seen through a device-side copy (the guest
    // may not read some of them itself).
    for (mem, _) in buffers {
        let copy = EnqueueCopyBuffer {
            queue: 2,
            src: mem,
            dst: 20,
            src_offset: 0,
            dst_offset: 0,
            size: SIZE as u64,
            wait: vec![],
            event: 0,
        };
        let read = EnqueueReadBuffer {
            queue: 2,
            mem: 20,
            offset: 0,
            data: DataRef {
                offset: 0,
                len: SIZE as u64,
            },
            wait: vec![],
            event: 0,
        };
        let (reply, data) = raw.batch_with_in(1, &[copy.into(), read.into()], SIZE as u32);
        req::assert_all_ok(&reply);
        assert!(data == contents(mem), "buffer {mem} lost its contents");
    }
}

/// As above, for images: a checkpoint reads every image whole, a restore
/// writes it whole. Each is filled on the device (the guest may not write
/// some of them from the host) and read back through a copy to a buffer.
#[test]
fn images_the_host_may_not_read_or_write_survive_a_checkpoint_and_restore() {
    const HOST_WRITE_ONLY: u64 = 1 << 7;
    const HOST_READ_ONLY: u64 = 1 << 8;
    const HOST_NO_ACCESS: u64 = 1 << 9;
    const SIDE: u64 = 16;
    const BYTES: u64 = SIDE * SIDE * 4;
    let images = [
        (10, HOST_READ_ONLY),
        (11, HOST_WRITE_ONLY),
        (12, HOST_NO_ACCESS),
    ];
    // CL_UNSIGNED_INT8 images are filled from four 32-bit channels.
    let color = |mem: u64| -> [u8; 4] { [mem as u8, 2 * mem as u8, 3 * mem as u8, 255] };
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut requests: Vec<Request> = vec![
        req::context(1),
        req::queue(2, 1),
        req::buffer(20, 1, 1, BYTES),
    ];
    for (mem, host) in images {
        requests.push(
            CreateImage {
                mem,
                context: 1,
                flags: 1 | host,
                channel_order: 0x10B5, // CL_RGBA
                channel_type: 0x10DA,  // CL_UNSIGNED_INT8
                image_type: 0x10F1,    // CL_MEM_OBJECT_IMAGE2D
                dims: [SIDE, SIDE, 1],
                array_size: 0,
                buffer: 0,
            }
            .into(),
        );
        requests.push(
            EnqueueFillImage {
                queue: 2,
                mem,
                color: color(mem)
                    .iter()
                    .flat_map(|c| u32::from(*c).to_le_bytes())
                    .collect(),
                origin: [0; 3],
                region: [SIDE, SIDE, 1],
                wait: vec![],
                event: 0,
            }
            .into(),
        );
    }
    requests.push(Finish { queue: 2 }.into());
    req::assert_all_ok(&raw.batch(1, &requests));
    let file = backend.dir().join("image-host-flags.ckpt");
    assert_ctl_ok(&backend, &["checkpoint", file.to_str().unwrap()]);
    assert_ctl_ok(&backend, &["restore", file.to_str().unwrap()]);
    for (mem, _) in images {
        let copy = EnqueueCopyImageToBuffer {
            queue: 2,
            src: mem,
            dst: 20,
            src_origin: [0; 3],
            region: [SIDE, SIDE, 1],
            dst_offset: 0,
            wait: vec![],
            event: 0,
        };
        let read = EnqueueReadBuffer {
            queue: 2,
            mem: 20,
            offset: 0,
            data: DataRef {
                offset: 0,
                len: BYTES,
            },
            wait: vec![],
            event: 0,
        };
        let (reply, data) = raw.batch_with_in(1, &[copy.into(), read.into()], BYTES as u32);
        req::assert_all_ok(&reply);
        assert!(
            data.chunks(4).all(|pixel| pixel == color(mem)),
            "image {mem} lost its contents"
        );
    }
}

/// A checkpoint the previous build wrote (commit 371b4fb, before executors
/// owned their state: session state version 3, contents keyed by object
/// id) after `setup` and steps 0..5; its guest's next message was 24.
const PREVIOUS_FORMAT: &[u8] = include_bytes!("fixtures/previous-format.ckpt");
const PREVIOUS_NEXT_SEQ: u64 = 24;

/// `PREVIOUS_FORMAT` with this host's device profile in place of the one
/// it was taken with (PoCL's follows the host's CPU and memory); the
/// sessions and contents stay as the previous build wrote them.
fn previous_format_here(backend: &Backend) -> std::path::PathBuf {
    let own = backend.dir().join("own.prof");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_vgpu-backend"))
        .arg("--write-profile")
        .arg(&own)
        .status()
        .unwrap();
    assert!(status.success());
    let profile = vgpu_migration::Profile::from_bytes(&std::fs::read(&own).unwrap()).unwrap();
    let mut reader = vgpu_migration::StreamReader::new(PREVIOUS_FORMAT).unwrap();
    let path = backend.dir().join("previous.ckpt");
    let out = std::fs::File::create(&path).unwrap();
    let mut writer = vgpu_migration::StreamWriter::new(out).unwrap();
    while let Some(item) = reader.next_item().unwrap() {
        match item {
            vgpu_migration::Item::State(state) => {
                let vgpu_migration::VgpuState::V1(mut state) = *state;
                assert_eq!(
                    state
                        .sessions
                        .iter()
                        .map(|s| s.version())
                        .collect::<Vec<_>>(),
                    vec![3],
                    "the fixture is of the previous format"
                );
                state.profile = profile.clone();
                writer
                    .write_state(&vgpu_migration::VgpuState::V1(state))
                    .unwrap();
            }
            vgpu_migration::Item::BufferChunk {
                session,
                buffer,
                offset,
                data,
            } => writer
                .write_buffer_chunk(session, buffer, offset, data)
                .unwrap(),
            vgpu_migration::Item::End(_) => break,
            vgpu_migration::Item::Base { .. } | vgpu_migration::Item::BaseRef { .. } => {
                unreachable!("a whole checkpoint")
            }
        }
    }
    writer.finish().unwrap();
    path
}

#[test]
fn a_checkpoint_of_the_previous_format_restores_and_computes_on() {
    let scratch = Backend::start();
    let file = previous_format_here(&scratch);
    let copy = std::env::temp_dir().join(format!("vgpu-previous-{}.ckpt", std::process::id()));
    std::fs::copy(&file, &copy).unwrap();
    drop(scratch);
    let restarted = Backend::start_with(&["--restore", copy.to_str().unwrap()], &[]);
    let mut raw = restarted.raw();
    raw.next_seq = PREVIOUS_NEXT_SEQ;
    steps(&mut raw, 5, 10);
    assert_eq!(
        read_a(&mut raw),
        reference(10),
        "the restored run differs from an undisturbed one"
    );
    // Saved again, it is in the new format and restores the same way.
    let again = restarted.dir().join("again.ckpt");
    assert_ctl_ok(&restarted, &["checkpoint", again.to_str().unwrap()]);
    let mut reader =
        vgpu_migration::StreamReader::new(std::fs::File::open(&again).unwrap()).unwrap();
    let Some(vgpu_migration::Item::State(state)) = reader.next_item().unwrap() else {
        panic!("a state first");
    };
    let vgpu_migration::VgpuState::V1(state) = *state;
    assert_eq!(
        state.sessions[0].version(),
        vgpu_migration::SESSION_STATE_VERSION
    );
    let _ = std::fs::remove_file(&copy);
}

/// A buffer beyond the largest allocation the guest was told of is
/// refused as OpenCL says (`CL_INVALID_BUFFER_SIZE`), also where the
/// device and the quota would take it: the same answer on every host.
#[test]
fn a_buffer_beyond_the_advertised_largest_allocation_is_refused() {
    let backend = Backend::start_with(&["--memory", "256M", "--max-memory", "1G"], &[]);
    let mut raw = backend.raw();
    raw.open_session(1);
    let (_, largest) = memory_seen(&mut raw, 1);
    assert_eq!(largest, 256 << 20);
    let buffer = |mem: u64, size: u64| -> Request { req::buffer(mem, 1, 1, size) };
    let context: Request = req::context(1);
    let reply = raw.batch(
        1,
        &[context, buffer(2, largest + (64 << 20)), buffer(3, largest)],
    );
    assert_eq!(
        reply.records[1].status,
        Status::INVALID_BUFFER_SIZE,
        "{reply:?}"
    );
    assert!(reply.records[2].status.is_success(), "{reply:?}");
}
