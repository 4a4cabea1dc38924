//! Hostile input from a guest, each case on its own: the daemon answers
//! with an error status or drops the chain, keeps serving, and other
//! sessions keep their objects.

mod common;

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::frame::{BatchBuilder, BATCH_HEADER_LEN};
use vgpu_protocol::messages::*;
use vgpu_protocol::{DataRef, ObjectKind, Request, Status, Wire};
use vgpu_transport::vring::{DescSpec, Descriptor};

const VRING_DESC_F_NEXT: u16 = 1;
const VRING_DESC_F_WRITE: u16 = 2;

/// A session on its own connection that owns a buffer; checks it survives.
struct Bystander {
    raw: RawFrontend,
}

impl Bystander {
    fn new(backend: &Backend) -> Bystander {
        let mut raw = backend.raw();
        raw.open_session(7);
        let reply = raw.batch(7, &[req::context(1), req::buffer(5, 1, 1, 256)]);
        assert!(
            reply.records.iter().all(|r| r.status.is_success()),
            "{reply:?}"
        );
        Bystander { raw }
    }

    fn assert_intact(&mut self) {
        let reply = self.raw.batch(7, &[SessionStats {}.into()]);
        let counts = SessionStatsReply::from_bytes(&reply.records[0].payload)
            .unwrap()
            .counts;
        assert_eq!(
            counts[ObjectKind::Mem.index()],
            1,
            "bystander lost its buffer"
        );
        assert_eq!(
            counts[ObjectKind::Context.index()],
            1,
            "bystander lost its context"
        );
    }
}

fn one_status(raw: &mut RawFrontend, session: u64, request: Request) -> Status {
    let reply = raw.batch(session, &[request]);
    assert!(reply.status.is_success(), "{reply:?}");
    reply.records[0].status
}

#[test]
fn truncated_header_drops_the_chain() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    let bytes = BatchBuilder::new(0).finish(1, 64);
    let (used, _) = raw.send_bytes(&bytes[..BATCH_HEADER_LEN - 5], 64);
    assert_eq!(used, 0, "a chain without a full header is returned unused");
    raw.open_session(1);
    bystander.assert_intact();
    assert!(backend.is_running());
}

#[test]
fn unknown_opcode_gets_invalid_operation_and_the_batch_goes_on() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut builder = BatchBuilder::new(0);
    builder.push(1, &Ping {}.into());
    builder.push(2, &Ping {}.into());
    let mut bytes = builder.finish(1, 4096);
    bytes[BATCH_HEADER_LEN..BATCH_HEADER_LEN + 4].copy_from_slice(&0x1fffu32.to_le_bytes());
    let (_, reply) = raw.send_bytes(&bytes, 4096);
    let reply = vgpu_protocol::decode_reply(&reply).unwrap();
    assert_eq!(reply.records[0].status, Status::INVALID_OPERATION);
    assert_eq!(reply.records[1].status, Status::SUCCESS);
}

#[test]
fn payload_length_beyond_the_chain_refuses_the_batch() {
    let backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut builder = BatchBuilder::new(0);
    builder.push(1, &Ping {}.into());
    let mut bytes = builder.finish(1, 4096);
    let at = BATCH_HEADER_LEN + 16;
    bytes[at..at + 4].copy_from_slice(&(1u32 << 30).to_le_bytes());
    let (_, reply) = raw.send_bytes(&bytes, 4096);
    let reply = vgpu_protocol::decode_reply(&reply).unwrap();
    assert_eq!(reply.status, Status::INVALID_VALUE);
    // request_len larger than the readable descriptors.
    let mut bytes = BatchBuilder::new(0).finish(1, 4096);
    bytes[20..24].copy_from_slice(&(1u32 << 20).to_le_bytes());
    let (_, reply) = raw.send_bytes(&bytes, 4096);
    assert_eq!(
        vgpu_protocol::decode_reply(&reply).unwrap().status,
        Status::INVALID_VALUE
    );
    // Bulk data beyond the out-data stream.
    let status = one_status(&mut raw, 1, req::context(1));
    assert_eq!(status, Status::SUCCESS);
    let status = one_status(
        &mut raw,
        1,
        CreateBuffer {
            mem: 2,
            context: 1,
            flags: 1,
            size: 4096,
            init: DataRef {
                offset: 0,
                len: 4096,
            },
        }
        .into(),
    );
    assert_eq!(status, Status::INVALID_VALUE);
    bystander.assert_intact();
}

