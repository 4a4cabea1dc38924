//! Seed inputs: valid batches as the guest library sends them (a whole
//! program's life: create, build, launch, transfer, release, reuse), and
//! choice streams for the structured mode of `backend_dispatch`.

use vgpu_protocol::frame::ReplyBuilder;
use vgpu_protocol::messages::*;
use vgpu_protocol::{ArgKind, DataRef, ObjectKind, Request, Status};

use crate::dispatch::{encode, raw_input, MODE_STRUCTURED, SOURCES};

fn context_and_queue() -> Vec<Request> {
    vec![
        OpenSession {
            min_version: 1,
            max_version: 1,
            flags: 0,
        }
        .into(),
        CreateContext {
            context: 1,
            properties: vec![0x1084, 0x1234, 0],
        }
        .into(),
        CreateQueue {
            queue: 2,
            context: 1,
            properties: vec![],
        }
        .into(),
    ]
}

fn buffer(mem: u64, size: u64, init: DataRef) -> Request {
    CreateBuffer {
        mem,
        context: 1,
        flags: 1,
        size,
        init,
    }
    .into()
}

/// Transfers: write, read, copy, fill, sub-buffers, rects.
fn transfers() -> Vec<Vec<Request>> {
    let mut first = context_and_queue();
    first.extend([
        buffer(
            3,
            256,
            DataRef {
                offset: 0,
                len: 256,
            },
        ),
        buffer(4, 256, DataRef::NONE),
        EnqueueWriteBuffer {
            queue: 2,
            mem: 4,
            offset: 16,
            data: DataRef {
                offset: 100,
                len: 64,
            },
            wait: vec![],
            event: 5,
        }
        .into(),
        EnqueueCopyBuffer {
            queue: 2,
            src: 3,
            dst: 4,
            src_offset: 0,
            dst_offset: 128,
            size: 64,
            wait: vec![5],
            event: 0,
        }
        .into(),
        EnqueueFillBuffer {
            queue: 2,
            mem: 3,
            pattern: vec![1, 2, 3, 4],
            offset: 64,
            size: 64,
            wait: vec![],
            event: 0,
        }
        .into(),
        CreateSubBuffer {
            mem: 6,
            parent: 3,
            flags: 1,
            origin: 0,
            size: 64,
        }
        .into(),
    ]);
    let second = vec![
        EnqueueReadBuffer {
            queue: 2,
            mem: 6,
            offset: 0,
            data: DataRef { offset: 0, len: 64 },
            wait: vec![],
            event: 0,
        }
        .into(),
        EnqueueWriteBufferRect {
            queue: 2,
            mem: 4,
            buffer_origin: [0, 1, 0],
            host_origin: [0, 0, 0],
            region: [8, 4, 1],
            buffer_row_pitch: 16,
            buffer_slice_pitch: 0,
            host_row_pitch: 8,
            host_slice_pitch: 0,
            data: DataRef { offset: 0, len: 32 },
            wait: vec![],
            event: 0,
        }
        .into(),
        EnqueueReadBufferRect {
            queue: 2,
            mem: 4,
            buffer_origin: [4, 0, 0],
            host_origin: [0, 0, 0],
            region: [4, 4, 2],
            buffer_row_pitch: 16,
            buffer_slice_pitch: 64,
            host_row_pitch: 0,
            host_slice_pitch: 0,
            data: DataRef {
                offset: 64,
                len: 32,
            },
            wait: vec![],
            event: 0,
        }
        .into(),
        EnqueueCopyBufferRect {
            queue: 2,
            src: 3,
            dst: 4,
            src_origin: [0, 0, 0],
            dst_origin: [8, 1, 0],
            region: [8, 2, 1],
            src_row_pitch: 16,
            src_slice_pitch: 0,
            dst_row_pitch: 16,
            dst_slice_pitch: 0,
            wait: vec![],
            event: 7,
        }
        .into(),
        InitBuffer {
            mem: 3,
            offset: 8,
            data: DataRef { offset: 0, len: 8 },
        }
        .into(),
        Finish { queue: 2 }.into(),
        GetInfo {
            target: 11,
            handle: 7,
            index: 0,
            param: 0x11D3, // CL_EVENT_COMMAND_EXECUTION_STATUS
        }
        .into(),
    ];
    let third = vec![
        Release {
            kind: ObjectKind::Mem as u32,
            handle: 6,
        }
        .into(),
        Release {
            kind: ObjectKind::Mem as u32,
            handle: 3,
        }
        .into(),
        // Handle reuse after release.
        buffer(3, 16, DataRef { offset: 0, len: 16 }),
        Release {
            kind: ObjectKind::Event as u32,
            handle: 5,
        }
        .into(),
        SessionStats {}.into(),
    ];
    vec![first, second, third]
}

