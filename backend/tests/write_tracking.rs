//! Write tracking on the real device: each command that may write a
//! buffer stamps it, and nothing else does.

mod common;
use common::req;

use vgpu_backend::executor::written::advance;
use vgpu_backend::harness::InProcess;
use vgpu_protocol::frame::BatchBuilder;
use vgpu_protocol::messages::*;
use vgpu_protocol::{decode_reply, ArgKind, DataRef, Request};

const SIZE: u64 = 256;
const CL_MEM_READ_ONLY: u64 = 1 << 2;
const SOURCE: &[u8] = b"kernel void twice(global uint* a, global const uint* b) {
    size_t i = get_global_id(0);
    a[i] = b[i] * 2u;
}";

fn run(harness: &mut InProcess, requests: &[Request], out_data: &[u8]) {
    let mut builder = BatchBuilder::new(0);
    for (seq, request) in requests.iter().enumerate() {
        builder.push(seq as u64 + 1, request);
    }
    let request = builder.finish(1, 1 << 16);
    let (reply, _) = harness.run(&request, out_data, 0);
    let reply = decode_reply(&reply).unwrap();
    assert!(reply.status.is_success(), "{reply:?}");
    for r in &reply.records {
        assert!(
            r.status.is_success(),
            "record {} failed: {}",
            r.seq,
            r.status
        );
    }
}

fn buffer(mem: u64, flags: u64) -> Request {
    req::buffer(mem, 1, flags, SIZE)
}

fn mem_arg(index: u32, handle: u64) -> Request {
    SetKernelArg {
        kernel: 4,
        index,
        arg_kind: ArgKind::Mem as u32,
        size: 8,
        value: vec![],
        handle,
    }
    .into()
}

/// Which of the session's buffers were written since `epoch`, in creation
/// order (a, b, c: their marks' serial numbers grow).
fn written_since(harness: &mut InProcess, epoch: u64) -> Vec<bool> {
    let mut sources = harness.live_buffers();
    sources.sort_by_key(|s| s.object());
    sources.iter().map(|s| s.written_at() >= epoch).collect()
}

#[test]
fn each_writing_command_marks_only_what_it_may_write() {
    let Some(mut harness) = InProcess::opencl() else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    run(
        &mut harness,
        &[
            req::context(1),
            req::queue(2, 1),
            req::program(3, 1, SOURCE),
            req::build(3),
            req::kernel(4, 3, b"twice"),
            buffer(5, 1),
            buffer(6, CL_MEM_READ_ONLY),
            buffer(7, 1),
            mem_arg(0, 5),
            mem_arg(1, 6),
        ],
        &[],
    );
    let listed = harness.live_buffers();
    assert_eq!(listed.len(), 3);
    assert!(listed
        .iter()
        .all(|s| s.object().is_some() && s.size() == SIZE));

    let copied = advance();
    assert_eq!(written_since(&mut harness, copied), [false, false, false]);

    let launch = EnqueueNdRange {
        queue: 2,
        kernel: 4,
        work_dim: 1,
        offset: [0; 3],
        global: [SIZE / 4, 1, 1],
        local: [0; 3],
        wait: vec![],
        event: 0,
    };
    run(
        &mut harness,
        &[launch.into(), Finish { queue: 2 }.into()],
        &[],
    );
    assert_eq!(
        written_since(&mut harness, copied),
        [true, false, false],
        "a kernel writes its writable argument only"
    );

    let copied = advance();
    let write = EnqueueWriteBuffer {
        queue: 2,
        mem: 7,
        offset: 0,
        data: DataRef { offset: 0, len: 16 },
        wait: vec![],
        event: 0,
    };
    run(&mut harness, &[write.into()], &[1u8; 16]);
    assert_eq!(written_since(&mut harness, copied), [false, false, true]);

    let copied = advance();
    let fill = EnqueueFillBuffer {
        queue: 2,
        mem: 6,
        pattern: vec![9, 9, 9, 9],
        offset: 0,
        size: SIZE,
        wait: vec![],
        event: 0,
    };
    let copy = EnqueueCopyBuffer {
        queue: 2,
        src: 6,
        dst: 5,
        src_offset: 0,
        dst_offset: 0,
        size: SIZE,
        wait: vec![],
        event: 0,
    };
    run(
        &mut harness,
        &[fill.into(), copy.into(), Finish { queue: 2 }.into()],
        &[],
    );
    assert_eq!(
        written_since(&mut harness, copied),
        [true, true, false],
        "a fill writes its buffer, a copy its destination"
    );
}