#[test]
fn handles_of_other_sessions_and_vms_are_unknown() {
    let backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    // Same VM (same connection), another session.
    let mut raw = backend.raw();
    raw.open_session(1);
    raw.open_session(2);
    let reply = raw.batch(
        1,
        &[req::context(1), req::buffer(5, 1, 1, 64), req::queue(3, 1)],
    );
    assert!(reply.records.iter().all(|r| r.status.is_success()));
    assert_eq!(
        one_status(
            &mut raw,
            2,
            Release {
                kind: ObjectKind::Mem as u32,
                handle: 5
            }
            .into()
        ),
        Status::INVALID_MEM_OBJECT
    );
    assert_eq!(
        one_status(&mut raw, 2, Finish { queue: 3 }.into()),
        Status::INVALID_COMMAND_QUEUE
    );
    // Another VM's handle (the bystander's buffer 5 and context 1).
    let fill = EnqueueFillBuffer {
        queue: 3,
        mem: 5,
        pattern: vec![0xff],
        offset: 0,
        size: 64,
        wait: vec![],
        event: 0,
    };
    assert_eq!(
        one_status(&mut raw, 1, fill.into()),
        Status::SUCCESS,
        "own buffer 5 is fine"
    );
    let mut other_vm = backend.raw();
    other_vm.open_session(7);
    assert_eq!(
        one_status(
            &mut other_vm,
            7,
            Release {
                kind: ObjectKind::Mem as u32,
                handle: 99
            }
            .into()
        ),
        Status::INVALID_MEM_OBJECT
    );
    // A batch for a session that was never opened.
    let reply = raw.batch(3, &[Ping {}.into()]);
    assert_eq!(reply.status, Status::INVALID_OPERATION);
    bystander.assert_intact();
}

#[test]
fn descriptor_outside_guest_memory_drops_the_chain() {
    let backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let reply_at = raw.scratch(0);
    for addr in [0u64, 0x10, u64::MAX - 16, raw.dev.guest_memory().end - 8] {
        let chain = [
            DescSpec {
                addr,
                len: 64,
                writable: false,
            },
            DescSpec {
                addr: reply_at,
                len: 64,
                writable: true,
            },
        ];
        assert_eq!(
            raw.send_chain(&chain),
            0,
            "chain at {addr:#x} must come back unused"
        );
    }
    raw.open_session(2);
    bystander.assert_intact();
}

#[test]
fn reply_descriptor_that_is_not_writable_drops_the_chain() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut builder = BatchBuilder::new(0);
    builder.push(1, &Ping {}.into());
    let bytes = builder.finish(1, 64);
    let (req_at, reply_at) = (raw.scratch(0), raw.scratch(4096));
    raw.dev.write_guest(req_at, &bytes).unwrap();
    let chain = [
        DescSpec {
            addr: req_at,
            len: bytes.len() as u32,
            writable: false,
        },
        DescSpec {
            addr: reply_at,
            len: 64,
            writable: false,
        },
    ];
    assert_eq!(raw.send_chain(&chain), 0);
    // A readable descriptor after a writable one is refused too.
    let chain = [
        DescSpec {
            addr: req_at,
            len: bytes.len() as u32,
            writable: false,
        },
        DescSpec {
            addr: reply_at,
            len: 64,
            writable: true,
        },
        DescSpec {
            addr: reply_at + 64,
            len: 64,
            writable: false,
        },
    ];
    assert_eq!(raw.send_chain(&chain), 0);
    raw.open_session(2);
}

