//! Dirty logging as QEMU drives it for a live migration: the front-end
//! acks `VHOST_F_LOG_ALL` and hands a log with `SET_LOG_BASE`; from then on
//! every guest page the backend writes (a reply through a host pointer,
//! the used ring) is marked in it, and a page it only reads is not.

mod common;

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

use common::Backend;
use vgpu_protocol::messages::Ping;
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost::vhost_user::VhostUserFrontend;
use vhost::{VhostBackend, VhostUserDirtyLogRegion};

const VHOST_F_LOG_ALL: u64 = 1 << 26;
/// The log's page (one bit each), as the vhost-user protocol fixes it.
const LOG_PAGE: u64 = 4096;

/// Whether the log marks guest page `gpa`.
fn marked(log: &std::fs::File, gpa: u64) -> bool {
    let page = gpa / LOG_PAGE;
    let mut byte = [0u8];
    log.read_exact_at(&mut byte, page / 8)
        .expect("read the log");
    byte[0] & (1 << (page % 8)) != 0
}

#[test]
fn pages_the_backend_writes_are_marked_in_the_log() {
    let backend = Backend::start();
    let mut raw = backend.raw();
    raw.open_session(1);

    let end = raw.dev.guest_memory().end;
    let log_len = (end / LOG_PAGE).div_ceil(8).next_multiple_of(LOG_PAGE);
    let log = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(backend.dir().join("dirty.log"))
        .expect("create the log");
    log.set_len(log_len).expect("size the log");

    let protocol = raw.dev.acked_protocol_features() | VhostUserProtocolFeatures::LOG_SHMFD;
    let features = raw.dev.acked_features() | VHOST_F_LOG_ALL;
    let frontend = raw.dev.frontend();
    frontend
        .set_protocol_features(protocol)
        .expect("SET_PROTOCOL_FEATURES with LOG_SHMFD");
    frontend
        .set_features(features)
        .expect("SET_FEATURES with LOG_ALL");
    frontend
        .set_log_base(
            0,
            Some(VhostUserDirtyLogRegion {
                mmap_size: log_len,
                mmap_offset: 0,
                mmap_handle: log.as_raw_fd(),
            }),
        )
        .expect("SET_LOG_BASE");

    // `batch` puts the request at the data area's start and the reply
    // 1 MiB further (see `RawFrontend::send_bytes`).
    let request_at = raw.scratch(0);
    let reply_at = raw.scratch(1 << 20);
    assert!(!marked(&log, reply_at), "a fresh log is clean");
    let reply = raw.batch(1, &[Ping {}.into()]);
    assert!(reply.status.is_success(), "{reply:?}");

    assert!(marked(&log, reply_at), "the reply's page is not marked");
    assert!(
        !marked(&log, request_at),
        "the request's page was only read, yet it is marked"
    );
}
