//! Copy-on-write saves of the OpenCL executor, on PoCL: a save's contents
//! are read after the session went on writing, and must still be those of
//! the save, whatever wrote them since (transfers, fills, copies, kernels,
//! sub-buffers, an out-of-order queue) and even once the guest released
//! the buffer.

mod common;

use std::collections::HashMap;

use common::req;
use vgpu_backend::executor::BufferSource;
use vgpu_backend::harness::InProcess;
use vgpu_protocol::frame::BatchBuilder;
use vgpu_protocol::messages::*;
use vgpu_protocol::{decode_reply, ArgKind, DataRef, ObjectKind, Request};

/// PoCL's device enumeration is not safe from two threads of a process at
/// once (see `executor_round_trip.rs`).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const INTS: usize = 1 << 16;
const SIZE: u64 = (INTS * 4) as u64;
const KERNEL: &[u8] = b"kernel void set(global uint* a, uint v) {
    size_t i = get_global_id(0);
    a[i] = v + (uint)i;
}";
const CL_QUEUE_PROPERTIES: u64 = 0x1093;
const CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE: u64 = 1;

/// Sequence numbers grow across batches: a repeated one is a replay.
static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Runs one batch; fails the test unless every call succeeded.
fn run(harness: &mut InProcess, requests: &[Request], out_data: &[u8], in_len: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0);
    for request in requests {
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        builder.push(seq, request);
    }
    let (reply, data) = harness.run(&builder.finish(1, 1 << 16), out_data, in_len);
    let reply = decode_reply(&reply).expect("a reply");
    assert!(
        reply.status.is_success() && reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    data
}

fn pattern(seed: u32) -> Vec<u8> {
    (0..INTS as u32)
        .flat_map(|i| {
            i.wrapping_mul(2_654_435_761)
                .wrapping_add(seed)
                .to_le_bytes()
        })
        .collect()
}

fn write(queue: u64, mem: u64, offset: u64, len: u64) -> Request {
    EnqueueWriteBuffer {
        queue,
        mem,
        offset,
        data: DataRef { offset: 0, len },
        wait: vec![],
        event: 0,
    }
    .into()
}

fn read(harness: &mut InProcess, mem: u64) -> Vec<u8> {
    let request: Request = EnqueueReadBuffer {
        queue: 2,
        mem,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: SIZE,
        },
        wait: vec![],
        event: 0,
    }
    .into();
    run(harness, &[request], &[], SIZE as usize)
}

fn launch(queue: u64, mem: u64, v: u32) -> Vec<Request> {
    vec![
        SetKernelArg {
            kernel: 4,
            index: 0,
            arg_kind: ArgKind::Mem as u32,
            size: 8,
            value: vec![],
            handle: mem,
        }
        .into(),
        SetKernelArg {
            kernel: 4,
            index: 1,
            arg_kind: ArgKind::Value as u32,
            size: 4,
            value: v.to_le_bytes().to_vec(),
            handle: 0,
        }
        .into(),
        EnqueueNdRange {
            queue,
            kernel: 4,
            work_dim: 1,
            offset: [0; 3],
            global: [INTS as u64, 1, 1],
            local: [0; 3],
            wait: vec![],
            event: 0,
        }
        .into(),
    ]
}

/// Context 1, in-order queue 2, out-of-order queue 9, kernel 4, and
/// buffers 10..=15 each filled with its own pattern; buffer 16 is a
/// sub-buffer of the second half of 13.
fn set_up() -> Option<(std::sync::MutexGuard<'static, ()>, InProcess)> {
    let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut harness = InProcess::opencl()?;
    let mut requests = req::kernel_setup(KERNEL, b"set");
    requests.push(
        CreateQueue {
            queue: 9,
            context: 1,
            properties: vec![
                CL_QUEUE_PROPERTIES,
                CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE,
                0,
            ],
        }
        .into(),
    );
    for mem in 10..=15 {
        requests.push(req::buffer(mem, 1, 1, SIZE));
    }
    requests.push(
        CreateSubBuffer {
            mem: 16,
            parent: 13,
            flags: 1,
            origin: SIZE / 2,
            size: SIZE / 2,
        }
        .into(),
    );
    run(&mut harness, &requests, &[], 0);
    for mem in 10..=15u64 {
        run(
            &mut harness,
            &[write(2, mem, 0, SIZE)],
            &pattern(mem as u32),
            0,
        );
    }
    Some((turn, harness))
}

fn read_source(source: &mut dyn BufferSource) -> Vec<u8> {
    let mut data = vec![0u8; source.size() as usize];
    source.read(0, &mut data).expect("an owed source reads");
    data
}

/// Every buffer the save owes, read back whole, by guest handle (the
/// content keys of a harness session's guest buffers are their handles).
fn read_all(sources: &mut [(u64, Box<dyn BufferSource>)]) -> HashMap<u64, Vec<u8>> {
    sources
        .iter_mut()
        .map(|(key, source)| (*key, read_source(source.as_mut())))
        .collect()
}

