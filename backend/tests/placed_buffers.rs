//! Placed buffers (`MEM_FLAG_PLACED`) and the placement gate, as the
//! loopback's guest library uses them and as a hostile front-end might:
//! refusals get an error status, an accepted buffer is the guest memory
//! it names, and a checkpoint closes the gate for good.

mod common;

use common::{req, Backend, RawFrontend};
use vgpu_protocol::messages::*;
use vgpu_protocol::{DataRef, Request, Status};

/// Scratch offsets of the gate words and of buffers' storage.
const GATE_AT: u64 = 16 << 20;
const STORAGE_AT: u64 = 24 << 20;
const SIZE: u64 = 4096;

fn storage_at(mem: u64) -> u64 {
    STORAGE_AT + (mem << 20)
}

fn placed(mem: u64, size: u64, storage_len: u64) -> Request {
    CreateBuffer {
        mem,
        context: 1,
        flags: 1 | MEM_FLAG_PLACED,
        size,
        init: DataRef {
            offset: 0,
            len: storage_len,
        },
    }
    .into()
}

fn set_gate(raw: &mut RawFrontend, len: usize) -> Status {
    let request = SetPlacementGate {
        gate: DataRef {
            offset: 0,
            len: len as u64,
        },
    };
    let reply = raw.batch_with_out_at(1, &[request.into()], &vec![0u8; len], GATE_AT);
    reply.records[0].status
}

/// Creates placed buffer `mem` over `storage`, written at scratch offset
/// `STORAGE_AT + mem * 1 MiB` (each buffer's own).
fn create_placed(raw: &mut RawFrontend, mem: u64, size: u64, storage: &[u8]) -> Status {
    let request = placed(mem, size, storage.len() as u64);
    let reply = raw.batch_with_out_at(1, &[request], storage, storage_at(mem));
    reply.records[0].status
}

/// A session with context 1 on a fresh backend.
fn session(backend: &Backend) -> RawFrontend {
    let mut raw = backend.raw();
    raw.open_session(1);
    let reply = raw.batch(1, &[req::context(1)]);
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    raw
}

#[test]
fn the_session_announces_placed_buffers() {
    let backend = Backend::start();
    let client = backend.client();
    assert_ne!(client.session_info().flags & SESSION_FLAG_PLACED_BUFFERS, 0);
}

#[test]
fn a_placed_buffer_before_the_gate_is_refused() {
    let backend = Backend::start();
    let mut raw = session(&backend);
    let status = create_placed(&mut raw, 2, SIZE, &[0; SIZE as usize]);
    assert_eq!(status, Status::INVALID_VALUE);
}

#[test]
fn a_gate_is_eight_bytes_and_set_once() {
    let backend = Backend::start();
    let mut raw = session(&backend);
    assert_eq!(set_gate(&mut raw, 4), Status::INVALID_VALUE);
    assert_eq!(set_gate(&mut raw, 16), Status::INVALID_VALUE);
    assert_eq!(set_gate(&mut raw, 8), Status::SUCCESS);
    assert_eq!(set_gate(&mut raw, 8), Status::INVALID_OPERATION);
}

#[test]
fn placed_storage_must_cover_the_whole_buffer() {
    let backend = Backend::start();
    let mut raw = session(&backend);
    assert_eq!(set_gate(&mut raw, 8), Status::SUCCESS);
    let status = create_placed(&mut raw, 2, 2 * SIZE, &[0; SIZE as usize]);
    assert_eq!(status, Status::INVALID_VALUE);
    // Still usable: a buffer of the right size is placed.
    assert_eq!(
        create_placed(&mut raw, 2, SIZE, &[0; SIZE as usize]),
        Status::SUCCESS
    );
}

#[test]
fn a_placed_buffer_is_the_guest_memory_until_a_checkpoint_closes_the_gate() {
    let backend = Backend::start();
    let mut raw = session(&backend);
    assert_eq!(set_gate(&mut raw, 8), Status::SUCCESS);
    let initial: Vec<u8> = (0..SIZE).map(|i| i as u8).collect();
    assert_eq!(create_placed(&mut raw, 2, SIZE, &initial), Status::SUCCESS);
    let reply = raw.batch(1, &[req::queue(3, 1)]);
    assert!(reply.records[0].status.is_success(), "{reply:?}");

    // Bytes the guest writes into the storage are the buffer's.
    let written: Vec<u8> = (0..SIZE).map(|i| (i * 7 + 1) as u8).collect();
    let at = raw.scratch(storage_at(2));
    raw.dev
        .write_guest(at, &written)
        .expect("write the storage");
    let (reply, data) = raw.batch_with_in(1, &[read_buffer()], SIZE as u32);
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    assert!(data == written, "the buffer is not the guest's storage");

    // A checkpoint closes the gate (word 1) and keeps it closed.
    let mut words = [0u8; 8];
    raw.dev
        .read_guest(raw.scratch(GATE_AT), &mut words)
        .expect("read the gate");
    assert_eq!(words, [0; 8], "the gate is open before the checkpoint");
    let file = backend.dir().join("placed.ckpt");
    let (ok, answer) = backend.ctl(&["checkpoint", file.to_str().expect("utf-8")]);
    assert!(ok, "{answer}");
    raw.dev
        .read_guest(raw.scratch(GATE_AT), &mut words)
        .expect("read the gate");
    assert_eq!(
        words[4..],
        1u32.to_le_bytes(),
        "the checkpoint left the gate open"
    );
    // No new placements once it is closed; the session goes on.
    assert_eq!(
        create_placed(&mut raw, 4, SIZE, &[0; SIZE as usize]),
        Status::INVALID_VALUE
    );
    let (reply, data) = raw.batch_with_in(1, &[read_buffer()], SIZE as u32);
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    assert!(data == written, "the buffer is not the guest's storage");
}

/// A blocking read of all of buffer 2 on queue 3.
fn read_buffer() -> Request {
    EnqueueReadBuffer {
        queue: 3,
        mem: 2,
        offset: 0,
        data: DataRef {
            offset: 0,
            len: SIZE,
        },
        wait: vec![],
        event: 0,
    }
    .into()
}
