//! The pre-copy channel (`--precopy-socket`) through the real daemon: the
//! connection reaches the worker of the front-end that made it (this test
//! process is that front-end), garbage is answered with errors and breaks
//! nothing, and `begin` / `next` / `finish` hand out a whole checkpoint of
//! the running vGPU that reads back with the guest's buffer contents.

mod common;

use std::time::{Duration, Instant};

use common::precopy::Channel;
use common::req;
use common::{Backend, RawFrontend};
use vgpu_migration::{Item, StreamReader};
use vgpu_protocol::messages::*;
use vgpu_protocol::DataRef;

const SIZE: u64 = 4 << 20;
const CL_MEM_READ_WRITE: u64 = 1;
/// More than any downtime limit lets QEMU move at the stop (the back-end
/// answers 2^62 while the whole checkpoint is not all handed out).
const UNTIL_SENT: u64 = 1 << 60;

/// Session 1 with one buffer (id 5) holding `pattern`.
fn setup(raw: &mut RawFrontend, pattern: &[u8]) {
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            req::buffer(5, 1, CL_MEM_READ_WRITE, SIZE),
        ],
    );
    req::assert_all_ok(&reply);
    write(raw, pattern);
}

/// Writes `data` to the buffer and waits for it.
fn write(raw: &mut RawFrontend, data: &[u8]) {
    let write = EnqueueWriteBuffer {
        queue: 2,
        mem: 5,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: SIZE,
        },
        wait: vec![],
        event: 0,
    };
    req::assert_all_ok(&raw.batch_with_out(1, &[write.into(), Finish { queue: 2 }.into()], data));
}

fn pattern() -> Vec<u8> {
    (0..SIZE as u32)
        .map(|i| (i.wrapping_mul(31) >> 3) as u8)
        .collect()
}

/// Takes 64 KiB slices of the stream until `n` bytes came (the stream is
/// longer).
fn take_at_least(channel: &mut Channel, n: u64) -> Vec<u8> {
    let mut taken = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while (taken.len() as u64) < n {
        let answer = channel.ask("next 65536");
        let len: usize = answer
            .strip_prefix("data ")
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{answer:?} after {} bytes", taken.len()));
        taken.extend(channel.bytes(len));
        assert!(Instant::now() < deadline, "the stream never came");
    }
    taken
}

#[test]
fn precopy_channel_hands_out_a_whole_checkpoint_and_survives_garbage() {
    let socket = std::env::temp_dir().join(format!("vgpu-precopy-{}.sock", std::process::id()));
    let socket_arg = socket.to_str().expect("a UTF-8 temp dir");
    let backend = Backend::start_with(&["--precopy-socket", socket_arg], &[]);
    let mut raw = backend.raw();
    let data = pattern();
    setup(&mut raw, &data);
    let mut channel = Channel::connect(&socket);

    // Garbage: an error each, and the channel goes on.
    for garbage in [
        "",
        "bogus",
        "next",
        "next lots",
        "next 99999999999",
        "pending",
        "finish",
        "loaded",
    ] {
        let answer = channel.ask(garbage);
        assert!(
            answer.starts_with("error "),
            "{garbage:?} answered {answer:?}"
        );
    }

    assert_eq!(channel.ask("begin 2"), "ok");
    let pending = |channel: &mut Channel| {
        let answer = channel.ask("pending");
        answer
            .strip_prefix("pending ")
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("{answer:?}"))
    };
    let before = pending(&mut channel);
    assert!(
        before >= UNTIL_SENT,
        "pending {before} before anything was sent"
    );
    // Until the last slice went, QEMU must not stop the VM: the rest
    // would cross in the downtime.
    // Asked over several of the back-end's counts (every 50 ms): none
    // may let QEMU stop.
    let mut stream = take_at_least(&mut channel, SIZE / 2);
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_millis(300) {
        let halfway = pending(&mut channel);
        assert!(
            halfway >= UNTIL_SENT,
            "pending {halfway} with {} bytes handed out",
            stream.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    stream.extend(channel.take_all(1 << 20));
    assert_eq!(channel.ask("finish"), "ok");

    // The guest writes its buffer again: the device state at the stop has
    // to carry it, and QEMU hears so.
    // The count runs every 50 ms on the back-end's own thread.
    write(&mut raw, &data);
    let want = format!("pending {SIZE}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut answer = channel.ask("pending");
    while answer != want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        answer = channel.ask("pending");
    }
    assert_eq!(answer, want, "the rewritten buffer is pending");

    // The objects come first; then the whole checkpoint.
    let checkpoint = common::precopy::checkpoint_of(&stream);
    let identity = vgpu_migration::base_id(&mut &checkpoint[..]).expect("a checkpoint stream");
    assert!(identity.is_some(), "a whole checkpoint has an identity");
    let mut reader = StreamReader::new(checkpoint).expect("a checkpoint stream");
    let mut contents = Vec::new();
    while let Some(item) = reader.next_item().expect("a valid stream") {
        if let Item::BufferChunk { data, .. } = item {
            contents.extend_from_slice(data);
        }
    }
    assert_eq!(contents, data, "the buffer's contents in the stream");
}