#[test]
fn looping_descriptor_chain_is_dropped() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut builder = BatchBuilder::new(0);
    builder.push(1, &Ping {}.into());
    let bytes = builder.finish(1, 64);
    let (req_at, reply_at) = (raw.scratch(0), raw.scratch(4096));
    raw.dev.write_guest(req_at, &bytes).unwrap();
    let ring = raw.dev.submit_ring();
    let ids = ring.alloc_descriptors(2).unwrap();
    let (a, b) = (ids[0], ids[1]);
    ring.write_descriptor(
        a,
        Descriptor {
            addr: req_at,
            len: bytes.len() as u32,
            flags: VRING_DESC_F_NEXT,
            next: b,
        },
    )
    .unwrap();
    ring.write_descriptor(
        b,
        Descriptor {
            addr: reply_at,
            len: 64,
            flags: VRING_DESC_F_NEXT | VRING_DESC_F_WRITE,
            next: a,
        },
    )
    .unwrap();
    ring.publish(a);
    raw.dev.kick().unwrap();
    let used = raw
        .dev
        .wait_used(Some(common::TIMEOUT))
        .unwrap()
        .expect("looping chain came back");
    assert_eq!(used.len, 0);
    raw.open_session(2);
    bystander.assert_intact();
    assert!(backend.is_running());
}

#[test]
fn garbage_batches_never_stop_the_daemon() {
    let mut backend = Backend::start();
    let mut bystander = Bystander::new(&backend);
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut builder = BatchBuilder::new(0);
    builder.push(1, &req::context(1));
    builder.push(2, &req::buffer(2, 1, 1, 64));
    builder.push(
        3,
        &SetKernelArg {
            kernel: 9,
            index: 0,
            arg_kind: 2,
            size: 8,
            value: vec![],
            handle: 2,
        }
        .into(),
    );
    let valid = builder.finish(1, 4096);
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..300 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut bytes = valid.clone();
        let at = BATCH_HEADER_LEN + (state as usize) % (bytes.len() - BATCH_HEADER_LEN);
        bytes[at] ^= (state >> 24) as u8 | 1;
        raw.send_bytes(&bytes, 4096);
    }
    assert!(backend.is_running());
    bystander.assert_intact();
}

#[test]
fn guest_bytes_are_never_taken_for_a_buffer_argument() {
    let mut backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);
    let source = b"kernel void k(global int* p, int v, local int* s) { p[0] = v; }".to_vec();
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            req::program(2, 1, &source),
            req::build(2),
            req::kernel(3, 2, b"k"),
            req::buffer(4, 1, 1, 64),
        ],
    );
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    let arg = |index: u32,
               arg_kind: vgpu_protocol::ArgKind,
               size: u64,
               value: Vec<u8>,
               handle: u64|
     -> Request {
        SetKernelArg {
            kernel: 3,
            index,
            arg_kind: arg_kind as u32,
            size,
            value,
            handle,
        }
        .into()
    };
    use vgpu_protocol::ArgKind::*;
    // A forged "cl_mem" for a pointer argument: the device would read it as a host pointer.
    assert_eq!(
        one_status(
            &mut raw,
            1,
            arg(0, Value, 8, 0xdead_beef_u64.to_le_bytes().to_vec(), 0)
        ),
        Status::INVALID_MEM_OBJECT
    );
    // A buffer for a value argument would hand the kernel a host address.
    assert_eq!(
        one_status(&mut raw, 1, arg(1, Mem, 8, vec![], 4)),
        Status::INVALID_ARG_VALUE
    );
    assert_eq!(
        one_status(&mut raw, 1, arg(2, Value, 4, vec![1; 4], 0)),
        Status::INVALID_ARG_VALUE
    );
    // The legitimate forms work.
    assert_eq!(
        one_status(&mut raw, 1, arg(0, Mem, 8, vec![], 4)),
        Status::SUCCESS
    );
    assert_eq!(
        one_status(&mut raw, 1, arg(0, Value, 8, vec![0; 8], 0)),
        Status::SUCCESS,
        "zero bytes mean NULL"
    );
    assert_eq!(
        one_status(&mut raw, 1, arg(1, Value, 4, vec![1; 4], 0)),
        Status::SUCCESS
    );
    assert_eq!(
        one_status(&mut raw, 1, arg(2, Local, 64, vec![], 0)),
        Status::SUCCESS
    );
    assert!(backend.is_running());
}