/// A program's life: build, kernel, arguments, launch, read back.
fn kernels() -> Vec<Vec<Request>> {
    let mut first = context_and_queue();
    first.extend([
        buffer(3, 64, DataRef { offset: 0, len: 64 }),
        CreateProgramWithSource {
            program: 4,
            context: 1,
            source: SOURCES[0].as_bytes().to_vec(),
        }
        .into(),
        BuildProgram {
            program: 4,
            options: b"-cl-fast-relaxed-math".to_vec(),
        }
        .into(),
        CreateKernel {
            kernel: 5,
            program: 4,
            name: b"bump".to_vec(),
        }
        .into(),
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
            size: 1,
            value: vec![9],
            handle: 0,
        }
        .into(),
        EnqueueNdRange {
            queue: 2,
            kernel: 5,
            work_dim: 1,
            offset: [0; 3],
            global: [16, 1, 1],
            local: [4, 1, 1],
            wait: vec![],
            event: 6,
        }
        .into(),
    ]);
    let second = vec![
        CreateKernel {
            kernel: 1,
            program: 4,
            name: b"local_copy".to_vec(),
        }
        .into(),
        SetKernelArg {
            kernel: 1,
            index: 0,
            arg_kind: ArgKind::Mem as u32,
            size: 8,
            value: vec![],
            handle: 3,
        }
        .into(),
        // (A clone made after a local argument was set trips PoCL 3.1:
        // regressions/backend_dispatch/clone-kernel-after-local-arg.)
        CloneKernel {
            kernel: 2,
            source: 1,
        }
        .into(),
        SetKernelArg {
            kernel: 2,
            index: 1,
            arg_kind: ArgKind::Local as u32,
            size: 16,
            value: vec![],
            handle: 0,
        }
        .into(),
        EnqueueNdRange {
            queue: 2,
            kernel: 2,
            work_dim: 2,
            offset: [0; 3],
            global: [4, 4, 1],
            local: [0; 3],
            wait: vec![6],
            event: 0,
        }
        .into(),
        WaitForEvents { events: vec![6] }.into(),
        EnqueueReadBuffer {
            queue: 2,
            mem: 3,
            offset: 0,
            data: DataRef { offset: 0, len: 64 },
            wait: vec![],
            event: 0,
        }
        .into(),
        GetInfo {
            target: 6,
            handle: 4,
            index: 0,
            param: 0x1166, // CL_PROGRAM_BINARIES
        }
        .into(),
        GetInfo {
            target: 7,
            handle: 4,
            index: 0,
            param: 0x1183, // CL_PROGRAM_BUILD_LOG
        }
        .into(),
        GetInfo {
            target: 9,
            handle: 5,
            index: 1,
            param: 0x1198, // CL_KERNEL_ARG_TYPE_NAME
        }
        .into(),
    ];
    let third = vec![
        CompileProgram {
            program: 4,
            options: vec![],
        }
        .into(),
        CreateProgramWithSource {
            program: 6,
            context: 1,
            source: SOURCES[2].as_bytes().to_vec(),
        }
        .into(),
        CompileProgram {
            program: 6,
            options: vec![],
        }
        .into(),
        LinkProgram {
            program: 7,
            context: 1,
            options: vec![],
            inputs: vec![6],
        }
        .into(),
        CreateProgramWithSource {
            program: 3,
            context: 1,
            source: SOURCES[1].as_bytes().to_vec(),
        }
        .into(),
        BuildProgram {
            program: 3,
            options: vec![],
        }
        .into(),
        Release {
            kind: ObjectKind::Program as u32,
            handle: 4,
        }
        .into(),
        // The kernels keep the released program alive.
        EnqueueNdRange {
            queue: 2,
            kernel: 5,
            work_dim: 1,
            offset: [0; 3],
            global: [1, 1, 1],
            local: [0; 3],
            wait: vec![],
            event: 0,
        }
        .into(),
        Finish { queue: 2 }.into(),
    ];
    vec![first, second, third]
}

