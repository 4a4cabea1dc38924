//! `--peer-memory`: a loopback program's bulk data read and written in
//! place by its worker (cross-memory attach), through the real daemon on
//! its real socket, on the real device (PoCL here).
//!
//! The tests run as root, and a confined worker started by root runs as
//! `nobody`, which may not attach to a root process: where the fast path
//! itself is under test the worker is left unconfined (`--sandbox none`)
//! and keeps root; with the default sandbox the same transfers must come
//! out right by copying.

mod common;

use common::calls::{context_and_queue, read_buffer as read};
use common::req;
use common::Backend;
use vgpu_protocol::frame::BatchBuilder;
use vgpu_protocol::limits::PEER_WINDOW_BASE;
use vgpu_protocol::messages::*;
use vgpu_protocol::{DataRef, Status};
use vgpu_transport::vring::DescSpec;
use vgpu_transport::Client;

/// Sizes on both sides of the transport's peer threshold (64 KiB), odd
/// ones included, and one the client splits into several chunks.
const SIZES: [usize; 5] = [1000, (64 << 10) - 1, (64 << 10) + 3, 3 << 20, 20 << 20];

fn buffer(client: &Client, context: u64, size: usize) -> u64 {
    let mem = client.new_handle();
    client
        .defer(
            CreateBuffer {
                mem,
                context,
                flags: 1,
                size: size as u64,
                init: DataRef { offset: 0, len: 0 },
            }
            .into(),
        )
        .expect("buffer");
    mem
}

fn write(client: &Client, queue: u64, mem: u64, bytes: &[u8]) -> Result<Vec<u8>, Status> {
    client.call_with_out(bytes, |data, start| {
        EnqueueWriteBuffer {
            queue,
            mem,
            offset: start,
            data,
            wait: vec![],
            event: 0,
        }
        .into()
    })
}

/// A pattern that differs in every byte position of a 251-byte cycle, so
/// a misplaced or missing chunk shows.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ seed.wrapping_mul(31))
        .collect()
}

fn round_trips(client: &Client) {
    let (context, queue) = context_and_queue(client);
    for (i, &size) in SIZES.iter().enumerate() {
        let mem = buffer(client, context, size);
        let bytes = pattern(size, i as u8 + 1);
        write(client, queue, mem, &bytes).expect("write");
        let mut back = vec![0u8; size];
        read(client, queue, mem, &mut back).expect("read");
        assert!(back == bytes, "{size} bytes came back changed");
        // A part at an offset: the map covers a range inside the buffer.
        let mut part = vec![0u8; size / 2];
        client
            .call_with_in(&mut part, |data, start| {
                EnqueueReadBuffer {
                    queue,
                    mem,
                    offset: (size / 4) as u64 + start,
                    data,
                    wait: vec![],
                    event: 0,
                }
                .into()
            })
            .expect("read part");
        assert!(
            part[..] == bytes[size / 4..size / 4 + size / 2],
            "{size}: part"
        );
    }
    client.flush().expect("no deferred error");
}

#[test]
fn transfers_go_by_peer_memory_and_come_back_intact() {
    let backend = Backend::start_with(&["--peer-memory", "--sandbox", "none"], &[]);
    let client = backend.client();
    assert_ne!(
        client.session_info().flags & SESSION_FLAG_PEER_MEMORY,
        0,
        "an unconfined worker of the program's own user reaches its memory"
    );
    round_trips(&client);
}

#[test]
fn transfers_through_the_pinned_staging_buffer_come_back_intact() {
    // The path GPUs take, forced on PoCL: chunks through the two 8 MiB
    // slots of a mapped `CL_MEM_ALLOC_HOST_PTR` buffer (20 MiB takes three,
    // the first slot reused while the second may still move), each
    // chunk's peer copy striped over three threads.
    let backend = Backend::start_with(
        &["--peer-memory", "--sandbox", "none"],
        &[
            ("VGPU_PEER_STAGING", "always"),
            ("VGPU_PEER_COPY_THREADS", "3"),
        ],
    );
    let client = backend.client();
    assert_ne!(client.session_info().flags & SESSION_FLAG_PEER_MEMORY, 0);
    round_trips(&client);
}

#[test]
fn without_the_option_sessions_get_no_peer_memory() {
    let backend = Backend::start_with(&["--sandbox", "none"], &[]);
    let client = backend.client();
    assert_eq!(client.session_info().flags & SESSION_FLAG_PEER_MEMORY, 0);
    round_trips(&client);
}

#[test]
fn a_worker_of_another_user_copies_instead() {
    // Root's confined worker runs as nobody: the probe fails, the seccomp
    // filter closes cross-memory attach, and the data is copied.
    let backend = Backend::start_with(&["--peer-memory"], &[]);
    let client = backend.client();
    assert_eq!(client.session_info().flags & SESSION_FLAG_PEER_MEMORY, 0);
    round_trips(&client);
}