#[test]
fn per_vm_quotas_refuse_with_out_of_resources_and_free_on_release() {
    let backend = Backend::start_with(
        &[
            "--max-memory",
            "1M",
            "--max-objects",
            "4",
            "--max-batch",
            "8",
        ],
        &[],
    );
    let mut raw = backend.raw();
    raw.open_session(1);
    let mut other_vm = backend.raw();
    other_vm.open_session(1);
    let buffer = |mem: u64, size: u64| -> Request { req::buffer(mem, 1, 1, size) };
    assert_eq!(one_status(&mut raw, 1, req::context(1)), Status::SUCCESS);
    assert_eq!(
        one_status(&mut raw, 1, buffer(2, 2 << 20)),
        Status::OUT_OF_RESOURCES,
        "over the memory quota"
    );
    assert_eq!(
        one_status(&mut raw, 1, buffer(2, 600 << 10)),
        Status::SUCCESS
    );
    assert_eq!(
        one_status(&mut raw, 1, buffer(3, 600 << 10)),
        Status::OUT_OF_RESOURCES
    );
    assert_eq!(
        one_status(
            &mut raw,
            1,
            Release {
                kind: ObjectKind::Mem as u32,
                handle: 2
            }
            .into()
        ),
        Status::SUCCESS
    );
    assert_eq!(
        one_status(&mut raw, 1, buffer(3, 600 << 10)),
        Status::SUCCESS,
        "memory came back on release"
    );
    // Objects: context and buffer 3 held; two more fit, the fifth does not.
    assert_eq!(
        one_status(
            &mut raw,
            1,
            CreateUserEvent {
                event: 4,
                context: 1
            }
            .into()
        ),
        Status::SUCCESS
    );
    assert_eq!(
        one_status(
            &mut raw,
            1,
            CreateUserEvent {
                event: 5,
                context: 1
            }
            .into()
        ),
        Status::SUCCESS
    );
    assert_eq!(
        one_status(
            &mut raw,
            1,
            CreateUserEvent {
                event: 6,
                context: 1
            }
            .into()
        ),
        Status::OUT_OF_RESOURCES
    );
    // Quotas are per VM: another front-end has its own.
    assert_eq!(
        one_status(&mut other_vm, 1, req::context(1)),
        Status::SUCCESS
    );
    assert_eq!(
        one_status(&mut other_vm, 1, buffer(2, 900 << 10)),
        Status::SUCCESS
    );
    // A batch over the message limit is refused whole.
    let pings: Vec<Request> = (0..9).map(|_| Ping {}.into()).collect();
    assert_eq!(raw.batch(1, &pings).status, Status::OUT_OF_RESOURCES);
    assert_eq!(raw.batch(1, &pings[..8]).status, Status::SUCCESS);
}

