//! A pre-copy migration between two real daemons on PoCL, the restore at
//! the stop adopting what the destination restored ahead: the guest must
//! find exactly its contents on the destination, whether a buffer was
//! adopted unchanged from the pre-copy stream, rewritten after its copy
//! (it comes in the device state at the stop), created after the pre-copy
//! checkpoint, or released after it (gone). This process plays both
//! front-ends and both QEMUs: the pre-copy channel on each side, and the
//! vhost-user device-state transfer at the stop.

mod common;

use std::io::{Read, Write};
use std::os::fd::OwnedFd;

use common::precopy::Channel;
use common::req;
use common::{Backend, RawFrontend};
use vgpu_protocol::messages::*;
use vgpu_protocol::{DataRef, ObjectKind};
use vhost::vhost_user::message::{VhostTransferStateDirection, VhostTransferStatePhase};
use vhost::vhost_user::VhostUserFrontend;

const SIZE: u64 = 4 << 20;
const CL_MEM_READ_WRITE: u64 = 1;
const CONTEXT: u64 = 1;
const QUEUE: u64 = 2;

/// Contents that tell buffers and their versions apart.
fn pattern(seed: u32) -> Vec<u8> {
    (0..SIZE as u32)
        .map(|i| (i.wrapping_mul(seed * 2 + 1).rotate_left(seed) >> 5) as u8)
        .collect()
}

fn create(raw: &mut RawFrontend, mem: u64) {
    req::assert_all_ok(&raw.batch(1, &[req::buffer(mem, CONTEXT, CL_MEM_READ_WRITE, SIZE)]));
}

fn write(raw: &mut RawFrontend, mem: u64, data: &[u8]) {
    let write = EnqueueWriteBuffer {
        queue: QUEUE,
        mem,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: SIZE,
        },
        wait: vec![],
        event: 0,
    };
    let batch = [write.into(), Finish { queue: QUEUE }.into()];
    req::assert_all_ok(&raw.batch_with_out(1, &batch, data));
}

fn read(raw: &mut RawFrontend, mem: u64) -> Result<Vec<u8>, vgpu_protocol::Status> {
    let read = EnqueueReadBuffer {
        queue: QUEUE,
        mem,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: SIZE,
        },
        wait: vec![],
        event: 0,
    };
    let (reply, data) = raw.batch_with_in(1, &[read.into()], SIZE as u32);
    let status = reply.records.first().map_or(reply.status, |r| r.status);
    status.is_success().then_some(data).ok_or(status)
}

/// Moves the device state from `source` to `destination` through a pipe
/// each, as the two QEMUs do at the stop; answers how the destination's
/// load went.
fn transfer_device_state(
    source: &mut RawFrontend,
    destination: &mut RawFrontend,
) -> Result<(), vhost::Error> {
    let (mut from_source, to_reader) = std::io::pipe().expect("a pipe");
    let phase = VhostTransferStatePhase::STOPPED;
    source
        .dev
        .frontend()
        .set_device_state_fd(
            VhostTransferStateDirection::SAVE,
            phase,
            OwnedFd::from(to_reader),
        )
        .expect("SET_DEVICE_STATE_FD on the source");
    let mut state = Vec::new();
    from_source
        .read_to_end(&mut state)
        .expect("read the source's device state");
    source
        .dev
        .frontend()
        .check_device_state()
        .expect("the source's device state was sent");

    let (from_writer, mut to_destination) = std::io::pipe().expect("a pipe");
    destination
        .dev
        .frontend()
        .set_device_state_fd(
            VhostTransferStateDirection::LOAD,
            phase,
            OwnedFd::from(from_writer),
        )
        .expect("SET_DEVICE_STATE_FD on the destination");
    to_destination
        .write_all(&state)
        .expect("hand the device state over");
    drop(to_destination);
    destination.dev.frontend().check_device_state()
}

fn start(name: &str) -> (Backend, std::path::PathBuf) {
    let socket =
        std::env::temp_dir().join(format!("vgpu-adopt-{name}-{}.sock", std::process::id()));
    let arg = socket.to_str().expect("a UTF-8 temp dir").to_string();
    (
        Backend::start_with(&["--precopy-socket", &arg], &[]),
        socket,
    )
}