/// Sends one `EnqueueWriteBuffer` whose out-data descriptor names `addr`
/// (`len` bytes) and returns its record's status, or `None` when the
/// chain itself was refused (used length 0).
fn write_from(
    raw: &mut common::RawFrontend,
    queue: u64,
    mem: u64,
    addr: u64,
    len: u32,
) -> Option<Status> {
    let mut builder = BatchBuilder::new(0);
    builder.push(
        raw.next_seq,
        &EnqueueWriteBuffer {
            queue,
            mem,
            offset: 0,
            data: DataRef {
                offset: 0,
                len: len.into(),
            },
            wait: vec![],
            event: 0,
        }
        .into(),
    );
    raw.next_seq += 1;
    let reply_len = 4096u32;
    let request = builder.finish(1, reply_len);
    let (req_at, reply_at) = (raw.scratch(0), raw.scratch(1 << 20));
    raw.dev.write_guest(req_at, &request).expect("request");
    let used = raw.send_chain(&[
        DescSpec {
            addr: req_at,
            len: request.len() as u32,
            writable: false,
        },
        DescSpec {
            addr,
            len,
            writable: false,
        },
        DescSpec {
            addr: reply_at,
            len: reply_len,
            writable: true,
        },
    ]);
    if used == 0 {
        return None;
    }
    let mut reply = vec![0u8; reply_len as usize];
    raw.dev.read_guest(reply_at, &mut reply).expect("reply");
    let reply = vgpu_protocol::decode_reply(&reply).expect("well-formed reply");
    Some(reply.records[0].status)
}

/// A session with a context, a queue and a 64 KiB buffer, made by hand.
fn raw_session(backend: &Backend) -> (common::RawFrontend, u64, u64) {
    let mut raw = backend.raw();
    raw.open_session(1);
    let reply = raw.batch(
        1,
        &[
            req::context(1),
            req::queue(2, 1),
            CreateBuffer {
                mem: 3,
                context: 1,
                flags: 1,
                size: 64 << 10,
                init: DataRef { offset: 0, len: 0 },
            }
            .into(),
        ],
    );
    assert!(
        reply.records.iter().all(|r| r.status.is_success()),
        "{reply:?}"
    );
    (raw, 2, 3)
}

#[test]
fn a_bad_peer_address_fails_only_its_call() {
    let backend = Backend::start_with(&["--peer-memory", "--sandbox", "none"], &[]);
    let (mut raw, queue, mem) = raw_session(&backend);
    // Page 0 of this process is never mapped.
    assert_eq!(
        write_from(&mut raw, queue, mem, PEER_WINDOW_BASE + 16, 4096),
        Some(Status::INVALID_VALUE)
    );
    // This process's real bytes, named in the peer window, do arrive.
    let bytes = pattern(64 << 10, 7);
    assert_eq!(
        write_from(
            &mut raw,
            queue,
            mem,
            PEER_WINDOW_BASE + bytes.as_ptr() as u64,
            bytes.len() as u32
        ),
        Some(Status::SUCCESS)
    );
    let (reply, data) = raw.batch_with_in(
        1,
        &[EnqueueReadBuffer {
            queue,
            mem,
            offset: 0,
            data: DataRef {
                offset: 0,
                len: 64 << 10,
            },
            wait: vec![],
            event: 0,
        }
        .into()],
        64 << 10,
    );
    assert!(reply.records[0].status.is_success(), "{reply:?}");
    assert!(data == bytes, "the peer's bytes reached the buffer");
}

#[test]
fn a_worker_without_peer_memory_refuses_peer_descriptors() {
    let backend = Backend::start_with(&["--sandbox", "none"], &[]);
    let (mut raw, queue, mem) = raw_session(&backend);
    let bytes = pattern(4096, 3);
    // Outside guest memory, as any stray address: the chain is dropped.
    assert_eq!(
        write_from(
            &mut raw,
            queue,
            mem,
            PEER_WINDOW_BASE + bytes.as_ptr() as u64,
            4096
        ),
        None
    );
}

#[test]
fn calls_without_a_one_copy_path_bounce_through_the_worker() {
    // CreateBuffer's initial data and a rectangle read take host pointers
    // from the worker: peer bytes reach them through bounce buffers, out
    // before the call and in after it.
    let backend = Backend::start_with(&["--peer-memory", "--sandbox", "none"], &[]);
    let client = backend.client();
    assert_ne!(client.session_info().flags & SESSION_FLAG_PEER_MEMORY, 0);
    let (context, queue) = context_and_queue(&client);
    let (width, rows) = (1024usize, 300usize);
    let bytes = pattern(width * rows, 9);
    let mem = client.new_handle();
    client
        .defer_with_out(&bytes, |init, _| {
            CreateBuffer {
                mem,
                context,
                flags: 1 | (1 << 5), // READ_WRITE | COPY_HOST_PTR
                size: bytes.len() as u64,
                init,
            }
            .into()
        })
        .expect("buffer with initial data");
    let mut back = vec![0u8; bytes.len()];
    client
        .call_with_in(&mut back, |data, _| {
            EnqueueReadBufferRect {
                queue,
                mem,
                buffer_origin: [0, 0, 0],
                host_origin: [0, 0, 0],
                region: [width as u64, rows as u64, 1],
                buffer_row_pitch: width as u64,
                buffer_slice_pitch: 0,
                host_row_pitch: width as u64,
                host_slice_pitch: 0,
                data,
                wait: vec![],
                event: 0,
            }
            .into()
        })
        .expect("rectangle read");
    assert!(
        back == bytes,
        "the initial data came back through the rectangle"
    );
    // Twice: the second call reuses the thread's spare bounce buffer.
    let mut again = vec![0u8; bytes.len()];
    read(&client, queue, mem, &mut again).expect("read");
    assert!(again == bytes);
    client.flush().expect("no deferred error");
}
