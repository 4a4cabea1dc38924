//! Coarse-grained SVM from a hostile guest: every SVM pointer and range is
//! looked up in the session's own allocations and refused outside them (a
//! pointer into backend memory, a range straddling an allocation's end), and
//! a session holding SVM refuses checkpoints and re-homes, naming SVM.

mod common;

use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, Request, Status};

const SOURCE: &[u8] = b"kernel void k(global int* p) { p[0] = 41 + get_global_id(0) + 1; }";
const SIZE: u64 = 100;

/// Context 1, queue 2, program 3, kernel 4 and one SVM allocation of
/// `SIZE` bytes, whose address it returns.
fn setup(raw: &mut RawFrontend) -> u64 {
    raw.open_session(1);
    let setup: Vec<Request> = vec![
        req::context(1),
        req::queue(2, 1),
        req::program(3, 1, SOURCE),
        BuildProgram {
            program: 3,
            options: b"-cl-std=CL2.0".to_vec(),
        }
        .into(),
        req::kernel(4, 3, b"k"),
        SvmAlloc {
            context: 1,
            flags: 1,
            size: SIZE,
            alignment: 0,
        }
        .into(),
    ];
    let reply = raw.batch(1, &setup);
    req::assert_all_ok(&reply);
    let payload = &reply.records.last().unwrap().payload;
    let addr = u64::from_le_bytes(payload[..8].try_into().unwrap());
    assert_ne!(addr, 0);
    assert_eq!(addr % 4096, 0, "allocations are page-aligned");
    addr
}

fn svm_arg(value: u64) -> Request {
    SetKernelArg {
        kernel: 4,
        index: 0,
        arg_kind: ArgKind::Svm as u32,
        size: 8,
        value: value.to_le_bytes().to_vec(),
        handle: 0,
    }
    .into()
}

fn fill(ptr: u64, size: u64) -> Request {
    EnqueueSvmFill {
        queue: 2,
        ptr,
        pattern: vec![0; 4],
        size,
        wait: vec![],
        event: 0,
    }
    .into()
}

fn read(ptr: u64, len: u64) -> Request {
    EnqueueSvmRead {
        queue: 2,
        ptr,
        data: DataRef { offset: 0, len },
        wait: vec![],
        event: 0,
    }
    .into()
}

#[test]
fn hostile_svm_messages_are_refused_and_the_session_goes_on() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    let a = setup(&mut raw);
    // Somewhere in the backend's own memory: the stack of this test is not
    // the backend's, but any address outside the allocation stands for it.
    let elsewhere = a + 64 * 4096;
    let copy = |dst: u64, src: u64, size: u64| -> Request {
        EnqueueSvmCopy {
            queue: 2,
            dst,
            src,
            size,
            wait: vec![],
            event: 0,
        }
        .into()
    };
    let cases: Vec<(&str, Request, Status)> = vec![
        (
            "pointer argument outside any allocation",
            svm_arg(elsewhere),
            Status::INVALID_ARG_VALUE,
        ),
        (
            "pointer argument one past the end",
            svm_arg(a + SIZE),
            Status::INVALID_ARG_VALUE,
        ),
        (
            "pointer argument just below the start",
            svm_arg(a - 1),
            Status::INVALID_ARG_VALUE,
        ),
        (
            "pointer argument of the wrong size",
            SetKernelArg {
                kernel: 4,
                index: 0,
                arg_kind: ArgKind::Svm as u32,
                size: 4,
                value: vec![0; 4],
                handle: 0,
            }
            .into(),
            Status::INVALID_ARG_VALUE,
        ),
        (
            "fill straddling the end",
            fill(a + 96, 8),
            Status::INVALID_VALUE,
        ),
        ("fill outside", fill(elsewhere, 8), Status::INVALID_VALUE),
        (
            "fill whose size overflows",
            fill(a, u64::MAX - 3),
            Status::INVALID_VALUE,
        ),
        (
            "copy from outside",
            copy(a, elsewhere, 8),
            Status::INVALID_VALUE,
        ),
        (
            "copy to outside",
            copy(elsewhere, a, 8),
            Status::INVALID_VALUE,
        ),
        (
            "copy straddling the end",
            copy(a, a + 64, 40),
            Status::INVALID_VALUE,
        ),
        (
            "overlapping copy",
            copy(a, a + 8, 16),
            Status::MEM_COPY_OVERLAP,
        ),
        (
            "read straddling the end",
            read(a + 90, 16),
            Status::INVALID_VALUE,
        ),
        ("read outside", read(elsewhere, 16), Status::INVALID_VALUE),
        (
            "write straddling the end",
            EnqueueSvmWrite {
                queue: 2,
                ptr: a + 99,
                data: DataRef { offset: 0, len: 2 },
                wait: vec![],
                event: 0,
            }
            .into(),
            Status::INVALID_VALUE,
        ),
        (
            "exec-info pointer outside",
            SetKernelExecSvm {
                kernel: 4,
                ptrs: vec![a, elsewhere],
            }
            .into(),
            Status::INVALID_VALUE,
        ),
        (
            "buffer over more than the allocation",
            CreateSvmBuffer {
                mem: 20,
                context: 1,
                flags: 1,
                ptr: a + 4,
                size: SIZE,
            }
            .into(),
            Status::INVALID_HOST_PTR,
        ),
        (
            "buffer outside",
            CreateSvmBuffer {
                mem: 21,
                context: 1,
                flags: 1,
                ptr: elsewhere,
                size: 8,
            }
            .into(),
            Status::INVALID_HOST_PTR,
        ),
        (
            "fine-grained allocation",
            SvmAlloc {
                context: 1,
                flags: 1 | (1 << 10),
                size: 64,
                alignment: 0,
            }
            .into(),
            Status::INVALID_VALUE,
        ),
        (
            "free of an inner address",
            SvmFree {
                context: 1,
                ptr: a + 4,
            }
            .into(),
            Status::INVALID_VALUE,
        ),
    ];
    for (what, request, want) in cases {
        let (reply, _) = raw.batch_with_in(1, &[request], 4096);
        assert_eq!(reply.records[0].status, want, "{what}");
    }

    // The session still works: zero, a buffer over the allocation, a
    // kernel writing through an inner pointer, reads both ways.
    let good = vec![
        fill(a, SIZE),
        CreateSvmBuffer {
            mem: 22,
            context: 1,
            flags: 1,
            ptr: a,
            size: SIZE,
        }
        .into(),
        svm_arg(a + 4),
        SetKernelExecSvm {
            kernel: 4,
            ptrs: vec![a],
        }
        .into(),
        EnqueueNdRange {
            queue: 2,
            kernel: 4,
            work_dim: 1,
            offset: [0; 3],
            global: [1, 1, 1],
            local: [0; 3],
            wait: vec![],
            event: 0,
        }
        .into(),
        read(a, 8),
        EnqueueReadBuffer {
            queue: 2,
            mem: 22,
            offset: 4,
            data: DataRef { offset: 8, len: 4 },
            wait: vec![],
            event: 0,
        }
        .into(),
        Finish { queue: 2 }.into(),
    ];
    let (reply, data) = raw.batch_with_in(1, &good, 4096);
    req::assert_all_ok(&reply);
    assert_eq!(&data[..12], &[0, 0, 0, 0, 42, 0, 0, 0, 42, 0, 0, 0]);

    // The allocation outlives its free while a buffer uses it.
    let reply = raw.batch(1, &[SvmFree { context: 1, ptr: a }.into()]);
    req::assert_all_ok(&reply);
    let (reply, data) = raw.batch_with_in(
        1,
        &[
            EnqueueReadBuffer {
                queue: 2,
                mem: 22,
                offset: 4,
                data: DataRef { offset: 0, len: 4 },
                wait: vec![],
                event: 0,
            }
            .into(),
            read(a, 4),
        ],
        4096,
    );
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    assert_eq!(&data[..4], &[42, 0, 0, 0]);
    assert_eq!(reply.records[1].status, Status::INVALID_VALUE, "freed");
}