#[test]
fn released_handles_are_unknown_and_racing_releases_free_once() {
    let backend = Backend::start();
    let client = std::sync::Arc::new(backend.client());
    let context = client.new_handle();
    client.call(req::context(context)).unwrap();
    let mems: Vec<u64> = (0..64).map(|_| client.new_handle()).collect();
    for &mem in &mems {
        client.call(req::buffer(mem, context, 1, 64)).unwrap();
    }
    // Two guest threads release every buffer at the same time: each release
    // succeeds exactly once, the loser gets CL_INVALID_MEM_OBJECT.
    let racers: Vec<_> = (0..2)
        .map(|_| {
            let (client, mems) = (client.clone(), mems.clone());
            std::thread::spawn(move || {
                mems.iter()
                    .map(|&handle| {
                        client.call(
                            Release {
                                kind: ObjectKind::Mem as u32,
                                handle,
                            }
                            .into(),
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let results: Vec<Vec<_>> = racers.into_iter().map(|t| t.join().unwrap()).collect();
    for (i, (a, b)) in results[0].iter().zip(&results[1]).enumerate() {
        let outcomes = [a, b];
        assert_eq!(
            outcomes.iter().filter(|r| r.is_ok()).count(),
            1,
            "buffer {i}: {outcomes:?}"
        );
        assert!(outcomes.contains(&&Err(Status::INVALID_MEM_OBJECT)));
    }
    // Use after release.
    let fill = EnqueueFillBuffer {
        queue: 0,
        mem: mems[0],
        pattern: vec![1],
        offset: 0,
        size: 64,
        wait: vec![],
        event: 0,
    };
    assert!(client.call(fill.into()).is_err());
    let info = GetInfo {
        target: vgpu_protocol::InfoTarget::Mem as u32,
        handle: mems[0],
        index: 0,
        param: 0x1102,
    };
    assert_eq!(client.call(info.into()), Err(Status::INVALID_MEM_OBJECT));
    let counts = SessionStatsReply::from_bytes(&client.call(SessionStats {}.into()).unwrap())
        .unwrap()
        .counts;
    assert_eq!(counts[ObjectKind::Mem.index()], 0);
}

#[test]
fn the_daemon_runs_confined() {
    let backend = Backend::start();
    let pid = backend.pid();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net")).unwrap();
    if unsafe_is_root() {
        assert_ne!(ours, theirs, "the daemon left the host's network");
    }
    // Confined, it still computes.
    let mut raw = backend.raw();
    raw.open_session(1);
    assert_eq!(one_status(&mut raw, 1, req::context(1)), Status::SUCCESS);
    // The front-end's own worker process is confined the same way.
    let status = backend.status();
    let worker = status["vms"][0]["worker_pid"].as_u64().expect("worker_pid");
    assert_ne!(worker, pid as u64, "served by the supervisor itself");
    let worker_status = std::fs::read_to_string(format!("/proc/{worker}/status")).unwrap();
    assert!(worker_status.contains("NoNewPrivs:\t1"), "{worker_status}");
    assert!(worker_status.contains("Seccomp:\t2"), "{worker_status}");
    // Its file system is the driver's files alone where the kernel has
    // Landlock (this host's has: sandbox_probe.rs shows what it refuses).
    let file_system = status["vms"][0]["file_system"]
        .as_str()
        .expect("file_system");
    if kernel_has_landlock() {
        assert!(file_system.starts_with("landlock ABI "), "{file_system}");
    } else {
        assert!(file_system.contains("no Landlock"), "{file_system}");
    }
    let its_net = std::fs::read_link(format!("/proc/{worker}/ns/net")).unwrap();
    if unsafe_is_root() {
        assert_ne!(ours, its_net, "the worker left the host's network");
        // Started as root, the worker runs as an unprivileged user.
        let uid_line = worker_status
            .lines()
            .find(|l| l.starts_with("Uid:"))
            .expect("Uid line");
        assert!(
            uid_line.split_whitespace().skip(1).all(|id| id != "0"),
            "the worker kept root: {uid_line}"
        );
    }
}

fn kernel_has_landlock() -> bool {
    // SAFETY: with the VERSION flag (1) the kernel reads no attribute.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    abi > 0
}

fn unsafe_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