#[test]
fn an_adopted_restore_gives_the_guest_its_exact_contents() {
    let (source, source_channel) = start("source");
    let (destination, destination_channel) = start("destination");
    let mut guest = source.raw();
    guest.open_session(1);
    req::assert_all_ok(&guest.batch(1, &[req::context(CONTEXT), req::queue(QUEUE, CONTEXT)]));
    // 5: kept as copied; 6: rewritten after its copy; 7: released after it.
    for mem in [5, 6, 7] {
        create(&mut guest, mem);
        write(&mut guest, mem, &pattern(mem as u32));
    }

    let mut outgoing = Channel::connect(&source_channel);
    assert_eq!(outgoing.ask("begin 2"), "ok");
    let stream = outgoing.take_all(1 << 20);
    assert_eq!(outgoing.ask("finish"), "ok");
    // The destination's QEMU connects its device first, then hears of the
    // stream as it arrives.
    let mut resumed = destination.raw();
    let mut incoming = Channel::connect(&destination_channel);
    incoming.load(&stream, 1 << 20);
    assert_eq!(incoming.ask("loaded"), format!("ok {}", stream.len()));

    // After the pre-copy checkpoint, while the VM still runs.
    let rewritten = pattern(60);
    write(&mut guest, 6, &rewritten);
    req::assert_all_ok(
        &guest.batch(
            1,
            &[Release {
                kind: ObjectKind::Mem as u32,
                handle: 7,
            }
            .into()],
        ),
    );
    create(&mut guest, 8);
    write(&mut guest, 8, &pattern(8));

    transfer_device_state(&mut guest, &mut resumed).expect("the destination took the device state");
    resumed.next_seq = guest.next_seq;
    for (mem, want, what) in [
        (5, pattern(5), "kept as copied"),
        (6, rewritten, "rewritten after its copy"),
        (8, pattern(8), "created after the pre-copy checkpoint"),
    ] {
        let got =
            read(&mut resumed, mem).unwrap_or_else(|s| panic!("buffer {mem} ({what}): {s:?}"));
        let differs = got.iter().zip(&want).position(|(g, w)| g != w);
        assert_eq!(
            differs, None,
            "buffer {mem} ({what}): first byte that differs"
        );
        assert_eq!(got.len(), want.len(), "buffer {mem} ({what})");
    }
    assert_eq!(
        read(&mut resumed, 7),
        Err(vgpu_protocol::Status::INVALID_MEM_OBJECT),
        "buffer 7, released after the pre-copy checkpoint"
    );
}

#[test]
fn a_cancelled_incoming_precopy_leaves_nothing_behind() {
    let (source, source_channel) = start("cancel-source");
    let (destination, destination_channel) = start("cancel-destination");
    let mut guest = source.raw();
    guest.open_session(1);
    req::assert_all_ok(&guest.batch(1, &[req::context(CONTEXT), req::queue(QUEUE, CONTEXT)]));
    for mem in [5, 6] {
        create(&mut guest, mem);
        write(&mut guest, mem, &pattern(mem as u32));
    }
    let mut outgoing = Channel::connect(&source_channel);
    assert_eq!(outgoing.ask("begin 2"), "ok");
    let stream = outgoing.take_all(1 << 20);
    assert_eq!(outgoing.ask("finish"), "ok");

    // Half the stream, then the destination's QEMU gives up: the restore
    // ahead stops and what it built goes; no base is kept, so a device
    // state leaning on one is refused and the destination has no session.
    let mut resumed = destination.raw();
    let mut incoming = Channel::connect(&destination_channel);
    incoming.load(&stream[..stream.len() / 2], 1 << 20);
    assert_eq!(incoming.ask("abort"), "ok");
    assert!(
        transfer_device_state(&mut guest, &mut resumed).is_err(),
        "an incremental device state without its base was taken"
    );
    resumed.next_seq = guest.next_seq;
    assert!(
        read(&mut resumed, 5).is_err(),
        "a session of the cancelled restore is there"
    );

    // A whole pre-copy afterwards restores the guest's contents.
    incoming.load(&stream, 1 << 20);
    assert_eq!(incoming.ask("loaded"), format!("ok {}", stream.len()));
    transfer_device_state(&mut guest, &mut resumed).expect("the destination took the device state");
    resumed.next_seq = guest.next_seq;
    for mem in [5, 6] {
        let got = read(&mut resumed, mem).unwrap_or_else(|s| panic!("buffer {mem}: {s:?}"));
        assert!(got == pattern(mem as u32), "buffer {mem} differs");
    }
}

#[test]
fn a_base_named_by_the_operator_is_read_for_what_was_not_restored_ahead() {
    let (source, _) = start("named-source");
    let (destination, _) = start("named-destination");
    let mut guest = source.raw();
    guest.open_session(1);
    req::assert_all_ok(&guest.batch(1, &[req::context(CONTEXT), req::queue(QUEUE, CONTEXT)]));
    for mem in [5, 6] {
        create(&mut guest, mem);
        write(&mut guest, mem, &pattern(mem as u32));
    }
    // A whole checkpoint both back-ends name (`vgpu-ctl migration-base`):
    // nothing was restored ahead, so the restore at the stop reads every
    // buffer the device state takes from it out of the file.
    let base = std::env::temp_dir().join(format!("vgpu-adopt-base-{}.ckpt", std::process::id()));
    let base_path = base.to_str().expect("a UTF-8 temp dir");
    let mut resumed = destination.raw();
    let (taken, reply) = source.ctl(&["checkpoint", base_path]);
    assert!(taken, "checkpoint: {reply}");
    for backend in [&source, &destination] {
        let (named, reply) = backend.ctl(&["migration-base", base_path]);
        assert!(named, "migration-base: {reply}");
    }
    let rewritten = pattern(60);
    write(&mut guest, 6, &rewritten);

    transfer_device_state(&mut guest, &mut resumed).expect("the destination took the device state");
    let _ = std::fs::remove_file(&base);
    resumed.next_seq = guest.next_seq;
    for (mem, want) in [(5, pattern(5)), (6, rewritten)] {
        let got = read(&mut resumed, mem).unwrap_or_else(|s| panic!("buffer {mem}: {s:?}"));
        assert!(got == want, "buffer {mem} differs");
    }
}