#[test]
fn a_session_holding_svm_refuses_checkpoints_and_rehomes() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    let a = setup(&mut raw);
    let file = std::env::temp_dir().join(format!("vgpu-svm-{}.ckpt", std::process::id()));
    let (ok, out) = backend.ctl(&["checkpoint", file.to_str().unwrap()]);
    assert!(!ok, "checkpoint with SVM succeeded: {out}");
    assert!(out.contains("SVM"), "the error names SVM: {out}");
    let (ok, out) = backend.ctl(&["rehome", "--device", "opencl:pthread"]);
    assert!(!ok, "re-home with SVM succeeded: {out}");
    assert!(out.contains("SVM"), "the error names SVM: {out}");
    // The session is intact and, once its SVM is freed, checkpoints.
    let (reply, data) = raw.batch_with_in(1, &[fill(a, 8), read(a, 8)], 4096);
    req::assert_all_ok(&reply);
    assert_eq!(&data[..8], &[0; 8]);
    // A kernel argument still naming freed SVM holds it too.
    req::assert_all_ok(&raw.batch(1, &[svm_arg(a + 8), SvmFree { context: 1, ptr: a }.into()]));
    let (ok, out) = backend.ctl(&["checkpoint", file.to_str().unwrap()]);
    assert!(!ok && out.contains("SVM"), "argument on freed SVM: {out}");
    let null_arg = SetKernelArg {
        kernel: 4,
        index: 0,
        arg_kind: ArgKind::NullMem as u32,
        size: 8,
        value: vec![],
        handle: 0,
    };
    req::assert_all_ok(&raw.batch(1, &[null_arg.into()]));
    let (ok, out) = backend.ctl(&["checkpoint", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(&file);
    assert!(ok, "checkpoint without SVM failed: {out}");
}

#[test]
fn a_free_while_a_user_event_holds_the_queue_does_not_block_the_session() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    let a = setup(&mut raw);
    let held = vec![
        CreateUserEvent {
            event: 30,
            context: 1,
        }
        .into(),
        EnqueueMarker {
            queue: 2,
            wait: vec![30],
            event: 0,
        }
        .into(),
        Flush { queue: 2 }.into(),
        SvmFree { context: 1, ptr: a }.into(),
        Ping {}.into(),
    ];
    // Were the free to wait for the user event (never set), this batch
    // would get no answer and `batch` would fail on its timeout.
    req::assert_all_ok(&raw.batch(1, &held));
    // Freed for the guest at once; the memory goes once the queue can finish.
    let (reply, _) = raw.batch_with_in(1, &[read(a, 4)], 4096);
    assert_eq!(reply.records[0].status, Status::INVALID_VALUE);
    let done = vec![
        SetUserEventStatus {
            event: 30,
            status: 0,
        }
        .into(),
        Finish { queue: 2 }.into(),
    ];
    req::assert_all_ok(&raw.batch(1, &done));
}