/// User events, markers, barriers, waits.
fn events() -> Vec<Vec<Request>> {
    let mut first = context_and_queue();
    first.extend([
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
        EnqueueBarrier {
            queue: 2,
            wait: vec![],
            event: 5,
        }
        .into(),
        Flush { queue: 2 }.into(),
    ]);
    let second = vec![
        SetUserEventStatus {
            event: 3,
            status: 0,
        }
        .into(),
        WaitForEvents { events: vec![4, 5] }.into(),
        Retain {
            kind: ObjectKind::Event as u32,
            handle: 4,
        }
        .into(),
        Release {
            kind: ObjectKind::Event as u32,
            handle: 4,
        }
        .into(),
        GetInfo {
            target: 12,
            handle: 4,
            index: 0,
            param: 0x1282,
        }
        .into(),
        Release {
            kind: ObjectKind::Queue as u32,
            handle: 2,
        }
        .into(),
        Release {
            kind: ObjectKind::Context as u32,
            handle: 1,
        }
        .into(),
        CloseSession {}.into(),
    ];
    vec![first, second]
}

/// Device and platform queries.
fn queries() -> Vec<Vec<Request>> {
    let mut first: Vec<Request> = [(1, 0x0902), (2, 0x1000), (2, 0x1004), (2, 0x1030)]
        .iter()
        .map(|&(target, param)| {
            GetInfo {
                target,
                handle: 0,
                index: 0,
                param,
            }
            .into()
        })
        .collect();
    first.push(Ping {}.into());
    vec![first]
}

/// Seeds of `backend_dispatch`: (name, input).
pub fn dispatch_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = vec![
        ("raw-transfers".to_string(), raw_input(&transfers())),
        ("raw-kernels".to_string(), raw_input(&kernels())),
        ("raw-events".to_string(), raw_input(&events())),
        ("raw-queries".to_string(), raw_input(&queries())),
    ];
    // Choice streams: a fixed pseudo-random sequence of choices each.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for (i, len) in [64usize, 256, 512, 1024, 2048].into_iter().enumerate() {
        let mut input = vec![MODE_STRUCTURED];
        for _ in 0..len {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            input.push(state as u8);
        }
        seeds.push((format!("structured-{i}"), input));
    }
    seeds
}

/// Seeds of `protocol_decode`: request streams, reply streams, payloads.
pub fn decode_seeds() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for (name, batches) in [
        ("transfers", transfers()),
        ("kernels", kernels()),
        ("events", events()),
        ("queries", queries()),
    ] {
        for (i, requests) in batches.iter().enumerate() {
            seeds.push((format!("request-{name}-{i}"), encode(0, requests, 4096)));
            let mut payload = requests[0].opcode().to_le_bytes().to_vec();
            let mut w = vgpu_protocol::codec::Writer::new();
            requests[requests.len() - 1].encode_payload(&mut w);
            payload.extend_from_slice(&w.bytes);
            seeds.push((format!("payload-{name}-{i}"), payload));
        }
    }
    let mut reply = ReplyBuilder::new(4096);
    reply.push(0x1001, 1, Status::SUCCESS, b"PoCL\0");
    reply.push(0x1012, 2, Status::INVALID_VALUE, &[]);
    reply.push(
        0x0004,
        3,
        Status::SUCCESS,
        &vgpu_protocol::Wire::to_bytes(&SessionStatsReply {
            counts: vec![1, 2, 3, 0, 0, 0, 0],
        }),
    );
    seeds.push(("reply".to_string(), reply.finish()));
    seeds.push((
        "refused".to_string(),
        ReplyBuilder::refused(Status::INVALID_VALUE),
    ));
    seeds.push((
        "ptx".to_string(),
        b".version 7.0\n.target sm_50\n.address_size 64\n".to_vec(),
    ));
    let mut elf = vec![0u8; 128];
    elf[..4].copy_from_slice(b"\x7fELF");
    elf[4] = 2;
    elf[5] = 1;
    seeds.push(("elf".to_string(), elf));
    seeds
}

/// Seeds of `backend_chains`: its input is read by `Unstructured`, so any
/// bytes are a valid run; these are fixed pseudo-random ones of a few
/// lengths (xorshift64*, so that `make_seeds` writes the same files).
pub fn chains_seeds() -> Vec<(String, Vec<u8>)> {
    let mut state = 0x00c4_a1e5_5eed_0001u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    [64usize, 256, 512, 1024, 2048, 4096, 4096, 8192]
        .iter()
        .enumerate()
        .map(|(i, &len)| {
            let bytes = (0..len).map(|_| (next() >> 56) as u8).collect();
            (format!("random-{i}"), bytes)
        })
        .collect()
}