#[test]
fn a_save_read_after_the_guest_wrote_holds_the_contents_at_the_save() {
    let Some((_turn, mut harness)) = set_up() else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    let (_, mut sources) = harness.save_unread().expect("the session saves");
    assert_eq!(sources.len(), 6, "the six top-level buffers");
    assert!(sources.iter().all(|(_, s)| s.owed()));

    // The guest goes on: every kind of write, and a release.
    let new = pattern(99);
    let mut requests = vec![write(2, 10, 0, SIZE)];
    requests.extend(launch(2, 11, 7));
    requests.push(
        EnqueueFillBuffer {
            queue: 2,
            mem: 12,
            pattern: vec![0xAB; 4],
            offset: 0,
            size: SIZE,
            wait: vec![],
            event: 0,
        }
        .into(),
    );
    // Through the sub-buffer: the parent's contents are what is owed.
    requests.push(write(2, 16, 0, SIZE / 2));
    // On the out-of-order queue: the copy must still run before it.
    requests.extend(launch(9, 14, 5));
    requests.push(Finish { queue: 9 }.into());
    requests.push(
        EnqueueCopyBuffer {
            queue: 2,
            src: 10,
            dst: 15,
            src_offset: 0,
            dst_offset: 0,
            size: SIZE,
            wait: vec![],
            event: 0,
        }
        .into(),
    );
    requests.push(Finish { queue: 2 }.into());
    run(&mut harness, &requests, &new, 0);
    // Released right after: the checkpoint still holds it.
    let release: Request = Release {
        kind: ObjectKind::Mem as u32,
        handle: 15,
    }
    .into();
    run(&mut harness, &[release], &[], 0);

    // The guest sees its writes...
    assert_eq!(read(&mut harness, 10), new);
    let expected_11: Vec<u8> = (0..INTS as u32)
        .flat_map(|i| (7 + i).to_le_bytes())
        .collect();
    assert_eq!(read(&mut harness, 11), expected_11);
    assert_eq!(read(&mut harness, 12), vec![0xAB; SIZE as usize]);
    // ...and the save, read only now, what was there at the save.
    let saved = read_all(&mut sources);
    for mem in 10..=15u64 {
        assert!(
            saved[&mem] == pattern(mem as u32),
            "buffer {mem} as read after the guest wrote it is not its contents at the save"
        );
    }
}

#[test]
fn a_save_read_in_pieces_around_a_write_is_still_one_moment() {
    let Some((_turn, mut harness)) = set_up() else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    let (_, mut sources) = harness.save_unread().expect("the session saves");
    let (_, source) = sources
        .iter_mut()
        .find(|(key, _)| *key == 10)
        .expect("buffer 10 is saved");
    // The first half is read from the buffer itself, before any write...
    let half = (SIZE / 2) as usize;
    let mut first = vec![0u8; half];
    source.read(0, &mut first).expect("reads");
    // ...the guest then writes all of it, twice...
    let new = pattern(1234);
    run(&mut harness, &[write(2, 10, 0, SIZE)], &new, 0);
    run(&mut harness, &launch(2, 10, 3), &[], 0);
    run(&mut harness, &[Finish { queue: 2 }.into()], &[], 0);
    // ...and the second half still comes from the moment of the save.
    let mut second = vec![0u8; half];
    source.read(SIZE / 2, &mut second).expect("reads");
    first.extend(second);
    assert!(first == pattern(10), "the halves come from two moments");
}

#[test]
fn a_settled_debt_costs_later_writes_nothing_and_a_new_save_owes_afresh() {
    let Some((_turn, mut harness)) = set_up() else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    let (_, sources) = harness.save_unread().expect("the session saves");
    drop(sources);
    let new = pattern(5);
    run(&mut harness, &[write(2, 10, 0, SIZE)], &new, 0);
    let (_, mut sources) = harness.save_unread().expect("the session saves again");
    run(&mut harness, &launch(2, 10, 1), &[], 0);
    run(&mut harness, &[Finish { queue: 2 }.into()], &[], 0);
    let saved = read_all(&mut sources);
    assert!(
        saved[&10] == new,
        "the second save holds the write before it"
    );
}

/// A 2D RGBA float image of `W`×`H` pixels written whole.
fn write_image(mem: u64) -> Request {
    EnqueueWriteImage {
        queue: 2,
        mem,
        origin: [0; 3],
        region: [W, H, 1],
        data: DataRef {
            offset: 0,
            len: W * H * 16,
        },
        wait: vec![],
        event: 0,
    }
    .into()
}

const W: u64 = 64;
const H: u64 = 32;

/// Every channel of every pixel a float of its own, times `scale`.
fn pixels(scale: f32) -> Vec<u8> {
    (0..W * H * 4)
        .flat_map(|i| (i as f32 * scale).to_le_bytes())
        .collect()
}

#[test]
fn an_owed_image_is_read_to_the_host_before_the_guest_writes_it() {
    let Some((_turn, mut harness)) = set_up() else {
        eprintln!("skipped: no OpenCL device");
        return;
    };
    let image: Request = CreateImage {
        mem: 20,
        context: 1,
        flags: 1,
        channel_order: 0x10B5, // CL_RGBA
        channel_type: 0x10DE,  // CL_FLOAT
        image_type: vgpu_protocol::image::image_type::IMAGE2D,
        dims: [W, H, 0],
        array_size: 0,
        buffer: 0,
    }
    .into();
    run(&mut harness, &[image], &[], 0);
    let before = pixels(1.0);
    run(&mut harness, &[write_image(20)], &before, 0);
    let (_, mut sources) = harness.save_unread().expect("the session saves");
    let after = pixels(-2.0);
    run(
        &mut harness,
        &[write_image(20), Finish { queue: 2 }.into()],
        &after,
        0,
    );
    let saved = read_all(&mut sources);
    assert!(
        saved[&20] == before,
        "the image as read after the guest wrote it is not its contents at the save"
    );
}
